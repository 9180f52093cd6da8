package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
)

// EngineBackend is the Backend of a model loaded by the engine. Its
// engine.Scheduler owns the model: every request's sequences decode
// together in shared forward passes, prompts are prefilled in chunks beside
// them, and embeddings join the same steps. Each KV-cache slot (--parallel)
// keeps the tokens of the last sequence that ran in it, and a prompt starts
// from the longest prefix any slot holds (the previous turn of the same
// chat, another candidate of n/best_of, a shared system prompt). The
// tokenizer calls are safe from any goroutine.
type EngineBackend struct {
	m     *engine.Model
	s     *engine.Scheduler
	name  string
	vocab sampling.Vocab
	steps prometheus.Histogram // forward-pass times, for /metrics
	pool  engine.Pooling
	proj  Projector // vision projector (SetProjector), nil for none
}

// RerankTokens returns the sequence a cross-encoder scores for a (query,
// document) pair ([CLS] query [SEP] document for BERT's vocabulary).
func (b *EngineBackend) RerankTokens(query, document string) ([]int32, error) {
	return engine.RerankTokens(b.m.Tok, query, document)
}

// NewEngineBackend serves m under the model id name and starts its
// scheduler; Close stops it. pool is the embedding pooling; PoolNone means
// the model's own ({arch}.pooling_type, mean when absent). cfg.Pooling is
// set from it.
func NewEngineBackend(m *engine.Model, name string, pool engine.Pooling, cfg engine.SchedulerConfig) *EngineBackend {
	if pool == engine.PoolNone {
		pool = m.Opts.Pooling
		if pool == engine.PoolNone || pool == engine.PoolRank && m.Classifier == nil {
			pool = engine.PoolMean
		}
	}
	cfg.Pooling = pool
	b := &EngineBackend{m: m, name: name, steps: newStepHistogram(), pool: pool}
	onStep := cfg.OnStep
	cfg.OnStep = func(d time.Duration, decodeRows, prefillRows int) {
		b.steps.Observe(d.Seconds())
		if onStep != nil {
			onStep(d, decodeRows, prefillRows)
		}
	}
	b.s = engine.NewScheduler(m, cfg)
	tokenize := func(text string) ([]int32, error) { return m.Tok.Encode(text, false, false) }
	b.vocab = sampling.Vocab{Size: m.Opts.Vocab, EOG: m.Tok.EOGIDs(), Tokenize: tokenize}
	return b
}

// Close stops the scheduler (ending what still runs with engine.ErrClosed).
// The model is free for other use afterwards.
func (b *EngineBackend) Close() { b.s.Close() }

// Batching reports that the scheduler runs concurrent calls together.
func (b *EngineBackend) Batching() bool { return true }

// Stats returns the scheduler's counters.
func (b *EngineBackend) Stats() engine.Stats { return b.s.Stats() }

// Info returns the model description.
func (b *EngineBackend) Info() ModelInfo {
	tok := b.m.Tok
	// A sequence may use --ctx-size positions, or the whole KV pool when
	// that is smaller: the prompt check answers 400 past it.
	ctxSize := b.m.CtxSize()
	if kv := b.m.GPU.Config(); kv.Pages > 0 {
		ctxSize = min(ctxSize, kv.Pages*kv.PageSize)
	}
	info := ModelInfo{Name: b.name, ContextSize: ctxSize, VocabSize: b.m.Opts.Vocab, ChatTemplate: tok.ChatTemplate(), AddBOS: tok.AddBOS(),
		TrainContextSize: b.m.Opts.CtxTrain, EmbeddingSize: b.m.Opts.Embd,
		Encoder: b.m.Opts.Encoder, Reranker: b.pool == engine.PoolRank}
	for _, t := range b.m.File.Tensors {
		info.Params += int64(t.NumElements())
		info.SizeBytes += int64(t.Size)
	}
	if id, ok := tok.BOS(); ok {
		info.BOSText = tok.TokenText(id)
	}
	if id, ok := tok.EOS(); ok {
		info.EOSText = tok.TokenText(id)
	}
	if f := tok.FIM(); f.Pre >= 0 && f.Suf >= 0 && f.Mid >= 0 {
		info.FIM = &FIMTokens{Pre: f.Pre, Suf: f.Suf, Mid: f.Mid, Rep: f.Rep, Sep: f.Sep}
	}
	return info
}

// Tokenize turns text into token ids.
func (b *EngineBackend) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return b.m.Tok.Encode(text, addSpecial, parseSpecial)
}

// TokenizeText turns text into token ids as plain text (no special token
// matched); see TextTokenizer.
func (b *EngineBackend) TokenizeText(text string) ([]int32, error) { return b.m.Tok.EncodeText(text) }

