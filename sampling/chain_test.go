package sampling

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func newChain(t testing.TB, p Params, v Vocab, con Constraint) *Chain {
	t.Helper()
	c, err := NewChain(p, v, con)
	if err != nil {
		t.Fatalf("NewChain(%+v) = %v", p, err)
	}
	return c
}

func greedyParams() Params {
	p := DefaultParams()
	p.Temperature = 0
	p.Seed = 1
	return p
}

func TestGreedy(t *testing.T) {
	ninf, nan := float32(math.Inf(-1)), float32(math.NaN())
	tests := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"max", []float32{0.1, 3, -2, 2.9}, 1},
		{"ties pick lowest id", []float32{1, 4, 4, 4}, 1},
		{"skips NaN", []float32{nan, 1, nan, 0.5}, 1},
		{"all negative", []float32{-5, -3, -4}, 1},
		{"masked max", []float32{ninf, ninf, -100}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChain(t, greedyParams(), Vocab{Size: len(tt.logits)}, nil)
			got, err := c.Sample(slices.Clone(tt.logits))
			if err != nil || got != tt.want {
				t.Errorf("Sample(%v) = %d, %v, want %d", tt.logits, got, err, tt.want)
			}
		})
	}
}

func TestArgmaxAgainstReference(t *testing.T) {
	ninf := float32(math.Inf(-1))
	for n := 1; n <= 41; n += 4 {
		for seed := uint64(0); seed < 20; seed++ {
			rng := rand.New(rand.NewPCG(seed, uint64(n)))
			logits := make([]float32, n)
			for i := range logits {
				// Few distinct values: ties across lanes and in the tail.
				logits[i] = float32(rng.IntN(4))
				if rng.IntN(5) == 0 {
					logits[i] = ninf
				}
			}
			want := int32(-1)
			for i, l := range logits {
				if l > ninf && (want < 0 || l > logits[want]) {
					want = int32(i)
				}
			}
			if got := argmax(logits); got != want {
				t.Errorf("argmax(%v) = %d, want %d", logits, got, want)
			}
		}
	}
}

func TestSampleErrors(t *testing.T) {
	ninf := float32(math.Inf(-1))
	for _, mode := range []int{0, 1, 2} {
		for _, temp := range []float64{0, 0.8} {
			t.Run(fmt.Sprintf("mirostat%d_temp%v", mode, temp), func(t *testing.T) {
				p := DefaultParams()
				p.MirostatMode, p.Temperature = mode, temp
				c := newChain(t, p, Vocab{Size: 3}, nil)
				if id, err := c.Sample([]float32{ninf, ninf, float32(math.NaN())}); !errors.Is(err, ErrNoCandidates) {
					t.Errorf("Sample(all masked) = %d, %v, want ErrNoCandidates", id, err)
				}
				if id, err := c.Sample([]float32{1, 2}); err == nil {
					t.Errorf("Sample(short row) = %d, nil, want an error", id)
				}
				if err := c.Accept(3); err == nil {
					t.Errorf("Accept(3) with vocabulary 3 = nil, want an error")
				}
				if err := c.Prime([]int32{0, -1}); err == nil {
					t.Errorf("Prime([0 -1]) = nil, want an error")
				}
			})
		}
	}
	if _, err := NewChain(DefaultParams(), Vocab{Size: 0}, nil); err == nil {
		t.Errorf("NewChain(vocab 0) = nil error, want one")
	}
	if _, err := NewChain(DefaultParams(), Vocab{Size: 4, EOG: []int32{4}}, nil); err == nil {
		t.Errorf("NewChain(EOG 4 of vocab 4) = nil error, want one")
	}
}

// randomLogits returns n logits from a seeded normal distribution.
func randomLogits(seed uint64, n int, spread float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 99))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * spread)
	}
	return out
}

// generate samples and accepts steps tokens, each from a different logits
// row derived from the step number.
func generate(t *testing.T, c *Chain, vocab, steps int) []int32 {
	t.Helper()
	var out []int32
	for s := 0; s < steps; s++ {
		logits := randomLogits(uint64(s), vocab, 2)
		id, err := c.Sample(logits)
		if err != nil {
			t.Fatalf("Sample(step %d) = %v", s, err)
		}
		if err := c.Accept(id); err != nil {
			t.Fatalf("Accept(%d) = %v", id, err)
		}
		out = append(out, id)
	}
	return out
}

