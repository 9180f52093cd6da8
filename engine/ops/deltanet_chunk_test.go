package ops

import (
	"math"
	"testing"
)

// chunkedGDN is the chunked form of the gated delta rule in f64, as the
// shader delta_net_chunk.comp computes it (per value head and chunk of c
// rows, with G the decays' cumulative sum within the chunk):
//
//	(I + A) D = diag(b) (V - diag(exp G) K S),  A[t][s] = b_t exp(G_t-G_s) k_t.k_s (s < t)
//	o_t = exp(G_t) q_t^T S + sum_{s<=t} exp(G_t-G_s) (q_t.k_s) d_s
//	S'  = exp(G_last) S + sum_s exp(G_last-G_s) k_s d_s^T
//
// It checks the algebra against RefGatedDeltaNet before any GLSL.
func chunkedGDN(out, qkv, beta, alpha, dtBias, a, state []float32, runs []SeqRun, p DeltaNetParams, C int) {
	cols, dk, dv := p.QKVCols(), p.HeadK, p.HeadV
	for _, r := range runs {
		for h := range p.VHeads {
			kh := h % p.KHeads
			st := state[(int(r.Slot)*p.VHeads+h)*dv*dk : (int(r.Slot)*p.VHeads+h+1)*dv*dk]
			s := make([]float64, dv*dk) // S[i][j] at j*dk+i
			if r.Pos > 0 {
				for i := range s {
					s[i] = float64(st[i])
				}
			}
			for c0 := 0; c0 < int(r.Rows); c0 += C {
				c := min(C, int(r.Rows)-c0)
				K, Q := make([][]float64, c), make([][]float64, c)
				G, b := make([]float64, c), make([]float64, c)
				for t := range c {
					row := qkv[(int(r.Row)+c0+t)*cols:]
					K[t], Q[t] = make([]float64, dk), make([]float64, dk)
					l2(K[t], row[(p.KHeads+kh)*dk:(p.KHeads+kh+1)*dk], p.Eps)
					l2(Q[t], row[kh*dk:(kh+1)*dk], p.Eps)
					for i := range Q[t] {
						Q[t][i] /= math.Sqrt(float64(dk))
					}
					x := float64(alpha[(int(r.Row)+c0+t)*p.VHeads+h]) + float64(dtBias[h])
					if x <= 20 {
						x = math.Log(1 + math.Exp(x))
					}
					G[t] = x * float64(a[h])
					if t > 0 {
						G[t] += G[t-1]
					}
					b[t] = 1 / (1 + math.Exp(-float64(beta[(int(r.Row)+c0+t)*p.VHeads+h])))
				}
				dot := func(x, y []float64) (d float64) {
					for i := range x {
						d += x[i] * y[i]
					}
					return d
				}
				// T = (I + A)^-1 by columns.
				T := make([][]float64, c)
				for t := range T {
					T[t] = make([]float64, c)
					T[t][t] = 1
				}
				for sc := range c {
					for t := sc + 1; t < c; t++ {
						var x float64
						for m := sc; m < t; m++ {
							x -= b[t] * math.Exp(G[t]-G[m]) * dot(K[t], K[m]) * T[m][sc]
						}
						T[t][sc] = x
					}
				}
				for j := range dv {
					col := s[j*dk : (j+1)*dk]
					rr := make([]float64, c)
					qs := make([]float64, c)
					for t := range c {
						v := float64(qkv[(int(r.Row)+c0+t)*cols+2*p.KHeads*dk+h*dv+j])
						rr[t] = b[t] * (v - math.Exp(G[t])*dot(K[t], col))
						qs[t] = dot(Q[t], col)
					}
					d := make([]float64, c)
					for t := range c {
						for sc := 0; sc <= t; sc++ {
							d[t] += T[t][sc] * rr[sc]
						}
					}
					for t := range c {
						o := math.Exp(G[t]) * qs[t]
						for sc := 0; sc <= t; sc++ {
							o += math.Exp(G[t]-G[sc]) * dot(Q[t], K[sc]) * d[sc]
						}
						out[((int(r.Row)+c0+t)*p.VHeads+h)*dv+j] = float32(o)
					}
					gl := G[c-1]
					for i := range col {
						x := math.Exp(gl) * col[i]
						for sc := range c {
							x += math.Exp(gl-G[sc]) * K[sc][i] * d[sc]
						}
						col[i] = x
					}
				}
			}
			for i := range s {
				st[i] = float32(s[i])
			}
		}
	}
}

