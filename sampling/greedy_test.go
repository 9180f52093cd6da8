package sampling

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// rowArgmax is the test's own greedy pick: the first largest logit above
// -Inf, -1 when there is none.
func rowArgmax(x []float32) int32 {
	best, id := float32(math.Inf(-1)), int32(-1)
	for i, v := range x {
		if v > best {
			best, id = v, int32(i)
		}
	}
	return id
}

// TestGreedyPredicate lists which chains may take their token from an
// argmax computed elsewhere.
func TestGreedyPredicate(t *testing.T) {
	v := Vocab{Size: 50, EOG: []int32{7}}
	for _, tc := range []struct {
		name string
		edit func(p *Params)
		con  Constraint
		want bool
	}{
		{"temperature 0", func(p *Params) {}, nil, true},
		{"temperature 0, Mirostat 2", func(p *Params) { p.MirostatMode = 2 }, nil, true},
		{"top_k 1 at temperature 0.8, top_p and min_p", func(p *Params) { p.Temperature, p.TopK = 0.8, 1 }, nil, true},
		{"top_k 1 with Mirostat", func(p *Params) { p.Temperature, p.TopK, p.MirostatMode = 0.8, 1, 1 }, nil, false},
		{"temperature 0.8, top_k 40", func(p *Params) { p.Temperature = 0.8 }, nil, false},
		{"logit bias", func(p *Params) { p.LogitBias = map[string]float64{"3": 1} }, nil, false},
		{"a zero logit bias", func(p *Params) { p.LogitBias = map[string]float64{"3": 0} }, nil, false},
		{"repeat penalty", func(p *Params) { p.RepeatPenalty = 1.1 }, nil, false},
		{"frequency penalty", func(p *Params) { p.FrequencyPenalty = 0.5 }, nil, false},
		{"presence penalty", func(p *Params) { p.PresencePenalty = 0.5 }, nil, false},
		{"penalties with an empty window", func(p *Params) { p.RepeatPenalty, p.PenaltyLastN = 1.3, 0 }, nil, true},
		{"logprobs", func(p *Params) { p.Logprobs = true }, nil, false},
		{"top_logprobs", func(p *Params) { p.TopLogprobs = 3 }, nil, false},
		{"grammar", func(p *Params) {}, &evenOnly{}, false},
		{"min_tokens pending", func(p *Params) { p.MinTokens = 2 }, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := greedyParams()
			tc.edit(&p)
			c := newChain(t, p, v, tc.con)
			if got := c.Greedy(); got != tc.want {
				t.Errorf("Greedy() = %v, want %v", got, tc.want)
			}
			if !tc.want {
				if _, err := c.SampleArgmax(3); err == nil {
					t.Errorf("SampleArgmax(3) on a chain that is not greedy: no error")
				}
			}
		})
	}
	// min_tokens stops masking once enough tokens were accepted, and a
	// grammar installed later ends the argmax path.
	p := greedyParams()
	p.MinTokens = 2
	c := newChain(t, p, v, nil)
	for i := range 2 {
		if c.Greedy() {
			t.Fatalf("Greedy() after %d of 2 min_tokens = true, want false", i)
		}
		if err := c.Accept(1); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Greedy() {
		t.Errorf("Greedy() after min_tokens were accepted = false, want true")
	}
	c.SetConstraint(&evenOnly{})
	if c.Greedy() {
		t.Errorf("Greedy() after SetConstraint = true, want false")
	}
	c.SetConstraint(nil)
	if !c.Greedy() {
		t.Errorf("Greedy() after SetConstraint(nil) = false, want true")
	}
	for _, id := range []int32{-2, 50} {
		if _, err := c.SampleArgmax(id); err == nil || errors.Is(err, ErrNoCandidates) {
			t.Errorf("SampleArgmax(%d) = %v, want an out-of-vocabulary error", id, err)
		}
	}
}

