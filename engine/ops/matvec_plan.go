package ops

import (
	"fmt"

	"github.com/vkllm/vkllm/gguf"
)

// rowChunk is one binding of a weight matrix: rows [rowBegin, rowEnd) bound
// at bindOffset for bindRange bytes, the first of them wOff bytes into the
// binding. Kernels address rows relative to rowBegin.
type rowChunk struct {
	rowBegin, rowEnd      int
	bindOffset, bindRange uint64
	wOff                  uint32
}

// planRowChunks splits a weight matrix of rows rows of rowBytes bytes,
// starting offset bytes into a buffer of bufSize bytes, into bindings no
// larger than maxRange whose offsets are multiples of align (the device's
// maxStorageBufferRange and minStorageBufferOffsetAlignment). Each binding
// covers whole 32-bit words, since the kernels read weights as words: the
// buffer must extend to the word boundary after the matrix.
func planRowChunks(offset, rowBytes uint64, rows int, bufSize, maxRange, align uint64) ([]rowChunk, error) {
	var chunks []rowChunk
	for r := 0; r < rows; {
		ch, err := rowChunkAt(r, offset, rowBytes, rows, bufSize, maxRange, align)
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, ch)
		r = ch.rowEnd
	}
	return chunks, nil
}

// rowChunkAt returns the binding that starts at row r of the matrix that
// planRowChunks splits; the next one starts at its rowEnd. Recording walks
// the chunks this way without allocating.
func rowChunkAt(r int, offset, rowBytes uint64, rows int, bufSize, maxRange, align uint64) (rowChunk, error) {
	if rows <= 0 || rowBytes == 0 {
		return rowChunk{}, fmt.Errorf("weight of %d rows of %d bytes is empty", rows, rowBytes)
	}
	if align == 0 || align%4 != 0 && 4%align != 0 {
		return rowChunk{}, fmt.Errorf("storage buffer offset alignment %d is unusable", align)
	}
	end := offset + uint64(rows)*rowBytes
	if end < offset || roundUp4(end) > bufSize {
		return rowChunk{}, fmt.Errorf("weight bytes [%d, %d) (padded to a word) exceed the %d-byte buffer", offset, end, bufSize)
	}
	start := offset + uint64(r)*rowBytes
	bind := start - start%align
	bind -= bind % 4
	lead := start - bind
	if maxRange < lead+rowBytes+4 {
		return rowChunk{}, fmt.Errorf("a %d-byte weight row does not fit a %d-byte storage binding", rowBytes, maxRange)
	}
	n := min(int((maxRange-lead-3)/rowBytes), rows-r)
	rng := roundUp4(lead + uint64(n)*rowBytes)
	if lead > 1<<32-1 || rng > 1<<32-1 {
		return rowChunk{}, fmt.Errorf("binding of %d bytes exceeds 32-bit addressing", rng)
	}
	return rowChunk{rowBegin: r, rowEnd: r + n, bindOffset: bind, bindRange: rng, wOff: uint32(lead)}, nil
}

func roundUp4(n uint64) uint64 { return (n + 3) &^ 3 }

// weightRowBytes returns the bytes of one row of cols elements of t, and
// fails for types the kernels do not support.
func weightRowBytes(t gguf.GGMLType, cols int) (uint64, error) {
	if _, ok := kernelsFor(t); !ok {
		return 0, fmt.Errorf("no get_rows/matvec/matmul kernels for weight type %v", t)
	}
	if cols <= 0 {
		return 0, fmt.Errorf("%v weight rows of %d elements", t, cols)
	}
	return t.RowSize(uint64(cols))
}

// weightKernels names the pipeline variants for one weight type.
type weightKernels struct {
	getRows, matvec, matvecSG, matmul string
	// matvecXU reads the activations from a uniform buffer (CPU devices),
	// matvecXT too and the weights from a uniform texel buffer.
	matvecXU, matvecXT string
	// fused, fusedSG, fusedXU and fusedXT are the matvec variants with the
	// split and GLU epilogues (matvec_fused.go).
	fused, fusedSG, fusedXU, fusedXT string
}

