package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/fixtures"
)

// sampleFile builds a small file with every metadata type and two tensors.
func sampleFile(t testing.TB) []byte {
	t.Helper()
	w := NewWriter()
	w.MustSet("general.architecture", "llama")
	w.MustSet("u8", uint8(200))
	w.MustSet("i8", int8(-7))
	w.MustSet("u16", uint16(65000))
	w.MustSet("i16", int16(-30000))
	w.MustSet("u32", uint32(4000000000))
	w.MustSet("i32", int32(-2000000000))
	w.MustSet("f32", float32(1.5))
	w.MustSet("bool", true)
	w.MustSet("str", "héllo")
	w.MustSet("u64", uint64(1<<63+5))
	w.MustSet("i64", int64(-1<<62))
	w.MustSet("f64", math.Pi)
	w.MustSet("strs", []string{"a", "", "ccc"})
	w.MustSet("f32s", []float32{1, -2, 3.25})
	w.MustSet("i32s", []int32{-1, 2, 3})
	w.MustSet("u8s", []uint8{1, 2})
	w.MustSet("bools", []bool{true, false})
	w.MustSet("nested", []Array{{Type: ValueInt16, Values: []int16{1, -2}}, {Type: ValueString, Values: []string{"x"}}})
	f32 := make([]byte, 4*6)
	for i := range 6 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)+0.5))
	}
	if err := w.AddTensor("a", TypeF32, []uint64{3, 2}, f32); err != nil {
		t.Fatal(err)
	}
	q := bytes.Repeat([]byte{7}, 2*34)
	if err := w.AddTensor("b.weight", TypeQ8_0, []uint64{64}, q); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func checkSample(t *testing.T, f *File) {
	t.Helper()
	wantKV := map[string]any{
		"u8": uint8(200), "i8": int8(-7), "u16": uint16(65000), "i16": int16(-30000),
		"u32": uint32(4000000000), "i32": int32(-2000000000), "f32": float32(1.5), "bool": true,
		"str": "héllo", "u64": uint64(1<<63 + 5), "i64": int64(-1 << 62), "f64": math.Pi,
	}
	for k, want := range wantKV {
		kv, ok := f.Get(k)
		if !ok || !reflect.DeepEqual(kv.Value, want) {
			t.Errorf("Get(%q) = %#v, want %#v", k, kv.Value, want)
		}
	}
	if s, err := f.Strings("strs"); err != nil || !reflect.DeepEqual(s, []string{"a", "", "ccc"}) {
		t.Errorf("Strings(strs) = %q, %v", s, err)
	}
	if v, err := f.Float32s("f32s"); err != nil || !reflect.DeepEqual(v, []float32{1, -2, 3.25}) {
		t.Errorf("Float32s(f32s) = %v, %v", v, err)
	}
	if v, err := f.Int32s("u8s"); err != nil || !reflect.DeepEqual(v, []int32{1, 2}) {
		t.Errorf("Int32s(u8s) = %v, %v", v, err)
	}
	nested, err := f.Array("nested")
	if err != nil || nested.Len() != 2 || !reflect.DeepEqual(nested.Values.([]Array)[0].Values, []int16{1, -2}) {
		t.Errorf("Array(nested) = %#v, %v", nested, err)
	}
	if v, err := f.Int("u32"); err != nil || v != 4000000000 {
		t.Errorf("Int(u32) = %d, %v", v, err)
	}
	if _, err := f.Int("u64"); err == nil {
		t.Error("Int(u64) over int64 succeeded")
	}
	if v, err := f.Float("f32"); err != nil || v != 1.5 {
		t.Errorf("Float(f32) = %v, %v", v, err)
	}
	_, err = f.String("u32")
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Have != "uint32" || ke.Want != "string" || !strings.Contains(err.Error(), `"u32"`) {
		t.Errorf("String(u32) error = %v, want a KeyError naming the key and both types", err)
	}
	if _, err := f.String("missing"); !errors.Is(err, ErrKeyNotFound) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("String(missing) error = %v, want ErrKeyNotFound naming the key", err)
	}
	a, ok := f.Tensor("a")
	if !ok || !reflect.DeepEqual(a.Dims, []uint64{3, 2}) || a.Type != TypeF32 || a.Size != 24 || a.NumElements() != 6 {
		t.Fatalf("Tensor(a) = %+v", a)
	}
	data, err := f.TensorData(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(data[20:])); got != 5.5 {
		t.Errorf("tensor a[5] = %v, want 5.5", got)
	}
	b, _ := f.Tensor("b.weight")
	if b.Offset%f.Alignment != 0 || b.Size != 68 {
		t.Errorf("tensor b = %+v, want aligned offset and 68 bytes", b)
	}
	if (f.DataOffset)%int64(f.Alignment) != 0 {
		t.Errorf("DataOffset %d not aligned", f.DataOffset)
	}
}

