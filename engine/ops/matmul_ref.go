package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/gguf/quant"
)

// MatMulRef is the CPU reference of the matvec and matmul kernels: for a
// weight matrix w of type t in GGUF layout (rows rows of cols elements,
// block-packed along a row) and n activation columns x (column c is
// x[c*cols : (c+1)*cols]), it writes y[c*rows+r] = sum_k W[r][k]*x[c][k],
// dequantizing w as llama.cpp does (see dequantize) and multiplying with
// MatMulF32Ref.
func MatMulRef(t gguf.GGMLType, w []byte, rows, cols int, x []float32, n int, y []float32) error {
	rowBytes, err := checkWeight(t, w, rows, cols)
	if err != nil {
		return err
	}
	wf := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		if err := dequantize(t, w[r*rowBytes:(r+1)*rowBytes], wf[r*cols:(r+1)*cols]); err != nil {
			return fmt.Errorf("ops: MatMulRef: row %d: %w", r, err)
		}
	}
	return MatMulF32Ref(wf, rows, cols, x, n, y)
}

// MatMulF32Ref is the product of MatMulRef over weights already in f32
// (w holds rows rows of cols values): y[c*rows+r] = sum_k w[r][k]*x[c][k],
// accumulated in float64 and rounded once to f32. It is the one reference
// product of the project (the engine's CPU forward pass multiplies with it).
func MatMulF32Ref(w []float32, rows, cols int, x []float32, n int, y []float32) error {
	if rows < 0 || cols <= 0 || len(w) < rows*cols {
		return fmt.Errorf("ops: MatMulF32Ref: %d weights for %d rows of %d", len(w), rows, cols)
	}
	if n < 0 || len(x) < n*cols {
		return fmt.Errorf("ops: MatMulF32Ref: x has %d elements, want %d columns of %d", len(x), n, cols)
	}
	if len(y) < n*rows {
		return fmt.Errorf("ops: MatMulF32Ref: y has %d elements, want %d columns of %d", len(y), n, rows)
	}
	for c := 0; c < n; c++ {
		xc := x[c*cols : (c+1)*cols]
		for r := 0; r < rows; r++ {
			var s float64
			for k, v := range w[r*cols : (r+1)*cols] {
				s += float64(v) * float64(xc[k])
			}
			y[c*rows+r] = float32(s)
		}
	}
	return nil
}

// GetRowsRef is the CPU reference of the get_rows kernel: it writes row
// ids[i] of the weight matrix w (type t, rows rows of cols elements) as f32
// into dst[i*cols : (i+1)*cols]. An id outside [0, rows) gives a zero row,
// as the kernel does.
func GetRowsRef(t gguf.GGMLType, w []byte, rows, cols int, ids []int32, dst []float32) error {
	rowBytes, err := checkWeight(t, w, rows, cols)
	if err != nil {
		return err
	}
	if len(dst) < len(ids)*cols {
		return fmt.Errorf("ops: GetRowsRef: dst has %d elements, want %d rows of %d", len(dst), len(ids), cols)
	}
	for i, id := range ids {
		out := dst[i*cols : (i+1)*cols]
		if id < 0 || int(id) >= rows {
			clear(out)
			continue
		}
		if err := dequantize(t, w[int(id)*rowBytes:(int(id)+1)*rowBytes], out); err != nil {
			return fmt.Errorf("ops: GetRowsRef: row %d: %w", id, err)
		}
	}
	return nil
}

// checkWeight validates a host weight matrix and returns its row size.
func checkWeight(t gguf.GGMLType, w []byte, rows, cols int) (int, error) {
	if rows < 0 || cols <= 0 {
		return 0, fmt.Errorf("ops: weight shape %dx%d is empty or negative", rows, cols)
	}
	rb, err := t.RowSize(uint64(cols))
	if err != nil {
		return 0, fmt.Errorf("ops: weight rows: %w", err)
	}
	if uint64(len(w)) < rb*uint64(rows) {
		return 0, fmt.Errorf("ops: %v weight has %d bytes, want %d rows of %d", t, len(w), rows, rb)
	}
	return int(rb), nil
}

// dequantize decodes src of type t into dst with gguf/quant, which
// reproduces llama.cpp's dequantize_row_* bit for bit.
func dequantize(t gguf.GGMLType, src []byte, dst []float32) error {
	if !quant.CanDequantize(t) {
		return fmt.Errorf("ops: %v weights cannot be dequantized", t)
	}
	return quant.Dequantize(t, src, dst)
}
