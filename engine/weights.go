package engine

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/vkllm/vkllm/engine/tensortag"
	"github.com/vkllm/vkllm/gguf"
)

// Tensor is one weight as stored in the GGUF file.
type Tensor struct {
	Name string
	Type gguf.GGMLType
	Dims []uint64 // fastest-varying first: a matrix is [cols rows]
	Data []byte   // a slice of the file mapping
	idx  int      // index in Weights.Tensors
	// parts, for a tensor fuseRows made, are the tensors it joins; it has
	// no Data of its own. fused is the tensor a part belongs to.
	parts []*Tensor
	fused *Tensor
}

// fuseRows returns a tensor named name that joins parts, for the fused
// kernels (one dispatch for the q, k and v projections, or for the gate
// and up ones): matrices of one type and row length, their rows one after
// another, or f32 vectors (biases), their values one after another. It
// returns nil where the parts do not fuse (one is missing, or their types
// or row lengths differ); the forward pass then multiplies by them
// separately. The parts stay tensors of their own: the GPU keeps a fused
// matrix's parts as views of its buffer (prefill multiplies by them),
// and the CPU reference reads only the parts.
func fuseRows(name string, parts ...*Tensor) *Tensor {
	vec := parts[0] != nil && len(parts[0].Dims) == 1
	n := 0
	for _, p := range parts {
		if p == nil || p.fused != nil || p.Type != parts[0].Type || len(p.Dims) != len(parts[0].Dims) || len(p.Dims) > 2 ||
			!vec && p.Cols() != parts[0].Cols() || vec && p.Type != gguf.TypeF32 {
			return nil
		}
		if vec {
			n += p.Cols()
		} else {
			n += p.Rows()
		}
	}
	f := &Tensor{Name: name, Type: parts[0].Type, Dims: []uint64{uint64(n)}, parts: parts}
	if !vec {
		f.Dims = []uint64{parts[0].Dims[0], uint64(n)}
	}
	for _, p := range parts {
		p.fused = f
	}
	return f
}

// fusedOf returns the tensor fuseRows made of exactly ts, in order, or nil.
func fusedOf(ts ...*Tensor) *Tensor {
	if ts[0] == nil {
		return nil
	}
	f := ts[0].fused
	if f == nil || len(f.parts) != len(ts) {
		return nil
	}
	for i, t := range ts {
		if f.parts[i] != t {
			return nil
		}
	}
	return f
}

// Cols returns the length of a row (ne0).
func (t *Tensor) Cols() int { return int(t.Dims[0]) }

// Rows returns the number of rows (ne1; 1 for a vector).
func (t *Tensor) Rows() int {
	if len(t.Dims) < 2 {
		return 1
	}
	return int(t.Dims[1])
}

// Weights holds the tensors of a model, bound to its architecture's
// struct (see archModel), and every tensor the forward pass reads.
type Weights struct {
	Arch string
	// Tensors lists every tensor the forward pass reads, each once; a
	// tensor's index here is its Tensor.idx.
	Tensors []*Tensor
	model   archModel
	net     Net // a Net's weights (NetWeights) instead of an architecture's
}

// Matrices returns the 2-D tensors of w.
func (w *Weights) Matrices() []*Tensor {
	var out []*Tensor
	for _, t := range w.Tensors {
		if len(t.Dims) >= 2 && t.Rows() > 1 && t.parts == nil {
			out = append(out, t)
		}
	}
	return out
}

// SupportedTypes are the weight formats the kernels read.
var supportedTypes = map[gguf.GGMLType]bool{
	gguf.TypeF32: true, gguf.TypeF16: true, gguf.TypeBF16: true,
	gguf.TypeQ4_0: true, gguf.TypeQ4_1: true, gguf.TypeQ5_0: true, gguf.TypeQ5_1: true, gguf.TypeQ8_0: true,
	gguf.TypeQ2_K: true, gguf.TypeQ3_K: true, gguf.TypeQ4_K: true, gguf.TypeQ5_K: true, gguf.TypeQ6_K: true,
	gguf.TypeIQ4_NL: true, gguf.TypeIQ4_XS: true, gguf.TypeMXFP4: true,
}

// eachTensor calls fn for each *Tensor field of the struct dst points to
// that has a gguf tag, with the tensor's name (prefixed with prefix) and
// the field's tags, recursing into the slice-of-struct field tagged
// gguf:"blk" with the prefix "blk.N." for element N (the slice is made by
// the caller). See package tensortag for the tags.
func eachTensor(dst any, prefix string, fn func(field reflect.Value, name string, tag reflect.StructTag) error) error {
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("gguf")
		if !ok {
			continue
		}
		if tag == "blk" {
			s := v.Field(i)
			for j := range s.Len() {
				if err := eachTensor(s.Index(j).Addr().Interface(), fmt.Sprintf("%sblk.%d.", prefix, j), fn); err != nil {
					return err
				}
			}
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if err := fn(v.Field(i), prefix+name, t.Field(i).Tag); err != nil {
			return err
		}
	}
	return nil
}

