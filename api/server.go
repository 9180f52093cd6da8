package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// Config holds the server settings. The zero value of each field is a safe
// default.
type Config struct {
	// APIKey, when set, is required as "Authorization: Bearer <key>" on
	// every route but /health: one key, or several separated by commas.
	// With several, each key's requests are a prompt-cache scope of their
	// own: a request reuses only the prompt prefixes that requests with
	// the same key left in the KV cache (and the public one, CacheShare),
	// so one key's prompts neither speed up nor show in (timings.cache_n)
	// another's.
	APIKey string
	// CacheShare is a prompt prefix (the start of the prompt as the
	// model sees it, template applied: what /apply-template returns) whose
	// cached pages every key reuses: the shared system prompt of several
	// keys' clients. Empty: nothing is shared between keys.
	CacheShare string
	// AllowedHosts are Host names answered besides the loopback names when
	// the server listens on a loopback address (then any other Host is a
	// 403, which defeats DNS rebinding); when set, they are enforced on
	// any address. On another address without them (and without an
	// APIKey), the names answered are those no public DNS can point at
	// the server: IP addresses, names without a dot, .local and the like,
	// the machine's hostname. "*" allows every Host.
	AllowedHosts []string
	// CORSOrigins are the web origins ("https://app.example") that may use
	// the server from a browser and get CORS headers; "*" allows any.
	// Requests that may change state from other sites' pages (by
	// Sec-Fetch-Site or Origin, see guard.go) are a 403; requests that
	// carry neither header (curl, SDKs) are not browser pages' and pass.
	// CheckCORSOrigins checks the values.
	CORSOrigins []string
	// MaxHeaderBytes caps the request line and headers (default 16 KiB);
	// larger ones are answered 431.
	MaxHeaderBytes int
	// ModelAlias is the model id in responses; "" uses ModelInfo.Name.
	ModelAlias string
	// ChatTemplate is the template of requests without one; "" means
	// "jinja" when the model has a template and "plain" otherwise.
	ChatTemplate string
	// ChatTemplateText, when set, is a Jinja chat template that replaces
	// the model's tokenizer.chat_template (--chat-template-file).
	ChatTemplateText string
	// Version is the build's version, reported by /props and /metrics.
	Version string
	// ModelPath is the model file; /props reports its name without the
	// folders, or the whole path with PropsFullPath.
	ModelPath string
	// PropsFullPath makes /props report ModelPath whole
	// (--props-full-path); by default clients learn only the file name.
	PropsFullPath bool
	// Parallel is how many Generate/Embed calls run at once (default 1).
	Parallel int
	// QueueSize is how many requests may wait for the model, each counted
	// as the sequences it runs at once (at most MaxRequestSeqs); more are
	// answered 503 at once (default 64).
	QueueSize int
	// MaxRequestSeqs is the most sequences one request runs at once: the
	// candidates of n/best_of (the engine's SchedulerConfig.MaxRequestSeqs,
	// which serve sets to the same) and the inputs of an embeddings
	// request; a request's prompts run one after another (default: half of
	// Parallel, rounded up).
	MaxRequestSeqs int
	// MaxRequestBytes caps request bodies (default 16 MiB).
	MaxRequestBytes int
	// MaxBodyBytesInFlight caps the bytes of the request bodies being read
	// or served at once (default 4 x MaxRequestBytes, at least
	// MaxRequestBytes); a body that does not fit is answered 503 at once,
	// before it is read.
	MaxBodyBytesInFlight int
	// MaxRequestTokens caps the tokens one generation request may ask
	// for: prompts x candidates x (prompt + max_tokens) (default 16 x the
	// context size).
	MaxRequestTokens int
	// DefaultMaxTokens is the max_tokens of a generation request that
	// gives none (nor max_completion_tokens; --n-predict): 0 keeps the
	// contract's default of 16, -1 means up to the context.
	DefaultMaxTokens int
	// ReasoningFormat is how a thinking model's reasoning is returned when
	// the request's reasoning_format does not say (--reasoning-format: one
	// of ReasoningFormats; "" is "auto"; see reasoning.go).
	ReasoningFormat string
	// NoThinking renders prompts with enable_thinking false unless the
	// request's chat_template_kwargs set it (--reasoning-budget 0).
	NoThinking bool
	// GrammarSteps bounds the work of compiling one request's grammar,
	// JSON Schema or tool grammar before it is admitted (grammar.Budget);
	// more is a 400 naming the field (0: grammar.DefaultSteps).
	GrammarSteps int
	// ReadTimeout and WriteTimeout bound reading a request and writing a
	// non-streaming response (defaults 60 s and 10 min).
	ReadTimeout, WriteTimeout time.Duration
	// HasProjector says a multimodal projector is loaded (images accepted).
	HasProjector bool
	// MediaDir is the folder image_url paths and file:// URLs are read
	// from ("" refuses them; data URLs always work). See media.go.
	MediaDir string
	// MaxImageBytes, MaxImagePixels and MaxImages limit each image's file
	// size and pixel count (read from its header before decoding) and the
	// images per request (0: 10 MiB, 40 megapixels, 8).
	MaxImageBytes  int64
	MaxImagePixels int
	MaxImages      int
	// MaxImageDecodes is how many images are decoded at once, all
	// requests together (default 2); MaxImageDecodeBytes caps the memory
	// those decodes hold, each counted from its header before it starts
	// (default 1 GiB). An image that would need more than all of it is a
	// 400; others wait their turn while their client stays (imagedecode.go).
	MaxImageDecodes     int
	MaxImageDecodeBytes int64
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
	// Now returns the current time (tests); nil is time.Now.
	Now func() time.Time
}