func TestSeedDeterminism(t *testing.T) {
	const vocab, steps = 500, 64
	configs := map[string]func(p *Params){
		"default":   func(p *Params) {},
		"top_p":     func(p *Params) { p.TopK = 0; p.TopP = 0.9; p.MinP = 0 },
		"mirostat1": func(p *Params) { p.MirostatMode = 1 },
		"mirostat2": func(p *Params) { p.MirostatMode = 2 },
		"penalties": func(p *Params) { p.RepeatPenalty = 1.3; p.PresencePenalty = 0.5 },
	}
	for name, edit := range configs {
		t.Run(name, func(t *testing.T) {
			p := DefaultParams()
			p.Temperature = 1.5
			edit(&p)
			p.Seed = 42
			a := generate(t, newChain(t, p, Vocab{Size: vocab}, nil), vocab, steps)
			b := generate(t, newChain(t, p, Vocab{Size: vocab}, nil), vocab, steps)
			if !slices.Equal(a, b) {
				t.Errorf("seed 42 twice: %v and %v, want equal", a, b)
			}
			p.Seed = 43
			d := generate(t, newChain(t, p, Vocab{Size: vocab}, nil), vocab, steps)
			if slices.Equal(a, d) {
				t.Errorf("seeds 42 and 43 gave the same %d tokens, want different", steps)
			}
			p.Seed = RandomSeed
			r1 := generate(t, newChain(t, p, Vocab{Size: vocab}, nil), vocab, steps)
			r2 := generate(t, newChain(t, p, Vocab{Size: vocab}, nil), vocab, steps)
			if slices.Equal(r1, r2) {
				t.Errorf("two random seeds gave the same %d tokens, want different", steps)
			}

			// Reset replays the same seed from the start.
			p.Seed = 42
			c := newChain(t, p, Vocab{Size: vocab}, nil)
			generate(t, c, vocab, steps)
			c.Reset()
			if again := generate(t, c, vocab, steps); !slices.Equal(a, again) {
				t.Errorf("after Reset: %v, want %v", again, a)
			}
		})
	}
}