// kernelsFor returns the kernel names for weight type t (constant strings,
// so recording allocates nothing).
func kernelsFor(t gguf.GGMLType) (weightKernels, bool) {
	switch t {
	case gguf.TypeF32:
		return weightKernels{"get_rows_f32_f32", "matvec_f32_f32", "matvec_f32_f32_sg", "matmul_f32_f32", "matvec_f32_f32_xu", "matvec_f32_f32_xt", "matvec_fused_f32_f32", "matvec_fused_f32_f32_sg", "matvec_fused_f32_f32_xu", "matvec_fused_f32_f32_xt"}, true
	case gguf.TypeF16:
		return weightKernels{"get_rows_f16_f32", "matvec_f16_f32", "matvec_f16_f32_sg", "matmul_f16_f32", "matvec_f16_f32_xu", "matvec_f16_f32_xt", "matvec_fused_f16_f32", "matvec_fused_f16_f32_sg", "matvec_fused_f16_f32_xu", "matvec_fused_f16_f32_xt"}, true
	case gguf.TypeBF16:
		return weightKernels{"get_rows_bf16_f32", "matvec_bf16_f32", "matvec_bf16_f32_sg", "matmul_bf16_f32", "matvec_bf16_f32_xu", "matvec_bf16_f32_xt", "matvec_fused_bf16_f32", "matvec_fused_bf16_f32_sg", "matvec_fused_bf16_f32_xu", "matvec_fused_bf16_f32_xt"}, true
	case gguf.TypeQ4_0:
		return weightKernels{"get_rows_q4_0_f32", "matvec_q4_0_f32", "matvec_q4_0_f32_sg", "matmul_q4_0_f32", "matvec_q4_0_f32_xu", "matvec_q4_0_f32_xt", "matvec_fused_q4_0_f32", "matvec_fused_q4_0_f32_sg", "matvec_fused_q4_0_f32_xu", "matvec_fused_q4_0_f32_xt"}, true
	case gguf.TypeQ4_1:
		return weightKernels{"get_rows_q4_1_f32", "matvec_q4_1_f32", "matvec_q4_1_f32_sg", "matmul_q4_1_f32", "matvec_q4_1_f32_xu", "matvec_q4_1_f32_xt", "matvec_fused_q4_1_f32", "matvec_fused_q4_1_f32_sg", "matvec_fused_q4_1_f32_xu", "matvec_fused_q4_1_f32_xt"}, true
	case gguf.TypeQ5_0:
		return weightKernels{"get_rows_q5_0_f32", "matvec_q5_0_f32", "matvec_q5_0_f32_sg", "matmul_q5_0_f32", "matvec_q5_0_f32_xu", "matvec_q5_0_f32_xt", "matvec_fused_q5_0_f32", "matvec_fused_q5_0_f32_sg", "matvec_fused_q5_0_f32_xu", "matvec_fused_q5_0_f32_xt"}, true
	case gguf.TypeQ5_1:
		return weightKernels{"get_rows_q5_1_f32", "matvec_q5_1_f32", "matvec_q5_1_f32_sg", "matmul_q5_1_f32", "matvec_q5_1_f32_xu", "matvec_q5_1_f32_xt", "matvec_fused_q5_1_f32", "matvec_fused_q5_1_f32_sg", "matvec_fused_q5_1_f32_xu", "matvec_fused_q5_1_f32_xt"}, true
	case gguf.TypeQ8_0:
		return weightKernels{"get_rows_q8_0_f32", "matvec_q8_0_f32", "matvec_q8_0_f32_sg", "matmul_q8_0_f32", "matvec_q8_0_f32_xu", "matvec_q8_0_f32_xt", "matvec_fused_q8_0_f32", "matvec_fused_q8_0_f32_sg", "matvec_fused_q8_0_f32_xu", "matvec_fused_q8_0_f32_xt"}, true
	case gguf.TypeQ2_K:
		return weightKernels{"get_rows_q2_k_f32", "matvec_q2_k_f32", "matvec_q2_k_f32_sg", "matmul_q2_k_f32", "matvec_q2_k_f32_xu", "matvec_q2_k_f32_xt", "matvec_fused_q2_k_f32", "matvec_fused_q2_k_f32_sg", "matvec_fused_q2_k_f32_xu", "matvec_fused_q2_k_f32_xt"}, true
	case gguf.TypeQ3_K:
		return weightKernels{"get_rows_q3_k_f32", "matvec_q3_k_f32", "matvec_q3_k_f32_sg", "matmul_q3_k_f32", "matvec_q3_k_f32_xu", "matvec_q3_k_f32_xt", "matvec_fused_q3_k_f32", "matvec_fused_q3_k_f32_sg", "matvec_fused_q3_k_f32_xu", "matvec_fused_q3_k_f32_xt"}, true
	case gguf.TypeQ4_K:
		return weightKernels{"get_rows_q4_k_f32", "matvec_q4_k_f32", "matvec_q4_k_f32_sg", "matmul_q4_k_f32", "matvec_q4_k_f32_xu", "matvec_q4_k_f32_xt", "matvec_fused_q4_k_f32", "matvec_fused_q4_k_f32_sg", "matvec_fused_q4_k_f32_xu", "matvec_fused_q4_k_f32_xt"}, true
	case gguf.TypeQ5_K:
		return weightKernels{"get_rows_q5_k_f32", "matvec_q5_k_f32", "matvec_q5_k_f32_sg", "matmul_q5_k_f32", "matvec_q5_k_f32_xu", "matvec_q5_k_f32_xt", "matvec_fused_q5_k_f32", "matvec_fused_q5_k_f32_sg", "matvec_fused_q5_k_f32_xu", "matvec_fused_q5_k_f32_xt"}, true
	case gguf.TypeQ6_K:
		return weightKernels{"get_rows_q6_k_f32", "matvec_q6_k_f32", "matvec_q6_k_f32_sg", "matmul_q6_k_f32", "matvec_q6_k_f32_xu", "matvec_q6_k_f32_xt", "matvec_fused_q6_k_f32", "matvec_fused_q6_k_f32_sg", "matvec_fused_q6_k_f32_xu", "matvec_fused_q6_k_f32_xt"}, true
	case gguf.TypeIQ4_NL:
		return weightKernels{"get_rows_iq4_nl_f32", "matvec_iq4_nl_f32", "matvec_iq4_nl_f32_sg", "matmul_iq4_nl_f32", "matvec_iq4_nl_f32_xu", "matvec_iq4_nl_f32_xt", "matvec_fused_iq4_nl_f32", "matvec_fused_iq4_nl_f32_sg", "matvec_fused_iq4_nl_f32_xu", "matvec_fused_iq4_nl_f32_xt"}, true
	case gguf.TypeMXFP4:
		return weightKernels{"get_rows_mxfp4_f32", "matvec_mxfp4_f32", "matvec_mxfp4_f32_sg", "matmul_mxfp4_f32", "matvec_mxfp4_f32_xu", "matvec_mxfp4_f32_xt", "matvec_fused_mxfp4_f32", "matvec_fused_mxfp4_f32_sg", "matvec_fused_mxfp4_f32_xu", "matvec_fused_mxfp4_f32_xt"}, true
	case gguf.TypeIQ4_XS:
		return weightKernels{"get_rows_iq4_xs_f32", "matvec_iq4_xs_f32", "matvec_iq4_xs_f32_sg", "matmul_iq4_xs_f32", "matvec_iq4_xs_f32_xu", "matvec_iq4_xs_f32_xt", "matvec_fused_iq4_xs_f32", "matvec_fused_iq4_xs_f32_sg", "matvec_fused_iq4_xs_f32_xu", "matvec_fused_iq4_xs_f32_xt"}, true
	}
	return weightKernels{}, false
}

// matvecS16Kernels returns the float matvec variants that read the weight
// blocks through 16- and 8-bit storage views (quant.glsl's A_16BIT), plain
// and subgroup, or false for the types without them.
func matvecS16Kernels(t gguf.GGMLType) (plain, sg string, ok bool) {
	switch t {
	case gguf.TypeQ4_0:
		return "matvec_q4_0_f32_s16", "matvec_q4_0_f32_sg_s16", true
	case gguf.TypeQ8_0:
		return "matvec_q8_0_f32_s16", "matvec_q8_0_f32_sg_s16", true
	case gguf.TypeQ4_K:
		return "matvec_q4_k_f32_s16", "matvec_q4_k_f32_sg_s16", true
	case gguf.TypeQ5_K:
		return "matvec_q5_k_f32_s16", "matvec_q5_k_f32_sg_s16", true
	case gguf.TypeQ6_K:
		return "matvec_q6_k_f32_s16", "matvec_q6_k_f32_sg_s16", true
	}
	return "", "", false
}
