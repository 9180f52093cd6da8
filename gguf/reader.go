// Package gguf reads and writes GGUF files (versions 2 and 3, little-endian):
// the metadata key-value pairs, the tensor infos and the tensor data, which
// Open memory-maps so that a tensor's bytes are a slice of the mapping.
//
// Every count, length and dimension the file claims is checked against the
// bytes that remain before anything is allocated, so a corrupt or hostile
// file yields a *FormatError naming the byte offset, never a panic or a huge
// allocation.
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strings"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the largest number of dimensions a tensor may have.
const MaxDims = 4

const (
	maxArrayDepth = 8
	maxNameLen    = 1 << 16 // tensor names and keys
)

// FormatError reports a malformed GGUF file at a byte offset.
type FormatError struct {
	Off int64  // byte offset in the file
	Msg string // what is wrong
	Val any    // the offending value, if any
}

func (e *FormatError) Error() string {
	if e.Val != nil {
		return fmt.Sprintf("gguf: %s (%v) at offset %d", e.Msg, e.Val, e.Off)
	}
	return fmt.Sprintf("gguf: %s at offset %d", e.Msg, e.Off)
}

// TensorInfo describes one tensor of the file.
type TensorInfo struct {
	Name string
	// Dims are the tensor's dimensions, fastest-varying first (ggml's ne0, ne1, ...).
	Dims []uint64
	Type GGMLType
	// Offset is the tensor's byte offset from the start of the data section.
	Offset uint64
	// Size is the tensor's size in bytes.
	Size uint64

	part int // the split model's part that holds it (0: the first file)
}

