package ops

import (
	"fmt"
	"math"
)

// SeqRun is one sequence's consecutive rows of a batch, for the recurrent
// ops (SSMConv, GatedDeltaNet): Rows rows from batch row Row, at positions
// Pos.. of slot Slot. A run at position 0 starts from a zero state; any
// other continues the slot's state, which must hold exactly the slot's
// first Pos positions. Runs of one batch name distinct slots. On the
// device a run is four int32s in this order.
type SeqRun struct {
	Slot, Row, Rows, Pos int32
}

// SSMConvParams shapes SSMConv: Channels inputs per row, a causal
// depthwise convolution of Kernel taps, and Slots per-slot states of
// Kernel-1 rows of Channels values each ([slot][Kernel-1][Channels], the
// oldest row first).
type SSMConvParams struct {
	Channels, Kernel, Slots int
}

func (p SSMConvParams) check(op string, x, dst, w, state int, runs []SeqRun) error {
	if p.Channels <= 0 || p.Kernel < 1 || p.Slots <= 0 {
		return fmt.Errorf("ops: %s: bad shape %+v", op, p)
	}
	if w < p.Channels*p.Kernel || state < p.Slots*(p.Kernel-1)*p.Channels {
		return fmt.Errorf("ops: %s: %d weights, %d state values for %+v", op, w, state, p)
	}
	return checkRuns(op, runs, p.Slots, min(x, dst)/p.Channels)
}

// checkRuns reports runs outside rows batch rows or slots slots, and two
// runs of one slot.
func checkRuns(op string, runs []SeqRun, slots, rows int) error {
	seen := map[int32]bool{}
	for _, r := range runs {
		if r.Slot < 0 || int(r.Slot) >= slots || r.Row < 0 || r.Rows < 1 || int(r.Row)+int(r.Rows) > rows || r.Pos < 0 || seen[r.Slot] {
			return fmt.Errorf("ops: %s: run %+v outside %d slots and %d rows (or a slot twice)", op, r, slots, rows)
		}
		seen[r.Slot] = true
	}
	return nil
}

// RefSSMConv is the CPU reference of SSMConv: for each run, each channel c
// of each row t is SiLU(sum_k in[t-(K-1)+k][c] * w[c*K+k]), where in is
// the slot's state rows (zeros at position 0) followed by the run's rows of
// x ([rows][Channels]); w is the GGUF ssm_conv1d weight ([Channels][K],
// tap k of channel c at c*K+k). The slot's state becomes the last K-1
// rows of in. Rows outside every run are left alone in dst.
func RefSSMConv(dst, x, w, state []float32, runs []SeqRun, p SSMConvParams) error {
	if err := p.check("RefSSMConv", len(x), len(dst), len(w), len(state), runs); err != nil {
		return err
	}
	C, K := p.Channels, p.Kernel
	for _, r := range runs {
		st := state[int(r.Slot)*(K-1)*C : int(r.Slot+1)*(K-1)*C]
		in := make([]float32, (K-1+int(r.Rows))*C)
		if r.Pos > 0 {
			copy(in, st)
		}
		copy(in[(K-1)*C:], x[int(r.Row)*C:int(r.Row+r.Rows)*C])
		for t := range int(r.Rows) {
			for c := range C {
				var s float64
				for k := range K {
					s += float64(in[(t+k)*C+c]) * float64(w[c*K+k])
				}
				dst[(int(r.Row)+t)*C+c] = float32(s / (1 + math.Exp(-s)))
			}
		}
		copy(st, in[int(r.Rows)*C:])
	}
	return nil
}

// DeltaNetParams shapes GatedDeltaNet: KHeads key heads of HeadK values
// and VHeads value heads of HeadV (value head h reads key head h %
// KHeads, as the reference's tiling), Slots per-slot states of VHeads x
// HeadV x HeadK f32 values, and Eps the L2 norm's floor.
type DeltaNetParams struct {
	KHeads, VHeads, HeadK, HeadV, Slots int
	Eps                                 float32
}

// QKVCols is the width of GatedDeltaNet's input rows: q and k (KHeads x
// HeadK each), then v (VHeads x HeadV).
func (p DeltaNetParams) QKVCols() int { return 2*p.KHeads*p.HeadK + p.VHeads*p.HeadV }

