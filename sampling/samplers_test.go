package sampling

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// logitsOf returns ln p for each p: the softmax of the result is p.
func logitsOf(ps ...float64) []float32 {
	out := make([]float32, len(ps))
	for i, p := range ps {
		out[i] = float32(math.Log(p))
	}
	return out
}

// onlyParams returns parameters with every truncation sampler off and
// temperature 1, for editing into the one under test.
func onlyParams() Params {
	p := DefaultParams()
	p.TopK, p.TopP, p.MinP, p.TFSZ, p.TypicalP, p.Temperature = 0, 1, 0, 1, 1, 1
	p.Seed = 1
	return p
}

// survivors runs the truncation samplers of a chain built from p over
// logits and returns the surviving ids (ascending) and their probabilities
// after temperature, from a float64 softmax of the returned logits.
func survivors(t *testing.T, p Params, logits []float32) ([]int32, map[int32]float64) {
	t.Helper()
	c, err := NewChain(p, Vocab{Size: len(logits)}, nil)
	if err != nil {
		t.Fatalf("NewChain(%+v) = %v", p, err)
	}
	cs, err := c.truncate(slices.Clone(logits))
	if err != nil {
		t.Fatalf("truncate() = %v", err)
	}
	ids := make([]int32, len(cs))
	maxL := math.Inf(-1)
	for i, cd := range cs {
		ids[i] = cd.id
		maxL = max(maxL, float64(cd.logit))
	}
	sum := 0.0
	probs := map[int32]float64{}
	for _, cd := range cs {
		e := math.Exp(float64(cd.logit) - maxL)
		probs[cd.id] = e
		sum += e
	}
	for id := range probs {
		probs[id] /= sum
	}
	slices.Sort(ids)
	return ids, probs
}

// distA: sorted by probability the ids are 1 (.4), 3 (.2), 4 (.15), 5 (.1),
// 0 and 6 (.05, a tie), 7 (.03), 2 (.02).
var distA = []float64{0.05, 0.4, 0.02, 0.2, 0.15, 0.1, 0.05, 0.03}

// distT: the most likely token (3, p .3) is not the most typical. Entropy
// H = 1.9207 nats; |-ln p - H| is .024 for p=.15 (ids 1, 5), .382 for
// p=.1 (ids 0, 4, 6), .717 for p=.3 (id 3), 1.075 for p=.05 (ids 2, 7).
var distT = []float64{0.1, 0.15, 0.05, 0.3, 0.1, 0.15, 0.1, 0.05}

// distF: sorted probabilities .35 .3 .2 .1 .05 (ids 4 2 0 3 1); first
// differences .05 .1 .1 .05, absolute second differences .05 0 .05, so the
// normalized tail weights are .5 0 .5.
var distF = []float64{0.2, 0.05, 0.3, 0.1, 0.35}

