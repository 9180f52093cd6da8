package api

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
)

// fakeBackend is a deterministic Backend over a byte vocabulary: ids 0-2
// are <unk>, <s> (BOS) and </s> (EOS); id 3+b is byte b; id 259 is the
// control token [TOOL_CALLS] (no output bytes, as in Mistral vocabularies). Generation runs a
// real sampling chain over logits that favour the bytes of reply(prompt)
// and then EOS, so grammars, logprobs and seeds behave as with a model.
type fakeBackend struct {
	ctxSize  int
	template string
	// reply returns the scripted output for the prompt text.
	reply func(prompt string) string
	// strength returns the logit of the scripted token for a seed (best_of
	// candidates get different log-probabilities).
	strength func(seed int64) float32
	// delay is slept before each token; gate, when set, is received from
	// before the first token.
	delay time.Duration
	gate  chan struct{}
	// hold, when set, is received from after the first token (the
	// generation waits there until the test releases it or ctx ends);
	// ended, when set, receives what each Generate call returns. With
	// them tests follow a generation by events, not by the clock.
	hold  chan struct{}
	ended chan error
	// controls are more control tokens (no output bytes), ids fakeVocab
	// and up: a vocabulary whose reasoning markers are control tokens, as
	// Command R7B's and Gemma 4's are.
	controls []string

	cancelled atomic.Int32 // Generate calls that ended by ctx
	running   atomic.Int32
	maxSeen   atomic.Int32
}

const (
	fakeVocab     = 260
	fakeToolCalls = 259
)

func newFake() *fakeBackend {
	return &fakeBackend{ctxSize: 512, reply: func(string) string { return "Hello, world! This is the fake model." }}
}

func (f *fakeBackend) Info() ModelInfo {
	return ModelInfo{Name: "fake-model", ContextSize: f.ctxSize, VocabSize: f.vocab(), ChatTemplate: f.template,
		BOSText: "<s>", EOSText: "</s>", AddBOS: true}
}

// vocab is the vocabulary's size.
func (f *fakeBackend) vocab() int { return fakeVocab + len(f.controls) }

func (f *fakeBackend) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	var out []int32
	if addSpecial {
		out = append(out, 1)
	}
next:
	for i := 0; i < len(text); {
		if parseSpecial {
			for k, c := range f.controls {
				if strings.HasPrefix(text[i:], c) {
					out, i = append(out, int32(fakeVocab+k)), i+len(c)
					continue next
				}
			}
		}
		if parseSpecial && strings.HasPrefix(text[i:], "<s>") {
			out, i = append(out, 1), i+3
			continue
		}
		if parseSpecial && strings.HasPrefix(text[i:], "[TOOL_CALLS]") {
			out, i = append(out, fakeToolCalls), i+len("[TOOL_CALLS]")
			continue
		}
		if parseSpecial && strings.HasPrefix(text[i:], "</s>") {
			out, i = append(out, 2), i+4
			continue
		}
		out = append(out, int32(text[i])+3)
		i++
	}
	return out, nil
}

func (f *fakeBackend) Detokenize(tokens []int32) (string, error) {
	var b strings.Builder
	for _, id := range tokens {
		switch {
		case id == 1:
			b.WriteString("<s>")
		case id == 2:
			b.WriteString("</s>")
		case id == fakeToolCalls:
			b.WriteString("[TOOL_CALLS]")
		case id >= 3 && id < fakeVocab:
			b.WriteByte(byte(id - 3))
		case id >= fakeVocab && int(id) < f.vocab():
			b.WriteString(f.controls[id-fakeVocab])
		case id == 0:
		default:
			return "", fmt.Errorf("token %d is outside the vocabulary", id)
		}
	}
	return b.String(), nil
}

var fakePieces = func() [][]byte {
	p := make([][]byte, fakeVocab)
	for i := 3; i < fakeToolCalls; i++ {
		p[i] = []byte{byte(i - 3)}
	}
	return p
}()

func (f *fakeBackend) Piece(id int32) []byte {
	if id < 0 || id >= fakeVocab {
		return nil
	}
	return fakePieces[id]
}

func (f *fakeBackend) TokenText(id int32) string {
	switch id {
	case 0:
		return "<unk>"
	case 1:
		return "<s>"
	case 2:
		return "</s>"
	case fakeToolCalls:
		return "[TOOL_CALLS]"
	}
	if id >= fakeVocab && int(id) < f.vocab() {
		return f.controls[id-fakeVocab]
	}
	return string(f.Piece(id))
}

func (f *fakeBackend) IsEOG(id int32) bool { return id == 2 }
func (f *fakeBackend) EOG() []int32        { return []int32{2} }

// fakeCand is one candidate's state in fakeBackend.Generate.
type fakeCand struct {
	req      *GenerateRequest
	chain    *sampling.Chain
	script   []int32
	strength float32
	i        int
	done     bool
	ev       engine.Event
}

