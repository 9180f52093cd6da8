package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// Writer builds a GGUF v3 file: metadata pairs in the order they were first
// set, then tensor infos and aligned tensor data in the order they were added.
// The zero value is not usable; call NewWriter.
type Writer struct {
	// Alignment of tensor data; a value other than DefaultAlignment is also
	// written as general.alignment.
	Alignment uint64

	kv      []KV
	index   map[string]int
	tensors []writerTensor
	names   map[string]bool
}

type writerTensor struct {
	info TensorInfo
	data []byte
}

// NewWriter returns an empty writer with the default alignment.
func NewWriter() *Writer {
	return &Writer{Alignment: DefaultAlignment, index: map[string]int{}, names: map[string]bool{}}
}

// Set stores value under key, replacing an earlier value of the key in place.
// The value's Go type chooses the GGUF type: uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64, float64, a slice of
// one of those, or an Array (for nested arrays).
func (w *Writer) Set(key string, value any) error {
	t, v, err := valueOf(value)
	if err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	kv := KV{Key: key, Type: t, Value: v}
	if i, ok := w.index[key]; ok {
		w.kv[i] = kv
		return nil
	}
	w.index[key] = len(w.kv)
	w.kv = append(w.kv, kv)
	return nil
}

// MustSet is Set for values known to be valid (literals in generators and
// tests); an unsupported Go type is a bug and panics.
func (w *Writer) MustSet(key string, value any) {
	if err := w.Set(key, value); err != nil {
		panic("BUG: " + err.Error())
	}
}

func valueOf(value any) (ValueType, any, error) {
	switch v := value.(type) {
	case uint8:
		return ValueUint8, v, nil
	case int8:
		return ValueInt8, v, nil
	case uint16:
		return ValueUint16, v, nil
	case int16:
		return ValueInt16, v, nil
	case uint32:
		return ValueUint32, v, nil
	case int32:
		return ValueInt32, v, nil
	case float32:
		return ValueFloat32, v, nil
	case bool:
		return ValueBool, v, nil
	case string:
		return ValueString, v, nil
	case uint64:
		return ValueUint64, v, nil
	case int64:
		return ValueInt64, v, nil
	case float64:
		return ValueFloat64, v, nil
	case Array:
		if err := checkArray(v); err != nil {
			return 0, nil, err
		}
		return ValueArray, v, nil
	}
	et, ok := sliceElemType(value)
	if !ok {
		return 0, nil, fmt.Errorf("unsupported Go type %T", value)
	}
	a := Array{Type: et, Values: value}
	if err := checkArray(a); err != nil {
		return 0, nil, err
	}
	return ValueArray, a, nil
}

func sliceElemType(value any) (ValueType, bool) {
	switch value.(type) {
	case []uint8:
		return ValueUint8, true
	case []int8:
		return ValueInt8, true
	case []uint16:
		return ValueUint16, true
	case []int16:
		return ValueInt16, true
	case []uint32:
		return ValueUint32, true
	case []int32:
		return ValueInt32, true
	case []float32:
		return ValueFloat32, true
	case []bool:
		return ValueBool, true
	case []string:
		return ValueString, true
	case []uint64:
		return ValueUint64, true
	case []int64:
		return ValueInt64, true
	case []float64:
		return ValueFloat64, true
	case []Array:
		return ValueArray, true
	}
	return 0, false
}

