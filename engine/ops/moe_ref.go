package ops

import (
	"fmt"
	"math"
)

// RefMoERoute is the CPU reference of MoERoute: the experts (sel) and
// weights (w) of each of s.Rows rows of logits, in f64. Ties go to the
// lower expert index.
func RefMoERoute(logits []float32, s MoEShape, sel []int32, w []float32) error {
	if err := s.check("RefMoERoute"); err != nil {
		return err
	}
	if len(logits) < s.Rows*s.Experts || len(sel) < s.Pairs() || len(w) < s.Pairs() {
		return fmt.Errorf("ops: RefMoERoute: %d logits, %d sel, %d weights for %d rows of %d experts, %d used",
			len(logits), len(sel), len(w), s.Rows, s.Experts, s.Used)
	}
	val := make([]float64, s.Experts)
	taken := make([]bool, s.Experts)
	picked := make([]float64, s.Used)
	for r := range s.Rows {
		row := logits[r*s.Experts : (r+1)*s.Experts]
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, float64(v))
		}
		var sum float64
		for e, v := range row {
			val[e] = float64(v)
			if s.Gating == GatingSoftmax {
				val[e] = math.Exp(float64(v) - m)
				sum += val[e]
			}
		}
		if s.Gating == GatingSoftmax {
			for e := range val {
				val[e] /= sum
			}
		}
		clear(taken)
		for j := range s.Used {
			bi := -1
			for e, v := range val {
				if !taken[e] && (bi < 0 || v > val[bi]) {
					bi = e
				}
			}
			taken[bi] = true
			sel[r*s.Used+j], picked[j] = int32(bi), val[bi]
		}
		switch {
		case s.Gating == GatingSoftmaxWeight:
			var ws float64
			top := picked[0] // the largest
			for j := range picked {
				picked[j] = math.Exp(picked[j] - top)
				ws += picked[j]
			}
			for j := range picked {
				picked[j] /= ws
			}
		case s.Norm:
			var ws float64
			for _, v := range picked {
				ws += v
			}
			ws = max(ws, 6.103515625e-5)
			for j := range picked {
				picked[j] /= ws
			}
		}
		for j, v := range picked {
			w[r*s.Used+j] = float32(v)
		}
	}
	return nil
}

// RefMoEGroup is the CPU reference of MoERoute's routes: those of sel.
func RefMoEGroup(sel []int32, s MoEShape) ([]uint32, error) {
	if err := s.check("RefMoEGroup"); err != nil {
		return nil, err
	}
	if len(sel) < s.Pairs() {
		return nil, fmt.Errorf("ops: RefMoEGroup: %d selections for %d pairs", len(sel), s.Pairs())
	}
	routes := make([]uint32, s.RoutesLen())
	for p, e := range sel[:s.Pairs()] {
		if e < 0 || int(e) >= s.Experts {
			return nil, fmt.Errorf("ops: RefMoEGroup: pair %d chose expert %d of %d", p, e, s.Experts)
		}
		routes[s.Experts+int(e)*s.Rows+int(routes[e])] = uint32(p)
		routes[e]++
	}
	r := uint32(0)
	for e := range s.Experts {
		routes[s.actOff()+e] = r
		if routes[e] != 0 {
			routes[s.actList()+int(r)] = uint32(e)
			r++
		}
	}
	routes[s.actOff()+s.Experts] = r
	return routes, nil
}

// RefMatVecID is the CPU reference of MatVecID over dequantized experts
// (w: s.Experts matrices of rows x cols f32): y[p] = W_sel[p] x[p/xDiv]
// (+ bias[sel[p]] where bias is not nil), sums in f64 (MatMulF32Ref).
func RefMatVecID(w []float32, rows, cols int, s MoEShape, sel []int32, x []float32, xDiv int, bias, y []float32) error {
	if err := s.check("RefMatVecID"); err != nil {
		return err
	}
	if xDiv != 1 && xDiv != s.Used {
		return fmt.Errorf("ops: RefMatVecID: xDiv %d, want 1 or %d", xDiv, s.Used)
	}
	if len(w) < s.Experts*rows*cols || len(sel) < s.Pairs() || len(x) < s.Pairs()/xDiv*cols || len(y) < s.Pairs()*rows ||
		bias != nil && len(bias) < s.Experts*rows {
		return fmt.Errorf("ops: RefMatVecID: buffers too small for %d pairs of %d experts of %dx%d", s.Pairs(), s.Experts, rows, cols)
	}
	for p := range s.Pairs() {
		e := int(sel[p])
		if e < 0 || e >= s.Experts {
			return fmt.Errorf("ops: RefMatVecID: pair %d chose expert %d of %d", p, e, s.Experts)
		}
		c := p / xDiv
		out := y[p*rows : (p+1)*rows]
		if err := MatMulF32Ref(w[e*rows*cols:(e+1)*rows*cols], rows, cols, x[c*cols:(c+1)*cols], 1, out); err != nil {
			return err
		}
		if bias != nil {
			for i := range out {
				out[i] += bias[e*rows+i]
			}
		}
	}
	return nil
}

// RefMoESum is the CPU reference of MoESum.
func RefMoESum(x, w []float32, s MoEShape, n int, y []float32, acc bool) {
	for r := range s.Rows {
		for j := range n {
			var sum float64
			for t := range s.Used {
				p := r*s.Used + t
				sum += float64(w[p]) * float64(x[p*n+j])
			}
			if acc {
				y[r*n+j] += float32(sum)
			} else {
				y[r*n+j] = float32(sum)
			}
		}
	}
}

// RefSwiGLUOAI is the CPU reference of SwiGLUOAI.
func RefSwiGLUOAI(dst, gate, up []float32) {
	for i, g := range gate {
		gc := math.Min(float64(g), 7)
		uc := math.Max(math.Min(float64(up[i]), 7), -7)
		dst[i] = float32(gc / (1 + math.Exp(-1.702*gc)) * (uc + 1))
	}
}
