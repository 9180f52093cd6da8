package gguf

import (
	"fmt"
	"math/bits"
)

// GGMLType is a tensor element type id as stored in GGUF tensor infos.
type GGMLType uint32

// Tensor type ids, as numbered by ggml. Ids that ggml retired (4, 5, 31-33,
// 36-38) are kept in the table as unsupported so that a file using them is
// named in the error rather than mis-read.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
)

// TypeInfo describes the block layout of a tensor type: BlockSize elements
// are stored in TypeSize bytes.
type TypeInfo struct {
	Name      string
	BlockSize int
	TypeSize  int
}

// typeTable is indexed by GGMLType. A zero BlockSize marks an id that ggml
// retired; such ids still carry a name for error messages.
var typeTable = [...]TypeInfo{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 18},
	TypeQ4_1:    {"Q4_1", 32, 20},
	4:           {"Q4_2 (removed)", 0, 0},
	5:           {"Q4_3 (removed)", 0, 0},
	TypeQ5_0:    {"Q5_0", 32, 22},
	TypeQ5_1:    {"Q5_1", 32, 24},
	TypeQ8_0:    {"Q8_0", 32, 34},
	TypeQ8_1:    {"Q8_1", 32, 36},
	TypeQ2_K:    {"Q2_K", 256, 84},
	TypeQ3_K:    {"Q3_K", 256, 110},
	TypeQ4_K:    {"Q4_K", 256, 144},
	TypeQ5_K:    {"Q5_K", 256, 176},
	TypeQ6_K:    {"Q6_K", 256, 210},
	TypeQ8_K:    {"Q8_K", 256, 292},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66},
	TypeIQ2_XS:  {"IQ2_XS", 256, 74},
	TypeIQ3_XXS: {"IQ3_XXS", 256, 98},
	TypeIQ1_S:   {"IQ1_S", 256, 50},
	TypeIQ4_NL:  {"IQ4_NL", 32, 18},
	TypeIQ3_S:   {"IQ3_S", 256, 110},
	TypeIQ2_S:   {"IQ2_S", 256, 82},
	TypeIQ4_XS:  {"IQ4_XS", 256, 136},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", 256, 56},
	TypeBF16:    {"BF16", 1, 2},
	31:          {"Q4_0_4_4 (removed)", 0, 0},
	32:          {"Q4_0_4_8 (removed)", 0, 0},
	33:          {"Q4_0_8_8 (removed)", 0, 0},
	TypeTQ1_0:   {"TQ1_0", 256, 54},
	TypeTQ2_0:   {"TQ2_0", 256, 66},
	36:          {"IQ4_NL_4_4 (removed)", 0, 0},
	37:          {"IQ4_NL_4_8 (removed)", 0, 0},
	38:          {"IQ4_NL_8_8 (removed)", 0, 0},
	TypeMXFP4:   {"MXFP4", 32, 17},
}

// Info returns the block layout of t. ok is false for ids that ggml never
// defined or retired.
func (t GGMLType) Info() (info TypeInfo, ok bool) {
	if int(t) >= len(typeTable) {
		return TypeInfo{}, false
	}
	info = typeTable[t]
	return info, info.BlockSize > 0
}

// String returns ggml's name for t, or "type(N)" for an unknown id.
func (t GGMLType) String() string {
	if int(t) < len(typeTable) && typeTable[t].Name != "" {
		return typeTable[t].Name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the number of elements in one block of t (0 if unknown).
func (t GGMLType) BlockSize() int {
	info, _ := t.Info()
	return info.BlockSize
}

// TypeSize returns the number of bytes in one block of t (0 if unknown).
func (t GGMLType) TypeSize() int {
	info, _ := t.Info()
	return info.TypeSize
}

// RowSize returns the number of bytes that n elements of type t occupy.
// It fails when t is unknown, n is not a multiple of the block size, or the
// size overflows.
func (t GGMLType) RowSize(n uint64) (uint64, error) {
	info, ok := t.Info()
	if !ok {
		return 0, fmt.Errorf("gguf: unsupported tensor type %v", t)
	}
	if n%uint64(info.BlockSize) != 0 {
		return 0, fmt.Errorf("gguf: %d elements of type %v is not a whole number of %d-element blocks", n, t, info.BlockSize)
	}
	hi, lo := bits.Mul64(n/uint64(info.BlockSize), uint64(info.TypeSize))
	if hi != 0 || lo > 1<<62 {
		return 0, fmt.Errorf("gguf: %d elements of type %v overflow the size", n, t)
	}
	return lo, nil
}

// IsQuantized reports whether t packs elements in blocks of more than one.
func (t GGMLType) IsQuantized() bool { return t.BlockSize() > 1 }