// TestSampleArgmaxMatchesSample: on every greedy configuration, Sample on
// a row and SampleArgmax on the row's argmax give the same token or error,
// the same Mirostat mu and the same generator state, step after step, on
// rows with ties, NaNs, infinities and nothing to choose.
func TestSampleArgmaxMatchesSample(t *testing.T) {
	const vocab = 301
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	rng := rand.New(rand.NewPCG(5, 6))
	rows := make([][]float32, 0, 64)
	for r := range 64 {
		x := make([]float32, vocab)
		for i := range x {
			x[i] = float32(math.Round(rng.NormFloat64()*4)) / 2 // coarse: many ties
		}
		switch r % 8 {
		case 1: // the maximum tied at the start and the end
			x[0], x[vocab-1] = 99, 99
		case 2:
			x[rng.IntN(vocab)], x[rng.IntN(vocab)] = nan, nan
		case 3:
			x[rng.IntN(vocab)] = inf
		case 4: // nothing to choose
			for i := range x {
				x[i] = -inf
				if i%5 == 0 {
					x[i] = nan
				}
			}
		case 5: // one finite logit
			for i := range x {
				x[i] = -inf
			}
			x[rng.IntN(vocab)] = -1e30
		case 6: // signed zeros tied
			for i := range x {
				x[i] = -1
			}
			x[200], x[100] = 0, float32(math.Copysign(0, -1))
		}
		rows = append(rows, x)
	}
	for _, tc := range []struct {
		name string
		edit func(p *Params)
	}{
		{"temperature 0", func(p *Params) {}},
		{"temperature 0 with top_k, top_p, min_p", func(p *Params) { p.TopK, p.TopP, p.MinP = 5, 0.5, 0.2 }},
		{"temperature 0, Mirostat 1", func(p *Params) { p.MirostatMode = 1 }},
		{"temperature 0, Mirostat 2", func(p *Params) { p.MirostatMode, p.MirostatEta = 2, 0.3 }},
		{"top_k 1, temperature 0.8", func(p *Params) { p.Temperature, p.TopK = 0.8, 1 }},
		{"top_k 1, temperature 1.5, every truncation", func(p *Params) {
			p.Temperature, p.TopK, p.TopP, p.MinP, p.TypicalP, p.TFSZ, p.MinKeep = 1.5, 1, 0.3, 0.4, 0.5, 0.6, 0
		}},
		{"min_tokens 3, then greedy", func(p *Params) { p.MinTokens = 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := greedyParams()
			p.Seed = 77
			tc.edit(&p)
			v := Vocab{Size: vocab, EOG: []int32{3}}
			full, fast := newChain(t, p, v, nil), newChain(t, p, v, nil)
			greedy := 0
			for i, x := range rows {
				row := append([]float32(nil), x...)
				want, wantErr := full.Sample(row)
				var got int32
				var gotErr error
				if fast.Greedy() { // as the engine does: the argmax where allowed
					greedy++
					got, gotErr = fast.SampleArgmax(rowArgmax(x))
				} else {
					got, gotErr = fast.Sample(append([]float32(nil), x...))
				}
				if got != want || !errors.Is(gotErr, wantErr) && gotErr != wantErr {
					t.Fatalf("row %d: SampleArgmax = %d, %v; Sample = %d, %v", i, got, gotErr, want, wantErr)
				}
				if fast.Mu() != full.Mu() || fast.rng != full.rng {
					t.Fatalf("row %d: after SampleArgmax mu %g and the generator differ from Sample's (mu %g)", i, fast.Mu(), full.Mu())
				}
				if wantErr == nil {
					if err := full.Accept(want); err != nil {
						t.Fatal(err)
					}
					if err := fast.Accept(got); err != nil {
						t.Fatal(err)
					}
				}
			}
			if greedy < len(rows)-p.MinTokens-8 { // rows of nothing do not count towards min_tokens
				t.Errorf("SampleArgmax stood in for %d of %d rows", greedy, len(rows))
			}
		})
	}
}

// TestSampleArgmaxAllocs holds the argmax path to zero allocations.
func TestSampleArgmaxAllocs(t *testing.T) {
	p := greedyParams()
	c := newChain(t, p, Vocab{Size: 100}, nil)
	if n := testing.AllocsPerRun(100, func() {
		if c.Greedy() {
			if id, err := c.SampleArgmax(42); err == nil {
				_ = c.Accept(id)
			}
		}
	}); n != 0 {
		t.Errorf("Greedy + SampleArgmax + Accept: %v allocations, want 0", n)
	}
}
