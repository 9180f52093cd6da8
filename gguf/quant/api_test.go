package quant

import (
	"math"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

// dequantTypes lists every type Dequantize supports.
var dequantTypes = []gguf.GGMLType{
	gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16,
	gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
	gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4,
}

func TestSupport(t *testing.T) {
	supported := map[gguf.GGMLType]bool{}
	for _, typ := range dequantTypes {
		supported[typ] = true
	}
	for id := 0; id < 48; id++ {
		typ := gguf.GGMLType(id)
		want := supported[typ]
		if got := CanDequantize(typ); got != want {
			t.Errorf("CanDequantize(%v) = %v, want %v", typ, got, want)
		}
		if got := CanQuantize(typ); got != want {
			t.Errorf("CanQuantize(%v) = %v, want %v", typ, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name  string
		typ   gguf.GGMLType
		src   int // bytes
		dst   int // elements
		wants []string
	}{
		{"unsupported quant", gguf.TypeIQ2_XXS, 66, 256, []string{"IQ2_XXS", "unsupported"}},
		{"unsupported Q8_1", gguf.TypeQ8_1, 36, 32, []string{"Q8_1", "unsupported"}},
		{"unsupported integer", gguf.TypeI32, 4, 1, []string{"I32", "unsupported"}},
		{"retired id", gguf.GGMLType(4), 18, 32, []string{"Q4_2", "unsupported"}},
		{"unknown id", gguf.GGMLType(1000), 4, 1, []string{"type(1000)", "unsupported"}},
		{"partial block", gguf.TypeQ4_0, 18, 31, []string{"Q4_0", "31", "32"}},
		{"partial super block", gguf.TypeQ4_K, 144, 255, []string{"Q4_K", "255", "256"}},
		{"short input", gguf.TypeQ4_K, 143, 256, []string{"Q4_K", "143", "256", "144"}},
		{"long input", gguf.TypeQ8_0, 35, 32, []string{"Q8_0", "35", "32", "34"}},
		{"f16 odd bytes", gguf.TypeF16, 7, 4, []string{"F16", "7", "8"}},
		{"f32 short", gguf.TypeF32, 12, 4, []string{"F32", "12", "16"}},
		{"empty input for one block", gguf.TypeIQ4_XS, 0, 256, []string{"IQ4_XS", "0", "136"}},
		{"MXFP4 partial block", gguf.TypeMXFP4, 17, 48, []string{"MXFP4", "48", "32"}},
		{"MXFP4 short input", gguf.TypeMXFP4, 33, 64, []string{"MXFP4", "33", "64", "34"}},
		{"MXFP4 long input", gguf.TypeMXFP4, 18, 32, []string{"MXFP4", "18", "32", "17"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Dequantize(tt.typ, make([]byte, tt.src), make([]float32, tt.dst))
			if err == nil {
				t.Fatalf("Dequantize(%v, %d bytes, %d elements) = nil, want an error", tt.typ, tt.src, tt.dst)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Dequantize(%v, %d bytes, %d elements) = %q, want it to mention %q", tt.typ, tt.src, tt.dst, err, w)
				}
			}
		})
	}
	quantTests := []struct {
		name  string
		typ   gguf.GGMLType
		n     int
		wants []string
	}{
		{"unsupported", gguf.TypeIQ3_S, 256, []string{"IQ3_S", "unsupported"}},
		{"partial block", gguf.TypeQ5_1, 33, []string{"Q5_1", "33", "32"}},
		{"MXFP4 partial block", gguf.TypeMXFP4, 40, []string{"MXFP4", "40", "32"}},
		{"partial super block", gguf.TypeQ6_K, 512 + 32, []string{"Q6_K", "544", "256"}},
	}
	for _, tt := range quantTests {
		t.Run("Quantize "+tt.name, func(t *testing.T) {
			q, err := Quantize(tt.typ, make([]float32, tt.n))
			if err == nil {
				t.Fatalf("Quantize(%v, %d elements) = %d bytes, nil, want an error", tt.typ, tt.n, len(q))
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Quantize(%v, %d elements) = %q, want it to mention %q", tt.typ, tt.n, err, w)
				}
			}
		})
	}
}

func TestQuantizeTo(t *testing.T) {
	x := gaussian(512, 5)
	for _, typ := range dequantTypes {
		want, err := Quantize(typ, x)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		allocs := testing.AllocsPerRun(5, func() {
			if err := QuantizeTo(typ, got, x); err != nil {
				t.Fatalf("QuantizeTo(%v, %d bytes, %d elements) = %v", typ, len(got), len(x), err)
			}
		})
		if string(got) != string(want) {
			t.Errorf("QuantizeTo(%v) differs from Quantize(%v)", typ, typ)
		}
		if allocs != 0 {
			t.Errorf("QuantizeTo(%v) allocates %v times per call, want 0", typ, allocs)
		}
		if err := QuantizeTo(typ, got[:len(got)-1], x); err == nil || !strings.Contains(err.Error(), typ.String()) {
			t.Errorf("QuantizeTo(%v, %d bytes, %d elements) = %v, want an error naming the type", typ, len(got)-1, len(x), err)
		}
	}
}

// TestEmpty checks that zero elements are fine for every type.
func TestEmpty(t *testing.T) {
	for _, typ := range dequantTypes {
		if err := Dequantize(typ, nil, nil); err != nil {
			t.Errorf("Dequantize(%v, nil, nil) = %v, want nil", typ, err)
		}
		if q, err := Quantize(typ, nil); err != nil || len(q) != 0 {
			t.Errorf("Quantize(%v, nil) = %d bytes, %v, want 0 bytes, nil", typ, len(q), err)
		}
	}
}

// TestDequantizeAllocs checks Dequantize allocates nothing.
func TestDequantizeAllocs(t *testing.T) {
	for _, typ := range dequantTypes {
		n := 1024
		src := make([]byte, n/typ.BlockSize()*typ.TypeSize())
		dst := make([]float32, n)
		allocs := testing.AllocsPerRun(10, func() {
			if err := Dequantize(typ, src, dst); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("Dequantize(%v) allocates %v times per call, want 0", typ, allocs)
		}
	}
}

// TestQuantizeNonFinite checks that NaN and infinite inputs do not panic
// and that the finite blocks around them are unaffected.
func TestQuantizeNonFinite(t *testing.T) {
	x := gaussian(3*256, 3)
	x[256+5] = float32(math.NaN())
	x[256+77] = float32(math.Inf(1))
	x[256+200] = float32(math.Inf(-1))
	for _, typ := range dequantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			q, err := Quantize(typ, x)
			if err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(x))
			if err := Dequantize(typ, q, y); err != nil {
				t.Fatal(err)
			}
			// The first and last super blocks hold only finite values.
			for _, r := range [][2]int{{0, 256}, {512, 768}} {
				want, _ := roundTrip(t, typ, x[r[0]:r[1]])
				got := q[r[0]/typ.BlockSize()*typ.TypeSize() : r[1]/typ.BlockSize()*typ.TypeSize()]
				if string(got) != string(want) {
					t.Errorf("Quantize(%v) of finite elements [%d,%d) changed by non-finite neighbours", typ, r[0], r[1])
				}
			}
		})
	}
}