func TestClone(t *testing.T) {
	const vocab = 300
	p := DefaultParams()
	p.Temperature = 1.5
	p.RepeatPenalty = 1.5
	p.Seed = 7
	base := newChain(t, p, Vocab{Size: vocab}, nil)
	if err := base.Prime([]int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	same := base.Clone(7, nil)
	other := base.Clone(8, nil)
	a := generate(t, base, vocab, 40)
	if b := generate(t, same, vocab, 40); !slices.Equal(a, b) {
		t.Errorf("Clone(7) of a seed-7 chain: %v, want %v", b, a)
	}
	if d := generate(t, other, vocab, 40); slices.Equal(a, d) {
		t.Errorf("Clone(8) repeated the seed-7 tokens %v", d)
	}
	// The clone copied the primed window and is independent afterwards.
	fresh := newChain(t, p, Vocab{Size: vocab}, nil)
	if err := fresh.Prime([]int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	cl := fresh.Clone(1, nil)
	if err := cl.Accept(9); err != nil {
		t.Fatal(err)
	}
	if fresh.pen.counts[9] != 0 || cl.pen.counts[9] != 1 || cl.pen.counts[2] != 1 {
		t.Errorf("after clone.Accept(9): original count %d, clone counts 9:%d 2:%d, want 0, 1, 1",
			fresh.pen.counts[9], cl.pen.counts[9], cl.pen.counts[2])
	}
}

// TestDrawFrequencies checks that draws follow the survivors' softmax.
func TestDrawFrequencies(t *testing.T) {
	const n = 40000
	p := onlyParams()
	p.Temperature = 0.7
	p.TopK = 6
	p.Seed = 2024
	c := newChain(t, p, Vocab{Size: len(distA)}, nil)
	counts := map[int32]int{}
	for i := 0; i < n; i++ {
		id, err := c.Sample(logitsOf(distA...))
		if err != nil {
			t.Fatal(err)
		}
		counts[id]++
	}
	// Survivors: top 6 (ids 1 3 4 5 0 6), probabilities p^(1/0.7) normalized.
	keep := []int32{1, 3, 4, 5, 0, 6}
	sum := 0.0
	for _, id := range keep {
		sum += math.Pow(distA[id], 1/0.7)
	}
	total := 0
	for _, id := range keep {
		want := math.Pow(distA[id], 1/0.7) / sum
		got := float64(counts[id]) / n
		sigma := math.Sqrt(want * (1 - want) / n)
		if !(math.Abs(got-want) <= 5*sigma) {
			t.Errorf("frequency of %d = %.4f, want %.4f ± %.4f", id, got, want, 5*sigma)
		}
		total += counts[id]
	}
	if total != n {
		t.Errorf("%d of %d draws fell outside the top 6", n-total, n)
	}
}

func TestPenalties(t *testing.T) {
	// Token 0 occurs twice, 1 and 2 once; 3 and 4 never.
	base := []float32{2, -2, 0.5, 3, 0}
	tests := []struct {
		name               string
		lastN              int
		repeat, freq, pres float64
		history            []int32
		want               []float32
	}{
		// 0: 2/2 - (2*.5+.25); 1: -2*2 - .75; 2: .5/2 - .75.
		{"all three whole window", -1, 2, 0.5, 0.25, []int32{0, 0, 1, 2}, []float32{-0.25, -4.75, -0.5, 3, 0}},
		{"window 2 sees 1 2", 2, 2, 0.5, 0.25, []int32{0, 0, 1, 2}, []float32{2, -4.75, -0.5, 3, 0}},
		{"window 3 sees 0 1 2", 3, 2, 0.5, 0.25, []int32{0, 0, 1, 2}, []float32{0.25, -4.75, -0.5, 3, 0}},
		{"window larger than history", 64, 2, 0.5, 0.25, []int32{0, 0, 1, 2}, []float32{-0.25, -4.75, -0.5, 3, 0}},
		{"window 0 is off", 0, 2, 0.5, 0.25, []int32{0, 0, 1, 2}, []float32{2, -2, 0.5, 3, 0}},
		{"repeat only: negative logits multiplied", -1, 2, 0, 0, []int32{0, 1, 2}, []float32{1, -4, 0.25, 3, 0}},
		{"repeat below 1 raises", -1, 0.5, 0, 0, []int32{0, 1}, []float32{4, -1, 0.5, 3, 0}},
		{"zero logit is multiplied", -1, 2, 0, 0.5, []int32{4}, []float32{2, -2, 0.5, 3, -0.5}},
		{"frequency counts occurrences", -1, 1, 1, 0, []int32{3, 3, 3}, []float32{2, -2, 0.5, 0, 0}},
		{"presence counts once", -1, 1, 0, 1, []int32{3, 3, 3}, []float32{2, -2, 0.5, 2, 0}},
		{"negative frequency rewards", -1, 1, -1, 0, []int32{1}, []float32{2, -1, 0.5, 3, 0}},
	}
	for _, tt := range tests {
		for _, via := range []string{"prime", "accept"} {
			t.Run(tt.name+"/"+via, func(t *testing.T) {
				p := greedyParams()
				p.PenaltyLastN, p.RepeatPenalty, p.FrequencyPenalty, p.PresencePenalty = tt.lastN, tt.repeat, tt.freq, tt.pres
				c := newChain(t, p, Vocab{Size: len(base)}, nil)
				if via == "prime" {
					if err := c.Prime(tt.history); err != nil {
						t.Fatal(err)
					}
				} else {
					for _, id := range tt.history {
						if err := c.Accept(id); err != nil {
							t.Fatal(err)
						}
					}
				}
				logits := slices.Clone(base)
				if _, err := c.Sample(logits); err != nil {
					t.Fatal(err)
				}
				for i := range logits {
					if !(math.Abs(float64(logits[i]-tt.want[i])) <= 1e-6) {
						t.Errorf("penalized logits = %v, want %v", logits, tt.want)
						break
					}
				}
			})
		}
	}
}

func TestPenaltyWindowSlides(t *testing.T) {
	p := greedyParams()
	p.PenaltyLastN, p.PresencePenalty = 3, 1
	c := newChain(t, p, Vocab{Size: 6}, nil)
	// After each accepted token, the penalized ids are the last three.
	seq := []int32{0, 1, 2, 3, 3, 4, 5, 5, 5}
	for i, id := range seq {
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
		logits := make([]float32, 6)
		if _, err := c.Sample(logits); err != nil {
			t.Fatal(err)
		}
		window := seq[max(0, i-2) : i+1]
		for tok := int32(0); tok < 6; tok++ {
			want := float32(0)
			if slices.Contains(window, tok) {
				want = -1
			}
			if logits[tok] != want {
				t.Errorf("after %v: logit[%d] = %v, want %v", seq[:i+1], tok, logits[tok], want)
			}
		}
	}
	// Reset empties the window.
	c.Reset()
	logits := make([]float32, 6)
	if _, err := c.Sample(logits); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logits, make([]float32, 6)) {
		t.Errorf("after Reset: logits = %v, want all 0", logits)
	}
}

func TestLogitBias(t *testing.T) {
	tokenize := func(s string) ([]int32, error) {
		switch s {
		case "ab":
			return []int32{3, 4}, nil
		case "b":
			return []int32{4}, nil
		case "big":
			return []int32{99}, nil
		}
		return nil, errors.New("unknown text")
	}
	ninf := math.Inf(-1)
	base := []float32{0, 1, 0.5, 0, 0}
	tests := []struct {
		name string
		typ  string
		bias map[string]float64
		want []float32
		tok  int32
	}{
		{"by id", "input_ids", map[string]float64{"2": 10}, []float32{0, 1, 10.5, 0, 0}, 2},
		{"by id, empty type", "", map[string]float64{"0": -1, "3": 2}, []float32{-1, 1, 0.5, 2, 0}, 3},
		{"ban the maximum", "input_ids", map[string]float64{"1": ninf}, []float32{0, float32(ninf), 0.5, 0, 0}, 2},
		{"by text, each token", "tokens", map[string]float64{"ab": 5}, []float32{0, 1, 0.5, 5, 5}, 3},
		{"by text, overlapping keys add", "tokens", map[string]float64{"ab": 1, "b": 2}, []float32{0, 1, 0.5, 1, 3}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := greedyParams()
			p.LogitBias, p.LogitBiasType = tt.bias, tt.typ
			c := newChain(t, p, Vocab{Size: 5, Tokenize: tokenize}, nil)
			logits := slices.Clone(base)
			id, err := c.Sample(logits)
			if err != nil || id != tt.tok {
				t.Errorf("Sample() = %d, %v, want %d", id, err, tt.tok)
			}
			if !slices.Equal(logits, tt.want) {
				t.Errorf("biased logits = %v, want %v", logits, tt.want)
			}
		})
	}

	bad := []struct {
		name     string
		typ      string
		bias     map[string]float64
		tokenize func(string) ([]int32, error)
	}{
		{"id not a number", "input_ids", map[string]float64{"ab": 1}, nil},
		{"id out of range", "input_ids", map[string]float64{"5": 1}, nil},
		{"id negative", "input_ids", map[string]float64{"-1": 1}, nil},
		{"text without tokenizer", "tokens", map[string]float64{"ab": 1}, nil},
		{"tokenizer fails", "tokens", map[string]float64{"zz": 1}, tokenize},
		{"token out of range", "tokens", map[string]float64{"big": 1}, tokenize},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p := greedyParams()
			p.LogitBias, p.LogitBiasType = tt.bias, tt.typ
			_, err := NewChain(p, Vocab{Size: 5, Tokenize: tt.tokenize}, nil)
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Field != "logit_bias" {
				t.Errorf("NewChain(%v) = %v, want a logit_bias ParamError", tt.bias, err)
			}
		})
	}
}