// Server states.
const (
	stateLoading int32 = iota
	stateReady
	stateFailed
)

// Server serves API.md over fasthttp. Create it with NewServer, start
// serving at once with Serve (every route answers 503 while loading), and
// call Ready when the backend is loaded.
type Server struct {
	cfg  Config
	keys [][32]byte // the API keys' digests (authKey)
	// shareToks are Config.CacheShare's tokens, made once (cacheScope).
	shareOnce sync.Once
	shareToks []int32
	state     atomic.Int32
	progress  atomic.Uint64          // float64 bits
	phase     atomic.Pointer[string] // SetPhase

	// loopbackOnly says Serve listens on a loopback address, so that
	// only loopback Host names are answered (set before serving).
	loopbackOnly bool
	// hostname is the machine's (os.Hostname, lower case), a Host name
	// answered on other addresses (hostAllowed; set before serving).
	hostname string

	backend Backend // set once by Ready, read after state is ready
	info    ModelInfo
	defTmpl *chatTemplate

	vocabOnce sync.Once
	vocab     *grammar.Vocab
	vocabErr  error
	// preserved maps control tokens that mark tool calls or reasoning to
	// their text; requests with tools render the first, answers of a
	// thinking template the second (llama.cpp's preserved tokens).
	preserved map[int32][]byte
	// thinkTok are the preserved tokens that mark reasoning.
	thinkTok map[int32]bool

	// respStore keeps recent /v1/responses items (previous_response_id,
	// item_reference).
	respStore responseStore

	slots    chan struct{} // one per parallel sequence (backends that do not batch)
	batching bool          // the backend is a BatchingBackend
	waiting  atomic.Int32  // requests queued or running

	bodyBytes atomic.Int64 // bytes of the request bodies being read or served
	decodes   *decodeGate  // image decodes' slots and memory
	conns     connSet      // open connections, for Shutdown

	baseCtx context.Context
	cancel  context.CancelFunc
	srv     *fasthttp.Server
	metrics *metrics
}

// NewServer returns a server in the loading state.
func NewServer(cfg Config) *Server {
	if cfg.Parallel <= 0 {
		cfg.Parallel = 1
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 64
	}
	if cfg.MaxRequestSeqs <= 0 {
		cfg.MaxRequestSeqs = (cfg.Parallel + 1) / 2
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 16 << 20
	}
	if cfg.MaxBodyBytesInFlight <= 0 {
		cfg.MaxBodyBytesInFlight = 4 * cfg.MaxRequestBytes
	}
	cfg.MaxBodyBytesInFlight = max(cfg.MaxBodyBytesInFlight, cfg.MaxRequestBytes)
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 16 << 10
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 60 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, slots: make(chan struct{}, cfg.Parallel),
		decodes: newDecodeGate(cfg.MaxImageDecodes, cfg.MaxImageDecodeBytes), keys: apiKeyDigests(cfg.APIKey)}
	s.metrics = newMetrics(s)
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	s.srv = &fasthttp.Server{
		Handler:            s.Handler(),
		Name:               "vkllm",
		MaxRequestBodySize: cfg.MaxRequestBytes,
		// Bodies are read by the handler (readBody), after the request
		// passed the guard and authentication and its bytes fit
		// MaxBodyBytesInFlight; fasthttp reads ahead at most 8 KiB.
		StreamRequestBody: true,
		// fasthttp would read and parse a multipart/form-data body of
		// any length up to MaxRequestBodySize before the handler runs;
		// the guard refuses multipart bodies unread instead.
		DisablePreParseMultipartForm: true,
		ReadBufferSize:               cfg.MaxHeaderBytes,
		ReadTimeout:                  cfg.ReadTimeout,
		WriteTimeout:                 cfg.WriteTimeout,
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{cfg.Logger},
		ErrorHandler:                 s.readError,
		ConnState:                    s.conns.state,
	}
	return s
}