func TestTruncationSamplers(t *testing.T) {
	ids := func(xs ...int32) []int32 { slices.Sort(xs); return xs }
	all := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	tests := []struct {
		name string
		dist []float64
		edit func(p *Params)
		want []int32
	}{
		{"top_k 3", distA, func(p *Params) { p.TopK = 3 }, ids(1, 3, 4)},
		{"top_k 5 tie keeps lower id", distA, func(p *Params) { p.TopK = 5 }, ids(1, 3, 4, 5, 0)},
		{"top_k 0 is off", distA, func(p *Params) { p.TopK = 0 }, all(8)},
		{"top_k above vocab", distA, func(p *Params) { p.TopK = 100 }, all(8)},
		{"top_k 1", distA, func(p *Params) { p.TopK = 1 }, ids(1)},
		{"top_k 2000 quickselect path", distA, func(p *Params) { p.TopK = 2000 }, all(8)},

		{"top_p 0.5", distA, func(p *Params) { p.TopP = 0.5 }, ids(1, 3)},
		{"top_p 0.7", distA, func(p *Params) { p.TopP = 0.7 }, ids(1, 3, 4)},
		{"top_p 0.88", distA, func(p *Params) { p.TopP = 0.88 }, ids(1, 3, 4, 5, 0)},
		{"top_p 0.05", distA, func(p *Params) { p.TopP = 0.05 }, ids(1)},
		{"top_p 0 keeps one", distA, func(p *Params) { p.TopP = 0; p.MinKeep = 0 }, ids(1)},
		{"top_p min_keep 3", distA, func(p *Params) { p.TopP = 0.05; p.MinKeep = 3 }, ids(1, 3, 4)},
		{"top_p 1 is off", distA, func(p *Params) { p.TopP = 1 }, all(8)},
		{"top_p after top_k renormalizes", distA, func(p *Params) { p.TopK = 3; p.TopP = 0.75 }, ids(1, 3)},

		{"min_p 0.3", distA, func(p *Params) { p.MinP = 0.3 }, ids(1, 3, 4)},
		{"min_p 0.2", distA, func(p *Params) { p.MinP = 0.2 }, ids(1, 3, 4, 5)},
		{"min_p 0.6", distA, func(p *Params) { p.MinP = 0.6 }, ids(1)},
		{"min_p 0.6 min_keep 2", distA, func(p *Params) { p.MinP = 0.6; p.MinKeep = 2 }, ids(1, 3)},
		{"min_p 1 keeps the maximum", distA, func(p *Params) { p.MinP = 1 }, ids(1)},
		{"min_p 0 is off", distA, func(p *Params) { p.MinP = 0 }, all(8)},
		{"min_p sorted path", distA, func(p *Params) { p.TopK = 6; p.MinP = 0.3 }, ids(1, 3, 4)},
		{"min_p sorted path min_keep", distA, func(p *Params) { p.TopK = 6; p.MinP = 0.6; p.MinKeep = 3 }, ids(1, 3, 4)},

		{"typical 0.2 drops the most likely", distT, func(p *Params) { p.TypicalP = 0.2 }, ids(1, 5)},
		{"typical 0.45", distT, func(p *Params) { p.TypicalP = 0.45 }, ids(1, 5, 0, 4)},
		{"typical 0.65", distT, func(p *Params) { p.TypicalP = 0.65 }, ids(1, 5, 0, 4, 6, 3)},
		{"typical 0.2 min_keep 3", distT, func(p *Params) { p.TypicalP = 0.2; p.MinKeep = 3 }, ids(1, 5, 0)},
		{"typical 1 is off", distT, func(p *Params) { p.TypicalP = 1 }, all(8)},

		{"tfs 0.6", distF, func(p *Params) { p.TFSZ = 0.6 }, ids(4, 2)},
		{"tfs 0.4", distF, func(p *Params) { p.TFSZ = 0.4 }, ids(4)},
		{"tfs 0.4 min_keep 0 keeps one", distF, func(p *Params) { p.TFSZ = 0.4; p.MinKeep = 0 }, ids(4)},
		{"tfs 0.4 min_keep 2", distF, func(p *Params) { p.TFSZ = 0.4; p.MinKeep = 2 }, ids(4, 2)},
		// As in llama.cpp the cut index ranges over the len-2 second
		// differences, so min_keep 3 of 5 tokens keeps them all.
		{"tfs 0.4 min_keep 3", distF, func(p *Params) { p.TFSZ = 0.4; p.MinKeep = 3 }, all(5)},
		{"tfs 1 is off", distF, func(p *Params) { p.TFSZ = 1 }, all(5)},
		{"tfs after top_k 2 is off", distF, func(p *Params) { p.TopK = 2; p.TFSZ = 0.1 }, ids(4, 2)},

		{"default chain", distA, func(p *Params) { *p = DefaultParams() }, ids(1, 3, 4, 5, 0, 6)},
		{"default chain min_p cuts", distA, func(p *Params) { *p = DefaultParams(); p.MinP = 0.2 }, ids(1, 3, 4, 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := onlyParams()
			tt.edit(&p)
			got, probs := survivors(t, p, logitsOf(tt.dist...))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("survivors(%s) = %v, want %v", tt.name, got, tt.want)
			}
			// The survivors' probabilities are the original ones raised to
			// 1/T and renormalized over the survivors.
			invT := 1 / p.Temperature
			sum := 0.0
			for _, id := range tt.want {
				sum += math.Pow(tt.dist[id], invT)
			}
			for _, id := range tt.want {
				want := math.Pow(tt.dist[id], invT) / sum
				if !(math.Abs(probs[id]-want) <= 1e-5) {
					t.Errorf("p(%d) = %.6f, want %.6f", id, probs[id], want)
				}
			}
		})
	}
}

