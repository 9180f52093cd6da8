package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/peterbourgon/ff/v4"
	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/api"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/vk"
)

// serveFlags are the flags of "vkllm serve".
type serveFlags struct {
	modelFlags
	mediaFlags
	llamaFlags
	host, apiKey, cacheShare, alias, template, templateFile, pooling string
	allowedHosts, corsOrigins, memoryLimit                           string
	metricsAddr, logLevel                                            string
	reasoningFormat                                                  string
	reasoningBudget                                                  int
	port, parallel, queueSize, maxBody, prefill                      int
	maxInflight, maxRequestTokens, nPredict                          int
	maxRequestSeqs                                                   int
	readTimeout, writeTimeout, shutdownTimeout                       time.Duration
	logJSON, version, propsFullPath, selfCheck                       bool
	noMMProj                                                         bool
	prefillSlowdown                                                  float64
}

// register adds serve's flags to fs. Each is also read from its VKLLM_*
// variable (parseFlags with env).
func (f *serveFlags) register(fs *ff.FlagSet) {
	f.modelFlags.register(fs, 0, true)
	fs.StringVar(&f.host, 0, "host", "127.0.0.1", "listen `address`")
	fs.IntVar(&f.port, 0, "port", 8080, "listen `port`")
	fs.IntVar(&f.parallel, 0, "parallel", 4, "(-np) most `sequences` decoded together (each a row of the KV page table; their positions share the --kv-memory pool, and a request waits while the pool lacks its prompt's pages); more wait in the queue, each free slot going to the waiting request with the fewest running")
	fs.IntVar(&f.prefill, 0, "prefill-chunk", 0, "most prompt `tokens` one step feeds while other sequences are decoding, which bounds how much a long prompt that arrives slows their tokens (0: chosen from measured step times so that such a step takes at most --prefill-slowdown times a decode-only step; the step's budget is always --batch-size, and a step that only feeds prompts takes about 100 ms of them, at least 64)")
	fs.Float64Var(&f.prefillSlowdown, 0, "prefill-slowdown", 1.25, "with the automatic --prefill-chunk, how many `times` longer than a decode-only step a step that also feeds prompts may take: lower keeps the running streams' inter-token latency steadier while long prompts arrive, higher gets those prompts to their first token sooner (> 1)")
	fs.IntVar(&f.queueSize, 0, "queue-size", 64, "`requests` that may wait for the model, each counted as the sequences it runs at once (at most --max-request-seqs); more get 503 at once")
	fs.IntVar(&f.maxRequestSeqs, 0, "max-request-seqs", 0, "most `sequences` one request runs at once (the candidates of n/best_of, the inputs of an embeddings request); the others wait behind other requests', and each free slot goes to the waiting request with the fewest running (0: half of --parallel, rounded up)")
	fs.StringVar(&f.apiKey, 0, "api-key", "", "require \"Authorization: Bearer `key`\" on every route but /health and the chat page; several keys separated by commas each get a prompt cache of their own (a request reuses only prompt prefixes that requests with its key left, and timings.cache_n counts only those) (default none)")
	fs.StringVar(&f.cacheShare, 0, "cache-share", "", "with several --api-key keys, a prompt `prefix` (the start of the prompt as the model sees it, template applied: what /apply-template returns) whose cached pages every key reuses, such as a system prompt all clients send; @file reads it from a file (default none: nothing is shared between keys)")
	fs.StringVar(&f.allowedHosts, 0, "allowed-hosts", "", "comma-separated Host `names` answered besides those a DNS-rebinding page cannot bring (on loopback: localhost and 127.x; elsewhere without this flag or --api-key: IP addresses, names without a dot, .local/.internal/.lan names, the hostname); other Hosts get 403; on a non-loopback address only these are answered; * allows all")
	fs.StringVar(&f.corsOrigins, 0, "cors-origins", "", "comma-separated web `origins` (https://app.example) allowed to call the server from a browser, with CORS headers; * allows any (default none: POSTs from other sites' pages get 403; clients that are no browser page are not concerned)")
	fs.StringVar(&f.alias, 'a', "model-alias", "", "model `id` in /v1/models and responses (default the file name; a hub model's store name, owner/repo:QUANT)")
	fs.StringVar(&f.template, 0, "chat-template", "", "default chat `template`: "+strings.Join(api.TemplateNames, ", ")+" (default jinja when the model or --chat-template-file has a template, else plain)")
	fs.StringVar(&f.templateFile, 0, "chat-template-file", "", "Jinja chat template `file` used instead of the model's tokenizer.chat_template")
	f.mediaFlags.register(fs)
	fs.BoolVarDefault(&f.noMMProj, 0, "no-mmproj", false, "with -hf or a stored model's name, leave the repository's vision projector (mmproj) out")
	f.llamaFlags.register(fs)
	fs.StringVar(&f.pooling, 0, "pooling", "", "embedding `pooling`: mean, cls or last (default the model's {arch}.pooling_type, mean when absent)")
	fs.IntVar(&f.maxBody, 0, "max-request-bytes", 16<<20, "largest request body in `bytes`")
	fs.IntVar(&f.maxInflight, 0, "max-inflight-bytes", 0, "most `bytes` of request bodies read or served at once; a body that does not fit is answered 503 before it is read (0: 4x --max-request-bytes)")
	fs.StringVar(&f.reasoningFormat, 0, "reasoning-format", "auto", "how a thinking model's reasoning is returned when the request's reasoning_format does not say: auto or deepseek (in reasoning_content), deepseek-legacy (in reasoning_content and, with its markers, in content), none (left in content), as llama-server's")
	fs.IntVar(&f.reasoningBudget, 0, "reasoning-budget", -1, "`tokens` of thinking allowed, as llama-server's: -1 unlimited, 0 renders prompts with enable_thinking false (unless a request's chat_template_kwargs set it)")
	fs.IntVar(&f.nPredict, 'n', "n-predict", 0, "`tokens` a generation request without max_tokens may generate (0: 16, the API's default; -1: up to the context), as llama-server's -n")
	fs.IntVar(&f.maxRequestTokens, 0, "max-request-tokens", 0, "most `tokens` one request may ask for: prompts x candidates (n, best_of) x (prompt + max_tokens); more is a 400 (0: 16x the context size)")
	fs.StringVar(&f.memoryLimit, 0, "memory-limit", "", "soft limit of the Go heap, as GOMEMLIMIT (`size` like 4GiB or 512MiB): the collector works harder near it instead of letting request garbage grow the process (default none: $GOMEMLIMIT if set)")
	fs.DurationVar(&f.readTimeout, 0, "read-timeout", 60*time.Second, "`time` to read a request")
	fs.DurationVar(&f.writeTimeout, 0, "timeout", 10*time.Minute, "`time` to write a non-streaming response; for a stream, the longest one event's write may wait for the client, so a stream that is read goes on however long it runs")
	fs.DurationVar(&f.shutdownTimeout, 0, "shutdown-timeout", 10*time.Second, "on SIGINT/SIGTERM, the whole `time` shutdown may take: requests in flight may finish until a quarter of it (at most 5s) is left, then their generations are cancelled and the connections still open closed")
	fs.BoolVarDefault(&f.selfCheck, 0, "self-check", true, "before loading the weights, run each feature-gated kernel path the device claims once against the CPU reference and turn off the paths that fail, with a warning (vkllm devices --check shows the results)")
	fs.StringVar(&f.metricsAddr, 0, "metrics-addr", "", "also serve /metrics, without the API key, on this `host:port` alone (for a Prometheus scraper that has no key; keep the address private: a port no Service exposes, a firewalled interface)")
	fs.BoolVarDefault(&f.logJSON, 0, "log-json", false, "log as JSON lines instead of text; the console lines (model, device, progress, address) become log records too, so the output is JSON only")
	fs.StringVar(&f.logLevel, 0, "log-level", "info", "least `level` logged: debug (adds the /health probes and /metrics scrapes), info, warn or error")
	fs.BoolVarDefault(&f.propsFullPath, 0, "props-full-path", false, "show the model's whole path in /props (default only its file name: the folders tell clients about the server's disk)")
	fs.BoolVarDefault(&f.version, 0, "version", false, "print the version and the built-in features, and exit")
}