func TestRoundTrip(t *testing.T) {
	raw := sampleFile(t)
	t.Run("NewFile", func(t *testing.T) {
		f, err := NewFile(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		checkSample(t, f)
	})
	t.Run("Open", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.gguf")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		checkSample(t, f)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAlignment(t *testing.T) {
	w := NewWriter()
	w.Alignment = 64
	w.MustSet("x", uint32(1))
	if err := w.AddTensor("t", TypeF16, []uint64{5}, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("u", TypeF16, []uint64{3}, make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := NewFile(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 {
		t.Errorf("alignment %d, data offset %d, second tensor offset %d; want 64, multiple of 64, 64", f.Alignment, f.DataOffset, f.Tensors[1].Offset)
	}
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter()
	if err := w.Set("k", struct{}{}); err == nil {
		t.Error("Set(struct{}) succeeded")
	}
	if err := w.AddTensor("q", TypeQ4_0, []uint64{33}, make([]byte, 18)); err == nil {
		t.Error("AddTensor with a partial Q4_0 block succeeded")
	}
	if err := w.AddTensor("f", TypeF32, []uint64{2}, make([]byte, 4)); err == nil {
		t.Error("AddTensor with short data succeeded")
	}
	if err := w.AddTensor("x", GGMLType(4), []uint64{32}, make([]byte, 18)); err == nil || !strings.Contains(err.Error(), "Q4_2") {
		t.Errorf("AddTensor with a retired type: %v, want an error naming Q4_2", err)
	}
}

func header(version uint32, nTensors, nKV uint64) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nTensors)
	return binary.LittleEndian.AppendUint64(b, nKV)
}

func TestMalformed(t *testing.T) {
	kvHeader := func(key string, typ uint32) []byte {
		b := header(3, 0, 1)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
		b = append(b, key...)
		return binary.LittleEndian.AppendUint32(b, typ)
	}
	hugeString := binary.LittleEndian.AppendUint64(kvHeader("k", uint32(ValueString)), 1<<60)
	hugeArray := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(kvHeader("k", uint32(ValueArray)), uint32(ValueUint32)), 1<<40)
	tensorWith := func(nDims uint32, dims []uint64, typ uint32, off uint64) []byte {
		b := header(3, 1, 0)
		b = binary.LittleEndian.AppendUint64(b, 1)
		b = append(b, 't')
		b = binary.LittleEndian.AppendUint32(b, nDims)
		for _, d := range dims {
			b = binary.LittleEndian.AppendUint64(b, d)
		}
		b = binary.LittleEndian.AppendUint32(b, typ)
		b = binary.LittleEndian.AppendUint64(b, off)
		return append(b, make([]byte, 64)...)
	}
	bigEndian := []byte(Magic)
	bigEndian = binary.BigEndian.AppendUint32(bigEndian, 3)
	bigEndian = append(bigEndian, make([]byte, 16)...)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), "bad magic"},
		{"big-endian", bigEndian, "big-endian"},
		{"version 1", header(1, 0, 0), "version 1"},
		{"version 9", header(9, 0, 0), "unsupported GGUF version"},
		{"huge tensor count", header(3, 1<<40, 0), "tensor count"},
		{"huge kv count", header(3, 0, 1<<50), "metadata count"},
		{"huge string", hugeString, "past the end"},
		{"huge array", hugeArray, "array length"},
		{"unknown value type", append(kvHeader("k", 13), 0, 0, 0, 0), "unknown value type"},
		{"bad bool", append(kvHeader("k", uint32(ValueBool)), 2), "bool"},
		{"zero dims", tensorWith(0, nil, 0, 0), "number of dimensions"},
		{"five dims", tensorWith(5, []uint64{1, 1, 1, 1, 1}, 0, 0), "number of dimensions"},
		{"dims overflow", tensorWith(2, []uint64{1 << 40, 1 << 40}, 0, 0), "overflows"},
		{"retired type", tensorWith(1, []uint64{32}, 4, 0), "Q4_2"},
		{"unknown type", tensorWith(1, []uint64{32}, 99, 0), "type(99)"},
		{"partial block", tensorWith(1, []uint64{16}, uint32(TypeQ4_0), 0), "block size"},
		{"misaligned", tensorWith(1, []uint64{1}, 0, 3), "alignment"},
		{"data past end", tensorWith(1, []uint64{1000}, 0, 0), "past the end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewFile(bytes.NewReader(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewFile = %v, want error containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "offset") {
				t.Errorf("error %q does not give the offset", err)
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	raw := sampleFile(t)
	f, err := NewFile(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	last := f.Tensors[len(f.Tensors)-1]
	end := int(f.DataOffset) + int(last.Offset+last.Size)
	// Every cut before the end of the last tensor's data must fail; a cut
	// in the padding after it may parse.
	for n := range end {
		if _, err := NewFile(bytes.NewReader(raw[:n])); err == nil {
			t.Fatalf("NewFile(first %d of %d bytes) succeeded", n, len(raw))
		}
	}
	if _, err := NewFile(bytes.NewReader(raw[:end])); err != nil {
		t.Errorf("NewFile(up to the end of the last tensor) = %v", err)
	}
}

func TestDuplicates(t *testing.T) {
	b := header(3, 0, 2)
	for range 2 {
		b = binary.LittleEndian.AppendUint64(b, 1)
		b = append(b, 'k')
		b = binary.LittleEndian.AppendUint32(b, uint32(ValueUint8))
		b = append(b, 1)
	}
	if _, err := NewFile(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "duplicate metadata key") {
		t.Errorf("duplicate key: %v", err)
	}
}

func TestFixtureFiles(t *testing.T) {
	dir := fixtures.Dir(t, "")
	paths, _ := filepath.Glob(filepath.Join(dir, "*", "*.gguf"))
	if len(paths) == 0 {
		t.Fatalf("no .gguf files under %s", dir)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.KV) == 0 {
				t.Error("no metadata")
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				data, err := f.TensorData(ti)
				if err != nil || uint64(len(data)) != ti.Size {
					t.Fatalf("TensorData(%s) = %d bytes, %v", ti.Name, len(data), err)
				}
			}
			// The writer reproduces a file the reader accepts with the
			// same metadata and tensors.
			w := NewWriter()
			for _, kv := range f.KV {
				if kv.Key == "general.alignment" {
					w.Alignment = uint64(kv.Value.(uint32))
				}
				if err := w.Set(kv.Key, kv.Value); err != nil {
					t.Fatal(err)
				}
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				data, _ := f.TensorData(ti)
				if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
					t.Fatal(err)
				}
			}
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			g, err := NewFile(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.KV, g.KV) {
				t.Error("metadata differs after rewrite")
			}
			for i := range f.Tensors {
				a, b := f.Tensors[i], g.Tensors[i]
				da, _ := f.TensorData(&a)
				db, _ := g.TensorData(&b)
				if a.Name != b.Name || a.Type != b.Type || !reflect.DeepEqual(a.Dims, b.Dims) || !bytes.Equal(da, db) {
					t.Fatalf("tensor %d differs after rewrite: %+v vs %+v", i, a, b)
				}
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	f.Add(sampleFile(f))
	f.Add(header(3, 0, 0))
	f.Add(header(2, 1, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := NewFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := range file.Tensors {
			if _, err := file.TensorData(&file.Tensors[i]); err != nil {
				t.Fatalf("TensorData of a parsed file: %v", err)
			}
		}
		for _, kv := range file.KV {
			_, _ = file.String(kv.Key)
			_, _ = file.Int32s(kv.Key)
		}
	})
}
