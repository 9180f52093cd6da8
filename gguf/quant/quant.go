// Package quant converts tensor data between ggml's weight formats and
// float32 on the CPU.
//
// Dequantize reproduces llama.cpp's dequantize_row_* bit for bit: every
// block is decoded with the same float32 operations in the same order, with
// explicit float32 conversions wherever the reference rounds, so that no
// multiply-add is fused on architectures where Go would fuse one (arm64,
// s390x, riscv64, loong64). Quantize reproduces llama.cpp's reference
// quantizers (quantize_row_*_ref, MXFP4's among them, and
// quantize_iq4_nl/quantize_iq4_xs without an importance matrix) byte for
// byte, which is what llama-quantize writes when it is given no imatrix.
//
// Both functions are safe for concurrent use and keep no state; Dequantize
// and QuantizeTo allocate nothing.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vkllm/vkllm/gguf"
)

// codec holds the block decoder and encoder of one type. dequant decodes
// whole blocks: len(src) == nblocks*TypeSize, len(dst) == nblocks*BlockSize.
// quant encodes whole blocks into dst of the matching size.
type codec struct {
	dequant func(src []byte, dst []float32)
	quant   func(src []float32, dst []byte)
}

// codecFor returns the codec of t; either function may be nil.
func codecFor(t gguf.GGMLType) codec {
	switch t {
	case gguf.TypeF32:
		return codec{dequantF32, quantF32}
	case gguf.TypeF16:
		return codec{dequantF16, quantF16}
	case gguf.TypeBF16:
		return codec{dequantBF16, quantBF16}
	}
	return codecForQuant(t)
}

// CanDequantize reports whether Dequantize supports t.
func CanDequantize(t gguf.GGMLType) bool { return codecFor(t).dequant != nil }

// CanQuantize reports whether Quantize supports t.
func CanQuantize(t gguf.GGMLType) bool { return codecFor(t).quant != nil }

// Dequantize decodes len(dst) elements of type t from src. len(dst) must be
// a multiple of t's block size and len(src) exactly the size of len(dst)
// elements of type t. Non-finite values in src (NaN or infinite scales)
// decode to whatever the reference arithmetic gives; Dequantize never fails
// on the contents of src, only on its size.
func Dequantize(t gguf.GGMLType, src []byte, dst []float32) error {
	c := codecFor(t)
	if c.dequant == nil {
		return fmt.Errorf("quant: dequantize %v: unsupported type", t)
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if len(dst)%bs != 0 {
		return fmt.Errorf("quant: dequantize %v: %d elements is not a multiple of the block size %d", t, len(dst), bs)
	}
	if want := len(dst) / bs * ts; len(src) != want {
		return fmt.Errorf("quant: dequantize %v: %d bytes of input for %d elements, want %d", t, len(src), len(dst), want)
	}
	c.dequant(src, dst)
	return nil
}

// Quantize encodes src as type t and returns the new encoded bytes. len(src)
// must be a multiple of t's block size.
func Quantize(t gguf.GGMLType, src []float32) ([]byte, error) {
	size, err := encodedSize(t, len(src))
	if err != nil {
		return nil, err
	}
	dst := make([]byte, size)
	codecFor(t).quant(src, dst)
	return dst, nil
}

// QuantizeTo encodes src as type t into dst, which must be exactly the
// encoded size (len(src)/BlockSize*TypeSize bytes).
func QuantizeTo(t gguf.GGMLType, dst []byte, src []float32) error {
	size, err := encodedSize(t, len(src))
	if err != nil {
		return err
	}
	if len(dst) != size {
		return fmt.Errorf("quant: quantize %v: %d bytes of output for %d elements, want %d", t, len(dst), len(src), size)
	}
	codecFor(t).quant(src, dst)
	return nil
}

// encodedSize checks that t can be quantized and n is whole blocks, and
// returns the encoded size.
func encodedSize(t gguf.GGMLType, n int) (int, error) {
	if codecFor(t).quant == nil {
		return 0, fmt.Errorf("quant: quantize %v: unsupported type", t)
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if n%bs != 0 {
		return 0, fmt.Errorf("quant: quantize %v: %d elements is not a multiple of the block size %d", t, n, bs)
	}
	return n / bs * ts, nil
}

func dequantF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func quantF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		h := uint16(src[2*i]) | uint16(src[2*i+1])<<8
		// FP16ToFP32 with its normal-number path written out, as it is
		// too big for the compiler to inline.
		if e := h & 0x7c00; e != 0 && e != 0x7c00 {
			dst[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + (127-15)<<23))
		} else {
			dst[i] = fp16SpecialToFP32(h)
		}
	}
}

func quantF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FP32ToFP16(v))
	}
}

func dequantBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = BF16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func quantBF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FP32ToBF16(v))
	}
}