func TestMinTokens(t *testing.T) {
	// EOG ids 3 and 4 are the most likely; 1 comes next.
	base := []float32{0, 1, 0.5, 5, 4}
	for _, minTokens := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(minTokens), func(t *testing.T) {
			p := greedyParams()
			p.MinTokens = minTokens
			c := newChain(t, p, Vocab{Size: 5, EOG: []int32{3, 4}}, nil)
			// Primed prompt tokens do not count.
			if err := c.Prime([]int32{0, 1, 2, 0, 1}); err != nil {
				t.Fatal(err)
			}
			for step := 0; step <= minTokens; step++ {
				logits := slices.Clone(base)
				id, err := c.Sample(logits)
				if err != nil {
					t.Fatal(err)
				}
				want := int32(3)
				if step < minTokens {
					want = 1
				}
				if id != want {
					t.Fatalf("step %d of min_tokens %d: Sample() = %d, want %d", step, minTokens, id, want)
				}
				if err := c.Accept(id); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// Sampled (not greedy) chains mask the same way.
	p := DefaultParams()
	p.MinTokens, p.Seed = 1000, 5
	c := newChain(t, p, Vocab{Size: 5, EOG: []int32{3, 4}}, nil)
	for i := 0; i < 200; i++ {
		id, err := c.Sample(slices.Clone(base))
		if err != nil {
			t.Fatal(err)
		}
		if id == 3 || id == 4 {
			t.Fatalf("Sample() = %d before min_tokens, want a non-EOG token", id)
		}
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
}

// evenOnly is a Constraint that allows only even ids and rejects accepting
// odd ones.
type evenOnly struct {
	accepted []int32
	maskErr  error
}

func (e *evenOnly) Mask(logits []float32) error {
	if e.maskErr != nil {
		return e.maskErr
	}
	for i := 1; i < len(logits); i += 2 {
		logits[i] = float32(math.Inf(-1))
	}
	return nil
}

func (e *evenOnly) Accept(id int32) error {
	if id%2 != 0 {
		return fmt.Errorf("token %d is not allowed", id)
	}
	e.accepted = append(e.accepted, id)
	return nil
}

func TestConstraint(t *testing.T) {
	for _, mode := range []int{0, 1, 2} {
		for _, temp := range []float64{0, 1.5} {
			t.Run(fmt.Sprintf("mirostat%d_temp%v", mode, temp), func(t *testing.T) {
				p := DefaultParams()
				p.MirostatMode, p.Temperature, p.Seed = mode, temp, 3
				con := &evenOnly{}
				c := newChain(t, p, Vocab{Size: 101}, con)
				got := generate(t, c, 101, 50)
				for _, id := range got {
					if id%2 != 0 {
						t.Fatalf("generated %v, want even ids only", got)
					}
				}
				if !slices.Equal(con.accepted, got) {
					t.Errorf("constraint accepted %v, want %v", con.accepted, got)
				}
			})
		}
	}
	con := &evenOnly{}
	c := newChain(t, DefaultParams(), Vocab{Size: 4}, con)
	if err := c.Accept(1); err == nil {
		t.Errorf("Accept(1) = nil, want the constraint's error")
	}
	con.maskErr = errors.New("broken grammar")
	if _, err := c.Sample(make([]float32, 4)); !errors.Is(err, con.maskErr) {
		t.Errorf("Sample() = %v, want wrapping %v", err, con.maskErr)
	}
}

// zipfLogits returns logits of p_i ∝ (i+1)^-s: Mirostat 1's estimate of s
// is then exact.
func zipfLogits(n int, s float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(-s * math.Log(float64(i+1)))
	}
	return out
}

func TestMirostat1(t *testing.T) {
	const n, s = 1000, 1.2
	// First-step k = (0.2·2^(2 tau)/(1-1000^-0.2))^(1/1.2) (Basu et al.
	// eq. 4 as in llama.cpp): 10.65 for tau 3, 454.9 for tau 6.25 (more than
	// the m = 100 tokens of the estimate), beyond the vocabulary for tau 9.
	tests := []struct {
		tau, eta float64
		firstK   int
	}{
		{3, 0.1, 10},
		{6.25, 0.05, 454},
		{9, 0.1, n},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.tau), func(t *testing.T) {
			p := DefaultParams()
			p.MirostatMode, p.MirostatTau, p.MirostatEta, p.Temperature, p.Seed = 1, tt.tau, tt.eta, 1, 11
			c := newChain(t, p, Vocab{Size: n}, nil)
			mu := 2 * tt.tau
			if c.Mu() != float32(mu) {
				t.Fatalf("initial Mu() = %v, want %v", c.Mu(), mu)
			}
			for step := 0; step < 30; step++ {
				eps := s - 1
				kf := math.Pow(eps*math.Pow(2, mu)/(1-math.Pow(n, -eps)), 1/s)
				k := max(1, min(n, int(kf)))
				if step == 0 && k != tt.firstK {
					t.Fatalf("reference k = %v, want %d", kf, tt.firstK)
				}
				id, err := c.Sample(zipfLogits(n, s))
				if err != nil {
					t.Fatal(err)
				}
				if int(id) >= k {
					t.Fatalf("step %d: Sample() = %d, want one of the top %d (k = %.3f)", step, id, k, kf)
				}
				// Surprise of the draw under the renormalized top k.
				zk := 0.0
				for i := 1; i <= k; i++ {
					zk += math.Pow(float64(i), -s)
				}
				pid := math.Pow(float64(id+1), -s) / zk
				mu -= tt.eta * (-math.Log2(pid) - tt.tau)
				if !(math.Abs(float64(c.Mu())-mu) <= 1e-4*max(1, math.Abs(mu))) {
					t.Fatalf("step %d: Mu() = %v, want %v", step, c.Mu(), mu)
				}
			}
			c.Reset()
			if c.Mu() != float32(2*tt.tau) {
				t.Errorf("after Reset: Mu() = %v, want %v", c.Mu(), 2*tt.tau)
			}
		})
	}
}