// NumElements returns the product of the dimensions.
func (t *TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file.
type File struct {
	Version   uint32
	KV        []KV // in file order
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is the absolute byte offset of the tensor data section.
	DataOffset int64
	// Size is the size of the file in bytes (of every part, for a split
	// model).
	Size int64
	// Parts is the number of files of a split model (1 otherwise).
	Parts int

	index       map[string]int
	tensorIndex map[string]int
	r           io.ReaderAt
	mapping     []byte // the whole file when mapped or in memory
	closer      func() error
	parts       []*File // a split model's other parts (see Open)
}

// Open memory-maps the named file and parses it. Close releases the mapping;
// tensor data slices must not be used after Close.
//
// A split model (the split.count key above 1: files named
// PREFIX-00001-of-0000N.gguf, as the reference's gguf-split writes them)
// opens from its first part: Open maps every part and the File holds them
// all, its metadata the first part's and its tensors every part's.
func Open(name string) (*File, error) {
	f, err := openOne(name)
	if err != nil {
		return nil, err
	}
	if err := f.openParts(name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openOne maps and parses one file.
func openOne(name string) (*File, error) {
	fd, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	data, unmap, err := mapFile(fd, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: map %s: %w", name, err)
	}
	f, err := parse(nil, data, st.Size())
	if err != nil {
		unmap()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f.closer = unmap
	return f, nil
}

// NewFile parses a GGUF file from r. If r has a Size method (bytes.Reader,
// io.SectionReader) or a Stat method (*os.File), the size bounds every claim
// of the file; otherwise reads past the end fail as they happen. Tensor data
// is read from r on demand.
func NewFile(r io.ReaderAt) (*File, error) {
	size := int64(math.MaxInt64)
	switch s := r.(type) {
	case interface{ Size() int64 }:
		size = s.Size()
	case interface{ Stat() (os.FileInfo, error) }:
		if st, err := s.Stat(); err == nil {
			size = st.Size()
		}
	}
	return parse(r, nil, size)
}

// Close releases the mappings made by Open. It does nothing for a File made
// by NewFile. The File must not be used afterwards.
func (f *File) Close() error {
	var err error
	for _, p := range f.parts {
		err = errors.Join(err, p.Close())
	}
	f.parts = nil
	if f.closer == nil {
		return err
	}
	err = errors.Join(err, f.closer())
	f.closer = nil
	f.mapping = nil
	return err
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the bytes of t. For a File made by Open the result is a
// slice of the mapping (no copy) and must not be modified or used after
// Close; otherwise it is read from the underlying reader.
func (f *File) TensorData(t *TensorInfo) ([]byte, error) {
	if t.part > 0 {
		f = f.parts[t.part-1]
	}
	start := f.DataOffset + int64(t.Offset)
	if f.mapping != nil {
		return f.mapping[start : start+int64(t.Size) : start+int64(t.Size)], nil
	}
	if t.Size > 1<<40 {
		return nil, fmt.Errorf("gguf: tensor %q: size %d too large to read", t.Name, t.Size)
	}
	buf := make([]byte, t.Size)
	if _, err := f.r.ReadAt(buf, start); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: read %d bytes at offset %d: %w", t.Name, t.Size, start, err)
	}
	return buf, nil
}

// decoder reads little-endian values, tracking the absolute offset.
type decoder struct {
	r    io.ReaderAt
	data []byte // whole file, when in memory
	size int64
	off  int64

	buf    []byte
	bufOff int64 // file offset of buf[0]
}

func (d *decoder) errorf(off int64, val any, format string, args ...any) error {
	return &FormatError{Off: off, Msg: fmt.Sprintf(format, args...), Val: val}
}

func (d *decoder) remaining() int64 { return d.size - d.off }

// next returns the next n bytes, valid until the following call.
func (d *decoder) next(n int64, what string) ([]byte, error) {
	if n < 0 || n > d.remaining() {
		return nil, d.errorf(d.off, nil, "%s: %d bytes run past the end of the file (%d bytes left)", what, n, max(d.remaining(), 0))
	}
	if d.data != nil {
		b := d.data[d.off : d.off+n]
		d.off += n
		return b, nil
	}
	if d.off >= d.bufOff && d.off+n <= d.bufOff+int64(len(d.buf)) {
		b := d.buf[d.off-d.bufOff : d.off-d.bufOff+n]
		d.off += n
		return b, nil
	}
	const chunk = 64 << 10
	want := max(n, chunk)
	if want > d.remaining() {
		want = d.remaining()
	}
	if int64(cap(d.buf)) < want {
		d.buf = make([]byte, want)
	}
	d.buf = d.buf[:want]
	got, err := d.r.ReadAt(d.buf, d.off)
	if int64(got) < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, d.errorf(d.off, nil, "%s: %v", what, err)
	}
	d.buf = d.buf[:got]
	d.bufOff = d.off
	d.off += n
	return d.buf[:n], nil
}

func (d *decoder) u32(what string) (uint32, error) {
	b, err := d.next(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	b, err := d.next(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a uint64 element count and checks that count elements of at
// least minSize bytes each fit in what is left of the file.
func (d *decoder) count(what string, minSize int64) (int, error) {
	off := d.off
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	left := d.remaining()
	if left < 0 {
		left = 0
	}
	if n > uint64(left)/uint64(minSize) || n > math.MaxInt32 {
		return 0, d.errorf(off, n, "%s: count larger than the %d bytes left in the file can hold", what, left)
	}
	return int(n), nil
}

func (d *decoder) str(what string, limit int64) (string, error) {
	off := d.off
	n, err := d.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(d.remaining()) {
		return "", d.errorf(off, n, "%s: length runs past the end of the file", what)
	}
	if limit > 0 && n > uint64(limit) {
		return "", d.errorf(off, n, "%s: length over the limit of %d", what, limit)
	}
	b, err := d.next(int64(n), what)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func parse(r io.ReaderAt, data []byte, size int64) (*File, error) {
	d := &decoder{r: r, data: data, size: size}
	magic, err := d.next(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, d.errorf(0, fmt.Sprintf("%q", magic), "not a GGUF file: bad magic")
	}
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, d.errorf(4, version, "GGUF version 1 is not supported (only 2 and 3)")
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, d.errorf(4, bits.ReverseBytes32(version), "big-endian GGUF files are not supported")
	default:
		return nil, d.errorf(4, version, "unsupported GGUF version")
	}
	f := &File{Version: version, Size: size, Parts: 1, r: r, mapping: data, Alignment: DefaultAlignment}
	// Minimum encoded sizes: a tensor info is a name length (8), n_dims (4),
	// one dim (8), type (4) and offset (8); a pair is a key length (8), a
	// type (4) and a one-byte value.
	nTensors, err := d.count("tensor count", 32)
	if err != nil {
		return nil, err
	}
	nKV, err := d.count("metadata count", 13)
	if err != nil {
		return nil, err
	}
	f.KV = make([]KV, 0, nKV)
	f.index = make(map[string]int, nKV)
	for range nKV {
		off := d.off
		key, err := d.str("metadata key", maxNameLen)
		if err != nil {
			return nil, err
		}
		if _, dup := f.index[key]; dup {
			return nil, d.errorf(off, key, "duplicate metadata key")
		}
		typOff := d.off
		t, err := d.u32("type of " + key)
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(t), key, typOff, 0)
		if err != nil {
			return nil, err
		}
		f.index[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Type: ValueType(t), Value: v})
	}
	if kv, ok := f.Get("general.alignment"); ok {
		a, isU32 := kv.Value.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			return nil, d.errorf(0, kv.Value, "general.alignment must be a uint32 power of two")
		}
		f.Alignment = uint64(a)
	}
	f.Tensors = make([]TensorInfo, nTensors)
	f.tensorIndex = make(map[string]int, nTensors)
	for i := range f.Tensors {
		if err := d.tensorInfo(f, i); err != nil {
			return nil, err
		}
	}
	f.DataOffset = int64(alignUp(uint64(d.off), f.Alignment))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		end := uint64(f.DataOffset) + t.Offset + t.Size
		if t.Offset > uint64(size) || end < t.Offset || end > uint64(size) {
			return nil, d.errorf(f.DataOffset, t.Name, "tensor data [%d, +%d) runs past the end of the %d-byte file", t.Offset, t.Size, size)
		}
	}
	return f, nil
}

func (d *decoder) tensorInfo(f *File, i int) error {
	off := d.off
	name, err := d.str("tensor name", maxNameLen)
	if err != nil {
		return err
	}
	if _, dup := f.tensorIndex[name]; dup {
		return d.errorf(off, name, "duplicate tensor name")
	}
	nDimsOff := d.off
	nDims, err := d.u32("tensor n_dims")
	if err != nil {
		return err
	}
	if nDims == 0 || nDims > MaxDims {
		return d.errorf(nDimsOff, nDims, "tensor %q: number of dimensions must be 1..%d", name, MaxDims)
	}
	t := TensorInfo{Name: name, Dims: make([]uint64, nDims)}
	elems := uint64(1)
	for j := range t.Dims {
		dimOff := d.off
		if t.Dims[j], err = d.u64("tensor dimension"); err != nil {
			return err
		}
		hi, lo := bits.Mul64(elems, t.Dims[j])
		if hi != 0 || lo > math.MaxInt64 {
			return d.errorf(dimOff, t.Dims[j], "tensor %q: element count overflows", name)
		}
		elems = lo
	}
	typOff := d.off
	typ, err := d.u32("tensor type")
	if err != nil {
		return err
	}
	t.Type = GGMLType(typ)
	info, ok := t.Type.Info()
	if !ok {
		return d.errorf(typOff, t.Type, "tensor %q: unsupported tensor type", name)
	}
	if t.Dims[0]%uint64(info.BlockSize) != 0 {
		return d.errorf(dimsOffset(nDimsOff), t.Dims[0], "tensor %q: first dimension is not a multiple of the %v block size %d", name, t.Type, info.BlockSize)
	}
	if t.Size, err = t.Type.RowSize(elems); err != nil {
		return d.errorf(typOff, name, "%v", err)
	}
	offOff := d.off
	if t.Offset, err = d.u64("tensor offset"); err != nil {
		return err
	}
	if t.Offset%f.Alignment != 0 {
		return d.errorf(offOff, t.Offset, "tensor %q: data offset is not a multiple of the alignment %d", name, f.Alignment)
	}
	f.tensorIndex[name] = i
	f.Tensors[i] = t
	return nil
}

func dimsOffset(nDimsOff int64) int64 { return nDimsOff + 4 }

func alignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

// value reads one metadata value of type t; typOff is where its type tag was.
func (d *decoder) value(t ValueType, key string, typOff int64, depth int) (any, error) {
	switch t {
	case ValueString:
		return d.str("value of "+key, 0)
	case ValueArray:
		return d.array(key, depth)
	}
	n := t.size()
	if n == 0 {
		return nil, d.errorf(typOff, uint32(t), "key %q: unknown value type", key)
	}
	b, err := d.next(int64(n), "value of "+key)
	if err != nil {
		return nil, err
	}
	switch t {
	case ValueUint8:
		return b[0], nil
	case ValueInt8:
		return int8(b[0]), nil
	case ValueBool:
		if b[0] > 1 {
			return nil, d.errorf(d.off-1, b[0], "key %q: bool value is not 0 or 1", key)
		}
		return b[0] == 1, nil
	case ValueUint16:
		return binary.LittleEndian.Uint16(b), nil
	case ValueInt16:
		return int16(binary.LittleEndian.Uint16(b)), nil
	case ValueUint32:
		return binary.LittleEndian.Uint32(b), nil
	case ValueInt32:
		return int32(binary.LittleEndian.Uint32(b)), nil
	case ValueFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case ValueUint64:
		return binary.LittleEndian.Uint64(b), nil
	case ValueInt64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	default: // ValueFloat64
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
}

func (d *decoder) array(key string, depth int) (Array, error) {
	typOff := d.off
	if depth >= maxArrayDepth {
		return Array{}, d.errorf(typOff, depth, "key %q: arrays nested too deeply", key)
	}
	et, err := d.u32("array type of " + key)
	if err != nil {
		return Array{}, err
	}
	t := ValueType(et)
	minSize := int64(t.size())
	switch t {
	case ValueString:
		minSize = 8
	case ValueArray:
		minSize = 12
	}
	if minSize == 0 {
		return Array{}, d.errorf(typOff, et, "key %q: unknown array element type", key)
	}
	n, err := d.count("array length of "+key, minSize)
	if err != nil {
		return Array{}, err
	}
	a := Array{Type: t}
	switch t {
	case ValueString:
		v := make([]string, n)
		for i := range v {
			if v[i], err = d.str("element of "+key, 0); err != nil {
				return Array{}, err
			}
		}
		a.Values = v
	case ValueArray:
		v := make([]Array, n)
		for i := range v {
			if v[i], err = d.array(key, depth+1); err != nil {
				return Array{}, err
			}
		}
		a.Values = v
	default:
		b, err := d.next(int64(n)*minSize, "elements of "+key)
		if err != nil {
			return Array{}, err
		}
		if a.Values, err = decodeScalars(t, b, n); err != nil {
			return Array{}, d.errorf(typOff, key, "%v", err)
		}
	}
	return a, nil
}

func decodeScalars(t ValueType, b []byte, n int) (any, error) {
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return append([]uint8(nil), b...), nil
	case ValueInt8:
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(b[i])
		}
		return v, nil
	case ValueBool:
		v := make([]bool, n)
		for i := range v {
			if b[i] > 1 {
				return nil, fmt.Errorf("bool element %d is %d, not 0 or 1", i, b[i])
			}
			v[i] = b[i] == 1
		}
		return v, nil
	case ValueUint16:
		v := make([]uint16, n)
		for i := range v {
			v[i] = le.Uint16(b[2*i:])
		}
		return v, nil
	case ValueInt16:
		v := make([]int16, n)
		for i := range v {
			v[i] = int16(le.Uint16(b[2*i:]))
		}
		return v, nil
	case ValueUint32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = le.Uint32(b[4*i:])
		}
		return v, nil
	case ValueInt32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(le.Uint32(b[4*i:]))
		}
		return v, nil
	case ValueFloat32:
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return v, nil
	case ValueUint64:
		v := make([]uint64, n)
		for i := range v {
			v[i] = le.Uint64(b[8*i:])
		}
		return v, nil
	case ValueInt64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(le.Uint64(b[8*i:]))
		}
		return v, nil
	default: // ValueFloat64
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return v, nil
	}
}

// Architecture returns general.architecture, the key prefix of the model's
// hyper-parameters.
func (f *File) Architecture() (string, error) { return f.String("general.architecture") }

// Describe returns a one-line summary of the file for logs.
func (f *File) Describe() string {
	arch, _ := f.Architecture()
	var b strings.Builder
	fmt.Fprintf(&b, "GGUF v%d, %d keys, %d tensors", f.Version, len(f.KV), len(f.Tensors))
	if arch != "" {
		fmt.Fprintf(&b, ", architecture %s", arch)
	}
	return b.String()
}