// FuzzDequantize decodes arbitrary bytes as every supported type; it must
// never panic (NaN and infinite outputs are fine).
func FuzzDequantize(f *testing.F) {
	f.Add([]byte{0xff, 0x7c, 1, 2, 3})
	f.Add(make([]byte, 300))
	seed := make([]byte, 420)
	for i := range seed {
		seed[i] = byte(i * 37)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range dequantTypes {
			bs, ts := typ.BlockSize(), typ.TypeSize()
			n := len(data) / ts
			dst := make([]float32, n*bs)
			if err := Dequantize(typ, data[:n*ts], dst); err != nil {
				t.Fatalf("Dequantize(%v, %d bytes, %d elements) = %v", typ, n*ts, len(dst), err)
			}
			// Sizes that do not match must fail, not panic.
			if len(data) != n*ts {
				if err := Dequantize(typ, data, dst); err == nil {
					t.Fatalf("Dequantize(%v, %d bytes, %d elements) = nil, want a size error", typ, len(data), len(dst))
				}
			}
		}
	})
}

// FuzzQuantize encodes arbitrary float32 bit patterns (NaN, infinities,
// subnormals) as every type; it must never panic.
func FuzzQuantize(f *testing.F) {
	f.Add([]byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x7f, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		x := make([]float32, 256)
		for i := 0; i+4 <= len(data) && i/4 < len(x); i += 4 {
			x[i/4] = math.Float32frombits(uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24)
		}
		for _, typ := range dequantTypes {
			q, err := Quantize(typ, x)
			if err != nil {
				t.Fatalf("Quantize(%v) = %v", typ, err)
			}
			if err := Dequantize(typ, q, make([]float32, len(x))); err != nil {
				t.Fatalf("Dequantize(%v) = %v", typ, err)
			}
		}
	})
}