func TestMirostat2(t *testing.T) {
	tests := []struct {
		name      string
		tau, eta  float64
		temp      float64
		firstKeep []int32 // survivors of the first step, mu = 2 tau
	}{
		// mu = 3: keep p >= 1/8: ids 1 (.4), 3 (.2), 4 (.15).
		{"tau 1.5", 1.5, 0.5, 1, []int32{1, 3, 4}},
		// mu = 0.2: nothing has surprise <= 0.2 bits, the maximum stays.
		{"tau 0.1 keeps the top", 0.1, 0.3, 1, []int32{1}},
		// mu = 10: everything passes.
		{"tau 5 keeps all", 5, 0.1, 1, []int32{0, 1, 2, 3, 4, 5, 6, 7}},
		// Temperature 0.5 squares and renormalizes: .4² / Σp² = .5063.
		{"tau 0.5 temp 0.5", 0.5, 0.2, 0.5, []int32{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultParams()
			p.MirostatMode, p.MirostatTau, p.MirostatEta, p.Temperature, p.Seed = 2, tt.tau, tt.eta, tt.temp, 5
			c := newChain(t, p, Vocab{Size: len(distA)}, nil)
			// The distribution after temperature.
			probs := make([]float64, len(distA))
			sum := 0.0
			for i, q := range distA {
				probs[i] = math.Pow(q, 1/tt.temp)
				sum += probs[i]
			}
			for i := range probs {
				probs[i] /= sum
			}
			mu := 2 * tt.tau
			for step := 0; step < 40; step++ {
				// Survivors: surprise at most mu, else the most likely alone.
				var keep []int32
				mass := 0.0
				for i, q := range probs {
					if -math.Log2(q) <= mu {
						keep = append(keep, int32(i))
						mass += q
					}
				}
				if len(keep) == 0 {
					keep, mass = []int32{1}, probs[1]
				}
				if step == 0 && !slices.Equal(keep, tt.firstKeep) {
					t.Fatalf("reference survivors = %v, want %v", keep, tt.firstKeep)
				}
				id, err := c.Sample(logitsOf(distA...))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(keep, id) {
					t.Fatalf("step %d (mu %.3f): Sample() = %d, want one of %v", step, mu, id, keep)
				}
				mu -= tt.eta * (-math.Log2(probs[id]/mass) - tt.tau)
				if !(math.Abs(float64(c.Mu())-mu) <= 1e-4) {
					t.Fatalf("step %d: Mu() = %v, want %v", step, c.Mu(), mu)
				}
			}
		})
	}
}

func TestMirostatGreedy(t *testing.T) {
	// Temperature 0 with Mirostat picks the maximum and observes 0 bits.
	for _, mode := range []int{1, 2} {
		p := greedyParams()
		p.MirostatMode, p.MirostatTau, p.MirostatEta = mode, 2, 0.5
		c := newChain(t, p, Vocab{Size: len(distA)}, nil)
		id, err := c.Sample(logitsOf(distA...))
		if err != nil || id != 1 {
			t.Errorf("mirostat %d greedy: Sample() = %d, %v, want 1", mode, id, err)
		}
		if want := float32(4 - 0.5*(0-2)); c.Mu() != want {
			t.Errorf("mirostat %d greedy: Mu() = %v, want %v", mode, c.Mu(), want)
		}
	}
}

// near reports whether got is within 1e-5 of want; equal infinities are
// near, NaN is near nothing.
func near(got, want float64) bool {
	return got == want || math.Abs(got-want) <= 1e-5
}