func TestTemperatureScalesSurvivors(t *testing.T) {
	for _, temp := range []float64{0.25, 0.8, 1, 2.5} {
		t.Run(fmt.Sprint(temp), func(t *testing.T) {
			p := onlyParams()
			p.Temperature = temp
			p.TopK = 4
			_, probs := survivors(t, p, logitsOf(distA...))
			// Independently: p_i^(1/T) / sum over the top 4 (ids 1 3 4 5).
			keep := []int32{1, 3, 4, 5}
			sum := 0.0
			for _, id := range keep {
				sum += math.Pow(distA[id], 1/temp)
			}
			for _, id := range keep {
				want := math.Pow(distA[id], 1/temp) / sum
				if !(math.Abs(probs[id]-want) <= 1e-5) {
					t.Errorf("temperature %v: p(%d) = %.6f, want %.6f", temp, id, probs[id], want)
				}
			}
		})
	}
}

// Reference truncation, written plainly in float64 with full sorts.

type refTok struct {
	id int32
	l  float64
}

func refSorted(logits []float32) []refTok {
	var ts []refTok
	for i, l := range logits {
		if !math.IsInf(float64(l), -1) {
			ts = append(ts, refTok{int32(i), float64(l)})
		}
	}
	sort.Slice(ts, func(a, b int) bool {
		return ts[a].l > ts[b].l || (ts[a].l == ts[b].l && ts[a].id < ts[b].id)
	})
	return ts
}

func refProbs(ts []refTok) []float64 {
	ps := make([]float64, len(ts))
	sum := 0.0
	for i, t := range ts {
		ps[i] = math.Exp(t.l - ts[0].l)
		sum += ps[i]
	}
	for i := range ps {
		ps[i] /= sum
	}
	return ps
}

func refTopKTopPMinP(logits []float32, k int, topP, minP float64, minKeep int) []int32 {
	ts := refSorted(logits)
	if k > 0 && k < len(ts) {
		ts = ts[:k]
	}
	if topP < 1 {
		ps := refProbs(ts)
		cum := 0.0
		for i := range ts {
			cum += ps[i]
			if cum >= topP && i+1 >= minKeep {
				ts = ts[:i+1]
				break
			}
		}
	}
	if minP > 0 {
		n := 0
		for i, t := range ts {
			if t.l >= ts[0].l+math.Log(minP) || i < minKeep {
				n = i + 1
			}
		}
		ts = ts[:n]
	}
	ids := make([]int32, len(ts))
	for i, t := range ts {
		ids[i] = t.id
	}
	slices.Sort(ids)
	return ids
}

// TestTruncationAgainstReference compares survivor sets with the plain
// reference on random vocabularies large enough to exercise the heap, the
// quickselect and the growing sorted prefix of top_p.
func TestTruncationAgainstReference(t *testing.T) {
	tests := []struct {
		vocab   int
		spread  float64 // logit scale: small spreads make top_p keep thousands
		topK    int
		topP    float64
		minP    float64
		minKeep int
	}{
		{1000, 4, 40, 0.95, 0.05, 1},
		{1000, 4, 0, 0.9, 0, 1},
		{5000, 0.5, 0, 0.9, 0, 1},
		{5000, 0.5, 0, 0.5, 0, 1},
		{5000, 0.5, 3000, 0.8, 0, 1},
		{5000, 3, 0, 1, 0.1, 1},
		{5000, 3, 0, 1, 0.9, 50},
		{5000, 3, 300, 0.99, 0.01, 1},
		// Far from 1 so float32 running sums (as in llama.cpp) and the
		// float64 reference agree on the cut.
		{20000, 1, 0, 0.6, 0, 1},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d/vocab%d_k%d_p%v_minp%v", i, tt.vocab, tt.topK, tt.topP, tt.minP), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			logits := make([]float32, tt.vocab)
			for j := range logits {
				logits[j] = float32(rng.NormFloat64() * tt.spread)
			}
			// A few exact ties and banned tokens.
			logits[10] = logits[11]
			logits[12] = float32(math.Inf(-1))
			p := onlyParams()
			p.TopK, p.TopP, p.MinP, p.MinKeep = tt.topK, tt.topP, tt.minP, tt.minKeep
			got, _ := survivors(t, p, logits)
			want := refTopKTopPMinP(logits, tt.topK, tt.topP, tt.minP, tt.minKeep)
			if !slices.Equal(got, want) {
				t.Errorf("survivors() = %d tokens, want %d tokens (reference)", len(got), len(want))
			}
		})
	}
}

