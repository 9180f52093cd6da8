package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/sweep"
	"github.com/vkllm/vkllm/vk"
)

// runsI32 flattens runs into the device layout (four int32 each).
func runsI32(runs []SeqRun) []int32 {
	x := make([]int32, 0, 4*len(runs))
	for _, r := range runs {
		x = append(x, r.Slot, r.Row, r.Rows, r.Pos)
	}
	return x
}

// nanRows sets the rows of x ([rows][cols]) that no run covers to the NaN
// pattern rig.buf fills outputs with, and reports which rows those are.
func nanRows(x []float32, cols int, runs []SeqRun) []bool {
	covered := make([]bool, len(x)/cols)
	for _, r := range runs {
		for t := r.Row; t < r.Row+r.Rows; t++ {
			covered[t] = true
		}
	}
	for t, c := range covered {
		if !c {
			for i := range cols {
				x[t*cols+i] = math.Float32frombits(NaNBits)
			}
		}
	}
	return covered
}

// checkRowsOut compares got with want ([rows][cols]) on the covered rows
// and requires the NaN pattern, bit for bit, on the others.
func checkRowsOut(t *testing.T, what string, got, want []float32, cols int, covered []bool) {
	t.Helper()
	var g, w []float32
	for r, c := range covered {
		if c {
			g, w = append(g, got[r*cols:(r+1)*cols]...), append(w, want[r*cols:(r+1)*cols]...)
			continue
		}
		for i := range cols {
			if b := math.Float32bits(got[r*cols+i]); b != NaNBits {
				t.Fatalf("%s: row %d outside every run was written ([%d] = %#x)", what, r, i, b)
			}
		}
	}
	closeTo(t, what, g, w, 1e-4)
}

// poisonSlots sets the state of the slots that runs start at position 0
// to NaN: the kernels must not read it.
func poisonSlots(state []float32, per int, runs []SeqRun) {
	for _, r := range runs {
		if r.Pos == 0 {
			for i := range per {
				state[int(r.Slot)*per+i] = float32(math.NaN())
			}
		}
	}
}

// convRuns are the runs of TestSSMConv's mixed batch of 13 rows (slots 0
// to 3): a run at position 0 with a poisoned state, one row continuing a
// state (shorter than K-1 for K > 2), a longer continuation, rows 5 and
// 12 outside every run and slot 1 in none.
var convRuns = []SeqRun{{Slot: 2, Row: 0, Rows: 5, Pos: 0}, {Slot: 0, Row: 6, Rows: 1, Pos: 3}, {Slot: 3, Row: 7, Rows: 2, Pos: 9}, {Slot: 4, Row: 9, Rows: 3, Pos: 1}}

func TestSSMConv(t *testing.T) {
	g := newRig(t)
	for _, sh := range []struct{ ch, k int }{{7, 4}, {7, 1}, {33, 2}, {256 + 2*64, 4}, {5, 8}, {130, 3}} {
		t.Run(fmt.Sprintf("C=%d/K=%d", sh.ch, sh.k), func(t *testing.T) {
			const rows, slots = 13, 5
			p := SSMConvParams{Channels: sh.ch, Kernel: sh.k, Slots: slots}
			per := (sh.k - 1) * sh.ch
			x, w, state := g.randn(rows*sh.ch, 1), g.randn(sh.ch*sh.k, 0.5), g.randn(slots*per, 1)
			poisonSlots(state, per, convRuns)
			xr, wr, sr, rr, dr := g.upF32(x), g.upF32(w), g.upF32(state), g.upI32(runsI32(convRuns)), g.buf(4*rows*sh.ch)
			if per == 0 {
				sr = vk.Range{}
			}
			g.run(func(c *vk.Cmd) error { return g.k.SSMConv(c, dr, xr, wr, sr, rr, len(convRuns), p) })
			want, wantState := make([]float32, rows*sh.ch), append([]float32(nil), state...)
			covered := nanRows(want, sh.ch, convRuns)
			if err := RefSSMConv(want, x, w, wantState, convRuns, p); err != nil {
				t.Fatal(err)
			}
			checkRowsOut(t, "dst", g.downF32(dr, rows*sh.ch), want, sh.ch, covered)
			if per > 0 {
				got := g.downF32(sr, slots*per)
				closeTo(t, "state", got, wantState, 1e-6)
				for i := per; i < 2*per; i++ { // slot 1: in no run
					if math.Float32bits(got[i]) != math.Float32bits(state[i]) {
						t.Fatalf("state of slot 1 (in no run) changed at %d", i-per)
					}
				}
			}
		})
	}
}