func TestLogprobs(t *testing.T) {
	const vocab = 97
	raw := randomLogits(5, vocab, 3)
	raw[13] = float32(math.Inf(-1))
	// Reference: float64 log-softmax of the raw logits.
	maxL := math.Inf(-1)
	for _, l := range raw {
		maxL = max(maxL, float64(l))
	}
	sum := 0.0
	for _, l := range raw {
		sum += math.Exp(float64(l) - maxL)
	}
	ref := func(id int32) float64 { return float64(raw[id]) - maxL - math.Log(sum) }
	order := make([]int32, vocab)
	for i := range order {
		order[i] = int32(i)
	}
	sort.SliceStable(order, func(a, b int) bool { return raw[order[a]] > raw[order[b]] })

	p := DefaultParams()
	p.Seed, p.TopLogprobs = 9, 5
	// Bias, penalties and the grammar must not change the reported logprobs.
	p.LogitBias = map[string]float64{"0": 3, "1": -2}
	p.RepeatPenalty = 1.5
	c := newChain(t, p, Vocab{Size: vocab}, &evenOnly{})
	if _, err := c.Logprob(0); !errors.Is(err, ErrNoLogprobs) {
		t.Errorf("Logprob before Sample = %v, want ErrNoLogprobs", err)
	}
	if err := c.Prime(order[:4]); err != nil {
		t.Fatal(err)
	}
	id, err := c.Sample(slices.Clone(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []int32{id, 0, 1, order[0], order[vocab-1]} {
		got, err := c.Logprob(tok)
		if err != nil || !near(float64(got), ref(tok)) {
			t.Errorf("Logprob(%d) = %v, %v, want %v", tok, got, err, ref(tok))
		}
	}
	// A NaN logit does not spoil the others.
	withNaN := slices.Clone(raw)
	withNaN[20] = float32(math.NaN())
	ref20 := raw[20]
	raw[20] = float32(math.Inf(-1)) // the reference treats it as probability 0
	maxL, sum = math.Inf(-1), 0
	for _, l := range raw {
		maxL = max(maxL, float64(l))
	}
	for _, l := range raw {
		sum += math.Exp(float64(l) - maxL)
	}
	nanChain := newChain(t, p, Vocab{Size: vocab}, nil)
	if _, err := nanChain.Sample(withNaN); err != nil {
		t.Fatal(err)
	}
	if got, err := nanChain.Logprob(order[0]); err != nil || !near(float64(got), ref(order[0])) {
		t.Errorf("with a NaN logit: Logprob(%d) = %v, %v, want %v", order[0], got, err, ref(order[0]))
	}
	raw[20] = ref20
	maxL, sum = math.Inf(-1), 0
	for _, l := range raw {
		maxL = max(maxL, float64(l))
	}
	for _, l := range raw {
		sum += math.Exp(float64(l) - maxL)
	}
	if got, err := c.Logprob(13); err != nil || !math.IsInf(float64(got), -1) {
		t.Errorf("Logprob(13) with raw logit -Inf = %v, %v, want -Inf", got, err)
	}
	if _, err := c.Logprob(vocab); err == nil {
		t.Errorf("Logprob(%d) = nil error, want out of range", vocab)
	}
	for _, n := range []int{0, 1, 5, 20, vocab, vocab + 3} {
		prefix := []TokenLogprob{{ID: -7, Logprob: 1}}
		got, err := c.TopLogprobs(prefix, n)
		if err != nil {
			t.Fatal(err)
		}
		want := min(n, vocab)
		if len(got) != 1+want || got[0].ID != -7 {
			t.Fatalf("TopLogprobs(prefix, %d) has %d entries (first %v), want prefix + %d", n, len(got), got[0], want)
		}
		for i, tl := range got[1:] {
			if tl.ID != order[i] || !near(float64(tl.Logprob), ref(order[i])) {
				t.Errorf("TopLogprobs(%d)[%d] = %+v, want {%d %v}", n, i, tl, order[i], ref(order[i]))
				break
			}
		}
	}

	off := newChain(t, DefaultParams(), Vocab{Size: vocab}, nil)
	if _, err := off.Sample(slices.Clone(raw)); err != nil {
		t.Fatal(err)
	}
	if _, err := off.Logprob(0); !errors.Is(err, ErrNoLogprobs) {
		t.Errorf("Logprob without Params.Logprobs = %v, want ErrNoLogprobs", err)
	}
	if _, err := off.TopLogprobs(nil, 3); !errors.Is(err, ErrNoLogprobs) {
		t.Errorf("TopLogprobs without Params.Logprobs = %v, want ErrNoLogprobs", err)
	}
}

// TestDrawFollowsLlamaCpp replays llama.cpp's dist sampler by hand: an
// mt19937 seeded with the request seed, one canonical double per token,
// target = u·Σp over the candidates in llama.cpp's order (sorted by
// descending logit after top_k or top_p, vocabulary order when nothing
// sorts them), and the first candidate whose running sum reaches it. A
// single candidate takes no random number.
func TestDrawFollowsLlamaCpp(t *testing.T) {
	tests := []struct {
		name  string
		vocab int
		edit  func(p *Params)
		order func(logits []float32) []int32 // candidate order before the draw
	}{
		{"top_k sorts", 40, func(p *Params) { p.TopK, p.TopP, p.MinP = 5, 1, 0 }, func(l []float32) []int32 {
			return refTopKTopPMinPOrdered(l, 5, 1, 0)
		}},
		{"vocabulary order", 40, func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 1, 0 }, func(l []float32) []int32 {
			ids := make([]int32, len(l))
			for i := range ids {
				ids[i] = int32(i)
			}
			return ids
		}},
		{"min_p keeps vocabulary order", 40, func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 1, 0.3 }, func(l []float32) []int32 {
			var ids []int32
			maxL := slices.Max(l)
			for i, x := range l {
				if x >= maxL+float32(math.Log(0.3)) {
					ids = append(ids, int32(i))
				}
			}
			return ids
		}},
		{"top_p sorts", 40, func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 0.9, 0 }, func(l []float32) []int32 {
			return refTopKTopPMinPOrdered(l, 0, 0.9, 0)
		}},
		{"top_p sorts bucketed", 6000, func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 0.5, 0 }, func(l []float32) []int32 {
			return refTopKTopPMinPOrdered(l, 0, 0.5, 0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := onlyParams()
			tt.edit(&p)
			p.Seed = 1234
			c := newChain(t, p, Vocab{Size: tt.vocab}, nil)
			var mt mt19937
			mt.seed(1234)
			for step := 0; step < 40; step++ {
				logits := randomLogits(uint64(step), tt.vocab, 1.5)
				order := tt.order(logits)
				want := order[0]
				if len(order) > 1 {
					sum := 0.0
					for _, id := range order {
						sum += float64(float32(math.Exp(float64(logits[id] - slices.Max(logits)))))
					}
					target := sum * mt.canonical()
					run := 0.0
					for _, id := range order {
						run += float64(float32(math.Exp(float64(logits[id] - slices.Max(logits)))))
						if run >= target {
							want = id
							break
						}
					}
				}
				got, err := c.Sample(slices.Clone(logits))
				if err != nil || got != want {
					t.Fatalf("step %d: Sample() = %d, %v, want %d", step, got, err, want)
				}
			}
		})
	}
}

