package ops

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/vk"
)

// ArgmaxPush mirrors the push-constant block of argmax.comp.
type ArgmaxPush struct {
	Rows, Cols uint32
}

// ArgmaxNone is what Argmax writes for a row with no element above -Inf
// (every one -Inf or NaN); as an int32 it is -1.
const ArgmaxNone = 0xFFFFFFFF

// Argmax records dst[r] = index of the largest element of src row r (the
// first on ties; NaN and -Inf never chosen, ArgmaxNone when nothing else is
// left) as uint32, over rows x cols f32. It is the sampler's greedy pick
// exactly, so a greedy sequence can take its token from the device.
func (k *Kernels) Argmax(c *vk.Cmd, dst, src vk.Range, rows, cols int) error {
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("ops: Argmax: shape %dx%d", rows, cols)
	}
	if err := sized("Argmax", "src", src, 4*uint64(rows*cols)); err != nil {
		return err
	}
	if err := sized("Argmax", "dst", dst, 4*uint64(rows)); err != nil {
		return err
	}
	rowBytes := 4 * uint64(cols)
	return k.rowChunks("Argmax", rows, rowBytes, func(r0, nr int) error {
		push := ArgmaxPush{Rows: uint32(nr), Cols: uint32(cols)}
		return Record(k, c, k.pick("argmax_f32", "argmax_f32_sg"), []uint32{k.wg}, k.Groups(uint32(nr)), &push,
			k.window(src, uint64(r0)*rowBytes, uint64(nr)*rowBytes), k.window(dst, 4*uint64(r0), 4*uint64(nr)))
	})
}

// RefArgmax is the CPU reference of Argmax.
func RefArgmax(dst []uint32, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		best, bi := float32(math.Inf(-1)), uint32(ArgmaxNone)
		for i, v := range src[r*cols : (r+1)*cols] {
			if v > best {
				best, bi = v, uint32(i)
			}
		}
		dst[r] = bi
	}
}

// MaxTopK is the largest k TopK supports.
const MaxTopK = 64

// TopKPush mirrors the push-constant block of topk.comp.
type TopKPush struct {
	Rows, Cols, K uint32
	Skip          uint32 // elements of the binding before the first row
}

// TopK records, for each of rows rows of cols f32, the k largest elements
// sorted by value descending (ties, -0 = +0, by index ascending; NaNs last)
// into idx (uint32) and vals (f32), both [rows][k]. 1 <= k <= min(cols,
// MaxTopK). src may start at any multiple of 4 bytes (rows after others in
// a logits buffer): the kernel binds from the aligned offset below it.
func (k *Kernels) TopK(c *vk.Cmd, idx, vals, src vk.Range, rows, cols, topK int) error {
	if rows <= 0 || cols <= 0 || topK <= 0 || topK > MaxTopK || topK > cols {
		return fmt.Errorf("ops: TopK: %d rows of %d, k %d (want 1 <= k <= min(cols, %d))", rows, cols, topK, MaxTopK)
	}
	if err := sized("TopK", "src", src, 4*uint64(rows*cols)); err != nil {
		return err
	}
	if src.Offset%4 != 0 {
		return fmt.Errorf("ops: TopK: src offset %d is not a multiple of 4", src.Offset)
	}
	for _, o := range []struct {
		what string
		r    vk.Range
	}{{"idx", idx}, {"vals", vals}} {
		if err := sized("TopK", o.what, o.r, 4*uint64(rows*topK)); err != nil {
			return err
		}
	}
	align := max(k.dev.Limits().MinStorageOffsetAlign, 4)
	rowBytes := 4 * uint64(cols)
	outBytes := 4 * uint64(topK)
	// At most this many rows fit in one binding after the worst skip;
	// output chunks start at multiples of 64 rows, or of whatever keeps
	// them aligned.
	per := int((k.dev.MaxBinding() - align) / rowBytes)
	if per == 0 {
		return fmt.Errorf("ops: TopK: a row of %d bytes exceeds one storage binding (%d bytes)", rowBytes, k.dev.MaxBinding())
	}
	if rows > per {
		if per >= 64 {
			per &^= 63
		}
		for per > 1 && (uint64(per)*outBytes)%align != 0 {
			per--
		}
		if (uint64(per)*outBytes)%align != 0 {
			return fmt.Errorf("ops: TopK: %d rows of %d cannot be split at aligned offsets", rows, cols)
		}
	}
	for r0 := 0; r0 < rows; r0 += per {
		nr := min(per, rows-r0)
		start := src.Offset + uint64(r0)*rowBytes
		base := start &^ (align - 1)
		in := vk.Range{Buf: src.Buf, Offset: base, Size: start - base + uint64(nr)*rowBytes}
		push := TopKPush{Rows: uint32(nr), Cols: uint32(cols), K: uint32(topK), Skip: uint32((start - base) / 4)}
		if err := Record(k, c, "top_k_f32", []uint32{k.wg}, k.Groups(uint32(nr)), &push, in,
			k.window(idx, uint64(r0)*outBytes, uint64(nr)*outBytes), k.window(vals, uint64(r0)*outBytes, uint64(nr)*outBytes)); err != nil {
			return err
		}
	}
	return nil
}

// RefTopK is the CPU reference of TopK.
func RefTopK(idx []uint32, vals []float32, src []float32, rows, cols, topK int) {
	order := make([]int, cols)
	for r := 0; r < rows; r++ {
		x := src[r*cols : (r+1)*cols]
		for i := range order {
			order[i] = i
		}
		less := func(a, b int) bool { // a ranks before b
			xa, xb := x[a], x[b]
			na, nb := xa != xa, xb != xb
			switch {
			case na != nb:
				return nb
			case na || xa == xb:
				return a < b
			}
			return xa > xb
		}
		// Partial selection sort is enough for k <= MaxTopK.
		for j := 0; j < topK; j++ {
			best := j
			for i := j + 1; i < cols; i++ {
				if less(order[i], order[best]) {
					best = i
				}
			}
			order[j], order[best] = order[best], order[j]
			idx[r*topK+j] = uint32(order[j])
			vals[r*topK+j] = x[order[j]]
		}
	}
}