// requestSeqs is --max-request-seqs with its default resolved: half of
// --parallel, rounded up.
func (f *serveFlags) requestSeqs() int {
	if f.maxRequestSeqs > 0 {
		return f.maxRequestSeqs
	}
	return (f.parallel + 1) / 2
}

// cmdServe serves the HTTP API (API.md) for one model: it listens at once,
// answers 503 while the model loads in the background, and shuts down
// gracefully on SIGINT/SIGTERM. The console (stderr) shows the model, the
// device, the load's progress and the address.
func cmdServe(args []string) error { return serve(os.Stderr, args) }

// serve is cmdServe with its console on con: a progress bar when con is a
// terminal, plain lines otherwise. The log goes to stderr.
func serve(con *os.File, args []string) error { return serveLog(con, os.Stderr, args) }

// serveLog is serve with its log on logOut.
func serveLog(conFile *os.File, logOut io.Writer, args []string) (err error) {
	fs := newFlagSet("serve")
	var f serveFlags
	f.register(fs)
	// vkllm serve NAME [flags]: a stored model's name first, as ollama
	// users type it (flag parsing stops at the first argument no flag).
	var named string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && args[0] != "help" {
		named, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, true, "vkllm serve -m FILE [flags]", "vkllm serve -hf owner/repo[:quant] [flags]", "vkllm serve owner/repo[:quant] [flags]   (a model in the store)"); err != nil {
		return err
	}
	if f.version {
		printVersion(os.Stdout)
		return nil
	}
	rest := fs.GetArgs()
	if named == "" && len(rest) == 1 && f.model == "" && f.hfRepo == "" {
		named, rest = rest[0], nil
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	if named != "" {
		if f.model != "" || f.hfRepo != "" {
			return fmt.Errorf("the model %q and -m/--hf-repo both name a model: pass one", named)
		}
		f.model = named
	}
	if err := f.validate(); err != nil {
		return err
	}
	if err := f.mediaFlags.validate(); err != nil {
		return err
	}
	if f.memoryLimit != "" {
		n, err := parseSize(f.memoryLimit)
		if err != nil {
			return fmt.Errorf("--memory-limit: %v", err)
		}
		debug.SetMemoryLimit(n)
	}
	if f.model == "" && f.hfRepo == "" {
		return errors.New("no model: pass -m file.gguf, -hf owner/repo[:quant] or the name of a stored model")
	}
	templateText, err := f.chatTemplate()
	if err != nil {
		return err
	}
	if err := api.CheckCORSOrigins(splitList(f.corsOrigins)); err != nil {
		return err
	}
	pool := engine.PoolNone // the model's own
	if f.pooling != "" {
		p, err := parsePooling(f.pooling)
		if err != nil {
			return err
		}
		pool = p
	}
	level, err := parseLogLevel(f.logLevel)
	if err != nil {
		return err
	}
	var h slog.Handler = slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level})
	if f.logJSON {
		h = slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level})
	}
	if f.logDisable {
		h = slog.DiscardHandler
	}
	log := slog.New(h)
	con := newConsole(conFile, log, f.logJSON)
	if f.logJSON {
		// The error serve ends with is a record too: main prints none.
		defer func() {
			if err != nil {
				log.Error("serve failed", "err", err.Error())
				err = loggedError{err}
			}
		}()
	}
	if f.logJSON && os.Getenv("MESA_VK_IGNORE_CONFORMANCE_WARNING") == "" {
		// lavapipe's "not a conformant Vulkan implementation" warning
		// is a plain line on stderr.
		os.Setenv("MESA_VK_IGNORE_CONFORMANCE_WARNING", "1")
	}
	f.llamaFlags.logNoEffect(fs, log)
	// Catch the signals before anything starts: a SIGTERM that arrives
	// while the model loads must shut down gracefully, not kill the process.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)

	// A hub model is downloaded (when the store lacks it) before the server
	// listens, as llama-server does.
	bars := func(label string) reporter {
		r := con.progress(label)
		if p, ok := r.(*progress); ok {
			p.verb = "downloaded"
		}
		return r
	}
	proj, err := f.resolve(context.Background(), bars, func(s string) { log.Warn(s) }, f.mmproj == "" && !f.noMMProj && mtmdBuilt)
	if err != nil {
		return err
	}
	if f.alias == "" {
		// A hub model is known by its store name, as llama-server names
		// an -hf model by its repository.
		f.alias = f.storeName
	}
	if proj != "" {
		f.mmproj = proj
		con.say("mmproj  "+proj, "mmproj", "path", proj)
	}

	// What will be loaded, on the console before the load starts: a file
	// that is not a model or a device that does not exist fails here.
	summary, err := modelSummary(f.model)
	if err != nil {
		return fmt.Errorf("loading %s: %w", f.model, err)
	}
	dev, err := deviceSummary(f.device)
	if err != nil {
		return err
	}
	con.say(fmt.Sprintf("vkllm %s\nmodel   %s\ndevice  %s", version, summary, dev), "vkllm", "version", version, "model", summary, "device", dev)

	cacheShare := f.cacheShare
	if name, ok := strings.CutPrefix(cacheShare, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return fmt.Errorf("--cache-share: %w", err)
		}
		cacheShare = string(b)
	}
	srv := api.NewServer(api.Config{
		APIKey: f.apiKey, CacheShare: cacheShare, ModelAlias: f.alias, ChatTemplate: f.template, ChatTemplateText: templateText,
		Parallel: f.parallel, QueueSize: f.queueSize, MaxRequestBytes: f.maxBody, ReadTimeout: f.readTimeout,
		WriteTimeout: f.writeTimeout, Logger: log, Version: version, ModelPath: f.model, PropsFullPath: f.propsFullPath,
		MaxBodyBytesInFlight: f.maxInflight, MaxRequestTokens: f.maxRequestTokens, DefaultMaxTokens: f.nPredict,
		ReasoningFormat: f.reasoningFormat, NoThinking: f.reasoningBudget == 0,
		MaxRequestSeqs: f.requestSeqs(),
		AllowedHosts:   splitList(f.allowedHosts), CORSOrigins: splitList(f.corsOrigins),
		HasProjector: f.mmproj != "", MediaDir: f.mediaDir, MaxImageBytes: int64(f.maxImageBytes),
		MaxImagePixels: f.maxImagePixels, MaxImages: f.maxImagesPerRq,
		MaxImageDecodes: f.maxDecodes, MaxImageDecodeBytes: int64(f.maxDecodeBytes),
	})
	addr := net.JoinHostPort(f.host, strconv.Itoa(f.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	log.Info("listening; loading the model (/health answers 503 until it is ready)", "addr", url, "model", f.model)
	serveErr := make(chan error, 2) // the API listener and the metrics one
	go func() { serveErr <- srv.Serve(ln) }()
	var metricsSrv *fasthttp.Server
	if f.metricsAddr != "" {
		mln, err := net.Listen("tcp", f.metricsAddr)
		if err != nil {
			srv.Shutdown(context.Background())
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		metricsSrv = &fasthttp.Server{Handler: srv.MetricsHandler(), Name: "vkllm", ReadTimeout: f.readTimeout,
			WriteTimeout: f.writeTimeout, MaxRequestBodySize: 1 << 10, CloseOnShutdown: true, Logger: slogPrintf{log}}
		log.Info("serving /metrics without the API key", "addr", "http://"+mln.Addr().String()+"/metrics")
		go func() {
			if err := metricsSrv.Serve(mln); err != nil {
				serveErr <- fmt.Errorf("--metrics-addr: %w", err)
			}
		}()
	}

	loaded := make(chan error, 1)
	var (
		model          *engine.Model
		backend        *api.EngineBackend
		closeProjector func() // the vision projector's, after the backend's
	)
	bar := con.progress("loading")
	uploaded := false
	kvBytes, kvFrac, err := parseKVMemory(f.kvMemory)
	if err != nil {
		return err
	}
	typeK, typeV, err := f.cacheTypes()
	if err != nil {
		return err
	}
	go func() {
		m, err := engine.Load(f.model, engine.Config{
			Device: f.device, CtxSize: f.ctxSize, Parallel: f.parallel, BatchSize: f.batchSize,
			KVMemory: kvBytes, KVFraction: kvFrac, CacheTypeK: typeK, CacheTypeV: typeV,
			Validation: f.validation, Verify: f.verify, PipelineCacheDir: f.pipelineCacheDir(),
			SelfCheck: f.selfCheck, Checkpoints: checkpointCount(f.checkpoints),
			Progress: func(done, total int64) {
				bar.update(done, total)
				if total > 0 {
					srv.SetProgress(float64(done) / float64(total))
				}
				if done == total && !uploaded {
					// The load then compiles the matrix kernels of
					// every weight shape, on every core: on a CPU
					// driver the longest part of a first start.
					uploaded = true
					bar.done()
					srv.SetPhase("compiling the matrix kernels")
					con.say("compiling the matrix kernels of every weight shape (Mesa's shader cache keeps them for the next start)",
						"weights uploaded; compiling the matrix kernels of every weight shape")
				}
			},
		})
		bar.done()
		if err != nil {
			loaded <- err
			return
		}
		model = m
		for _, h := range m.GPU.Placement() {
			con.say(fmt.Sprintf("memory  %v", h), "memory", "heap", fmt.Sprint(h))
		}
		for _, c := range m.Checks {
			switch {
			case c.Err != nil && c.Disabled:
				log.Warn("self-check failed; the path is off for this process", "path", c.Path, "err", c.Err)
			case c.Err != nil:
				log.Warn("self-check failed; the kernels have no fallback for this path", "path", c.Path, "err", c.Err)
			}
		}
		if pc := m.Device().PipelineCache(); pc.Ignored != "" {
			log.Warn("pipeline cache ignored; compiling every kernel", "path", pc.Path, "why", pc.Ignored)
		} else if pc.Path != "" {
			log.Info("pipeline cache", "path", pc.Path, "loaded_bytes", pc.LoadedBytes)
		}
		var proj api.Projector
		if f.mmproj != "" {
			pbar := con.progress("mmproj")
			p, closeProj, err := loadProjector(f.mmproj, m, pbar.update)
			pbar.done()
			if err != nil {
				loaded <- err
				return
			}
			proj, closeProjector = p, closeProj
		}
		// Compile the kernels every step shape uses before the first
		// request (lavapipe builds each at its first dispatch).
		start := time.Now()
		srv.SetPhase("compiling kernels")
		con.counter("compiling kernels", 0, 0)
		ws := engine.NewScheduler(m, engine.SchedulerConfig{})
		steps := 0
		err = ws.WarmUp(context.Background(), func(done, total int) {
			srv.SetPhase(fmt.Sprintf("compiling kernels (%d of %d)", done, total))
			con.counter("compiling kernels", done, total)
			steps = total
		})
		ws.Close()
		took := time.Since(start)
		con.end(fmt.Sprintf("compiled the kernels of %d step shapes in %.1fs", steps, took.Seconds()),
			"compiled the kernels of every step shape", "shapes", steps, "seconds", math.Round(took.Seconds()*10)/10)
		if err != nil {
			loaded <- err
			return
		}
		if err := m.Device().SavePipelineCache(); err != nil {
			log.Warn("pipeline cache not saved", "err", err)
		} else if pc := m.Device().PipelineCache(); pc.SavedBytes > 0 {
			log.Info("pipeline cache saved", "path", pc.Path, "bytes", pc.SavedBytes)
		}
		// lavapipe's compiler leaves its working memory in the C heap
		// (about 220 MiB of a first start's 600 on the small fixtures).
		vk.TrimHeap()
		m.Device().OnFirstDispatch(func(kernel string) {
			log.Warn("kernel compiled on the request path (after the warm-up)", "pipeline", kernel)
		})
		name := strings.TrimSuffix(filepath.Base(f.model), filepath.Ext(f.model))
		backend = api.NewEngineBackend(m, name, pool, engine.SchedulerConfig{PrefillChunk: f.prefill, StepLatencyFactor: f.prefillSlowdown,
			MaxRequestSeqs: f.requestSeqs()})
		if proj != nil {
			backend.SetProjector(proj)
		}
		if err := srv.Ready(backend); err != nil {
			loaded <- err
			return
		}
		kv := m.GPU.Config()
		con.say(fmt.Sprintf("ready   %s  (chat page at /, OpenAI-compatible API at /v1, metrics at /metrics); %d sequences of up to %d tokens sharing %d KV pages of %d (%d positions)",
			url, m.Slots(), m.CtxSize(), kv.Pages, kv.PageSize, kv.Pages*kv.PageSize), "ready",
			"url", url, "sequences", m.Slots(), "ctx_size", m.CtxSize(), "kv_pages", kv.Pages, "kv_page_size", kv.PageSize)
		loaded <- nil
	}()

	var runErr error
	for done := false; !done; {
		select {
		case err := <-loaded:
			if err != nil {
				log.Error("model load failed", "model", f.model, "err", err)
				runErr = fmt.Errorf("loading %s: %w", f.model, err)
				done = true
				break
			}
			log.Info("model loaded; ready", "model", f.model)
			loaded = nil
		case s := <-sig:
			log.Info("shutting down", "signal", s.String())
			done = true
		case err := <-serveErr:
			runErr, done = err, true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	inFlight := false
	if metricsSrv != nil {
		metricsSrv.ShutdownWithContext(ctx)
	}
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown", "err", err)
		// Generations still run on the model: releasing it under them
		// would crash them; exiting frees it.
		inFlight = errors.Is(err, api.ErrWorkInFlight)
	}
	if inFlight {
		return runErr
	}
	if loaded != nil && runErr == nil {
		// Still loading: wait for the loader so the device is released
		// cleanly, within what is left of --shutdown-timeout.
		select {
		case <-loaded:
		case <-ctx.Done():
			log.Warn("shutdown: the model was still loading at the deadline; exiting without releasing it")
			return runErr
		}
	}
	if backend != nil {
		backend.Close()
	}
	if closeProjector != nil {
		closeProjector()
	}
	if model != nil {
		if err := model.Device().SavePipelineCache(); err != nil {
			log.Warn("pipeline cache not saved", "err", err)
		}
		model.Close()
	}
	return runErr
}

// validate refuses settings that would otherwise be replaced by a default
// without a word: zero or negative sizes and timeouts. (Values that do not
// parse, from a flag or a VKLLM_* variable, were refused by parseFlags.)
func (f *serveFlags) validate() error {
	if f.prefill < 0 {
		return fmt.Errorf("--prefill-chunk: %d, want >= 0", f.prefill)
	}
	if !(f.prefillSlowdown > 1 && f.prefillSlowdown <= 100) {
		return fmt.Errorf("--prefill-slowdown: %v, want more than 1 and at most 100", f.prefillSlowdown)
	}
	if _, _, err := parseKVMemory(f.kvMemory); err != nil {
		return err
	}
	if _, _, err := f.cacheTypes(); err != nil {
		return err
	}
	if f.ctxSize < 0 || f.batchSize < 1 {
		return fmt.Errorf("--ctx-size %d, --batch-size %d: want >= 0 and >= 1", f.ctxSize, f.batchSize)
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--parallel", f.parallel}, {"--queue-size", f.queueSize}, {"--max-request-bytes", f.maxBody}} {
		if c.v < 1 {
			return fmt.Errorf("%s: %d, want >= 1", c.name, c.v)
		}
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--max-inflight-bytes", f.maxInflight}, {"--max-request-tokens", f.maxRequestTokens}, {"--max-request-seqs", f.maxRequestSeqs}} {
		if c.v < 0 {
			return fmt.Errorf("%s: %d, want >= 0 (0: the default)", c.name, c.v)
		}
	}
	if !slices.Contains(api.ReasoningFormats, f.reasoningFormat) {
		return fmt.Errorf("--reasoning-format: %q, want one of %s", f.reasoningFormat, strings.Join(api.ReasoningFormats, ", "))
	}
	if f.reasoningBudget != -1 && f.reasoningBudget != 0 {
		return fmt.Errorf("--reasoning-budget: %d, want -1 (unlimited) or 0 (no thinking), as llama-server takes", f.reasoningBudget)
	}
	if f.nPredict < -1 {
		return fmt.Errorf("--n-predict: %d, want -1 (up to the context), 0 (the default, 16) or a count of tokens", f.nPredict)
	}
	if f.maxInflight > 0 && f.maxInflight < f.maxBody {
		return fmt.Errorf("--max-inflight-bytes: %d is less than --max-request-bytes (%d): the largest body could never be read", f.maxInflight, f.maxBody)
	}
	if f.memoryLimit != "" {
		if _, err := parseSize(f.memoryLimit); err != nil {
			return fmt.Errorf("--memory-limit: %v", err)
		}
	}
	if f.port < 0 || f.port > 65535 {
		return fmt.Errorf("--port: %d, want 0 to 65535", f.port)
	}
	for _, c := range []struct {
		name string
		v    time.Duration
	}{{"--read-timeout", f.readTimeout}, {"--timeout", f.writeTimeout}} {
		if c.v <= 0 {
			return fmt.Errorf("%s: %v, want > 0", c.name, c.v)
		}
	}
	if _, err := parseLogLevel(f.logLevel); err != nil {
		return err
	}
	if f.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(f.metricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr: %q is not host:port (0.0.0.0:9090, :9090)", f.metricsAddr)
		}
	}
	if f.shutdownTimeout < 0 {
		return fmt.Errorf("--shutdown-timeout: %v, want >= 0", f.shutdownTimeout)
	}
	return nil
}

// chatTemplate checks --chat-template and reads --chat-template-file,
// before anything is loaded.
func (f *serveFlags) chatTemplate() (string, error) {
	text := ""
	if f.templateFile != "" {
		b, err := os.ReadFile(f.templateFile)
		if err != nil {
			return "", fmt.Errorf("--chat-template-file: %w", err)
		}
		if len(b) == 0 {
			return "", fmt.Errorf("--chat-template-file: %s is empty", f.templateFile)
		}
		text = string(b)
	}
	if err := api.CheckChatTemplate(f.template, text); err != nil {
		return "", err
	}
	return text, nil
}

// loggedError is an error the command has logged already: main exits with
// status 1 without printing it (under --log-json, so that the output stays
// JSON).
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// parseLogLevel parses --log-level.
func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", s)
}

// slogPrintf is fasthttp's Logger on a slog.Logger, at debug level: its
// messages may quote a raw request, headers included.
type slogPrintf struct{ l *slog.Logger }

func (p slogPrintf) Printf(format string, args ...any) { p.l.Debug(fmt.Sprintf(format, args...)) }

// modelSummary describes the model file from its metadata alone.
func modelSummary(path string) (string, error) {
	file, err := gguf.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	o, err := engine.ReadOptions(file)
	if err != nil {
		return "", err
	}
	name, _ := file.String("general.name")
	if name == "" {
		name = filepath.Base(path)
	}
	var params uint64
	types := map[string]uint64{}
	for i := range file.Tensors {
		t := &file.Tensors[i]
		params += t.NumElements()
		types[t.Type.String()] += t.NumElements()
	}
	main, most := "", uint64(0)
	for k, n := range types {
		if n > most || n == most && k < main {
			main, most = k, n
		}
	}
	return fmt.Sprintf("%s: %s, %s parameters (mostly %s), %d layers, %d embd, %d vocab, trained context %d, %.1f MiB",
		name, o.Arch, humanCount(params), main, o.Layers, o.Embd, o.Vocab, o.CtxTrain, float64(file.Size)/(1<<20)), nil
}

// humanCount writes n with a K, M or B suffix.
func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return strconv.FormatUint(n, 10)
}

