package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vkllm/vkllm/api"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
)

// serveFlags are the flags of "vkllm serve".
type serveFlags struct {
	modelFlags
	host, apiKey, alias, template, mmproj, pooling string
	port, parallel, queueSize, maxBody             int
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
	fs.IntVar(&f.parallel, "parallel", envInt("VKLLM_PARALLEL", 1), "sequences generated at once, each with its own KV-cache slot ($VKLLM_PARALLEL)")
	fs.IntVar(&f.queueSize, "queue-size", envInt("VKLLM_QUEUE_SIZE", 64), "requests that may wait for the model; more get 503 at once ($VKLLM_QUEUE_SIZE)")
	fs.StringVar(&f.apiKey, "api-key", os.Getenv("VKLLM_API_KEY"), "require \"Authorization: Bearer `key`\" on every request ($VKLLM_API_KEY; default none)")
	fs.StringVar(&f.alias, "model-alias", os.Getenv("VKLLM_MODEL_ALIAS"), "model `id` in /v1/models and responses ($VKLLM_MODEL_ALIAS; default the file name)")
	fs.StringVar(&f.template, "chat-template", os.Getenv("VKLLM_CHAT_TEMPLATE"), "default chat `template`: "+strings.Join(api.TemplateNames, ", ")+" ($VKLLM_CHAT_TEMPLATE; default jinja when the model has a template, else plain)")
	fs.StringVar(&f.mmproj, "mmproj", os.Getenv("VKLLM_MMPROJ"), "multimodal projector `file` (not supported yet: multimodal input comes in a later release)")
	fs.StringVar(&f.pooling, "pooling", os.Getenv("VKLLM_POOLING"), "embedding pooling: mean, cls or last ($VKLLM_POOLING; default the model's {arch}.pooling_type, mean when absent)")
	fs.IntVar(&f.maxBody, "max-request-bytes", envInt("VKLLM_MAX_REQUEST_BYTES", 16<<20), "largest request body in `bytes` ($VKLLM_MAX_REQUEST_BYTES)")
	fs.DurationVar(&f.readTimeout, "read-timeout", envDuration("VKLLM_READ_TIMEOUT", 60*time.Second), "time to read a request ($VKLLM_READ_TIMEOUT)")
	fs.DurationVar(&f.writeTimeout, "timeout", envDuration("VKLLM_TIMEOUT", 10*time.Minute), "time to answer a non-streaming request ($VKLLM_TIMEOUT)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", envDuration("VKLLM_SHUTDOWN_TIMEOUT", 10*time.Second), "on SIGINT/SIGTERM, time for open streams to end before they are cut ($VKLLM_SHUTDOWN_TIMEOUT)")
	fs.BoolVar(&f.logJSON, "log-json", os.Getenv("VKLLM_LOG_JSON") == "1", "log as JSON lines instead of text ($VKLLM_LOG_JSON=1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.mmproj != "" {
		return errors.New("--mmproj: multimodal input is not supported yet (it comes in a later release); start without --mmproj")
	}
	if f.model == "" {
		return errors.New("no model: pass -m file.gguf")
	}
	var pool *engine.Pooling
	if f.pooling != "" {
		p, err := parsePooling(f.pooling)
		if err != nil {
			return err
		}
		pool = &p
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if f.logJSON {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	if f.parallel < 1 {
		return fmt.Errorf("--parallel: %d, want >= 1", f.parallel)
	}

	srv := api.NewServer(api.Config{
		APIKey: f.apiKey, ModelAlias: f.alias, ChatTemplate: f.template, Parallel: f.parallel,
		QueueSize: f.queueSize, MaxRequestBytes: f.maxBody, ReadTimeout: f.readTimeout,
		WriteTimeout: f.writeTimeout, Logger: log,
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
	var model *engine.Model
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
		b, err := newEngineBackend(m, f.model, f.parallel, pool)
		if err == nil {
			err = srv.Ready(b)
		}
		loaded <- err
	}()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
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
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	if loaded != nil && runErr == nil {
		// Still loading: wait for the loader so the device is released cleanly.
		<-loaded
	}
	if model != nil {
		model.Close()
	}
	return runErr
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

// engineBackend adapts an engine.Model to api.Backend: one KV-cache slot per
// running sequence, the model's methods serialized by a mutex (the engine is
// used from one goroutine at a time; the batching scheduler replaces this).
type engineBackend struct {
	m       *engine.Model
	info    api.ModelInfo
	pooling engine.Pooling
	mu      sync.Mutex // serializes calls into m
	slots   chan int   // free slot indices
	eog     []int32
}

func newEngineBackend(m *engine.Model, path string, parallel int, pool *engine.Pooling) (*engineBackend, error) {
	tok := m.Tok
	info := api.ModelInfo{
		Name:         strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)),
		ContextSize:  m.CtxSize(),
		VocabSize:    m.Opts.Vocab,
		ChatTemplate: tok.ChatTemplate(),
		AddBOS:       tok.AddBOS(),
	}
	if id, ok := tok.BOS(); ok {
		info.BOSText = tok.TokenText(id)
	}
	if id, ok := tok.EOS(); ok {
		info.EOSText = tok.TokenText(id)
	}
	b := &engineBackend{m: m, info: info, slots: make(chan int, parallel), eog: tok.EOGIDs(), pooling: engine.PoolMean}
	for i := range parallel {
		b.slots <- i
	}
	if pool != nil {
		b.pooling = *pool
	} else if v, err := m.File.Int(m.Opts.Arch + ".pooling_type"); err == nil && v > 0 {
		b.pooling = engine.Pooling(v)
	}
	return b, nil
}

func (b *engineBackend) Info() api.ModelInfo { return b.info }

func (b *engineBackend) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return b.m.Tok.Encode(text, addSpecial, parseSpecial)
}

func (b *engineBackend) Detokenize(tokens []int32) (string, error) { return b.m.Tok.Decode(tokens) }

func (b *engineBackend) Piece(id int32) []byte {
	if b.m.Tok.IsControl(id) {
		return nil
	}
	return b.m.Tok.Piece(id)
}

func (b *engineBackend) IsEOG(id int32) bool { return b.m.Tok.IsEOG(id) }
func (b *engineBackend) EOG() []int32        { return b.eog }

func (b *engineBackend) Generate(ctx context.Context, req *api.GenerateRequest, emit func(*api.Event) error) error {
	chain, err := sampling.NewChain(req.Params, sampling.Vocab{Size: b.info.VocabSize, EOG: b.eog,
		Tokenize: func(s string) ([]int32, error) { return b.m.Tok.Encode(s, false, false) }}, req.Constraint)
	if err != nil {
		return err
	}
	if err := chain.Prime(req.Prompt); err != nil {
		return err
	}
	slot := <-b.slots
	defer func() { b.slots <- slot }()
	b.mu.Lock()
	logits, err := b.m.Prefill(ctx, slot, 0, req.Prompt)
	b.mu.Unlock()
	if err != nil {
		return err
	}
	ev := &api.Event{}
	pos := len(req.Prompt)
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, err := chain.Sample(logits)
		if err != nil {
			return err
		}
		if err := chain.Accept(id); err != nil {
			return err
		}
		*ev = api.Event{Token: id, EOG: b.m.Tok.IsEOG(id), Top: ev.Top[:0]}
		if req.Logprobs || req.TopLogprobs > 0 {
			if ev.Logprob, err = chain.Logprob(id); err != nil {
				return err
			}
			if ev.Top, err = chain.TopLogprobs(ev.Top, req.TopLogprobs); err != nil {
				return err
			}
		}
		if err := emit(ev); err != nil {
			if errors.Is(err, api.ErrStop) {
				return nil
			}
			return err
		}
		if ev.EOG || n+1 >= req.MaxTokens {
			return nil
		}
		if pos >= b.info.ContextSize {
			return api.ErrContextFull
		}
		b.mu.Lock()
		logits, err = b.m.Step(slot, pos, id)
		b.mu.Unlock()
		if err != nil {
			return err
		}
		pos++
	}
}

func (b *engineBackend) Embed(ctx context.Context, tokens []int32) ([]float32, error) {
	slot := <-b.slots
	defer func() { b.slots <- slot }()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m.Embed(ctx, slot, tokens, b.pooling)
}