// readError answers a request fasthttp cannot read with the API's error
// body. fasthttp's errors quote the raw request (API keys included), so
// neither the answer nor the log carries their text.
func (s *Server) readError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.writeError(ctx, errorf(413, "", "request body too large: the limit is %d bytes", s.cfg.MaxRequestBytes))
	case errors.As(err, &small):
		s.writeError(ctx, errorf(431, "", "request headers too large: the limit is %d bytes", s.cfg.MaxHeaderBytes))
	case errors.As(err, &netErr) && netErr.Timeout():
		s.writeError(ctx, errorf(408, "", "timed out reading the request"))
	default:
		s.writeError(ctx, badRequest("", "malformed HTTP request"))
	}
	s.cfg.Logger.Info("request", "route", "unreadable", "status", ctx.Response.StatusCode(), "err", redact(err.Error()))
}

type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn(redact(fmt.Sprintf(format, args...)))
}

// SetProgress reports the load progress in [0, 1] for /health.
func (s *Server) SetProgress(p float64) { s.progress.Store(math.Float64bits(p)) }

// SetPhase names what the load is doing now ("compiling kernels (3 of
// 21)"), for /health's phase while loading ("" leaves it out).
func (s *Server) SetPhase(phase string) { s.phase.Store(&phase) }

// Ready installs the loaded backend and starts answering requests. The
// default chat template must compile; an error leaves the server loading.
func (s *Server) Ready(b Backend) error {
	info := b.Info()
	if s.cfg.ModelAlias != "" {
		info.Name = s.cfg.ModelAlias
	}
	// The file's template replaces the model's before the default is
	// chosen: a model without a template of its own is exactly when
	// --chat-template-file is needed.
	if s.cfg.ChatTemplateText != "" {
		info.ChatTemplate = s.cfg.ChatTemplateText
	}
	name := s.cfg.ChatTemplate
	if name == "" {
		name = "plain"
		if info.ChatTemplate != "" {
			name = "jinja"
		}
	}
	t, err := newChatTemplate(name, info.ChatTemplate)
	if err != nil {
		return fmt.Errorf("--chat-template: %v", err)
	}
	s.backend, s.info, s.defTmpl = b, info, t
	if bb, ok := b.(BatchingBackend); ok && bb.Batching() {
		s.batching = true
	}
	s.preserved, s.thinkTok = map[int32][]byte{}, map[int32]bool{}
	for id := range int32(info.VocabSize) {
		if len(b.Piece(id)) > 0 {
			continue
		}
		txt := b.TokenText(id)
		if isToolMarkupToken(txt) {
			s.preserved[id] = []byte(txt)
		}
		if isThinkMarkerToken(txt) {
			s.preserved[id] = []byte(txt)
			s.thinkTok[id] = true
		}
	}
	s.state.Store(stateReady)
	return nil
}

// Serve accepts connections on ln until Shutdown. On a loopback address
// only loopback Host names (and Config.AllowedHosts) are answered; on
// another, without Config.AllowedHosts or an APIKey, only names no public
// DNS can point at the server (guard.go).
func (s *Server) Serve(ln net.Listener) error {
	s.loopbackOnly = isLoopbackAddr(ln.Addr())
	if h, err := os.Hostname(); err == nil {
		s.hostname = strings.ToLower(h)
	}
	return s.srv.Serve(trackingListener{ln})
}

// drainTimeout bounds how long Shutdown waits for cancelled requests when
// its context has no deadline.
const drainTimeout = 30 * time.Second