// TestSSMConvChunks runs one sequence of 40 rows as one run and as runs of
// 1, 7 and 32 rows in successive dispatches: the state carries the
// window from one to the next.
func TestSSMConvChunks(t *testing.T) {
	g := newRig(t)
	const rows, ch, K = 40, 19, 4
	p := SSMConvParams{Channels: ch, Kernel: K, Slots: 2}
	x, w := g.randn(rows*ch, 1), g.randn(ch*K, 0.5)
	xr, wr := g.upF32(x), g.upF32(w)
	whole, parts := g.buf(4*rows*ch), g.buf(4*rows*ch)
	s1, s2 := g.upF32(g.randn(2*(K-1)*ch, 1)), g.upF32(g.randn(2*(K-1)*ch, 1))
	one := g.upI32(runsI32([]SeqRun{{Slot: 1, Row: 0, Rows: rows}}))
	chunks := []SeqRun{{Slot: 1, Row: 0, Rows: 1, Pos: 0}, {Slot: 1, Row: 1, Rows: 7, Pos: 1}, {Slot: 1, Row: 8, Rows: 32, Pos: 8}}
	g.run(func(c *vk.Cmd) error {
		if err := g.k.SSMConv(c, whole, xr, wr, s1, one, 1, p); err != nil {
			return err
		}
		for _, r := range chunks {
			if err := g.k.SSMConv(c, parts, xr, wr, s2, g.upI32(runsI32([]SeqRun{r})), 1, p); err != nil {
				return err
			}
		}
		return nil
	})
	want, wantState := make([]float32, rows*ch), make([]float32, 2*(K-1)*ch)
	if err := RefSSMConv(want, x, w, wantState, []SeqRun{{Slot: 1, Row: 0, Rows: rows}}, p); err != nil {
		t.Fatal(err)
	}
	closeTo(t, "one run", g.downF32(whole, rows*ch), want, 1e-4)
	closeTo(t, "runs of 1, 7, 32", g.downF32(parts, rows*ch), want, 1e-4)
	closeTo(t, "state after one run", g.downF32(s1, 2*(K-1)*ch)[(K-1)*ch:], wantState[(K-1)*ch:], 1e-6)
	closeTo(t, "state after the runs", g.downF32(s2, 2*(K-1)*ch)[(K-1)*ch:], wantState[(K-1)*ch:], 1e-6)
}

// gdnCase is one GatedDeltaNet batch: its inputs and the reference's
// results.
type gdnCase struct {
	p                                   DeltaNetParams
	rows                                int
	qkv, beta, alpha, dtBias, a, state0 []float32
}

func (g *rig) gdnInputs(p DeltaNetParams, rows int) gdnCase {
	a := g.randn(p.VHeads, 0.5)
	for i, v := range a {
		a[i] = -float32(math.Exp(float64(v))) // a decay: a < 0
	}
	return gdnCase{p: p, rows: rows, qkv: g.randn(rows*p.QKVCols(), 1), beta: g.randn(rows*p.VHeads, 1.5),
		alpha: g.randn(rows*p.VHeads, 1.5), dtBias: g.randn(p.VHeads, 1), a: a, state0: g.randn(p.Slots*p.StateLen(), 0.3)}
}

// gdnOp is GatedDeltaNet's signature (GatedDeltaNetChunked's too).
type gdnOp func(c *vk.Cmd, out, qkv, beta, alpha, dtBias, a, state, runs vk.Range, nRuns int, p DeltaNetParams) error

// gdnGPU runs GatedDeltaNet over each batch of runs in turn (one dispatch
// each, the state carried in its buffer) and returns out and the final
// state.
func (g *rig) gdnGPU(cs gdnCase, batches ...[]SeqRun) (out, state []float32) {
	return g.gdnGPUOp(g.k.GatedDeltaNet, cs, batches...)
}

// gdnGPUOp is gdnGPU with op in place of GatedDeltaNet.
func (g *rig) gdnGPUOp(op gdnOp, cs gdnCase, batches ...[]SeqRun) (out, state []float32) {
	p := cs.p
	qr, br, ar, dr, aa, sr := g.upF32(cs.qkv), g.upF32(cs.beta), g.upF32(cs.alpha), g.upF32(cs.dtBias), g.upF32(cs.a), g.upF32(cs.state0)
	or := g.buf(4 * cs.rows * p.VHeads * p.HeadV)
	rr := make([]vk.Range, len(batches))
	for i, b := range batches {
		rr[i] = g.upI32(runsI32(b))
	}
	g.run(func(c *vk.Cmd) error {
		for i, b := range batches {
			if err := op(c, or, qr, br, ar, dr, aa, sr, rr[i], len(b), p); err != nil {
				return err
			}
		}
		return nil
	})
	return g.downF32(or, cs.rows*p.VHeads*p.HeadV), g.downF32(sr, p.Slots*p.StateLen())
}