// TestChunkedGDNAlgebra checks chunkedGDN against RefGatedDeltaNet on the
// CPU: the chunked algebra itself, chunk sizes that do and do not divide
// the runs.
func TestChunkedGDNAlgebra(t *testing.T) {
	g := &rig{t: t, r: newRand(t)}
	p := DeltaNetParams{KHeads: 2, VHeads: 4, HeadK: 16, HeadV: 8, Slots: 3, Eps: 1e-6}
	runs := []SeqRun{{Slot: 0, Row: 0, Rows: 37, Pos: 0}, {Slot: 2, Row: 38, Rows: 1, Pos: 4}, {Slot: 1, Row: 39, Rows: 9, Pos: 3}}
	cs := g.gdnInputs(p, 48)
	wantOut, wantState, covered := cs.ref(t, runs)
	for _, C := range []int{1, 4, 16, 64} {
		out, state := make([]float32, len(wantOut)), append([]float32(nil), cs.state0...)
		copy(out, wantOut) // rows outside every run
		chunkedGDN(out, cs.qkv, cs.beta, cs.alpha, cs.dtBias, cs.a, state, runs, p, C)
		checkRowsOut(t, "chunked out", out, wantOut, p.VHeads*p.HeadV, covered)
		closeTo(t, "chunked state", state, wantState, 1e-6)
	}
}

// TestGatedDeltaNetChunked compares GatedDeltaNetChunked with
// RefGatedDeltaNet: one long run from a poisoned state, and a batch of
// runs of 1, 7, C-1, C, C+1 and 3C+5 rows (C the device's chunk rows),
// some at position 0 with a poisoned state, some continuing one, with
// rows outside every run, a slot in no run, and runs of no rows or past
// the batch that must be skipped (their slots' states untouched).
func TestGatedDeltaNetChunked(t *testing.T) {
	g := newRig(t)
	type chunkTest struct {
		name string
		p    DeltaNetParams
	}
	for _, tc := range []chunkTest{
		{"32/tiled", DeltaNetParams{KHeads: 2, VHeads: 4, HeadK: 32, HeadV: 32, Eps: 1e-6}},
		{"128/tiled", DeltaNetParams{KHeads: 2, VHeads: 4, HeadK: 128, HeadV: 128, Eps: 1e-6}},
		// Heads off the multiples of 32 (lavapipe compiles each shape
		// for seconds: one of them).
		{"v>k", DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 20, HeadV: 50, Eps: 1e-6}},
	} {
		C := g.k.DeltaNetChunkRows(tc.p)
		if C == 0 {
			t.Fatalf("%s: no chunk rows for %+v", tc.name, tc.p)
		}
		long := func(t *testing.T) {
			p := tc.p
			p.Slots = 2
			runs := []SeqRun{{Slot: 1, Row: 0, Rows: 200, Pos: 0}}
			cs := g.gdnInputs(p, 200)
			poisonSlots(cs.state0, p.StateLen(), runs)
			out, state := g.gdnGPUOp(g.k.GatedDeltaNetChunked, cs, runs)
			wantOut, wantState, _ := cs.ref(t, runs)
			closeTo(t, "out", out, wantOut, 1e-4)
			closeTo(t, "state", state, wantState, 1e-4)
		}
		if tc.name != "v>k" { // the mixed batch covers that shape
			t.Run(tc.name+"/long", long)
		}
		t.Run(tc.name+"/mixed", func(t *testing.T) {
			p := tc.p
			p.Slots = 9
			lens := []int{1, 7, C - 1, C, C + 1, 3*C + 5}
			var runs []SeqRun
			row := 0
			for i, n := range lens {
				pos := int32(0)
				if i%2 == 1 {
					pos = int32(3 + i)
				}
				runs = append(runs, SeqRun{Slot: int32(7 - i), Row: int32(row), Rows: int32(n), Pos: pos})
				row += n + 1 // a row outside every run after each
			}
			rows := row
			// Skipped: a run of no rows (slot 0), one past the batch (slot
			// 8) over a row outside every run; slot 1 is in no run.
			bad := []SeqRun{{Slot: 0, Row: 2, Rows: 0, Pos: 5}, {Slot: 8, Row: int32(rows - 1), Rows: 4, Pos: 2}}
			cs := g.gdnInputs(p, rows)
			poisonSlots(cs.state0, p.StateLen(), runs)
			for i := range 2 * p.KHeads * p.HeadK { // a zero key and query row: the L2 norm's floor
				cs.qkv[(int(runs[5].Row)+C)*p.QKVCols()+i] = 0
			}
			out, state := g.gdnGPUOp(g.k.GatedDeltaNetChunked, cs, append(append([]SeqRun(nil), runs...), bad...))
			wantOut, wantState, covered := cs.ref(t, runs)
			checkRowsOut(t, "out", out, wantOut, p.VHeads*p.HeadV, covered)
			closeTo(t, "state", state, wantState, 1e-4)
			n := p.StateLen()
			for _, s := range []int{0, 1, 8} {
				for i := s * n; i < (s+1)*n; i++ {
					if math.Float32bits(state[i]) != math.Float32bits(cs.state0[i]) {
						t.Fatalf("state of slot %d (in no run that is not skipped) changed at %d", s, i-s*n)
					}
				}
			}
		})
	}
}