// Handler returns the request handler with every route of API.md 4.
func (s *Server) Handler() fasthttp.RequestHandler {
	r := router.New()
	getRoute(r, "/health", s.handleHealth)
	getRoute(r, "/v1/models", s.wrap("models", s.handleModels))
	getRoute(r, "/v1/models/{id:*}", s.wrap("model", s.handleModel))
	r.POST("/v1/responses", s.wrap("responses", s.handleResponses))
	r.POST("/v1/completions", s.wrap("completions", s.handleCompletions))
	r.POST("/v1/chat/completions", s.wrap("chat", s.handleChat))
	r.POST("/v1/embeddings", s.wrap("embeddings", s.handleEmbeddings))
	for _, p := range []string{"/v1/rerank", "/v1/reranking", "/rerank", "/reranking"} {
		r.POST(p, s.wrap("rerank", s.handleRerank))
	}
	r.POST("/extras/tokenize", s.wrap("tokenize", s.handleTokenize))
	r.POST("/extras/tokenize/count", s.wrap("tokenize_count", s.handleTokenCount))
	r.POST("/extras/detokenize", s.wrap("detokenize", s.handleDetokenize))
	r.POST("/apply-template", s.wrap("apply_template", s.handleApplyTemplate))
	s.opsRoutes(r)
	s.nativeRoutes(r)
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		s.writeError(ctx, errorf(404, "", "no route %s %s", ctx.Method(), ctx.Path()))
		s.logRequest(ctx, "not_found", time.Now(), 0)
	}
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		s.writeError(ctx, errorf(404, "", "no route %s %s", ctx.Method(), ctx.Path()))
		s.logRequest(ctx, "not_found", time.Now(), 0)
	}
	r.HandleMethodNotAllowed = true
	// Variants of a route (a trailing slash, other letter case) are
	// unknown routes too: a 404 with the error body, not a redirect.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	return func(ctx *fasthttp.RequestCtx) {
		if bothFramingHeaders(ctx.Request.Header.RawHeaders()) {
			// fasthttp frames such a request by Transfer-Encoding and
			// keeps the connection; a proxy in front may have framed it
			// by Content-Length, so the bytes that follow cannot be
			// trusted to be the next request (RFC 9112 6.3).
			s.writeError(ctx, badRequest("", "a request must not carry both Transfer-Encoding and Content-Length"))
			ctx.SetConnectionClose()
			s.logRequest(ctx, "unreadable", time.Now(), 0)
			return
		}
		if !s.guard(ctx) {
			s.logRequest(ctx, "guard", time.Now(), 0)
		} else {
			r.Handler(ctx)
		}
		if cl := ctx.Request.Header.ContentLength(); ctx.UserValue(bodyReadKey) == nil && (cl > 0 || cl == -1) {
			// A body no handler read may still be on the wire. A
			// request with neither Content-Length nor chunked framing
			// (-2, a GET or HEAD) has none: its connection is kept.
			ctx.SetConnectionClose()
		}
	}
}

// getRoute registers h for GET and HEAD on path: every GET route answers
// HEAD with the same status and headers (RFC 9110 9.3.2); fasthttp sends
// a HEAD answer without its body.
func getRoute(r *router.Router, path string, h fasthttp.RequestHandler) {
	r.GET(path, h)
	r.HEAD(path, h)
}

// bothFramingHeaders reports whether raw, a request's header lines as
// read (RequestHeader.RawHeaders), names both Transfer-Encoding and
// Content-Length. fasthttp's parsed header cannot tell: it drops
// Content-Length once Transfer-Encoding is chunked and keeps no record of
// Transfer-Encoding: identity.
func bothFramingHeaders(raw []byte) bool {
	var te, cl bool
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			continue // the end of the headers, or a folded line's continuation
		}
		key, _, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		key = bytes.TrimRight(key, " \t")
		te = te || bytes.EqualFold(key, []byte("Transfer-Encoding"))
		cl = cl || bytes.EqualFold(key, []byte("Content-Length"))
	}
	return te && cl
}

// handlerResult is what a route handler reports for the request log.
type handlerResult struct {
	tokens int
	logged bool // the handler wrote the log line itself
}