// Generate runs the candidates round-robin, one token each in turn, as a
// batching backend interleaves them.
func (f *fakeBackend) Generate(ctx context.Context, reqs []*GenerateRequest, emit func(i int, ev *engine.Event) error) error {
	err := f.generate(ctx, reqs, emit)
	if f.ended != nil {
		f.ended <- err
	}
	return err
}

func (f *fakeBackend) generate(ctx context.Context, reqs []*GenerateRequest, emit func(i int, ev *engine.Event) error) error {
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		m := f.maxSeen.Load()
		if n <= m || f.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	cands := make([]*fakeCand, len(reqs))
	for k, req := range reqs {
		prompt, err := f.Detokenize(req.Prompt)
		if err != nil {
			return err
		}
		script, _ := f.Tokenize(f.reply(prompt), false, true)
		strength := float32(20)
		if f.strength != nil {
			strength = f.strength(req.Params.Seed)
		}
		chain, err := sampling.NewChain(req.Params, sampling.Vocab{Size: f.vocab(), EOG: []int32{2}}, req.Constraint)
		if err != nil {
			return err
		}
		if err := chain.Prime(req.Prompt); err != nil {
			return err
		}
		cands[k] = &fakeCand{req: req, chain: chain, script: script, strength: strength}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			f.cancelled.Add(1)
			return ctx.Err()
		}
	}
	logits := make([]float32, f.vocab())
	for round, left := 0, len(cands); left > 0; round++ {
		if round == 1 && f.hold != nil {
			select {
			case <-f.hold:
			case <-ctx.Done():
				f.cancelled.Add(1)
				return ctx.Err()
			}
		}
		if f.delay > 0 {
			time.Sleep(f.delay)
		}
		if err := ctx.Err(); err != nil {
			f.cancelled.Add(1)
			return err
		}
		for k, c := range cands {
			if c.done {
				continue
			}
			if len(c.req.Prompt)+c.i >= f.ctxSize {
				c.done = true // out of positions: finish_reason "length"
				left--
				continue
			}
			for j := range logits {
				logits[j] = 0
			}
			want := int32(2)
			if c.i < len(c.script) {
				want = c.script[c.i]
			}
			logits[want] = c.strength
			id, err := c.chain.Sample(logits)
			if err != nil {
				return err
			}
			if err := c.chain.Accept(id); err != nil {
				return err
			}
			c.ev = engine.Event{Token: id, EOG: id == 2, Top: c.ev.Top[:0]}
			if c.req.Logprobs || c.req.TopLogprobs > 0 {
				if c.ev.Logprob, err = c.chain.Logprob(id); err != nil {
					return err
				}
				if c.ev.Top, err = c.chain.TopLogprobs(c.ev.Top, c.req.TopLogprobs); err != nil {
					return err
				}
			}
			if c.i == 0 && c.req.PromptLogprobs {
				if c.ev.Prompt, err = fakePromptLogprobs(c.chain, c.req); err != nil {
					return err
				}
			} else {
				c.ev.Prompt = nil
			}
			c.i++
			err = emit(k, &c.ev)
			switch {
			case err == ErrStop:
				c.done = true
			case err != nil:
				if ctx.Err() != nil {
					f.cancelled.Add(1)
				}
				return err
			case c.ev.EOG || c.i >= c.req.MaxTokens:
				c.done = true
			}
			if c.done {
				left--
			}
		}
	}
	return nil
}

// fakePromptScore is the logit the fake gives each prompt token at the
// position before it (every other token 0), so a prompt token's
// log-probability is fakePromptLogprob.
const fakePromptScore = 4

// fakePromptLogprob is log(e^s / (e^s + V-1)) for s = fakePromptScore.
var fakePromptLogprob = float32(fakePromptScore - math.Log(math.Exp(fakePromptScore)+fakeVocab-1))

// fakePromptLogprobs scores req's prompt as the engine does, through the
// chain, over the fake's logits rows.
func fakePromptLogprobs(c *sampling.Chain, req *GenerateRequest) ([]engine.PromptLogprob, error) {
	row := make([]float32, fakeVocab)
	var out []engine.PromptLogprob
	for _, tok := range req.Prompt[1:] {
		clear(row)
		row[tok] = fakePromptScore
		if err := c.Score(row); err != nil {
			return nil, err
		}
		lp, err := c.Logprob(tok)
		if err != nil {
			return nil, err
		}
		top, err := c.TopLogprobs(nil, req.TopLogprobs)
		if err != nil {
			return nil, err
		}
		out = append(out, engine.PromptLogprob{Token: tok, Logprob: lp, Top: top})
	}
	return out, nil
}

// Embed returns a letter histogram over 8 buckets (byte % 8), so texts that
// share letters are similar.
func (f *fakeBackend) Embed(ctx context.Context, tokens []int32) ([]float32, error) {
	v := make([]float32, 8)
	for _, id := range tokens {
		if id >= 3 {
			v[(id-3)%8]++
		}
	}
	return v, ctx.Err()
}
