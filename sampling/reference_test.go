package sampling

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// refTok is a candidate of the reference chain.
type refCand struct {
	id   int32
	l, p float32
}

// refChainDraw is a plain transcription of llama.cpp's sampler chain
// (top_k, tail-free, typical, top_p, min_p, temperature, dist) with full
// sorts and no shortcuts, in the same float32/float64 arithmetic, drawing
// with mt. It is the specification the optimized Chain must reproduce
// token for token.
func refChainDraw(logits []float32, p Params, mt *mt19937) int32 {
	var cur []refCand
	for i, l := range logits {
		cur = append(cur, refCand{id: int32(i), l: l})
	}
	sorted := false
	sortDesc := func() {
		sort.SliceStable(cur, func(a, b int) bool { return cur[a].l > cur[b].l })
		sorted = true
	}
	softmax := func() {
		maxL := cur[0].l
		for _, c := range cur {
			maxL = max(maxL, c.l)
		}
		var sum float32
		for i := range cur {
			cur[i].p = float32(math.Exp(float64(cur[i].l - maxL)))
			sum += cur[i].p
		}
		for i := range cur {
			cur[i].p /= sum
		}
	}
	minKeep := p.MinKeep

	if k := p.TopK; k > 0 {
		sortDesc()
		cur = cur[:min(k, len(cur))]
	}
	if z := float32(p.TFSZ); z < 1 && len(cur) > 2 {
		if !sorted {
			sortDesc()
		}
		softmax()
		first := make([]float32, len(cur)-1)
		for i := range first {
			first[i] = cur[i].p - cur[i+1].p
		}
		second := make([]float32, len(cur)-2)
		var sum float32
		for i := range second {
			second[i] = float32(math.Abs(float64(first[i] - first[i+1])))
			sum += second[i]
		}
		last := len(cur)
		var cum float32
		for i := range second {
			if sum > 1e-6 {
				cum += second[i] / sum
			} else {
				cum += 1 / float32(len(second))
			}
			if cum > z && i >= minKeep {
				last = i
				break
			}
		}
		cur = cur[:max(last, 1)]
	}
	if typ := float32(p.TypicalP); typ < 1 {
		if !sorted {
			sortDesc()
		}
		softmax()
		var h float32
		for _, c := range cur {
			h += -c.p * float32(math.Log(float64(c.p)))
		}
		score := make([]float32, len(cur))
		idx := make([]int, len(cur))
		for i, c := range cur {
			score[i] = float32(math.Abs(float64(-float32(math.Log(float64(c.p))) - h)))
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			sa, sb := score[idx[a]], score[idx[b]]
			return sa < sb || (sa == sb && cur[idx[a]].id < cur[idx[b]].id)
		})
		last := len(idx)
		var cum float32
		for i, j := range idx {
			cum += cur[j].p
			if cum > typ && (minKeep == 0 || i >= minKeep-1) {
				last = i + 1
				break
			}
		}
		var next []refCand
		for _, j := range idx[:last] {
			next = append(next, cur[j])
		}
		cur, sorted = next, false
	}
	if tp := float32(p.TopP); tp < 1 {
		softmax()
		if !sorted {
			sortDesc()
		}
		last := len(cur)
		var cum float32
		for i, c := range cur {
			cum += c.p
			if cum >= tp && i+1 >= minKeep {
				last = i + 1
				break
			}
		}
		cur = cur[:last]
	}
	if mp := float32(p.MinP); mp > 0 {
		maxL := cur[0].l
		for _, c := range cur {
			maxL = max(maxL, c.l)
		}
		minL := maxL + float32(math.Log(float64(mp)))
		applied := false
		if !sorted {
			var kept []refCand
			for _, c := range cur {
				if c.l >= minL {
					kept = append(kept, c)
				}
			}
			if len(kept) > 0 && len(kept) >= minKeep {
				cur, applied = kept, true
			}
		}
		if !applied {
			if !sorted {
				sortDesc()
			}
			i := 1
			for ; i < len(cur); i++ {
				if cur[i].l < minL && i >= minKeep {
					break
				}
			}
			cur = cur[:i]
		}
	}
	for i := range cur {
		cur[i].l /= float32(p.Temperature)
	}
	if len(cur) == 1 {
		return cur[0].id
	}
	maxL := cur[0].l
	for _, c := range cur {
		maxL = max(maxL, c.l)
	}
	sum := 0.0
	for i := range cur {
		cur[i].p = float32(math.Exp(float64(cur[i].l - maxL)))
		sum += float64(cur[i].p)
	}
	target := sum * mt.canonical()
	run := 0.0
	for _, c := range cur {
		run += float64(c.p)
		if run >= target {
			return c.id
		}
	}
	return cur[len(cur)-1].id
}

