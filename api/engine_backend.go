package api

import (
	"context"
	"fmt"
	"sync"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
)

// EngineBackend is the Backend of a model loaded by the engine. Sequences
// run one at a time (the batching scheduler that runs several slots in one
// forward pass is a later step); the tokenizer calls are safe from any
// goroutine. Each of the model's KV-cache slots (--parallel) keeps the
// tokens of the last sequence that ran in it: a prompt runs in the slot
// that shares the longest prefix with it (the previous turn of the same
// chat, another candidate of n/best_of), reuses those keys and values and
// processes only the rest; a prompt that shares nothing takes the least
// recently used slot, so several conversations keep their caches.
type EngineBackend struct {
	m    *engine.Model
	name string
	pool engine.Pooling

	mu     sync.Mutex // serializes the GPU: Generate and Embed
	logits []float32  // Sample edits its row; it gets a copy
	top    []sampling.TokenLogprob
	slots  []slotCache
	clock  uint64 // counts sequences, for slotCache.used
	reused int    // prompt tokens the last Generate took from the cache
}

// slotCache is what one KV-cache slot holds.
type slotCache struct {
	tokens []int32 // the tokens the slot holds keys and values of
	used   uint64  // when a sequence last ran in it (0: never)
}

// pickSlot returns the slot for prompt and how many of its first tokens
// that slot already holds (at most len(prompt)-1: the last prompt token is
// fed again for its logits). A slot whose tokens cover more than half of
// the prompt is a continuation of its sequence and the one covering most
// wins (the reference server's rule); otherwise the least recently used
// slot is taken. It trims each slot's tokens to what the model says the
// slot holds, and marks the chosen slot used.
func (b *EngineBackend) pickSlot(prompt []int32) (slot, reuse int) {
	best, lru := -1, 0
	for s := range b.slots {
		sc := &b.slots[s]
		sc.tokens = sc.tokens[:min(len(sc.tokens), b.m.SlotLen(s))]
		if n := sharedPrefix(sc.tokens, prompt); 2*n > len(prompt) && n > reuse {
			best, reuse = s, n
		}
		if sc.used < b.slots[lru].used {
			lru = s
		}
	}
	if best < 0 {
		best, reuse = lru, sharedPrefix(b.slots[lru].tokens, prompt)
	}
	b.clock++
	b.slots[best].used = b.clock
	return best, reuse
}

// sharedPrefix returns how many first tokens of prompt, short of its last,
// cached holds.
func sharedPrefix(cached, prompt []int32) int {
	n := 0
	for n < len(cached) && n < len(prompt)-1 && cached[n] == prompt[n] {
		n++
	}
	return n
}

// NewEngineBackend serves m under the model id name. pool is the embedding
// pooling; PoolNone means the model's own ({arch}.pooling_type, mean when
// absent).
func NewEngineBackend(m *engine.Model, name string, pool engine.Pooling) *EngineBackend {
	if pool == engine.PoolNone {
		pool = engine.PoolMean
		if v, err := m.File.Int(m.Opts.Arch + ".pooling_type"); err == nil && v >= 1 && v <= 3 {
			pool = engine.Pooling(v)
		}
	}
	return &EngineBackend{m: m, name: name, pool: pool, logits: make([]float32, m.Opts.Vocab), slots: make([]slotCache, m.Slots())}
}

// Info returns the model description.
func (b *EngineBackend) Info() ModelInfo {
	tok := b.m.Tok
	info := ModelInfo{Name: b.name, ContextSize: b.m.CtxSize(), VocabSize: b.m.Opts.Vocab, ChatTemplate: tok.ChatTemplate(), AddBOS: tok.AddBOS()}
	if id, ok := tok.BOS(); ok {
		info.BOSText = tok.TokenText(id)
	}
	if id, ok := tok.EOS(); ok {
		info.EOSText = tok.TokenText(id)
	}
	return info
}

// Tokenize turns text into token ids.
func (b *EngineBackend) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return b.m.Tok.Encode(text, addSpecial, parseSpecial)
}

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

// Generate runs one sequence; see Backend.Generate.
func (b *EngineBackend) Generate(ctx context.Context, req *GenerateRequest, emit func(*Event) error) error {
	if len(req.Prompt) == 0 {
		return fmt.Errorf("api: empty prompt")
	}
	tokenize := func(text string) ([]int32, error) { return b.m.Tok.Encode(text, false, false) }
	chain, err := sampling.NewChain(req.Params, sampling.Vocab{Size: b.m.Opts.Vocab, EOG: b.m.Tok.EOGIDs(), Tokenize: tokenize}, req.Constraint)
	if err != nil {
		return err
	}
	if err := chain.Prime(req.Prompt); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	slot, reuse := b.pickSlot(req.Prompt)
	sc := &b.slots[slot]
	if err := b.m.Truncate(slot, reuse); err != nil {
		return err
	}
	sc.tokens, b.reused = sc.tokens[:reuse], reuse
	logits, err := b.m.Prefill(ctx, slot, reuse, req.Prompt[reuse:])
	if err != nil {
		return err
	}
	sc.tokens = append(sc.tokens, req.Prompt[reuse:]...)
	pos := len(req.Prompt)
	var ev Event
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		copy(b.logits, logits)
		id, err := chain.Sample(b.logits)
		if err != nil {
			return err
		}
		if err := chain.Accept(id); err != nil {
			return err
		}
		ev = Event{Token: id, EOG: b.m.Tok.IsEOG(id)}
		if req.Logprobs || req.TopLogprobs > 0 {
			if ev.Logprob, err = chain.Logprob(id); err != nil {
				return err
			}
			if req.TopLogprobs > 0 {
				if b.top, err = chain.TopLogprobs(b.top[:0], req.TopLogprobs); err != nil {
					return err
				}
				ev.Top = b.top
			}
		}
		if err := emit(&ev); err != nil {
			if err == ErrStop {
				return nil
			}
			return err
		}
		if ev.EOG || n+1 >= req.MaxTokens {
			return nil
		}
		if pos >= b.m.CtxSize() {
			return ErrContextFull
		}
		if logits, err = b.m.Step(slot, pos, id); err != nil {
			return err
		}
		sc.tokens = append(sc.tokens, id)
		pos++
	}
}

// Embed returns the pooled embedding of tokens.
func (b *EngineBackend) Embed(ctx context.Context, tokens []int32) ([]float32, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	slot, _ := b.pickSlot(nil) // the least recently used slot
	b.slots[slot].tokens = b.slots[slot].tokens[:0]
	return b.m.Embed(ctx, slot, tokens, b.pool)
}
