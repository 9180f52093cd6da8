package engine

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/vkllm/vkllm/gguf"
)

// Tensor is one weight as stored in the GGUF file.
type Tensor struct {
	Name string
	Type gguf.GGMLType
	Dims []uint64 // fastest-varying first: a matrix is [cols rows]
	Data []byte   // a slice of the file mapping
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

// Block holds one transformer block's weights, tagged with their GGUF names
// below "blk.N.". Tensors an architecture does not have stay nil.
type Block struct {
	AttnNorm *Tensor `gguf:"attn_norm.weight"`
	Q        *Tensor `gguf:"attn_q.weight"`
	K        *Tensor `gguf:"attn_k.weight"`
	V        *Tensor `gguf:"attn_v.weight"`
	QBias    *Tensor `gguf:"attn_q.bias,optional"`
	KBias    *Tensor `gguf:"attn_k.bias,optional"`
	VBias    *Tensor `gguf:"attn_v.bias,optional"`
	QNorm    *Tensor `gguf:"attn_q_norm.weight,optional"`
	KNorm    *Tensor `gguf:"attn_k_norm.weight,optional"`
	Out      *Tensor `gguf:"attn_output.weight"`
	FFNNorm  *Tensor `gguf:"ffn_norm.weight"`
	Gate     *Tensor `gguf:"ffn_gate.weight"`
	Up       *Tensor `gguf:"ffn_up.weight"`
	Down     *Tensor `gguf:"ffn_down.weight"`
}

// Weights holds every weight of a decoder model.
type Weights struct {
	TokenEmbd  *Tensor `gguf:"token_embd.weight"`
	OutputNorm *Tensor `gguf:"output_norm.weight"`
	Output     *Tensor `gguf:"output.weight,optional"` // nil when tied to TokenEmbd
	// RopeFreqs divides the RoPE frequencies per dimension pair (Llama
	// 3.1-3.3 files carry it, computed from their llama3 rope scaling).
	RopeFreqs *Tensor `gguf:"rope_freqs.weight,optional"`
	Blocks    []Block
}

// OutputMatrix returns the matrix of the output projection.
func (w *Weights) OutputMatrix() *Tensor {
	if w.Output != nil {
		return w.Output
	}
	return w.TokenEmbd
}

// SupportedTypes are the weight formats the kernels read.
var supportedTypes = map[gguf.GGMLType]bool{
	gguf.TypeF32: true, gguf.TypeF16: true, gguf.TypeBF16: true,
	gguf.TypeQ4_0: true, gguf.TypeQ4_1: true, gguf.TypeQ5_0: true, gguf.TypeQ5_1: true, gguf.TypeQ8_0: true,
	gguf.TypeQ2_K: true, gguf.TypeQ3_K: true, gguf.TypeQ4_K: true, gguf.TypeQ5_K: true, gguf.TypeQ6_K: true,
	gguf.TypeIQ4_NL: true, gguf.TypeIQ4_XS: true,
}

// bindTensors fills the *Tensor fields of the struct dst points to from f,
// by their gguf tags prefixed with prefix.
func bindTensors(f *gguf.File, prefix string, dst any) error {
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("gguf")
		if !ok {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		name = prefix + name
		info, ok := f.Tensor(name)
		if !ok {
			if opt == "optional" {
				continue
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
		v.Field(i).Set(reflect.ValueOf(&Tensor{Name: name, Type: info.Type, Dims: info.Dims, Data: data}))
	}
	return nil
}

// LoadWeights binds the weights of a decoder model in f and checks every
// shape against o.
func LoadWeights(f *gguf.File, o Options) (*Weights, error) {
	w := &Weights{Blocks: make([]Block, o.Layers)}
	if err := bindTensors(f, "", w); err != nil {
		return nil, err
	}
	for i := range w.Blocks {
		if err := bindTensors(f, fmt.Sprintf("blk.%d.", i), &w.Blocks[i]); err != nil {
			return nil, err
		}
	}
	return w, w.check(o)
}

func (w *Weights) check(o Options) error {
	q, kv, kvV := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim, o.KVHeads*o.HeadDimV
	type want struct {
		name       string
		t          *Tensor
		cols, rows int
		required   bool
	}
	wants := []want{
		{"token_embd.weight", w.TokenEmbd, o.Embd, o.Vocab, true},
		{"output_norm.weight", w.OutputNorm, o.Embd, 1, true},
		{"output.weight", w.Output, o.Embd, o.Vocab, false},
		{"rope_freqs.weight", w.RopeFreqs, o.RopeDim / 2, 1, false},
	}
	for i := range w.Blocks {
		b, p := &w.Blocks[i], fmt.Sprintf("blk.%d.", i)
		wants = append(wants,
			want{p + "attn_norm.weight", b.AttnNorm, o.Embd, 1, true},
			want{p + "attn_q.weight", b.Q, o.Embd, q, true},
			want{p + "attn_k.weight", b.K, o.Embd, kv, true},
			want{p + "attn_v.weight", b.V, o.Embd, kvV, true},
			want{p + "attn_q.bias", b.QBias, q, 1, o.QKVBias},
			want{p + "attn_k.bias", b.KBias, kv, 1, o.QKVBias},
			want{p + "attn_v.bias", b.VBias, kvV, 1, o.QKVBias},
			want{p + "attn_q_norm.weight", b.QNorm, o.HeadDim, 1, o.QKNorm},
			want{p + "attn_k_norm.weight", b.KNorm, o.HeadDim, 1, o.QKNorm},
			want{p + "attn_output.weight", b.Out, o.Heads * o.HeadDimV, o.Embd, true},
			want{p + "ffn_norm.weight", b.FFNNorm, o.Embd, 1, true},
			want{p + "ffn_gate.weight", b.Gate, o.Embd, o.FFN, true},
			want{p + "ffn_up.weight", b.Up, o.Embd, o.FFN, true},
			want{p + "ffn_down.weight", b.Down, o.FFN, o.Embd, true},
		)
	}
	for _, x := range wants {
		if x.t == nil {
			if x.required {
				return fmt.Errorf("engine: tensor %s is missing; %s needs it (want [%d %d])", x.name, o.Arch, x.cols, x.rows)
			}
			continue
		}
		if x.t.Cols() != x.cols || x.t.Rows() != x.rows || len(x.t.Dims) > 2 {
			return fmt.Errorf("engine: tensor %s has dims %v, want [%d %d]", x.t.Name, x.t.Dims, x.cols, x.rows)
		}
		if x.rows == 1 && x.t.Type != gguf.TypeF32 {
			return fmt.Errorf("engine: vector %s has type %v; only F32 norms and biases are supported", x.t.Name, x.t.Type)
		}
	}
	return nil
}