// refTopKTopPMinPOrdered is refTopKTopPMinP keeping the descending-logit
// order.
func refTopKTopPMinPOrdered(logits []float32, k int, topP, minP float64) []int32 {
	keep := refTopKTopPMinP(logits, k, topP, minP, 1)
	sort.SliceStable(keep, func(a, b int) bool {
		la, lb := logits[keep[a]], logits[keep[b]]
		return la > lb || (la == lb && keep[a] < keep[b])
	})
	return keep
}

// checkedEven is evenOnly with Allows, so the chain uses llama.cpp's
// draw-then-check order; it counts Mask calls.
type checkedEven struct {
	evenOnly
	masks int
}

func (c *checkedEven) Mask(logits []float32) error {
	c.masks++
	return c.evenOnly.Mask(logits)
}

func (c *checkedEven) Allows(id int32) (bool, error) { return id%2 == 0, nil }

func TestConstraintCheckerFollowsLlamaCpp(t *testing.T) {
	const vocab = 10
	p := onlyParams()
	p.Seed = 77
	con := &checkedEven{}
	c := newChain(t, p, Vocab{Size: vocab}, con)
	var mt mt19937
	mt.seed(77)
	// Reference: draw over all tokens in vocabulary order; an odd token is
	// rejected and the draw repeats over the even tokens with a new number.
	drawRef := func(logits []float32, ok func(int) bool) int32 {
		maxL := float32(math.Inf(-1))
		for i, l := range logits {
			if ok(i) {
				maxL = max(maxL, l)
			}
		}
		sum := 0.0
		for i, l := range logits {
			if ok(i) {
				sum += float64(float32(math.Exp(float64(l - maxL))))
			}
		}
		target := sum * mt.canonical()
		run := 0.0
		last := int32(-1)
		for i, l := range logits {
			if !ok(i) {
				continue
			}
			last = int32(i)
			run += float64(float32(math.Exp(float64(l - maxL))))
			if run >= target {
				return int32(i)
			}
		}
		return last
	}
	rejected := 0
	for step := 0; step < 300; step++ {
		logits := randomLogits(uint64(step), vocab, 1)
		want := drawRef(logits, func(int) bool { return true })
		if want%2 != 0 {
			rejected++
			want = drawRef(logits, func(i int) bool { return i%2 == 0 })
		}
		got, err := c.Sample(slices.Clone(logits))
		if err != nil || got != want {
			t.Fatalf("step %d: Sample() = %d, %v, want %d", step, got, err, want)
		}
	}
	if con.masks != rejected || rejected == 0 {
		t.Errorf("Mask called %d times, want once per rejected draw (%d)", con.masks, rejected)
	}

	// Greedy decoding is the same in both orders.
	g := greedyParams()
	a := newChain(t, g, Vocab{Size: 101}, &checkedEven{})
	b := newChain(t, g, Vocab{Size: 101}, &evenOnly{})
	if ga, gb := generate(t, a, 101, 30), generate(t, b, 101, 30); !slices.Equal(ga, gb) {
		t.Errorf("greedy with a checker %v, with masking %v, want equal", ga, gb)
	}
}

// only3 allows token 3 alone.
type only3 struct{}

func (o *only3) Mask(logits []float32) error {
	for i := range logits {
		if i != 3 {
			logits[i] = float32(math.Inf(-1))
		}
	}
	return nil
}

func (o *only3) Accept(int32) error { return nil }

type only3Checked struct{ only3 }

func (o *only3Checked) Allows(id int32) (bool, error) { return id == 3, nil }