// deviceSummary names the Vulkan device sel (--device) selects, as the
// load will choose it.
func deviceSummary(sel string) (string, error) {
	devs, err := vk.Devices(vk.Options{})
	if err != nil {
		return "", err
	}
	i, err := vk.Select(devs, sel)
	if err != nil {
		return "", fmt.Errorf("--device: %w", err)
	}
	for _, d := range devs {
		if d.Index == i {
			return fmt.Sprintf("%s (%s, %s, Vulkan %s, %.1f GiB device memory)", d.Name, d.TypeName, d.DriverName, d.APIVersion,
				float64(d.DeviceLocalBytes())/(1<<30)), nil
		}
	}
	return "", fmt.Errorf("--device: BUG: selected device %d not listed", i)
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parsePooling(s string) (engine.Pooling, error) {
	switch strings.ToLower(s) {
	case "mean":
		return engine.PoolMean, nil
	case "cls":
		return engine.PoolCLS, nil
	case "last":
		return engine.PoolLast, nil
	}
	return 0, fmt.Errorf("--pooling: %q is not one of mean, cls, last", s)
}

// parseSize parses a size as GOMEMLIMIT writes it: an integer number of
// bytes with an optional unit B, KiB, MiB, GiB or TiB.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size (a positive number of bytes, optionally with B, KiB, MiB, GiB or TiB, as 4GiB)", s)
	}
	return n * mult, nil
}