// TestGatedDeltaNetChunkedChunks runs one 40-row sequence as runs of 1, 7
// and 32 rows in successive GatedDeltaNetChunked dispatches (the state
// carried through its buffer): it must match the reference's single run.
func TestGatedDeltaNetChunkedChunks(t *testing.T) {
	g := newRig(t)
	p := DeltaNetParams{KHeads: 2, VHeads: 4, HeadK: 32, HeadV: 32, Slots: 3, Eps: 1e-6}
	cs := g.gdnInputs(p, 40)
	one := []SeqRun{{Slot: 2, Row: 0, Rows: 40, Pos: 0}}
	wantOut, wantState, _ := cs.ref(t, one)
	out, state := g.gdnGPUOp(g.k.GatedDeltaNetChunked, cs, []SeqRun{{Slot: 2, Row: 0, Rows: 1, Pos: 0}},
		[]SeqRun{{Slot: 2, Row: 1, Rows: 7, Pos: 1}}, []SeqRun{{Slot: 2, Row: 8, Rows: 32, Pos: 8}})
	closeTo(t, "runs of 1, 7, 32: out", out, wantOut, 1e-4)
	closeTo(t, "runs of 1, 7, 32: state", state, wantState, 1e-4)
}

// TestDeltaNetChunkRows checks the chunk rows' rule: 16 where the chunk
// fits (heads of 128 on lavapipe's 32 KiB of shared memory), none (the
// fallback to GatedDeltaNet) past DeltaNetChunkMaxHead.
func TestDeltaNetChunkRows(t *testing.T) {
	g := newRig(t)
	for _, tc := range []struct{ hk, hv, want int }{{32, 32, 16}, {128, 128, 16}, {8, 100, 16}, {256, 256, 0}, {64, 256, 0}, {129, 8, 0}} {
		if got := g.k.DeltaNetChunkRows(DeltaNetParams{KHeads: 1, VHeads: 1, HeadK: tc.hk, HeadV: tc.hv, Slots: 1}); got != tc.want {
			t.Errorf("heads %d/%d: %d chunk rows, want %d", tc.hk, tc.hv, got, tc.want)
		}
	}
}