func TestMirostatRejectionUpdatesMuTwice(t *testing.T) {
	// tau 0.1: mu 0.2 keeps only the most likely token (id 1), surprise 0.
	// With a checker, id 1 is drawn, rejected (mu += eta·tau), then id 3 is
	// the only candidate (mu += eta·tau again); with masking only once.
	for _, tt := range []struct {
		name string
		con  Constraint
		want float32
	}{
		{"checker", &only3Checked{}, 0.2 + 2*0.5*0.1},
		{"mask", &only3{}, 0.2 + 0.5*0.1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := onlyParams()
			p.MirostatMode, p.MirostatTau, p.MirostatEta = 2, 0.1, 0.5
			c := newChain(t, p, Vocab{Size: len(distA)}, tt.con)
			id, err := c.Sample(logitsOf(distA...))
			if err != nil || id != 3 {
				t.Fatalf("Sample() = %d, %v, want 3", id, err)
			}
			if !(math.Abs(float64(c.Mu()-tt.want)) <= 1e-6) {
				t.Errorf("Mu() = %v, want %v", c.Mu(), tt.want)
			}
		})
	}
}

// TestPositiveInfinity: a broken model's +Inf logits take all the mass,
// shared evenly, in every mode; nothing turns into NaN.
func TestPositiveInfinity(t *testing.T) {
	inf := float32(math.Inf(1))
	base := make([]float32, 5000) // long enough for the bucketed top_p path
	for i := range base {
		base[i] = float32(i%7) - 3
	}
	base[10], base[4000] = inf, inf
	configs := map[string]func(p *Params){
		"greedy":    func(p *Params) { p.Temperature = 0 },
		"default":   func(p *Params) {},
		"top_p":     func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 0.9, 0 },
		"typical":   func(p *Params) { p.TopK, p.TypicalP = 0, 0.5 },
		"tfs":       func(p *Params) { p.TFSZ = 0.9 },
		"mirostat1": func(p *Params) { p.MirostatMode = 1 },
		"mirostat2": func(p *Params) { p.MirostatMode = 2 },
	}
	for name, edit := range configs {
		t.Run(name, func(t *testing.T) {
			p := DefaultParams()
			edit(&p)
			p.Seed, p.Logprobs = 3, true
			c := newChain(t, p, Vocab{Size: len(base)}, nil)
			seen := map[int32]bool{}
			for i := 0; i < 40; i++ {
				id, err := c.Sample(slices.Clone(base))
				if err != nil || (id != 10 && id != 4000) {
					t.Fatalf("Sample() = %d, %v, want 10 or 4000", id, err)
				}
				seen[id] = true
				if lp, err := c.Logprob(id); err != nil || !near(float64(lp), -math.Ln2) {
					t.Fatalf("Logprob(%d) = %v, %v, want -ln 2", id, lp, err)
				}
				if lp, err := c.Logprob(0); err != nil || !math.IsInf(float64(lp), -1) {
					t.Fatalf("Logprob(0) = %v, %v, want -Inf", lp, err)
				}
			}
			// Greedy takes the lower id; Mirostat 1 (k = 1 from the NaN
			// estimate) and tail-free (the curve bends after the first)
			// keep one token.
			if (name == "default" || name == "top_p" || name == "typical" || name == "mirostat2") && len(seen) != 2 {
				t.Errorf("40 draws gave %v, want both +Inf tokens", seen)
			}
		})
	}
}

// onlyEOG allows only token 4, as a finished grammar does.
type onlyEOG struct{}

func (onlyEOG) Mask(logits []float32) error {
	for i := range logits {
		if i != 4 {
			logits[i] = float32(math.Inf(-1))
		}
	}
	return nil
}
func (onlyEOG) Accept(int32) error { return nil }

type onlyEOGChecked struct{ onlyEOG }

func (onlyEOGChecked) Allows(id int32) (bool, error) { return id == 4, nil }

func TestMinTokensYields(t *testing.T) {
	// When nothing but end-of-generation may come next, min_tokens gives
	// way instead of failing.
	ninf := math.Inf(-1)
	tests := []struct {
		name string
		con  Constraint
		bias map[string]float64
	}{
		{"finished grammar", onlyEOG{}, nil},
		{"finished grammar, checker", onlyEOGChecked{}, nil},
		{"bias bans the rest", nil, map[string]float64{"0": ninf, "1": ninf, "2": ninf, "3": ninf}},
	}
	for _, tt := range tests {
		for _, temp := range []float64{0, 1} {
			t.Run(fmt.Sprintf("%s/temp%v", tt.name, temp), func(t *testing.T) {
				p := DefaultParams()
				p.MinTokens, p.Temperature, p.Seed, p.LogitBias = 5, temp, 1, tt.bias
				c := newChain(t, p, Vocab{Size: 5, EOG: []int32{4}}, tt.con)
				id, err := c.Sample([]float32{3, 2, 1, 0, -1})
				if err != nil || id != 4 {
					t.Errorf("Sample() = %d, %v, want the end token 4", id, err)
				}
			})
		}
	}
	// Otherwise the end token stays masked.
	p := greedyParams()
	p.MinTokens = 5
	c := newChain(t, p, Vocab{Size: 5, EOG: []int32{4}}, &evenOnly{})
	if id, err := c.Sample([]float32{0, 0, 1, 0, 9}); err != nil || id != 2 {
		t.Errorf("Sample() = %d, %v, want 2 (end token masked)", id, err)
	}
}
