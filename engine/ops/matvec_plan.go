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
	if rows <= 0 || rowBytes == 0 {
		return nil, fmt.Errorf("ops: weight of %d rows of %d bytes is empty", rows, rowBytes)
	}
	if align == 0 || align%4 != 0 && 4%align != 0 {
		return nil, fmt.Errorf("ops: storage buffer offset alignment %d is unusable", align)
	}
	end := offset + uint64(rows)*rowBytes
	if end < offset || roundUp4(end) > bufSize {
		return nil, fmt.Errorf("ops: weight bytes [%d, %d) (padded to a word) exceed the %d-byte buffer", offset, end, bufSize)
	}
	var chunks []rowChunk
	for r := 0; r < rows; {
		start := offset + uint64(r)*rowBytes
		bind := start - start%align
		bind -= bind % 4
		lead := start - bind
		if maxRange < lead+rowBytes+4 {
			return nil, fmt.Errorf("ops: a %d-byte weight row does not fit a %d-byte storage binding", rowBytes, maxRange)
		}
		n := int((maxRange - lead - 3) / rowBytes)
		n = min(n, rows-r)
		rng := roundUp4(lead + uint64(n)*rowBytes)
		if lead > 1<<32-1 || rng > 1<<32-1 {
			return nil, fmt.Errorf("BUG: ops: binding of %d bytes exceeds 32-bit addressing", rng)
		}
		chunks = append(chunks, rowChunk{rowBegin: r, rowEnd: r + n, bindOffset: bind, bindRange: rng, wOff: uint32(lead)})
		r += n
	}
	return chunks, nil
}

func roundUp4(n uint64) uint64 { return (n + 3) &^ 3 }

// weightRowBytes returns the bytes of one row of cols elements of t, and
// fails for types the kernels do not support.
func weightRowBytes(t gguf.GGMLType, cols int) (uint64, error) {
	if _, ok := kernelTypeName(t); !ok {
		return 0, fmt.Errorf("ops: no get_rows/matvec/matmul kernels for weight type %v", t)
	}
	if cols <= 0 {
		return 0, fmt.Errorf("ops: %v weight rows of %d elements", t, cols)
	}
	return t.RowSize(uint64(cols))
}

// kernelTypeName returns the name used for t in pipeline variant names
// (matvec_<name>_f32).
func kernelTypeName(t gguf.GGMLType) (string, bool) {
	switch t {
	case gguf.TypeF32:
		return "f32", true
	case gguf.TypeF16:
		return "f16", true
	case gguf.TypeBF16:
		return "bf16", true
	case gguf.TypeQ4_0:
		return "q4_0", true
	case gguf.TypeQ4_1:
		return "q4_1", true
	case gguf.TypeQ5_0:
		return "q5_0", true
	case gguf.TypeQ5_1:
		return "q5_1", true
	case gguf.TypeQ8_0:
		return "q8_0", true
	case gguf.TypeQ2_K:
		return "q2_k", true
	case gguf.TypeQ3_K:
		return "q3_k", true
	case gguf.TypeQ4_K:
		return "q4_k", true
	case gguf.TypeQ5_K:
		return "q5_k", true
	case gguf.TypeQ6_K:
		return "q6_k", true
	case gguf.TypeIQ4_NL:
		return "iq4_nl", true
	case gguf.TypeIQ4_XS:
		return "iq4_xs", true
	}
	return "", false
}