// TestChainMatchesReference draws with random parameter combinations and
// random logits, and requires the token-for-token result of the plain
// reference chain with the same seed.
func TestChainMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(2024, 11))
	pick := func(xs ...float64) float64 { return xs[rng.IntN(len(xs))] }
	for cfg := 0; cfg < 300; cfg++ {
		p := DefaultParams()
		p.TopK = []int{0, 1, 5, 40, 2000}[rng.IntN(5)]
		p.TFSZ = pick(1, 1, 0.95, 0.5)
		p.TypicalP = pick(1, 1, 0.9, 0.5)
		p.TopP = pick(1, 0.95, 0.5, 0)
		p.MinP = pick(0, 0.05, 0.3)
		p.MinKeep = rng.IntN(4)
		p.Temperature = pick(0.5, 1, 1.7)
		p.Seed = int64(rng.Uint32N(1 << 31))
		vocab := []int{2, 3, 50, 1500, 6000}[rng.IntN(5)]
		spread := pick(0.3, 1, 3)
		name := fmt.Sprintf("%d/v%d_k%d_tfs%v_typ%v_p%v_minp%v_keep%d_t%v", cfg, vocab, p.TopK, p.TFSZ, p.TypicalP, p.TopP, p.MinP, p.MinKeep, p.Temperature)
		c, err := NewChain(p, Vocab{Size: vocab}, nil)
		if err != nil {
			t.Fatalf("%s: NewChain = %v", name, err)
		}
		var mt mt19937
		mt.seed(uint32(p.Seed))
		for step := 0; step < 4; step++ {
			logits := make([]float32, vocab)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * spread)
			}
			want := refChainDraw(slices.Clone(logits), p, &mt)
			got, err := c.Sample(logits)
			if err != nil || got != want {
				t.Fatalf("%s step %d: Sample() = %d, %v, want %d (reference)", name, step, got, err, want)
			}
		}
	}
}

// refMirostat is a plain transcription of llama.cpp's temperature +
// Mirostat 1 (m = 100) or 2 samplers with full sorts and
// std::discrete_distribution's draw; it updates *mu. One documented
// difference: the first softmax sums in vocabulary order where llama.cpp
// sums after sorting, which saves the chain a full sort per token and can
// change a float32 rounding at the truncation boundary in rare steps.
func refMirostat(logits []float32, p Params, mu *float32, mt *mt19937) int32 {
	cur := make([]refCand, len(logits))
	for i, l := range logits {
		cur[i] = refCand{id: int32(i), l: l / float32(p.Temperature)}
	}
	softmax := func() {
		maxL := cur[0].l
		for _, c := range cur {
			maxL = max(maxL, c.l)
		}
		var sum float32
		for i := range cur {
			cur[i].p = float32(math.Exp(float64(cur[i].l - maxL)))
			sum += cur[i].p
		}
		for i := range cur {
			cur[i].p /= sum
		}
	}
	softmax() // vocabulary order
	sort.SliceStable(cur, func(a, b int) bool { return cur[a].l > cur[b].l })
	tau, eta := float32(p.MirostatTau), float32(p.MirostatEta)
	if p.MirostatMode == 1 {
		const m = 100
		var sumTiBi, sumTiSq float32
		for i := 0; i < m-1 && i < len(cur)-1; i++ {
			ti := float32(math.Log(float64(float32(i+2) / float32(i+1))))
			bi := float32(math.Log(float64(cur[i].p / cur[i+1].p)))
			sumTiBi += ti * bi
			sumTiSq += ti * ti
		}
		s := sumTiBi / sumTiSq
		eps := s - 1
		pow := func(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }
		k := pow(eps*pow(2, *mu)/(1-pow(float32(len(logits)), -eps)), 1/s)
		// llama.cpp's int(k) is undefined for k beyond int range; the
		// chain keeps everything then.
		ki := 1
		switch {
		case k >= float32(len(cur)):
			ki = len(cur)
		case k >= 1:
			ki = int(k)
		}
		cur = cur[:ki]
	} else {
		n := len(cur)
		for i, c := range cur {
			if -float32(math.Log2(float64(c.p))) > *mu {
				n = i
				break
			}
		}
		cur = cur[:max(n, 1)]
	}
	softmax()
	idx := 0
	if len(cur) >= 2 {
		sum := 0.0
		for _, c := range cur {
			sum += float64(c.p)
		}
		cp := make([]float64, len(cur))
		acc := 0.0
		for i, c := range cur {
			acc += float64(c.p) / sum
			cp[i] = acc
		}
		cp[len(cp)-1] = 1
		u := mt.canonical()
		idx = sort.Search(len(cp), func(i int) bool { return cp[i] >= u })
	}
	*mu -= eta * (-float32(math.Log2(float64(cur[idx].p))) - tau)
	return cur[idx].id
}

func TestMirostatMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 4))
	for cfg := 0; cfg < 60; cfg++ {
		p := DefaultParams()
		p.MirostatMode = 1 + rng.IntN(2)
		p.MirostatTau = []float64{0.5, 3, 5, 8}[rng.IntN(4)]
		p.MirostatEta = []float64{0.05, 0.1, 0.5}[rng.IntN(3)]
		p.Temperature = []float64{0.7, 1, 1.3}[rng.IntN(3)]
		p.Seed = int64(rng.Uint32N(1 << 31))
		vocab := []int{3, 120, 2000}[rng.IntN(3)]
		spread := []float64{0.5, 2, 4}[rng.IntN(3)]
		name := fmt.Sprintf("%d/mirostat%d_tau%v_eta%v_t%v_v%d_s%v", cfg, p.MirostatMode, p.MirostatTau, p.MirostatEta, p.Temperature, vocab, spread)
		c, err := NewChain(p, Vocab{Size: vocab}, nil)
		if err != nil {
			t.Fatalf("%s: NewChain = %v", name, err)
		}
		var mt mt19937
		mt.seed(uint32(p.Seed))
		mu := float32(2 * p.MirostatTau)
		for step := 0; step < 15; step++ {
			logits := make([]float32, vocab)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * spread)
			}
			want := refMirostat(slices.Clone(logits), p, &mu, &mt)
			got, err := c.Sample(logits)
			if err != nil || got != want || c.Mu() != mu {
				t.Fatalf("%s step %d: Sample() = %d, %v, mu %v; want %d, mu %v (reference)", name, step, got, err, c.Mu(), want, mu)
			}
		}
	}
}