// wrap adds authentication, the loading state and the request log.
func (s *Server) wrap(route string, h func(ctx *fasthttp.RequestCtx) handlerResult) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				// A bug must not take the server and every other
				// request down: answer 500 and log where it was.
				s.cfg.Logger.Error("panic in handler", "route", route, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				ctx.Response.Reset()
				s.writeError(ctx, errorf(500, "", "internal error: %v", r))
				s.logRequest(ctx, route, start, 0)
			}
		}()
		key, ok := s.authKey(ctx)
		if !ok {
			s.writeError(ctx, errorf(401, "", "missing or wrong API key: send Authorization: Bearer <key>"))
			s.logRequest(ctx, route, start, 0)
			return
		}
		if len(s.keys) > 1 {
			ctx.SetUserValue(cacheScopeKey, key)
		}
		switch s.state.Load() {
		case stateLoading:
			s.writeError(ctx, errorf(503, "", "the model is still loading (%.0f%%)", 100*math.Float64frombits(s.progress.Load())))
			s.logRequest(ctx, route, start, 0)
			return
		case stateFailed:
			s.writeError(ctx, errorf(500, "", "the model is not loaded"))
			s.logRequest(ctx, route, start, 0)
			return
		}
		if ctx.Request.Header.ContentLength() != 0 {
			release, e := s.readBody(ctx)
			defer release()
			if e != nil {
				// The rest of the body is unread: the connection
				// cannot carry another request.
				ctx.SetConnectionClose()
				s.writeError(ctx, e)
				s.logRequest(ctx, route, start, 0)
				return
			}
		}
		res := h(ctx)
		if !res.logged && !ctx.IsBodyStream() {
			s.logRequest(ctx, route, start, res.tokens)
		}
	}
}

// logRequest writes the request's log line and counts it in the metrics.
// Probes (/health whatever it answers, and /metrics scrapes that succeed)
// are logged at debug level: they come every few seconds.
func (s *Server) logRequest(ctx *fasthttp.RequestCtx, route string, start time.Time, tokens int) {
	level := slog.LevelInfo
	if route == "health" || route == "metrics" && ctx.Response.StatusCode() < 400 {
		level = slog.LevelDebug
	}
	s.cfg.Logger.Log(context.Background(), level, "request", "route", route, "method", string(ctx.Method()), "path", string(ctx.Path()),
		"status", ctx.Response.StatusCode(), "tokens", tokens, "duration", time.Since(start))
	s.metrics.request(route, ctx.Response.StatusCode(), time.Since(start))
}

func (s *Server) handleHealth(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	ctx.SetContentType("application/json")
	switch s.state.Load() {
	case stateReady:
		ctx.SetBodyString(`{"status":"ok"}`)
	case stateLoading:
		ctx.SetStatusCode(503)
		ctx.Response.Header.Set("Retry-After", retryAfter)
		p := math.Float64frombits(s.progress.Load())
		body := fmt.Sprintf(`{"status":"loading","progress":%.4g,`, p)
		if ph := s.phase.Load(); ph != nil && *ph != "" {
			q, _ := json.Marshal(*ph)
			body += `"phase":` + string(q) + ","
		}
		e := appendErrorBody(nil, errorf(503, "", "the model is still loading"))
		ctx.SetBodyString(body + string(e[1:]))
	default:
		ctx.SetStatusCode(500)
		e := appendErrorBody(nil, errorf(500, "", "the model failed to load"))
		ctx.SetBodyString(`{"status":"error",` + string(e[1:]))
	}
	s.logRequest(ctx, "health", start, 0)
}

// retryAfter is the Retry-After, in seconds, of every 503: about the time
// a short generation frees a place in the queue or the body budget, and
// the pace at which a client may poll a server that loads its model or is
// replaced after a shutdown.
const retryAfter = "1"

// authRealm is the realm of the WWW-Authenticate challenge of a 401.
const authRealm = "vkllm"

// writeError answers e as a JSON error body. A 401 carries the Bearer
// challenge (WWW-Authenticate, RFC 6750 3) and every 503 says when to try
// again (Retry-After, RFC 9110 10.2.3).
func (s *Server) writeError(ctx *fasthttp.RequestCtx, e *Error) {
	switch e.Status {
	case 401:
		ctx.Response.Header.Set("WWW-Authenticate", bearerChallenge(ctx.Request.Header.Peek("Authorization")))
	case 503:
		ctx.Response.Header.Set("Retry-After", retryAfter)
	}
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	ctx.SetBody(appendErrorBody(nil, e))
}

