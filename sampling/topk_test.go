package sampling

import (
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// rowTopK is the test's own top-k selection, as the engine's GPU kernel
// orders it: the largest value first, the lower id on ties (-0 equal to
// +0), NaN after everything; k entries whatever they hold.
func rowTopK(x []float32, k int) ([]int32, []float32) {
	order := make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		xa, xb := x[order[a]], x[order[b]]
		if na, nb := xa != xa, xb != xb; na || nb {
			return !na && nb
		}
		return xa > xb
	})
	k = min(k, len(x))
	ids, vals := make([]int32, k), make([]float32, k)
	for i := range k {
		ids[i], vals[i] = int32(order[i]), x[order[i]]
	}
	return ids, vals
}

// TestTopKPredicate lists which chains may take their token from the top
// logits computed elsewhere.
func TestTopKPredicate(t *testing.T) {
	v := Vocab{Size: 5000, EOG: []int32{7}}
	for _, tc := range []struct {
		name string
		edit func(p *Params)
		con  Constraint
		want int
	}{
		{"defaults (temperature 0.8, top_k 40, top_p, min_p)", func(p *Params) {}, nil, 40},
		{"top_k 1024, every truncation", func(p *Params) { p.TopK, p.TFSZ, p.TypicalP = 1024, 0.9, 0.9 }, nil, 1024},
		{"top_k 1025", func(p *Params) { p.TopK = 1025 }, nil, 0},
		{"top_k 0 (off)", func(p *Params) { p.TopK = 0 }, nil, 0},
		{"top_k 1 (greedy)", func(p *Params) { p.TopK = 1 }, nil, 0},
		{"temperature 0 (greedy)", func(p *Params) { p.Temperature = 0 }, nil, 0},
		{"Mirostat", func(p *Params) { p.MirostatMode = 2 }, nil, 0},
		{"logit bias", func(p *Params) { p.LogitBias = map[string]float64{"3": 1} }, nil, 0},
		{"repeat penalty", func(p *Params) { p.RepeatPenalty = 1.1 }, nil, 0},
		{"presence penalty", func(p *Params) { p.PresencePenalty = 0.5 }, nil, 0},
		{"logprobs", func(p *Params) { p.Logprobs = true }, nil, 0},
		{"grammar", func(p *Params) {}, &evenOnly{}, 0},
		{"min_tokens pending", func(p *Params) { p.MinTokens = 2 }, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultParams()
			p.Seed = 1
			tc.edit(&p)
			c := newChain(t, p, v, tc.con)
			if got := c.TopK(); got != tc.want {
				t.Errorf("TopK() = %d, want %d", got, tc.want)
			}
			if tc.want == 0 {
				if _, err := c.SampleTopK([]int32{1, 2}, []float32{2, 1}); err == nil {
					t.Error("SampleTopK on a chain whose TopK is 0: no error")
				}
			}
		})
	}
}

