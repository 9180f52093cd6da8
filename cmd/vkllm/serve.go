package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vkllm/vkllm/api"
	"github.com/vkllm/vkllm/engine"
)

// serveFlags are the flags of "vkllm serve".
type serveFlags struct {
	modelFlags
	host, apiKey, alias, template, mmproj, pooling string
	allowedHosts, corsOrigins, memoryLimit         string
	port, parallel, queueSize, maxBody, prefill    int
	maxInflight, maxRequestTokens                  int
	readTimeout, writeTimeout, shutdownTimeout     time.Duration
	logJSON                                        bool
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

// cmdServe serves the HTTP API (API.md) for one model: it listens at once,
// answers 503 while the model loads in the background, and shuts down
// gracefully on SIGINT/SIGTERM.
func cmdServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs, envInt("VKLLM_CTX_SIZE", 0))
	fs.StringVar(&f.host, "host", envOr("VKLLM_HOST", "127.0.0.1"), "listen `address` ($VKLLM_HOST)")
	fs.IntVar(&f.port, "port", envInt("VKLLM_PORT", 8080), "listen `port` ($VKLLM_PORT)")
	fs.IntVar(&f.parallel, "parallel", envInt("VKLLM_PARALLEL", 4), "sequences decoded together, one KV-cache slot each (a slot keeps the cache of its last conversation); more requests wait in the FIFO queue ($VKLLM_PARALLEL)")
	fs.IntVar(&f.prefill, "prefill-chunk", envInt("VKLLM_PREFILL_CHUNK", 0), "most prompt `tokens` one step feeds while other sequences are decoding, which bounds how much a long prompt that arrives slows their tokens (default 0: chosen from measured step times so that such a step takes at most 1.5x a decode-only step; the step's budget is always --batch-size) ($VKLLM_PREFILL_CHUNK)")
	fs.IntVar(&f.queueSize, "queue-size", envInt("VKLLM_QUEUE_SIZE", 64), "requests that may wait for the model; more get 503 at once ($VKLLM_QUEUE_SIZE)")
	fs.StringVar(&f.apiKey, "api-key", os.Getenv("VKLLM_API_KEY"), "require \"Authorization: Bearer `key`\" on every route but /health ($VKLLM_API_KEY; default none)")
	fs.StringVar(&f.allowedHosts, "allowed-hosts", os.Getenv("VKLLM_ALLOWED_HOSTS"), "comma-separated Host `names` answered besides localhost and 127.0.0.1 when listening on loopback (other Hosts get 403, against DNS rebinding); when set, enforced on any address; * allows all ($VKLLM_ALLOWED_HOSTS)")
	fs.StringVar(&f.corsOrigins, "cors-origins", os.Getenv("VKLLM_CORS_ORIGINS"), "comma-separated web `origins` (https://app.example) allowed to call the server from a browser, with CORS headers; * allows any ($VKLLM_CORS_ORIGINS; default none: requests from other origins' pages get 403)")
	fs.StringVar(&f.alias, "model-alias", os.Getenv("VKLLM_MODEL_ALIAS"), "model `id` in /v1/models and responses ($VKLLM_MODEL_ALIAS; default the file name)")
	fs.StringVar(&f.template, "chat-template", os.Getenv("VKLLM_CHAT_TEMPLATE"), "default chat `template`: "+strings.Join(api.TemplateNames, ", ")+" ($VKLLM_CHAT_TEMPLATE; default jinja when the model has a template, else plain)")
	fs.StringVar(&f.mmproj, "mmproj", os.Getenv("VKLLM_MMPROJ"), "multimodal projector `file` (not supported yet: multimodal input comes in a later release)")
	fs.StringVar(&f.pooling, "pooling", os.Getenv("VKLLM_POOLING"), "embedding pooling: mean, cls or last ($VKLLM_POOLING; default the model's {arch}.pooling_type, mean when absent)")
	fs.IntVar(&f.maxBody, "max-request-bytes", envInt("VKLLM_MAX_REQUEST_BYTES", 16<<20), "largest request body in `bytes` ($VKLLM_MAX_REQUEST_BYTES)")
	fs.IntVar(&f.maxInflight, "max-inflight-bytes", envInt("VKLLM_MAX_INFLIGHT_BYTES", 0), "most `bytes` of request bodies read or served at once; a body that does not fit is answered 503 before it is read ($VKLLM_MAX_INFLIGHT_BYTES; default 0: 4x --max-request-bytes)")
	fs.IntVar(&f.maxRequestTokens, "max-request-tokens", envInt("VKLLM_MAX_REQUEST_TOKENS", 0), "most `tokens` one request may ask for: prompts x candidates (n, best_of) x (prompt + max_tokens); more is a 400 ($VKLLM_MAX_REQUEST_TOKENS; default 0: 16x the context size)")
	fs.StringVar(&f.memoryLimit, "memory-limit", os.Getenv("VKLLM_MEMORY_LIMIT"), "soft limit of the Go heap, as GOMEMLIMIT (`size` like 4GiB or 512MiB): the collector works harder near it instead of letting request garbage grow the process ($VKLLM_MEMORY_LIMIT; default none: $GOMEMLIMIT if set)")
	fs.DurationVar(&f.readTimeout, "read-timeout", envDuration("VKLLM_READ_TIMEOUT", 60*time.Second), "time to read a request ($VKLLM_READ_TIMEOUT)")
	fs.DurationVar(&f.writeTimeout, "timeout", envDuration("VKLLM_TIMEOUT", 10*time.Minute), "time to write a non-streaming response; for a stream, the longest one event's write may wait for the client, so a stream that is read goes on however long it runs ($VKLLM_TIMEOUT)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", envDuration("VKLLM_SHUTDOWN_TIMEOUT", 10*time.Second), "on SIGINT/SIGTERM, the whole time shutdown may take: requests in flight may finish until a quarter of it (at most 5s) is left, then their generations are cancelled and the connections still open closed ($VKLLM_SHUTDOWN_TIMEOUT)")
	fs.BoolVar(&f.logJSON, "log-json", os.Getenv("VKLLM_LOG_JSON") == "1", "log as JSON lines instead of text ($VKLLM_LOG_JSON=1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := f.validate(); err != nil {
		return err
	}
	if f.memoryLimit != "" {
		n, err := parseSize(f.memoryLimit)
		if err != nil {
			return fmt.Errorf("--memory-limit: %v", err)
		}
		debug.SetMemoryLimit(n)
	}
	if f.mmproj != "" {
		return errors.New("--mmproj: multimodal input is not supported yet (it comes in a later release); start without --mmproj")
	}
	if f.model == "" {
		return errors.New("no model: pass -m file.gguf")
	}
	pool := engine.PoolNone // the model's own
	if f.pooling != "" {
		p, err := parsePooling(f.pooling)
		if err != nil {
			return err
		}
		pool = p
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if f.logJSON {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	if f.prefill < 0 {
		return fmt.Errorf("--prefill-chunk: %d, want >= 0", f.prefill)
	}
	// Catch the signals before anything starts: a SIGTERM that arrives
	// while the model loads must shut down gracefully, not kill the process.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)

	srv := api.NewServer(api.Config{
		APIKey: f.apiKey, ModelAlias: f.alias, ChatTemplate: f.template, Parallel: f.parallel,
		QueueSize: f.queueSize, MaxRequestBytes: f.maxBody, ReadTimeout: f.readTimeout,
		WriteTimeout: f.writeTimeout, Logger: log,
		MaxBodyBytesInFlight: f.maxInflight, MaxRequestTokens: f.maxRequestTokens,
		AllowedHosts: splitList(f.allowedHosts), CORSOrigins: splitList(f.corsOrigins),
	})
	addr := net.JoinHostPort(f.host, strconv.Itoa(f.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("listening", "addr", "http://"+ln.Addr().String(), "model", f.model)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	loaded := make(chan error, 1)
	var (
		model   *engine.Model
		backend *api.EngineBackend
	)
	go func() {
		m, err := engine.Load(f.model, engine.Config{
			Device: f.device, CtxSize: f.ctxSize, Parallel: f.parallel, BatchSize: f.batchSize,
			Validation: f.validation, Verify: f.verify,
			Progress: func(done, total int64) {
				if total > 0 {
					srv.SetProgress(float64(done) / float64(total))
				}
			},
		})
		if err != nil {
			loaded <- err
			return
		}
		model = m
		name := strings.TrimSuffix(filepath.Base(f.model), filepath.Ext(f.model))
		backend = api.NewEngineBackend(m, name, pool, engine.SchedulerConfig{PrefillChunk: f.prefill})
		loaded <- srv.Ready(backend)
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
	if model != nil {
		model.Close()
	}
	return runErr
}

// validate refuses settings that would otherwise be replaced by a default
// without a word: zero or negative sizes and timeouts, and environment
// values that do not parse.
func (f *serveFlags) validate() error {
	for _, key := range []string{"VKLLM_CTX_SIZE", "VKLLM_PORT", "VKLLM_PARALLEL", "VKLLM_QUEUE_SIZE", "VKLLM_MAX_REQUEST_BYTES",
		"VKLLM_MAX_INFLIGHT_BYTES", "VKLLM_MAX_REQUEST_TOKENS"} {
		if v := os.Getenv(key); v != "" {
			if _, err := strconv.Atoi(v); err != nil {
				return fmt.Errorf("$%s: %q is not an integer", key, v)
			}
		}
	}
	for _, key := range []string{"VKLLM_READ_TIMEOUT", "VKLLM_TIMEOUT", "VKLLM_SHUTDOWN_TIMEOUT"} {
		if v := os.Getenv(key); v != "" {
			if _, err := time.ParseDuration(v); err != nil {
				return fmt.Errorf("$%s: %q is not a duration (like 30s or 5m)", key, v)
			}
		}
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
	}{{"--max-inflight-bytes", f.maxInflight}, {"--max-request-tokens", f.maxRequestTokens}} {
		if c.v < 0 {
			return fmt.Errorf("%s: %d, want >= 0 (0: the default)", c.name, c.v)
		}
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
	if f.shutdownTimeout < 0 {
		return fmt.Errorf("--shutdown-timeout: %v, want >= 0", f.shutdownTimeout)
	}
	return nil
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