func checkArray(a Array) error {
	et, ok := sliceElemType(a.Values)
	if !ok || et != a.Type {
		return fmt.Errorf("array of %v holds %T", a.Type, a.Values)
	}
	if nested, ok := a.Values.([]Array); ok {
		for _, n := range nested {
			if err := checkArray(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// AddTensor appends a tensor. dims are fastest-varying first; data must hold
// exactly the tensor's bytes and is not copied (keep it unchanged until the
// file is written).
func (w *Writer) AddTensor(name string, typ GGMLType, dims []uint64, data []byte) error {
	if w.names[name] {
		return fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions, want 1..%d", name, len(dims), MaxDims)
	}
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	if bs := typ.BlockSize(); bs > 0 && dims[0]%uint64(bs) != 0 {
		return fmt.Errorf("gguf: tensor %q: first dimension %d is not a multiple of the %v block size %d", name, dims[0], typ, bs)
	}
	size, err := typ.RowSize(n)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if uint64(len(data)) != size {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d for %v %v", name, len(data), size, dims, typ)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, writerTensor{
		info: TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Size: size},
		data: data,
	})
	return nil
}

// WriteTo writes the file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.Alignment == 0 || w.Alignment&(w.Alignment-1) != 0 || w.Alignment > math.MaxUint32 {
		return 0, fmt.Errorf("gguf: alignment %d is not a power of two", w.Alignment)
	}
	kv := w.kv
	if w.Alignment != DefaultAlignment {
		if _, ok := w.index["general.alignment"]; !ok {
			kv = append(append([]KV(nil), kv...), KV{Key: "general.alignment", Type: ValueUint32, Value: uint32(w.Alignment)})
		}
	}
	cw := &countWriter{w: bufio.NewWriterSize(out, 1<<20)}
	e := encoder{w: cw}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(kv)))
	for _, p := range kv {
		e.str(p.Key)
		e.u32(uint32(p.Type))
		e.value(p.Type, p.Value)
	}
	offset := uint64(0)
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = offset
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
		offset = alignUp(offset+t.Size, w.Alignment)
	}
	e.pad(w.Alignment)
	for _, t := range w.tensors {
		e.raw(t.data)
		e.pad(w.Alignment)
	}
	if e.err == nil {
		e.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, e.err
}

// WriteFile writes the file to the named path.
func (w *Writer) WriteFile(name string) error {
	fd, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(fd); err != nil {
		fd.Close()
		return err
	}
	return fd.Close()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type encoder struct {
	w   *countWriter
	err error
	b   [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.b[:4], v)
	e.raw(e.b[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.b[:8], v)
	e.raw(e.b[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

func (e *encoder) pad(align uint64) {
	var zeros [64]byte
	for n := alignUp(uint64(e.w.n), align) - uint64(e.w.n); n > 0; {
		k := min(n, uint64(len(zeros)))
		e.raw(zeros[:k])
		n -= k
	}
}

func (e *encoder) value(t ValueType, v any) {
	switch t {
	case ValueUint8:
		e.raw([]byte{v.(uint8)})
	case ValueInt8:
		e.raw([]byte{uint8(v.(int8))})
	case ValueBool:
		b := byte(0)
		if v.(bool) {
			b = 1
		}
		e.raw([]byte{b})
	case ValueUint16:
		binary.LittleEndian.PutUint16(e.b[:2], v.(uint16))
		e.raw(e.b[:2])
	case ValueInt16:
		binary.LittleEndian.PutUint16(e.b[:2], uint16(v.(int16)))
		e.raw(e.b[:2])
	case ValueUint32:
		e.u32(v.(uint32))
	case ValueInt32:
		e.u32(uint32(v.(int32)))
	case ValueFloat32:
		e.u32(math.Float32bits(v.(float32)))
	case ValueUint64:
		e.u64(v.(uint64))
	case ValueInt64:
		e.u64(uint64(v.(int64)))
	case ValueFloat64:
		e.u64(math.Float64bits(v.(float64)))
	case ValueString:
		e.str(v.(string))
	case ValueArray:
		a := v.(Array)
		e.u32(uint32(a.Type))
		e.u64(uint64(a.Len()))
		e.elements(a)
	}
}

func (e *encoder) elements(a Array) {
	switch vs := a.Values.(type) {
	case []uint8:
		e.raw(vs)
	case []string:
		for _, s := range vs {
			e.str(s)
		}
	case []Array:
		for _, n := range vs {
			e.value(ValueArray, n)
		}
	default:
		for i := range a.Len() {
			e.value(a.Type, elementAt(a.Values, i))
		}
	}
}

func elementAt(slice any, i int) any {
	switch v := slice.(type) {
	case []float32:
		return v[i]
	case []float64:
		return v[i]
	case []bool:
		return v[i]
	}
	return index(slice, i)
}