// ref is gdnGPU's reference: the NaN pattern on rows outside every run.
func (cs gdnCase) ref(t *testing.T, runs []SeqRun) (out, state []float32, covered []bool) {
	t.Helper()
	p := cs.p
	out, state = make([]float32, cs.rows*p.VHeads*p.HeadV), append([]float32(nil), cs.state0...)
	covered = nanRows(out, p.VHeads*p.HeadV, runs)
	if err := RefGatedDeltaNet(out, cs.qkv, cs.beta, cs.alpha, cs.dtBias, cs.a, state, runs, p); err != nil {
		t.Fatal(err)
	}
	return out, state, covered
}

func TestGatedDeltaNet(t *testing.T) {
	g := newRig(t)
	mixed := []SeqRun{{Slot: 1, Row: 0, Rows: 4, Pos: 0}, {Slot: 3, Row: 4, Rows: 1, Pos: 5}, {Slot: 0, Row: 6, Rows: 3, Pos: 2}}
	decode := make([]SeqRun, 8)
	for i := range decode {
		decode[i] = SeqRun{Slot: int32(7 - i), Row: int32(i), Rows: 1, Pos: int32(3 * i)}
	}
	decode[2].Pos = 0
	prompt := []SeqRun{{Slot: 1, Row: 0, Rows: 37, Pos: 0}}
	long := []SeqRun{{Slot: 0, Row: 0, Rows: 200, Pos: 0}}
	type gdnTest struct {
		name string
		p    DeltaNetParams
		rows int
		runs []SeqRun
	}
	tests := []gdnTest{
		{"mixed/tiled", DeltaNetParams{KHeads: 2, VHeads: 4, HeadK: 32, HeadV: 32, Slots: 4, Eps: 1e-6}, 10, mixed},
		{"mixed/kv", DeltaNetParams{KHeads: 2, VHeads: 2, HeadK: 64, HeadV: 64, Slots: 4, Eps: 1e-6}, 10, mixed},
		{"mixed/k>v", DeltaNetParams{KHeads: 1, VHeads: 3, HeadK: 40, HeadV: 24, Slots: 4, Eps: 1e-6}, 10, mixed},
		{"mixed/v>k", DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 20, HeadV: 50, Slots: 4, Eps: 1e-6}, 10, mixed},
		{"decode/128", DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 128, HeadV: 128, Slots: 8, Eps: 1e-6}, 8, decode},
		{"decode/32", DeltaNetParams{KHeads: 2, VHeads: 4, HeadK: 32, HeadV: 32, Slots: 8, Eps: 1e-6}, 8, decode},
		{"prompt/32", DeltaNetParams{KHeads: 2, VHeads: 4, HeadK: 32, HeadV: 32, Slots: 2, Eps: 1e-6}, 37, prompt},
		{"prompt/128", DeltaNetParams{KHeads: 1, VHeads: 1, HeadK: 128, HeadV: 128, Slots: 2, Eps: 1e-6}, 37, prompt},
		// 200 rows of three loops over 128 keys would pass lavapipe's
		// 65535 loop iterations were those loops not unrolled.
		{"prompt/long", DeltaNetParams{KHeads: 1, VHeads: 1, HeadK: 128, HeadV: 128, Slots: 1, Eps: 1e-6}, 200, long},
	}
	if sweep.Long() { // the largest heads: 7 s of lavapipe's compiler
		tests = append(tests, gdnTest{"mixed/256", DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 256, HeadV: 256, Slots: 4, Eps: 1e-6}, 10, mixed})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := g.gdnInputs(tc.p, tc.rows)
			poisonSlots(cs.state0, tc.p.StateLen(), tc.runs)
			if tc.name == "mixed/tiled" { // a zero key and query row: the L2 norm's floor
				for i := range 2 * tc.p.KHeads * tc.p.HeadK {
					cs.qkv[6*tc.p.QKVCols()+i] = 0
				}
			}
			out, state := g.gdnGPU(cs, tc.runs)
			wantOut, wantState, covered := cs.ref(t, tc.runs)
			checkRowsOut(t, "out", out, wantOut, tc.p.VHeads*tc.p.HeadV, covered)
			closeTo(t, "state", state, wantState, 1e-4)
		})
	}
}