// bearerChallenge returns the WWW-Authenticate value of a 401 for a
// request whose Authorization header is auth. RFC 6750 3.1: a request
// without a Bearer token gets the bare challenge, one whose token is
// wrong gets error="invalid_token" as well.
func bearerChallenge(auth []byte) string {
	const scheme = "bearer "
	if len(auth) < len(scheme) || !strings.EqualFold(string(auth[:len(scheme)]), scheme) {
		return `Bearer realm="` + authRealm + `"`
	}
	return `Bearer realm="` + authRealm + `", error="invalid_token", error_description="the API key is wrong"`
}

func writeJSON(ctx *fasthttp.RequestCtx, v any) {
	ctx.SetContentType("application/json")
	b, err := json.Marshal(v)
	if err != nil {
		panic("BUG: response does not marshal: " + err.Error())
	}
	ctx.SetBody(b)
}

// reserve takes the queue places of a request that runs seqs sequences
// at once: at most MaxRequestSeqs, so that a request of many prompts or
// candidates weighs no more than the slots it may hold; false means the
// queue is full. A request larger than the whole queue is admitted only
// into an empty server, so it is served eventually without crowding out
// others.
func (s *Server) reserve(seqs int) bool {
	seqs = s.places(seqs)
	if now := int(s.waiting.Add(int32(seqs))); now > s.cfg.QueueSize+s.cfg.Parallel && now != seqs {
		s.waiting.Add(-int32(seqs))
		return false
	}
	return true
}

// unreserve gives back the places taken by reserve.
func (s *Server) unreserve(seqs int) { s.waiting.Add(-int32(s.places(seqs))) }

// places is the queue places of a request that runs seqs sequences at once.
func (s *Server) places(seqs int) int { return min(max(seqs, 1), s.cfg.MaxRequestSeqs) }

// run waits (FIFO) for a model slot and runs f in it; a BatchingBackend
// queues and schedules the calls itself, so f runs at once. Work cancelled
// because the server shuts down reports errShuttingDown.
func (s *Server) run(ctx context.Context, f func() error) error {
	if s.batching {
		return s.cancelled(f())
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return s.cancelled(ctx.Err())
	}
	defer func() { <-s.slots }()
	return s.cancelled(f())
}

func (s *Server) cancelled(err error) error {
	if errors.Is(err, context.Canceled) && s.baseCtx.Err() != nil {
		return errShuttingDown
	}
	return err
}

var errShuttingDown = errorf(503, "", "the server is shutting down; the generation was cancelled")

var errQueueFull = errorf(503, "", "the request queue is full; try again later")

func (s *Server) handleModels(ctx *fasthttp.RequestCtx) handlerResult {
	writeJSON(ctx, map[string]any{"object": "list", "data": []any{s.modelEntry()}})
	return handlerResult{}
}

// handleModel answers GET /v1/models/{id}: the model's entry, or a 404
// for another id.
func (s *Server) handleModel(ctx *fasthttp.RequestCtx) handlerResult {
	id, _ := ctx.UserValue("id").(string)
	if id != s.info.Name {
		s.writeError(ctx, errorf(404, "model", "model %q not found: this server serves %q", id, s.info.Name))
		return handlerResult{}
	}
	writeJSON(ctx, s.modelEntry())
	return handlerResult{}
}

// modelMeta is the meta object of a /v1/models entry, named as the
// reference server (llama.cpp) names it; unknown sizes are left out.
type modelMeta struct {
	NCtx      int   `json:"n_ctx"`
	NCtxTrain int   `json:"n_ctx_train,omitempty"`
	NVocab    int   `json:"n_vocab"`
	NEmbd     int   `json:"n_embd,omitempty"`
	NParams   int64 `json:"n_params,omitempty"`
	Size      int64 `json:"size,omitempty"`
}

func (s *Server) modelEntry() map[string]any {
	return map[string]any{
		"id": s.info.Name, "object": "model", "owned_by": "vkllm", "permissions": []any{},
		"created": s.cfg.Now().Unix(),
		"meta": modelMeta{NCtx: s.info.ContextSize, NCtxTrain: s.info.TrainContextSize, NVocab: s.info.VocabSize,
			NEmbd: s.info.EmbeddingSize, NParams: s.info.Params, Size: s.info.SizeBytes},
	}
}