// StateLen is the number of f32 values of one slot's state.
func (p DeltaNetParams) StateLen() int { return p.VHeads * p.HeadV * p.HeadK }

func (p DeltaNetParams) check(op string, out, qkv, beta, alpha, dt, a, state int, runs []SeqRun) error {
	if p.KHeads <= 0 || p.VHeads <= 0 || p.VHeads%p.KHeads != 0 || p.HeadK <= 0 || p.HeadV <= 0 || p.Slots <= 0 {
		return fmt.Errorf("ops: %s: bad shape %+v", op, p)
	}
	if dt < p.VHeads || a < p.VHeads || state < p.Slots*p.StateLen() {
		return fmt.Errorf("ops: %s: %d dt, %d a, %d state values for %+v", op, dt, a, state, p)
	}
	rows := min(qkv/p.QKVCols(), out/(p.VHeads*p.HeadV), beta/p.VHeads, alpha/p.VHeads)
	return checkRuns(op, runs, p.Slots, rows)
}

// RefGatedDeltaNet is the CPU reference of GatedDeltaNet, the gated delta
// rule of Qwen3.5's linear-attention layers, in f64. For each row of each
// run and each value head h (key head kh = h % KHeads):
//
//	q, k  = the row's key head kh of q and k (qkv), each L2-normalised
//	        (divided by max(|x|, Eps))
//	g     = softplus(alpha[h] + dtBias[h]) * a[h]    (a < 0: a decay)
//	b     = sigmoid(beta[h])
//	S     = S * exp(g)                   (S: HeadK x HeadV, the head's state)
//	d[j]  = (v[j] - sum_i S[i][j] k[i]) * b
//	S[i][j] += k[i] d[j]
//	out[j] = sum_i S[i][j] q[i] / sqrt(HeadK)
//
// The state starts at zero for a run at position 0, else from the slot's;
// it is stored per slot and head with S[i][j] at j*HeadK+i, and the run's
// final state is written back. softplus(x) is x above 20, as the reference's.
func RefGatedDeltaNet(out, qkv, beta, alpha, dtBias, a, state []float32, runs []SeqRun, p DeltaNetParams) error {
	if err := p.check("RefGatedDeltaNet", len(out), len(qkv), len(beta), len(alpha), len(dtBias), len(a), len(state), runs); err != nil {
		return err
	}
	cols, dk, dv := p.QKVCols(), p.HeadK, p.HeadV
	q, k := make([]float64, dk), make([]float64, dk)
	s := make([]float64, dv*dk)
	for _, r := range runs {
		for h := range p.VHeads {
			kh := h % p.KHeads
			st := state[(int(r.Slot)*p.VHeads+h)*dv*dk : (int(r.Slot)*p.VHeads+h+1)*dv*dk]
			for i := range s {
				s[i] = 0
				if r.Pos > 0 {
					s[i] = float64(st[i])
				}
			}
			for t := int(r.Row); t < int(r.Row+r.Rows); t++ {
				row := qkv[t*cols : (t+1)*cols]
				l2(q, row[kh*dk:(kh+1)*dk], p.Eps)
				l2(k, row[(p.KHeads+kh)*dk:(p.KHeads+kh+1)*dk], p.Eps)
				v := row[2*p.KHeads*dk+h*dv : 2*p.KHeads*dk+(h+1)*dv]
				x := float64(alpha[t*p.VHeads+h]) + float64(dtBias[h])
				if x <= 20 {
					x = math.Log(1 + math.Exp(x))
				}
				decay := math.Exp(x * float64(a[h]))
				b := 1 / (1 + math.Exp(-float64(beta[t*p.VHeads+h])))
				for j := range dv {
					col := s[j*dk : (j+1)*dk]
					var sk float64
					for i := range col {
						col[i] *= decay
						sk += col[i] * k[i]
					}
					d := (float64(v[j]) - sk) * b
					var o float64
					for i := range col {
						col[i] += k[i] * d
						o += col[i] * q[i]
					}
					out[t*p.VHeads*dv+h*dv+j] = float32(o / math.Sqrt(float64(dk)))
				}
			}
			for i := range s {
				st[i] = float32(s[i])
			}
		}
	}
	return nil
}

// l2 puts x / max(|x|, eps) into dst.
func l2(dst []float64, x []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	n := max(math.Sqrt(ss), float64(eps))
	for i, v := range x {
		dst[i] = float64(v) / n
	}
}