// TestSampleTopKMatchesSample is the proof that the engine may sample
// from the top k logits alone: for rows with ties, signed zeros, NaN,
// +-Inf and fewer finite logits than k, under every truncation sampler,
// SampleTopK draws exactly the tokens Sample draws on the whole row from
// the same seed, and leaves the generator in the same state.
func TestSampleTopKMatchesSample(t *testing.T) {
	const vocab = 503
	seed := uint64(20261124)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	rows := make([][]float32, 0, 96)
	for r := range 96 {
		x := make([]float32, vocab)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
			if r%2 == 1 {
				x[i] = float32(math.Round(float64(x[i])*2)) / 2 // coarse: many ties
			}
		}
		switch r % 12 {
		case 1:
			x[rng.IntN(vocab)], x[rng.IntN(vocab)] = nan, nan
		case 2:
			x[rng.IntN(vocab)] = inf
		case 3: // fewer finite logits than any k here
			for i := range x {
				if i%97 != 0 {
					x[i] = -inf
				}
			}
			x[5] = nan
		case 4: // signed zeros tied at the top
			for i := range x {
				x[i] = -1
			}
			x[300], x[100], x[200] = 0, float32(math.Copysign(0, -1)), 0
		case 5: // one logit far above the rest
			x[rng.IntN(vocab)] = 40
		case 6: // flat
			for i := range x {
				x[i] = 0.25
			}
		}
		rows = append(rows, x)
	}
	for _, tc := range []struct {
		name string
		edit func(p *Params)
	}{
		{"defaults", func(p *Params) {}},
		{"top_k 2", func(p *Params) { p.TopK = 2 }},
		{"top_k 64, temperature 1.5, top_p 0.9", func(p *Params) { p.TopK, p.Temperature, p.TopP, p.MinP = 64, 1.5, 0.9, 0 }},
		{"top_k 10, every truncation, min_keep 3", func(p *Params) {
			p.TopK, p.TopP, p.MinP, p.TypicalP, p.TFSZ, p.MinKeep = 10, 0.5, 0.1, 0.7, 0.8, 3
		}},
		{"top_k 600 (more than the vocabulary)", func(p *Params) { p.TopK, p.TopP, p.MinP = 600, 1, 0 }},
		{"top_k 40, temperature 0.3, min_p 0.2", func(p *Params) { p.Temperature, p.MinP = 0.3, 0.2 }},
		{"min_tokens 4, then top_k", func(p *Params) { p.MinTokens = 4 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultParams()
			p.Seed = 4242
			tc.edit(&p)
			v := Vocab{Size: vocab, EOG: []int32{3}}
			full, fast := newChain(t, p, v, nil), newChain(t, p, v, nil)
			used, draws := 0, 0
			for pass := range 3 { // each row several times: the generator moves on
				for i, x := range rows {
					want, wantErr := full.Sample(append([]float32(nil), x...))
					var got int32
					var gotErr error
					if k := fast.TopK(); k > 0 { // as the engine does
						used++
						// The engine selects the step's largest k, maybe
						// more than this chain's.
						ids, vals := rowTopK(x, k+i%3)
						got, gotErr = fast.SampleTopK(ids, vals)
					} else {
						got, gotErr = fast.Sample(append([]float32(nil), x...))
					}
					if got != want || !errors.Is(gotErr, wantErr) && gotErr != wantErr {
						t.Fatalf("pass %d row %d: SampleTopK = %d, %v; Sample = %d, %v", pass, i, got, gotErr, want, wantErr)
					}
					if fast.rng != full.rng {
						t.Fatalf("pass %d row %d: the generators differ after SampleTopK", pass, i)
					}
					if wantErr == nil {
						draws++
						if err := full.Accept(want); err != nil {
							t.Fatal(err)
						}
						if err := fast.Accept(got); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if used < 3*len(rows)-p.MinTokens-8 {
				t.Errorf("SampleTopK stood in for %d of %d rows", used, 3*len(rows))
			}
			t.Logf("%d draws, %d through SampleTopK", draws, used)
		})
	}
}

// TestSampleTopKErrors: entries too few, out of the vocabulary or out of
// order are refused, never drawn from.
func TestSampleTopKErrors(t *testing.T) {
	p := DefaultParams()
	p.Seed, p.TopK = 1, 3
	c := newChain(t, p, Vocab{Size: 10}, nil)
	for _, tc := range []struct {
		name string
		ids  []int32
		vals []float32
		want string
	}{
		{"too few", []int32{1, 2}, []float32{3, 2}, "at least top_k 3"},
		{"outside the vocabulary", []int32{1, 10, 2}, []float32{3, 2, 1}, "outside the vocabulary"},
		{"negative id", []int32{1, -1, 2}, []float32{3, 2, 1}, "outside the vocabulary"},
		{"values rising", []int32{1, 2, 3}, []float32{1, 2, 3}, "out of order"},
		{"a tie in the wrong order", []int32{4, 2, 3}, []float32{2, 2, 1}, "out of order"},
		{"a repeated id", []int32{4, 4, 3}, []float32{2, 2, 1}, "out of order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.SampleTopK(tc.ids, tc.vals); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SampleTopK(%v, %v) = %v, want an error containing %q", tc.ids, tc.vals, err, tc.want)
			}
		})
	}
	ninf := float32(math.Inf(-1))
	if _, err := c.SampleTopK([]int32{1, 2, 3}, []float32{ninf, ninf, ninf}); !errors.Is(err, ErrNoCandidates) {
		t.Errorf("SampleTopK of three -Inf = %v, want ErrNoCandidates", err)
	}
}

// TestSampleTopKAllocs holds the top-k path to zero allocations.
func TestSampleTopKAllocs(t *testing.T) {
	p := DefaultParams()
	p.Seed = 9
	c := newChain(t, p, Vocab{Size: 100}, nil)
	x := make([]float32, 100)
	for i := range x {
		x[i] = float32(i % 17)
	}
	ids, vals := rowTopK(x, 40)
	if n := testing.AllocsPerRun(100, func() {
		if c.TopK() > 0 {
			if id, err := c.SampleTopK(ids, vals); err == nil {
				_ = c.Accept(id)
			}
		}
	}); n != 0 {
		t.Errorf("TopK + SampleTopK + Accept: %v allocations, want 0", n)
	}
}