// Detokenize returns the text of tokens.
func (b *EngineBackend) Detokenize(tokens []int32) (string, error) { return b.m.Tok.Decode(tokens) }

// Piece returns the bytes token id adds to generated text: nothing for
// control tokens, which are not rendered in output (as the reference's
// server does by default).
func (b *EngineBackend) Piece(id int32) []byte {
	if b.m.Tok.IsControl(id) {
		return nil
	}
	return b.m.Tok.Piece(id)
}

// TokenText returns the vocabulary entry of id.
func (b *EngineBackend) TokenText(id int32) string { return b.m.Tok.TokenText(id) }

// IsEOG reports whether id ends generation.
func (b *EngineBackend) IsEOG(id int32) bool { return b.m.Tok.IsEOG(id) }

// EOG returns the end-of-generation ids.
func (b *EngineBackend) EOG() []int32 { return b.m.Tok.EOGIDs() }

// Generate runs the candidates of one request; see Backend.Generate. More
// candidates than the model has slots run in turns of that many.
func (b *EngineBackend) Generate(ctx context.Context, reqs []*GenerateRequest, emit func(i int, ev *engine.Event) error) error {
	if len(reqs) == 0 {
		return fmt.Errorf("api: no candidates")
	}
	chains := make([]*sampling.Chain, len(reqs))
	for i, r := range reqs {
		if len(r.Prompt) == 0 {
			return fmt.Errorf("api: empty prompt")
		}
		c, err := sampling.NewChain(r.Params, b.vocab, r.Constraint)
		if err != nil {
			return err
		}
		if err := c.Prime(textTokens(r.Prompt, r.Media)); err != nil {
			return err
		}
		chains[i] = c
	}
	var scope engine.CacheScope
	if rs := reqStatsOf(ctx); rs != nil && rs.scope != "" {
		scope.Key = rs.scope
		// The public part: as much of the shared prefix as the prompt
		// starts with (all candidates share their prompt).
		p := reqs[0].Prompt
		for scope.Public < min(len(p), len(rs.share)) && p[scope.Public] == rs.share[scope.Public] {
			scope.Public++
		}
	}
	turn := b.m.Slots()
	for first := 0; first < len(reqs); first += turn {
		last := min(first+turn, len(reqs))
		ereqs := make([]engine.GenRequest, last-first)
		for i, r := range reqs[first:last] {
			ereqs[i] = engine.GenRequest{Prompt: r.Prompt, Chain: chains[first+i], MaxTokens: r.MaxTokens,
				Logprobs: r.Logprobs, TopLogprobs: r.TopLogprobs, Label: r.ID, Media: r.Media, PromptLogprobs: r.PromptLogprobs, CacheScope: scope}
		}
		g, err := b.s.Generate(ctx, ereqs)
		if err != nil {
			return err
		}
		if err := follow(ctx, g, func(i int, ev *engine.Event) error { return emit(first+i, ev) }); err != nil {
			return err
		}
	}
	return nil
}

// follow relays the events of g to emit until every candidate ended. A
// candidate whose emit returns ErrStop is cancelled alone; any other error
// from emit, or ctx's, cancels them all, and follow waits until the
// scheduler has dropped them (one step) before returning it.
func follow(ctx context.Context, g *engine.Group, emit func(i int, ev *engine.Event) error) error {
	var (
		seqs    = g.Seqs()
		ge      engine.GroupEvent
		ok      bool
		failed  error
		stopped = make([]bool, len(seqs))
		done    = ctx.Done()
	)
	cancelAll := func(err error) {
		if failed == nil {
			failed = err
		}
		for _, q := range seqs {
			q.Cancel()
		}
	}
	for {
		select {
		case ge, ok = <-g.Events():
		case <-done:
			cancelAll(ctx.Err())
			done = nil // drain what was already sent
			continue
		}
		if !ok {
			return failed
		}
		i, q := ge.Candidate, seqs[ge.Candidate]
		if ge.End {
			switch err := q.Err(); {
			case stopped[i] || failed != nil:
			case err == nil, errors.Is(err, engine.ErrContextFull):
			default:
				cancelAll(err)
			}
			continue
		}
		if stopped[i] || failed != nil {
			continue // cancelled: drain what was already sent
		}
		if err := emit(i, &ge.Event); err != nil {
			if err == ErrStop {
				stopped[i] = true
				q.Cancel()
				continue
			}
			cancelAll(err)
		}
	}
}

// Embed returns the pooled embedding of tokens.
func (b *EngineBackend) Embed(ctx context.Context, tokens []int32) ([]float32, error) {
	return b.s.Embed(ctx, tokens)
}