func refTypical(logits []float32, typ float64, minKeep int) []int32 {
	ts := refSorted(logits)
	ps := refProbs(ts)
	h := 0.0
	for _, p := range ps {
		if p > 0 {
			h -= p * math.Log(p)
		}
	}
	idx := make([]int, len(ts))
	score := make([]float64, len(ts))
	for i := range idx {
		idx[i] = i
		score[i] = math.Abs(-math.Log(ps[i]) - h)
	}
	sort.Slice(idx, func(a, b int) bool {
		sa, sb := score[idx[a]], score[idx[b]]
		return sa < sb || (sa == sb && ts[idx[a]].id < ts[idx[b]].id)
	})
	cum := 0.0
	last := len(idx)
	for i, j := range idx {
		cum += ps[j]
		if cum > typ && (minKeep == 0 || i >= minKeep-1) {
			last = i + 1
			break
		}
	}
	var ids []int32
	for _, j := range idx[:last] {
		ids = append(ids, ts[j].id)
	}
	slices.Sort(ids)
	return ids
}

func TestTypicalAgainstReference(t *testing.T) {
	tests := []struct {
		vocab  int
		spread float64
		typ    float64
	}{
		{300, 2, 0.5},
		{5000, 1, 0.3},
		{5000, 3, 0.7},
		{20000, 0.7, 0.4},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("vocab%d_spread%v_typ%v", tt.vocab, tt.spread, tt.typ), func(t *testing.T) {
			logits := randomLogits(uint64(100+i), tt.vocab, tt.spread)
			p := onlyParams()
			p.TypicalP = tt.typ
			got, _ := survivors(t, p, logits)
			want := refTypical(logits, tt.typ, 1)
			if !slices.Equal(got, want) {
				t.Errorf("typical survivors = %d tokens, want %d tokens (reference)", len(got), len(want))
			}
		})
	}
}

// TestTopPUniform covers keys that span no range (no buckets) and ties
// broken by id.
func TestTopPUniform(t *testing.T) {
	for _, vocab := range []int{1000, 5000} {
		t.Run(fmt.Sprint(vocab), func(t *testing.T) {
			p := onlyParams()
			p.TopP = 0.3001
			got, _ := survivors(t, p, make([]float32, vocab))
			// Each token has 1/vocab; 0.3001 needs ceil(0.3001·vocab) of them,
			// the lowest ids.
			n := int(math.Ceil(0.3001 * float64(vocab)))
			want := make([]int32, n)
			for i := range want {
				want[i] = int32(i)
			}
			if !slices.Equal(got, want) {
				t.Errorf("top_p 0.3001 of %d uniform tokens kept %d, want ids 0..%d", vocab, len(got), n-1)
			}
		})
	}
}

func TestSelectFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tt := range []struct{ size, n int }{{1, 1}, {10, 3}, {17, 17}, {100, 1}, {1000, 999}, {5000, 256}, {5000, 40}} {
		t.Run(fmt.Sprintf("%d_of_%d", tt.n, tt.size), func(t *testing.T) {
			cs := make([]cand, tt.size)
			for i := range cs {
				// Few distinct keys: many ties, broken by id.
				cs[i] = cand{id: int32(i), key: float32(rng.IntN(20))}
			}
			rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
			want := slices.Clone(cs)
			sortCands(want)
			selectFirst(cs, tt.n)
			if !slices.Equal(cs[:tt.n], want[:tt.n]) {
				t.Errorf("selectFirst(%d of %d) head differs from the sorted head", tt.n, tt.size)
			}
		})
	}
}

