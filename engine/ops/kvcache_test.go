package ops

import (
	"math"
	"testing"

	"github.com/vkllm/vkllm/vk"
)

func TestKVWrite(t *testing.T) {
	g := newRig(t)
	// Pages of 4 positions; slot 1's second page is unmapped (-1) and
	// slot 2's last entry names a page past the pool: rows there are
	// skipped, as are rows of an out-of-range slot or position.
	kv := KVParams{Slots: 3, NCtx: 9, KVDim: 2 * 12, Pages: 8, PageSize: 4}
	table := []int32{
		5, 0, 7,
		2, -1, 3,
		6, 1, 8,
	}
	slot := []int32{0, 2, 2, 1, 7, 1, 2, 0, 1, 0}
	pos := []int32{0, 7, 3, 4, 0, 3, 8, 9, 8, 4}
	rows := len(slot)
	x := g.randn(rows*kv.KVDim, 2)
	cacheInit := make([]uint16, kv.Pages*kv.PageSize*kv.KVDim)
	for i := range cacheInit {
		cacheInit[i] = F16FromF32(float32(i%97) / 8)
	}
	cache := g.upF16(cacheInit)
	src, sr, pr, tr := g.upF32(x), g.upI32(slot), g.upI32(pos), g.upI32(table)
	g.run(func(c *vk.Cmd) error { return g.k.KVWrite(c, cache, src, sr, pr, tr, rows, kv) })
	want := append([]uint16(nil), cacheInit...)
	RefKVWrite(want, x, slot, pos, table, rows, kv)
	// Independently of RefKVWrite: row 1 (slot 2, position 7) lands in page
	// table[2][1] = 1 at offset 3, and row 5 (slot 1, position 3) in page 2
	// at offset 3; row 3 (slot 1, position 4: unmapped page) nowhere.
	for _, c := range []struct{ row, at int }{{1, (1*4 + 3) * kv.KVDim}, {5, (2*4 + 3) * kv.KVDim}, {0, (5*4 + 0) * kv.KVDim}} {
		if w := F16FromF32(x[c.row*kv.KVDim]); want[c.at] != w {
			t.Fatalf("RefKVWrite: row %d at element %d = %#04x, want %#04x", c.row, c.at, want[c.at], w)
		}
	}
	changed := 0
	for i := range want {
		if want[i] != cacheInit[i] {
			changed++
		}
	}
	if changed != 6*kv.KVDim {
		t.Fatalf("RefKVWrite changed %d elements, want the 6 mapped rows of %d", changed, kv.KVDim)
	}
	got := g.downF16(cache, len(want))
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("KVWrite cache[%d] = %#04x, want %#04x", i, got[i], want[i])
		}
	}
}

// TestKVWriteQuant quantizes rows into q8_0 and q4_0 pools: each block's
// scale equals the reference's (gguf/quant) bit for bit, and each value
// dequantizes within one quantization step of the reference's (the GPU
// may fuse x*id + 0.5 differently at a rounding tie), and the input within
// the format's error.
func TestKVWriteQuant(t *testing.T) {
	g := newRig(t)
	for _, typ := range []KVType{KVQ8_0, KVQ4_0} {
		t.Run(typ.String(), func(t *testing.T) {
			kv := KVParams{Slots: 2, NCtx: 20, KVDim: 96, PageSize: 4, Type: typ}
			table := scatteredTable(g, &kv, 1)
			slot := []int32{1, 0, 1, 0, 3}
			pos := []int32{0, 7, 19, 8, 2}
			rows := len(slot)
			x := g.randn(rows*kv.KVDim, 3)
			halfwords := int(kv.PoolBytes() / 2)
			init := make([]uint16, halfwords)
			for i := range init {
				init[i] = uint16(i * 7919)
			}
			cache := g.upF16(init)
			g.run(func(c *vk.Cmd) error {
				return g.k.KVWrite(c, cache, g.upF32(x), g.upI32(slot), g.upI32(pos), g.upI32(table), rows, kv)
			})
			want := append([]uint16(nil), init...)
			RefKVWrite(want, x, slot, pos, table, rows, kv)
			got := g.downF16(cache, halfwords)
			hw := typ.RowBytes(32) / 2 // halfwords per block
			for i := range got {
				if i%hw == 0 && got[i] != want[i] {
					t.Fatalf("block %d: scale %#04x, want %#04x", i/hw, got[i], want[i])
				}
			}
			gv, wv := DequantizeKV(got, typ, kv.KVDim), DequantizeKV(want, typ, kv.KVDim)
			for r := range rows {
				at := kvRow(table, slot[r], pos[r], kv)
				if at < 0 {
					continue
				}
				for i := 0; i < kv.KVDim; i++ {
					d := math.Abs(float64(F32FromF16(want[(at+i)/32*hw])))
					if e := math.Abs(float64(gv[at+i] - wv[at+i])); e > d*1.0001 {
						t.Fatalf("row %d value %d: %g, reference %g (scale %g)", r, i, gv[at+i], wv[at+i], d)
					}
					if e := math.Abs(float64(gv[at+i] - x[r*kv.KVDim+i])); e > d*1.0001 {
						t.Fatalf("row %d value %d: %g from %g, more than one step (%g) off", r, i, gv[at+i], x[r*kv.KVDim+i], d)
					}
				}
			}
			// Rows elsewhere are untouched: the skipped row (slot 3) and
			// every position no row wrote.
			for i := range got {
				row := i / (typ.RowBytes(kv.KVDim) / 2)
				written := false
				for r := range rows {
					if at := kvRow(table, slot[r], pos[r], kv); at >= 0 && at/kv.KVDim == row {
						written = true
					}
				}
				if !written && got[i] != init[i] {
					t.Fatalf("halfword %d of unwritten row %d changed", i, row)
				}
			}
		})
	}
}