func (s *Server) tokenize(text string) ([]int32, error) {
	return s.backend.Tokenize(text, true, true)
}

// tokenizeBody decodes a tokenize request and tokenizes its input; on an
// error it writes the response and returns false.
func (s *Server) tokenizeBody(ctx *fasthttp.RequestCtx) ([]int32, bool) {
	in, e := decodeTokenize(ctx.PostBody())
	if e != nil {
		s.writeError(ctx, e)
		return nil, false
	}
	toks, err := s.backend.Tokenize(in.input, true, in.parseSpecial)
	if err != nil {
		s.writeError(ctx, badRequest("input", "input: %v", err))
		return nil, false
	}
	return toks, true
}

func (s *Server) handleTokenize(ctx *fasthttp.RequestCtx) handlerResult {
	toks, ok := s.tokenizeBody(ctx)
	if !ok {
		return handlerResult{}
	}
	if toks == nil {
		toks = []int32{}
	}
	writeJSON(ctx, map[string]any{"tokens": toks})
	return handlerResult{tokens: len(toks)}
}

func (s *Server) handleTokenCount(ctx *fasthttp.RequestCtx) handlerResult {
	toks, ok := s.tokenizeBody(ctx)
	if !ok {
		return handlerResult{}
	}
	writeJSON(ctx, map[string]any{"count": len(toks)})
	return handlerResult{tokens: len(toks)}
}

func (s *Server) handleDetokenize(ctx *fasthttp.RequestCtx) handlerResult {
	toks, e := decodeDetokenize(ctx.PostBody(), s.info.VocabSize)
	if e != nil {
		s.writeError(ctx, e)
		return handlerResult{}
	}
	text, err := s.detokenize(toks)
	if err != nil {
		s.writeError(ctx, badRequest("tokens", "tokens: %v", err))
		return handlerResult{}
	}
	writeJSON(ctx, map[string]any{"text": text})
	return handlerResult{tokens: len(toks)}
}

// grammarVocab returns the vocabulary prepared for grammars, built on first use.
func (s *Server) grammarVocab() (*grammar.Vocab, error) {
	s.vocabOnce.Do(func() {
		n := s.info.VocabSize
		toks := make([][]byte, n)
		for i := range toks {
			toks[i] = s.piece(int32(i), true, nil) // with tools: every preserved token
		}
		s.vocab, s.vocabErr = grammar.NewVocab(toks, s.backend.EOG())
	})
	return s.vocab, s.vocabErr
}

// piece returns the output bytes of id; with tools, the tool-call marker
// tokens render as their text, and the reasoning marker tokens named in
// think (the template's own) do.
func (s *Server) piece(id int32, tools bool, think []string) []byte {
	p := s.backend.Piece(id)
	if len(p) == 0 && (tools || len(think) > 0) {
		if t, ok := s.preserved[id]; ok && (tools || s.thinkTok[id] && slices.Contains(think, string(t))) {
			return t
		}
	}
	return p
}

// checkPrompt is the 400 for a generation prompt of n tokens that is empty
// or leaves no position of the context for a generated token.
func (s *Server) checkPrompt(param string, n int) *Error {
	if n >= s.info.ContextSize {
		return badRequest(param, "%s: the prompt is %d tokens, the context size is %d: at most %d prompt tokens fit", param, n, s.info.ContextSize, s.info.ContextSize-1)
	}
	if n == 0 {
		return badRequest(param, "%s: the prompt is empty after tokenization", param)
	}
	return nil
}

// checkEmbedInput is the 400 for an embedding or rerank input of n tokens
// that is empty or longer than the context. Nothing is generated after
// it, so it may fill the context: a BERT input of exactly its 512
// positions is embedded.
func (s *Server) checkEmbedInput(param string, n int) *Error {
	if n > s.info.ContextSize {
		return badRequest(param, "%s: the input is %d tokens, the context size is %d: at most %d tokens fit", param, n, s.info.ContextSize, s.info.ContextSize)
	}
	if n == 0 {
		return badRequest(param, "%s: the input is empty after tokenization", param)
	}
	return nil
}