// TestGatedDeltaNetChunks runs one 40-row sequence as one run and as runs
// of 1, 7 and 32 rows in successive dispatches (the state carried through
// its buffer): both must match the reference's single run.
func TestGatedDeltaNetChunks(t *testing.T) {
	g := newRig(t)
	p := DeltaNetParams{KHeads: 2, VHeads: 4, HeadK: 32, HeadV: 32, Slots: 3, Eps: 1e-6}
	cs := g.gdnInputs(p, 40)
	one := []SeqRun{{Slot: 2, Row: 0, Rows: 40, Pos: 0}}
	wantOut, wantState, _ := cs.ref(t, one)
	out, state := g.gdnGPU(cs, one)
	closeTo(t, "one run: out", out, wantOut, 1e-4)
	closeTo(t, "one run: state", state, wantState, 1e-4)
	out, state = g.gdnGPU(cs, []SeqRun{{Slot: 2, Row: 0, Rows: 1, Pos: 0}}, []SeqRun{{Slot: 2, Row: 1, Rows: 7, Pos: 1}},
		[]SeqRun{{Slot: 2, Row: 8, Rows: 32, Pos: 8}})
	closeTo(t, "runs of 1, 7, 32: out", out, wantOut, 1e-4)
	closeTo(t, "runs of 1, 7, 32: state", state, wantState, 1e-4)
}

// TestDeltaNetErrors checks that bad shapes and short buffers are errors
// that name the op and the field, recorded nowhere.
func TestDeltaNetErrors(t *testing.T) {
	g := newRig(t)
	b := g.buf(4 << 10)
	small := g.buf(16)
	cp := SSMConvParams{Channels: 8, Kernel: 4, Slots: 2}
	dp := DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 8, HeadV: 8, Slots: 2, Eps: 1e-6}
	conv := func(p SSMConvParams, n int, state vk.Range) error {
		c, err := g.k.dev.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		return g.k.SSMConv(c, b, b, b, state, b, n, p)
	}
	gdn := func(p DeltaNetParams, n int, state vk.Range) error {
		c, err := g.k.dev.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		return g.k.GatedDeltaNet(c, b, b, b, b, b, b, state, b, n, p)
	}
	gdnc := func(p DeltaNetParams, n int, state vk.Range) error {
		c, err := g.k.dev.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		return g.k.GatedDeltaNetChunked(c, b, b, b, b, b, b, state, b, n, p)
	}
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{conv(SSMConvParams{Channels: 8, Kernel: 9, Slots: 2}, 1, b), []string{"SSMConv", "Kernel 9"}},
		{conv(SSMConvParams{Channels: 8, Kernel: 0, Slots: 2}, 1, b), []string{"SSMConv", "Kernel 0"}},
		{conv(SSMConvParams{Channels: 0, Kernel: 4, Slots: 2}, 1, b), []string{"SSMConv", "Channels"}},
		{conv(SSMConvParams{Channels: 8, Kernel: 4, Slots: 0}, 1, b), []string{"SSMConv", "Slots"}},
		{conv(cp, 0, b), []string{"SSMConv", "nRuns"}},
		{conv(cp, 1, small), []string{"SSMConv", "state"}},
		{conv(cp, 1, vk.Range{}), []string{"SSMConv", "state", "no buffer"}},
		{gdn(DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 257, HeadV: 8, Slots: 1}, 1, b), []string{"GatedDeltaNet", "HeadK 257"}},
		{gdn(DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 8, HeadV: 300, Slots: 1}, 1, b), []string{"GatedDeltaNet", "HeadV 300"}},
		{gdn(DeltaNetParams{KHeads: 2, VHeads: 3, HeadK: 8, HeadV: 8, Slots: 1}, 1, b), []string{"GatedDeltaNet", "VHeads 3"}},
		{gdn(DeltaNetParams{KHeads: 0, VHeads: 3, HeadK: 8, HeadV: 8, Slots: 1}, 1, b), []string{"GatedDeltaNet", "KHeads 0"}},
		{gdn(DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 8, HeadV: 8, Slots: 0}, 1, b), []string{"GatedDeltaNet", "Slots"}},
		{gdn(DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 8, HeadV: 8, Slots: 1, Eps: float32(math.NaN())}, 1, b), []string{"GatedDeltaNet", "Eps"}},
		{gdn(dp, -1, b), []string{"GatedDeltaNet", "nRuns"}},
		{gdn(dp, 1, small), []string{"GatedDeltaNet", "state"}},
		{gdnc(DeltaNetParams{KHeads: 1, VHeads: 2, HeadK: 257, HeadV: 8, Slots: 1}, 1, b), []string{"GatedDeltaNetChunked", "HeadK 257"}},
		{gdnc(dp, 0, b), []string{"GatedDeltaNetChunked", "nRuns"}},
		{gdnc(dp, 1, small), []string{"GatedDeltaNetChunked", "state"}},
	} {
		if tc.err == nil {
			t.Errorf("no error, want one naming %q", tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(tc.err.Error(), w) {
				t.Errorf("error %q does not name %q", tc.err, w)
			}
		}
	}
}