// bindTensors fills the *Tensor fields of the struct dst points to from f,
// by their gguf tags ("name" or "name,optional") prefixed with prefix (see
// eachTensor). A missing optional tensor stays nil; checkTensors then
// checks what was bound.
func bindTensors(f *gguf.File, prefix string, dst any) error {
	return eachTensor(dst, prefix, func(field reflect.Value, name string, tag reflect.StructTag) error {
		info, ok := f.Tensor(name)
		if !ok {
			if strings.HasSuffix(tag.Get("gguf"), ",optional") {
				return nil
			}
			return fmt.Errorf("engine: tensor %s is missing", name)
		}
		if !supportedTypes[info.Type] {
			return fmt.Errorf("engine: tensor %s has type %v, which is not supported", name, info.Type)
		}
		data, err := f.TensorData(info)
		if err != nil {
			return err
		}
		field.Set(reflect.ValueOf(&Tensor{Name: name, Type: info.Type, Dims: info.Dims, Data: data}))
		return nil
	})
}

// checkTensors checks the tensors bindTensors bound to the struct m points
// to against their tags: an optional tensor whose need tag names o.Arch is
// present, and each present tensor has its shape tag's dimensions for o
// (a vector, of one dimension, in F32). Loaders call it before they
// split, join or alias tensors.
func checkTensors(m any, o Options) error {
	env := o.shapeEnv()
	return eachTensor(m, "", func(field reflect.Value, name string, tag reflect.StructTag) error {
		t := field.Interface().(*Tensor)
		if t == nil {
			if d := (tensortag.Decl{Optional: true, Need: tag.Get("need")}); d.Needed(o.Arch) {
				return fmt.Errorf("engine: tensor %s is missing; %s needs it", name, o.Arch)
			}
			return nil
		}
		s, err := tensortag.ParseShape(tag.Get("shape"))
		if err != nil {
			return fmt.Errorf("BUG: tensor %s: %v", name, err)
		}
		ok, want, err := s.Check(t.Dims, env)
		if err != nil {
			return fmt.Errorf("BUG: tensor %s: %v", name, err)
		}
		if !ok {
			return fmt.Errorf("engine: tensor %s has dims %v, want %s", t.Name, t.Dims, want)
		}
		if len(s) == 1 && t.Type != gguf.TypeF32 {
			return fmt.Errorf("engine: vector %s has type %v; only F32 norms and biases are supported", t.Name, t.Type)
		}
		return nil
	})
}

// shapeEnv gives the names of shape tags (see tensortag.Env) their values
// for o.
func (o Options) shapeEnv() tensortag.Env {
	env := tensortag.Env{
		"E": o.Embd, "V": o.Vocab, "F": o.FFN, "D": o.HeadDim,
		"q": o.Heads * o.HeadDim, "kv": o.KVHeads * o.HeadDim,
		"qv": o.Heads * o.HeadDimV, "kvv": o.KVHeads * o.HeadDimV,
		"R": o.RopeDim, "C": o.CtxTrain,
		"X": o.Experts, "FX": o.ExpertFFN, "FS": o.SharedFFN, "H": o.Heads,
	}
	if r := o.Recurrent; r != nil {
		env["SC"], env["SK"], env["SH"], env["SD"], env["SV"] = r.Channels(), r.Kernel, r.VHeads, r.HeadV, r.VHeads*r.HeadV
	}
	return env
}

// collectTensors lists every non-nil exported *Tensor field of the struct
// src points to (recursing into structs and slices of structs), each once,
// and numbers them.
func collectTensors(src any) []*Tensor {
	var out []*Tensor
	seen := map[*Tensor]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				continue // settings (Rope, Attn) refer to tensors listed in fields
			}
			switch {
			case f.Type() == reflect.TypeFor[*Tensor]():
				if t := f.Interface().(*Tensor); t != nil && !seen[t] {
					seen[t] = true
					t.idx = len(out)
					out = append(out, t)
				}
			case f.Kind() == reflect.Struct:
				walk(f)
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
				for j := range f.Len() {
					walk(f.Index(j))
				}
			}
		}
	}
	walk(reflect.ValueOf(src).Elem())
	return out
}

// rowRange returns rows [r0, r1) of the matrix t as a tensor of their own
// (a fused weight split at load), named name.
func rowRange(t *Tensor, name string, r0, r1 int) (*Tensor, error) {
	rowBytes := t.Cols() / t.Type.BlockSize() * t.Type.TypeSize()
	if r0 < 0 || r1 > t.Rows() || r0 >= r1 || len(t.Data) < t.Rows()*rowBytes {
		return nil, fmt.Errorf("engine: tensor %s has dims %v, cannot take rows %d..%d", t.Name, t.Dims, r0, r1)
	}
	return &Tensor{Name: name, Type: t.Type, Dims: []uint64{t.Dims[0], uint64(r1 - r0)},
		Data: t.Data[r0*rowBytes : r1*rowBytes]}, nil
}

// LoadWeights binds the weights of f's architecture and checks every shape
// against o.
func LoadWeights(f *gguf.File, o Options) (*Weights, error) {
	spec, err := archFor(o.Arch)
	if err != nil {
		return nil, err
	}
	model, err := spec.load(f, o)
	if err != nil {
		return nil, err
	}
	return &Weights{Arch: o.Arch, model: model, Tensors: collectTensors(model)}, nil
}