// modelError maps an error of Generate or Embed.
func modelError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if pe := paramError(err); pe.Param != "" {
		return pe
	}
	if errors.Is(err, engine.ErrKVTooSmall) {
		// The prompt (with its n candidates) needs more KV pages than the
		// whole pool: the engine's message names both.
		return errorf(400, "n", "%v", err)
	}
	if errors.Is(err, grammar.ErrDeadEnd) {
		// The request's grammar (grammar, json_schema, response_format or
		// the tools) cannot be followed with this model's vocabulary: the
		// request's fault, not the server's.
		return errorf(422, "", "generation stopped: the request's grammar cannot be followed with this model: %v", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errorf(503, "", "generation cancelled: %v", err)
	}
	return errorf(500, "", "model error: %v", err)
}

// serve answers a generation request once it is decoded: e (a validation
// error) goes out as JSON or, for a streamed request, as an SSE error event;
// otherwise the request takes the queue places of seqs sequences run at
// once (reserve) and runs stream (which writes
// SSE events and returns completion tokens and status) or whole (which
// writes the JSON body), with a context cancelled when the server shuts
// down or the client goes away.
func (s *Server) serve(ctx *fasthttp.RequestCtx, route string, stream bool, e *Error, seqs int,
	streamFn func(gctx contextT, cancel func(), sse *sseWriter) (tokens, status int),
	whole func(gctx contextT) handlerResult) handlerResult {
	if s.info.Encoder {
		e = badRequest("model", "model: %s is an embedding or rerank model (an encoder) and cannot generate text; use /v1/embeddings or /v1/rerank", s.info.Name)
	}
	if e != nil {
		if stream {
			s.streamError(ctx, route, e)
		} else {
			s.writeError(ctx, e)
		}
		return handlerResult{}
	}
	if !s.reserve(seqs) {
		s.writeError(ctx, errQueueFull)
		return handlerResult{}
	}
	conn := ctx.Conn()
	id := requestID(ctx)
	method, path := string(ctx.Method()), string(ctx.Path())
	rs := &reqStats{id: id, start: time.Now()}
	rs.scope, rs.share = s.cacheScope(ctx)
	gone := func(cancel func()) func() { return func() { rs.clientGone.Store(true); cancel() } }
	if !stream {
		defer s.unreserve(seqs)
		gctx, cancel := contextWithCancel(s)
		defer cancel()
		gctx = withStats(gctx, rs)
		stop := watchClose(conn, gone(cancel))
		res := whole(gctx)
		stop()
		// Logged here, with what happened; wrap logs the rest.
		status, outcome := ctx.Response.StatusCode(), "ok"
		switch {
		case rs.clientGone.Load():
			// Nobody reads the answer: the client's doing, not a 200.
			status, outcome = 499, "client_gone"
		case s.baseCtx.Err() != nil && status == errShuttingDown.Status:
			outcome = "shutdown"
		case status >= 400:
			outcome = "error"
		}
		s.logGeneration(route, method, path, status, false, rs, outcome, nil)
		res.logged = true
		return res
	}
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.unreserve(seqs)
		gctx, cancel := contextWithCancel(s)
		defer cancel()
		gctx = withStats(gctx, rs)
		// A client that leaves while its request waits or its prompt is
		// prefilled (nothing written yet) is noticed too.
		stop := watchClose(conn, gone(cancel))
		defer stop()
		sse := newSSEWriter(w)
		// --timeout bounds each write, not the stream: a long stream
		// that a client reads goes on; one nobody reads for that long is
		// cut.
		sse.conn, sse.idle = conn, s.cfg.WriteTimeout
		defer s.recoverStream(route, sse)
		_, status := streamFn(gctx, cancel, sse)
		outcome := "ok"
		switch {
		case rs.clientGone.Load():
			status, outcome = 499, "client_gone"
		case sse.timedOut:
			// The client took no data for --timeout: the server cut it.
			status, outcome = 504, "timeout"
		case status == 499:
			outcome = "client_gone"
		case s.baseCtx.Err() != nil && status == errShuttingDown.Status:
			outcome = "shutdown"
		case status >= 400:
			outcome = "error"
		}
		s.logGeneration(route, method, path, status, true, rs, outcome, sse.sentError)
	})
	return handlerResult{logged: true}
}

// recoverStream, deferred in a stream writer (which runs outside the
// handler), turns a panic into an SSE error event and a log line instead of
// a crash of the whole server.
func (s *Server) recoverStream(route string, sse *sseWriter) {
	if r := recover(); r != nil {
		s.cfg.Logger.Error("panic in stream", "route", route, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		sse.error(errorf(500, "", "internal error: %v", r))
	}
}
