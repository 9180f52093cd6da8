package quant

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
)

// openGGUF opens path and closes it at the end of the test.
func openGGUF(t testing.TB, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("gguf.Open(%s): %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// tensorBytes returns the info and raw data of the named tensor.
func tensorBytes(t testing.TB, f *gguf.File, name string) (*gguf.TensorInfo, []byte) {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("tensor %q missing", name)
	}
	data, err := f.TensorData(ti)
	if err != nil {
		t.Fatalf("TensorData(%q): %v", name, err)
	}
	return ti, data
}

// f32Tensor decodes the named F32 tensor.
func f32Tensor(t testing.TB, f *gguf.File, name string) []float32 {
	t.Helper()
	ti, data := tensorBytes(t, f, name)
	if ti.Type != gguf.TypeF32 {
		t.Fatalf("tensor %q has type %v, want F32", name, ti.Type)
	}
	out := make([]float32, ti.NumElements())
	if err := Dequantize(gguf.TypeF32, data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// fixtureTypes lists the formats that have expected-<type>.gguf files.
func fixtureTypes(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "expected-*.gguf"))
	if err != nil || len(paths) == 0 {
		t.Skipf("no expected-*.gguf files in %s", dir)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "expected-"), ".gguf"))
	}
	return names
}

// TestDequantizeMatchesReference decodes the reference-quantized tensors of
// every quant-<type>.gguf fixture and compares them bit for bit with the
// reference's own dequantization in expected-<type>.gguf.
func TestDequantizeMatchesReference(t *testing.T) {
	dir := fixtures.Dir(t, "quant")
	for _, name := range fixtureTypes(t, dir) {
		t.Run(name, func(t *testing.T) {
			exp := openGGUF(t, filepath.Join(dir, "expected-"+name+".gguf"))
			src := openGGUF(t, filepath.Join(dir, "quant-"+name+".gguf"))
			if len(exp.Tensors) == 0 {
				t.Fatal("expected file has no tensors")
			}
			compared := 0
			for _, et := range exp.Tensors {
				want := f32Tensor(t, exp, et.Name)
				compared += len(want)
				qi, qdata := tensorBytes(t, src, et.Name)
				if !strings.EqualFold(qi.Type.String(), name) {
					t.Errorf("tensor %q has type %v, want %s", et.Name, qi.Type, name)
				}
				// The expected tensor may be the first rows only.
				rowSize, err := qi.Type.RowSize(qi.Dims[0])
				if err != nil {
					t.Fatal(err)
				}
				rows := uint64(len(want)) / qi.Dims[0]
				if et.Dims[0] != qi.Dims[0] || rows*rowSize > uint64(len(qdata)) {
					t.Fatalf("tensor %q: expected dims %v do not fit quantized dims %v", et.Name, et.Dims, qi.Dims)
				}
				got := make([]float32, len(want))
				if err := Dequantize(qi.Type, qdata[:rows*rowSize], got); err != nil {
					t.Fatalf("Dequantize(%v, %q) = %v", qi.Type, et.Name, err)
				}
				mismatches, first := 0, -1
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						if first < 0 {
							first = i
						}
						mismatches++
					}
				}
				if mismatches > 0 {
					t.Errorf("Dequantize(%v, %q): %d of %d elements differ; first [%d] = %v (%#08x), want %v (%#08x)",
						qi.Type, et.Name, mismatches, len(want), first, got[first], math.Float32bits(got[first]), want[first], math.Float32bits(want[first]))
				}
			}
			t.Logf("%s: compared %d elements of %d tensors bit for bit", name, compared, len(exp.Tensors))
		})
	}
}