func TestTopKFromLogits(t *testing.T) {
	ninf, nan := float32(math.Inf(-1)), float32(math.NaN())
	tests := []struct {
		name   string
		logits []float32
		k      int
		want   []int32
	}{
		{"plain", []float32{1, 5, 3, 4, 2}, 3, []int32{1, 3, 2}},
		{"ties keep lower ids", []float32{2, 2, 2, 2}, 2, []int32{0, 1}},
		{"late tie loses", []float32{1, 3, 2, 3}, 2, []int32{1, 3}},
		{"skips -Inf and NaN", []float32{ninf, nan, 1, ninf, 0}, 3, []int32{2, 4}},
		{"k above finite count", []float32{ninf, 7}, 5, []int32{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := topKFromLogits(tt.logits, tt.k, make([]cand, 0, tt.k))
			var got []int32
			for _, c := range cs {
				got = append(got, c.id)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("topKFromLogits(%v, %d) = %v, want %v", tt.logits, tt.k, got, tt.want)
			}
		})
	}
}

func TestMinPOrder(t *testing.T) {
	// llama.cpp keeps min_p survivors in their order when enough pass, and
	// falls back to a sorted prefix of min_keep otherwise.
	mk := func(ls ...float32) []cand {
		cs := make([]cand, len(ls))
		for i, l := range ls {
			cs[i] = cand{id: int32(i), logit: l, key: -l}
		}
		return cs
	}
	tests := []struct {
		name    string
		logits  []float32
		p       float32
		minKeep int
		want    []int32
		sorted  bool
	}{
		{"enough pass, order kept", []float32{1, 3, 0, 2.9}, 0.5, 1, []int32{1, 3}, false},
		{"too few pass, sorted fallback", []float32{1, 3, 0, 2.9}, 0.9, 3, []int32{1, 3, 0}, true},
		{"min_keep above size sorts all", []float32{1, 3, 0}, 0.9, 5, []int32{1, 0, 2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, sorted := minP(mk(tt.logits...), false, tt.p, tt.minKeep)
			var ids []int32
			for _, c := range got {
				ids = append(ids, c.id)
			}
			if !slices.Equal(ids, tt.want) || sorted != tt.sorted {
				t.Errorf("minP(%v, %v, %d) = %v sorted %v, want %v sorted %v", tt.logits, tt.p, tt.minKeep, ids, sorted, tt.want, tt.sorted)
			}
		})
	}
}

func TestSortCands(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shapes := map[string]func(i, n int) float32{
		"random":   func(i, n int) float32 { return float32(rng.NormFloat64()) },
		"few keys": func(i, n int) float32 { return float32(rng.IntN(3)) },
		"equal":    func(i, n int) float32 { return 1 },
		"zeros":    func(i, n int) float32 { return float32(math.Copysign(0, float64(i%2)-0.5)) },
		"sorted":   func(i, n int) float32 { return float32(i) },
		"reversed": func(i, n int) float32 { return float32(n - i) },
		"organ":    func(i, n int) float32 { return float32(min(i, n-i)) },
	}
	for name, shape := range shapes {
		for _, n := range []int{0, 1, 12, 13, 100, 1024, 1025, 5000, 40000} {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				cs := make([]cand, n)
				for i := range cs {
					cs[i] = cand{id: int32(i), key: shape(i, n)}
				}
				rng.Shuffle(n, func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
				want := slices.Clone(cs)
				slices.SortFunc(want, func(a, b cand) int {
					if a.key != b.key {
						if a.key < b.key {
							return -1
						}
						return 1
					}
					return int(a.id - b.id)
				})
				sortCands(cs)
				if !slices.Equal(cs, want) {
					t.Errorf("sortCands(%s, %d) differs from the reference order", name, n)
				}
			})
		}
	}
}
