package sampling

import (
	"math"
	"strings"
	"testing"
)

// vocab150k is a real vocabulary size (Llama 3 has 128256, Qwen 2 151936).
const vocab150k = 151936

// allConfigs lists one chain configuration per sampler, for the
// allocation test and the benchmarks.
var allConfigs = []struct {
	name string
	edit func(p *Params)
}{
	{"greedy", func(p *Params) { p.Temperature = 0 }},
	{"default", func(p *Params) {}},
	{"top_k", func(p *Params) { p.TopK, p.TopP, p.MinP = 40, 1, 0 }},
	{"top_k_large", func(p *Params) { p.TopK, p.TopP, p.MinP = 5000, 1, 0 }},
	{"top_p", func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 0.95, 0 }},
	{"min_p", func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 1, 0.05 }},
	{"typical", func(p *Params) { p.TopK, p.TopP, p.MinP, p.TypicalP = 0, 1, 0, 0.9 }},
	{"tfs", func(p *Params) { p.TopK, p.TopP, p.MinP, p.TFSZ = 0, 1, 0, 0.95 }},
	{"temperature_only", func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 1, 0 }},
	{"mirostat1", func(p *Params) { p.MirostatMode = 1 }},
	{"mirostat2", func(p *Params) { p.MirostatMode = 2 }},
	{"penalties", func(p *Params) { p.RepeatPenalty, p.FrequencyPenalty, p.PresencePenalty = 1.1, 0.2, 0.2 }},
	{"penalties_whole", func(p *Params) { p.RepeatPenalty, p.PenaltyLastN = 1.1, -1 }},
	{"logit_bias", func(p *Params) { p.LogitBias = map[string]float64{"7": 2, "11": math.Inf(-1)} }},
	{"min_tokens", func(p *Params) { p.MinTokens = 1 << 30 }},
	{"logprobs", func(p *Params) { p.Logprobs, p.TopLogprobs = true, 20 }},
	{"grammar", func(p *Params) {}},         // with a masking constraint, see newStepper
	{"grammar_checked", func(p *Params) {}}, // with a ConstraintChecker

	// High-entropy steps: the worst case of the samplers without top_k.
	{"default/flat", func(p *Params) {}},
	{"top_p/flat", func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 0.95, 0 }},
	{"min_p/flat", func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 1, 0.05 }},
	{"typical/flat", func(p *Params) { p.TopK, p.TopP, p.MinP, p.TypicalP = 0, 1, 0, 0.9 }},
	{"mirostat1/flat", func(p *Params) { p.MirostatMode = 1 }},
	{"mirostat2/flat", func(p *Params) { p.MirostatMode = 2 }},
}

// peakedLogits returns logits shaped like a confident language model step:
// a few tokens stand well out of a broad normal bulk, so the top 50 hold
// almost all the mass.
func peakedLogits(n int) []float32 {
	l := randomLogits(1, n, 2)
	for i := 0; i < 50; i++ {
		l[(i*7919)%n] += 18 - float32(i)/5
	}
	return l
}

// flatLogits returns a high-entropy step: no token stands out, so top_p and
// typical_p keep a large part of the vocabulary.
func flatLogits(n int) []float32 { return randomLogits(2, n, 1) }

// stepper samples and accepts from a fixed logits row, as a decode step.
type stepper struct {
	c    *Chain
	base []float32
	row  []float32
	top  []TokenLogprob
	err  error
}

func newStepper(tb testing.TB, name string, edit func(p *Params)) *stepper {
	p := DefaultParams()
	p.Seed = 1
	edit(&p)
	var con Constraint
	switch name {
	case "grammar":
		con = &maskEvery{k: 3}
	case "grammar_checked":
		con = &checkEvery{maskEvery{k: 3}}
	}
	c := newChain(tb, p, Vocab{Size: vocab150k, EOG: []int32{2, 3}}, con)
	base := peakedLogits(vocab150k)
	if strings.HasSuffix(name, "/flat") {
		base = flatLogits(vocab150k)
	}
	if err := c.Prime([]int32{5, 6, 7, 8}); err != nil {
		tb.Fatal(err)
	}
	return &stepper{c: c, base: base, row: make([]float32, len(base)), top: make([]TokenLogprob, 0, MaxTopLogprobs)}
}

func (s *stepper) step() {
	copy(s.row, s.base)
	id, err := s.c.Sample(s.row)
	if err != nil {
		s.err = err
		return
	}
	if s.c.raw != nil {
		if _, err := s.c.Logprob(id); err != nil {
			s.err = err
		}
		if s.top, err = s.c.TopLogprobs(s.top[:0], MaxTopLogprobs); err != nil {
			s.err = err
		}
	}
	if err := s.c.Accept(id); err != nil {
		s.err = err
	}
}

// maskEvery is an allocation-free Constraint that bans every id that is not
// a multiple of k.
type maskEvery struct{ k int }

func (m *maskEvery) Mask(logits []float32) error {
	ninf := float32(math.Inf(-1))
	for base := 0; base < len(logits); base += m.k {
		for i := base + 1; i < min(base+m.k, len(logits)); i++ {
			logits[i] = ninf
		}
	}
	return nil
}

func (m *maskEvery) Accept(int32) error { return nil }

// checkEvery adds Allows, so the chain masks only after a rejected draw.
type checkEvery struct{ maskEvery }

func (m *checkEvery) Allows(id int32) (bool, error) { return int(id)%m.k == 0, nil }

func TestSampleAllocatesNothing(t *testing.T) {
	for _, cfg := range allConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			s := newStepper(t, cfg.name, cfg.edit)
			if got := testing.AllocsPerRun(8, s.step); got != 0 {
				t.Errorf("allocations per Sample+Accept at vocabulary %d = %v, want 0", vocab150k, got)
			}
			if s.err != nil {
				t.Errorf("step: %v", s.err)
			}
		})
	}
}

func BenchmarkSample(b *testing.B) {
	for _, cfg := range allConfigs {
		b.Run(cfg.name, func(b *testing.B) {
			s := newStepper(b, cfg.name, cfg.edit)
			b.ReportAllocs()
			for b.Loop() {
				s.step()
			}
			if s.err != nil {
				b.Fatal(s.err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
