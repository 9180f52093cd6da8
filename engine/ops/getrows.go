package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/vk"
)

// GetRowsPush mirrors the push-constant block of shaders/get_rows.comp.
// Offsets and strides count elements, except WOff and WStride (bytes).
type GetRowsPush struct {
	K, NIds                     uint32 // row length, ids to gather
	WOff, WStride               uint32 // byte offset of row RowBegin in the binding, bytes per row
	RowBegin, RowEnd, TotalRows uint32 // rows bound, and rows of the whole matrix
	IdsOff, YOff, YStride       uint32
}

// getRowsWG is the get_rows workgroup size (groups of four elements each).
const getRowsWG = 64

// GetRows records the embedding lookup dst[i] = W[ids[i]] for n int32 ids:
// dst receives n rows of w.Cols f32 ([n][Cols]), dequantized. An id outside
// [0, w.Rows) gives a zero row. ids and dst must start at a multiple of 4
// bytes; any storage offset alignment is taken care of.
func (k *Kernels) GetRows(c *vk.Cmd, w Weight, ids vk.Range, n int, dst vk.Range) error {
	return k.getRows(c, w, ids, n, dst, k.dev.MaxBinding())
}

// getRows records GetRows with bindings of at most maxRange bytes: one
// dispatch per window of weight rows and group of ids.
func (k *Kernels) getRows(c *vk.Cmd, w Weight, ids vk.Range, n int, dst vk.Range, maxRange uint64) error {
	const op = "GetRows"
	names, _ := kernelsFor(w.Type)
	rowBytes, err := weightRowBytes(w.Type, w.Cols)
	if err != nil {
		return fmt.Errorf("ops: %s: %w", op, err)
	}
	if w.Rows <= 0 || n <= 0 {
		return fmt.Errorf("ops: %s: %d rows, %d ids is empty", op, w.Rows, n)
	}
	if w.Rows > 1<<31-1 {
		return fmt.Errorf("ops: %s: %d rows exceed int32 ids", op, w.Rows)
	}
	if err := sized(op, "weight", w.Data, rowBytes*uint64(w.Rows)); err != nil {
		return err
	}
	if err := sized(op, "ids", ids, 4*uint64(n)); err != nil {
		return err
	}
	if err := sized(op, "dst", dst, 4*uint64(n)*uint64(w.Cols)); err != nil {
		return err
	}
	if ids.Offset%4 != 0 || dst.Offset%4 != 0 {
		return fmt.Errorf("ops: %s: ids offset %d or dst offset %d is not a multiple of 4", op, ids.Offset, dst.Offset)
	}
	maxRange, align, budget, err := k.bindLimits(op, maxRange)
	if err != nil {
		return err
	}
	if 4*uint64(w.Cols) > budget {
		return fmt.Errorf("ops: %s: a row of %d f32 exceeds the %d-byte binding limit", op, w.Cols, maxRange)
	}
	maxY := max(k.dev.Limits().MaxWorkgroupCount[1], 1)
	maxZ := max(k.dev.Limits().MaxWorkgroupCount[2], 1)
	idStep := int(min(budget/(4*uint64(w.Cols)), uint64(maxY)*uint64(maxZ), uint64(n)))
	name := names.getRows
	groupsX := ceilDiv(ceilDiv(uint32(w.Cols), 4), getRowsWG)
	first := true
	for r := 0; r < w.Rows; {
		ch, err := rowChunkAt(r, w.Data.Offset, rowBytes, w.Rows, w.Data.Buf.Size(), maxRange, align)
		if err != nil {
			return fmt.Errorf("ops: %s: weight: %w", op, err)
		}
		r = ch.rowEnd
		wr := vk.Range{Buf: w.Data.Buf, Offset: ch.bindOffset, Size: ch.bindRange}
		for i0 := 0; i0 < n; i0 += idStep {
			ni := min(idStep, n-i0)
			ir, iOff := bindWindow(ids, 4*uint64(i0), 4*uint64(ni), align, maxRange)
			yr, yOff := bindWindow(dst, 4*uint64(i0)*uint64(w.Cols), 4*uint64(ni)*uint64(w.Cols), align, maxRange)
			push := GetRowsPush{
				K: uint32(w.Cols), NIds: uint32(ni),
				WOff: ch.wOff, WStride: uint32(rowBytes),
				RowBegin: uint32(ch.rowBegin), RowEnd: uint32(ch.rowEnd), TotalRows: uint32(w.Rows),
				IdsOff: iOff, YOff: yOff, YStride: uint32(w.Cols),
			}
			gy := min(uint32(ni), maxY)
			groups := [3]uint32{groupsX, gy, ceilDiv(uint32(ni), gy)}
			if !first {
				c.NoBarrier()
			}
			first = false
			fast := uint32(0)
			if w.Cols%4 == 0 && (ch.wOff|uint32(rowBytes))%16 == 0 {
				fast = 1
			}
			spec := [2]uint32{getRowsWG, fast}
			if err := Record(k, c, name, spec[:], groups, &push, wr, ir, yr); err != nil {
				return fmt.Errorf("ops: %s %v %dx%d: %w", op, w.Type, w.Rows, w.Cols, err)
			}
		}
	}
	return nil
}
