// Package engine turns a GGUF file into tokens: it reads the model's
// hyper-parameters and weights, puts the weights and the KV cache on the
// Vulkan device, and runs the forward pass as one recorded command buffer per
// batch. A plain-Go reference of the same forward pass (CPUModel) checks it.
package engine

import (
	"errors"
	"fmt"

	"github.com/vkllm/vkllm/gguf"
)

// Options are a decoder model's hyper-parameters, read from GGUF metadata
// keys prefixed with the architecture name.
type Options struct {
	Arch       string
	Embd       int // embedding_length
	Layers     int // block_count
	FFN        int // feed_forward_length
	Heads      int // attention.head_count
	KVHeads    int // attention.head_count_kv (default Heads)
	HeadDim    int // attention.key_length (default Embd/Heads)
	HeadDimV   int // attention.value_length (default HeadDim)
	Vocab      int // rows of token_embd.weight
	CtxTrain   int // context_length
	NormEps    float32
	RopeBase   float32 // rope.freq_base (default 10000)
	RopeScale  float32 // position multiplier: 1/rope.scaling.factor for linear scaling, else 1
	RopeDim    int     // rope.dimension_count (default HeadDim)
	RopeNeoX   bool    // rotate halves (NeoX) rather than adjacent pairs
	QKVBias    bool    // q/k/v projections have biases (qwen2)
	QKNorm     bool    // per-head RMSNorm of q and k (qwen3)
	TiedOutput bool    // no output.weight: the output reuses token_embd.weight
}

// archSpec is what differs between the supported decoder architectures.
// Adding an architecture that fits the llama block is one entry here; one
// with another block shape is a new file with its own forward functions.
type archSpec struct {
	neox, qkvBias, qkNorm bool
}

func archFor(name string) (archSpec, error) {
	switch name {
	case "llama":
		return archSpec{}, nil
	case "qwen2":
		return archSpec{neox: true, qkvBias: true}, nil
	case "qwen3":
		return archSpec{neox: true, qkNorm: true}, nil
	}
	return archSpec{}, fmt.Errorf("engine: unsupported architecture %q (supported: llama, qwen2, qwen3)", name)
}

// ReadOptions reads the hyper-parameters of f.
func ReadOptions(f *gguf.File) (Options, error) {
	arch, err := f.Architecture()
	if err != nil {
		return Options{}, err
	}
	spec, err := archFor(arch)
	if err != nil {
		return Options{}, err
	}
	o := Options{Arch: arch, RopeNeoX: spec.neox, QKVBias: spec.qkvBias, QKNorm: spec.qkNorm}
	p := arch + "."
	required := []struct {
		key string
		dst *int
	}{
		{p + "embedding_length", &o.Embd},
		{p + "block_count", &o.Layers},
		{p + "feed_forward_length", &o.FFN},
		{p + "attention.head_count", &o.Heads},
	}
	for _, r := range required {
		v, err := f.Int(r.key)
		if err != nil {
			return Options{}, err
		}
		if v <= 0 || v > 1<<24 {
			return Options{}, fmt.Errorf("engine: %s = %d is out of range", r.key, v)
		}
		*r.dst = int(v)
	}
	optional := []struct {
		key string
		dst *int
		def int
	}{
		{p + "attention.head_count_kv", &o.KVHeads, o.Heads},
		{p + "attention.key_length", &o.HeadDim, o.Embd / o.Heads},
		{p + "context_length", &o.CtxTrain, 2048},
	}
	for _, r := range optional {
		v, err := f.Int(r.key)
		switch {
		case errors.Is(err, gguf.ErrKeyNotFound):
			v = int64(r.def)
		case err != nil:
			return Options{}, err
		case v <= 0 || v > 1<<24:
			return Options{}, fmt.Errorf("engine: %s = %d is out of range", r.key, v)
		}
		*r.dst = int(v)
	}
	o.HeadDimV = o.HeadDim
	if v, err := f.Int(p + "attention.value_length"); err == nil {
		o.HeadDimV = int(v)
	}
	o.RopeDim = o.HeadDim
	if v, err := f.Int(p + "rope.dimension_count"); err == nil {
		o.RopeDim = int(v)
	}
	eps, err := f.Float(p + "attention.layer_norm_rms_epsilon")
	if err != nil {
		return Options{}, err
	}
	o.NormEps = float32(eps)
	o.RopeBase = 10000
	if v, err := f.Float(p + "rope.freq_base"); err == nil {
		o.RopeBase = float32(v)
	}
	o.RopeScale = 1
	if kind, err := f.String(p + "rope.scaling.type"); err == nil && kind != "none" {
		if kind != "linear" {
			return Options{}, fmt.Errorf("engine: %srope.scaling.type %q is not supported (only linear)", p, kind)
		}
		factor, err := f.Float(p + "rope.scaling.factor")
		if err != nil {
			return Options{}, err
		}
		if factor > 0 {
			o.RopeScale = float32(1 / factor)
		}
	} else if v, err := f.Float(p + "rope.scale_linear"); err == nil && v > 0 {
		o.RopeScale = float32(1 / v)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return Options{}, errors.New("engine: tensor token_embd.weight is missing")
	}
	if len(emb.Dims) != 2 || emb.Dims[0] != uint64(o.Embd) {
		return Options{}, fmt.Errorf("engine: token_embd.weight has dims %v, want [%d vocab]", emb.Dims, o.Embd)
	}
	o.Vocab = int(emb.Dims[1])
	_, hasOutput := f.Tensor("output.weight")
	o.TiedOutput = !hasOutput
	switch {
	case o.Heads%o.KVHeads != 0:
		return Options{}, fmt.Errorf("engine: %d heads is not a multiple of %d KV heads", o.Heads, o.KVHeads)
	case o.RopeDim > o.HeadDim || o.RopeDim%2 != 0:
		return Options{}, fmt.Errorf("engine: rope dimension %d must be even and at most the head width %d", o.RopeDim, o.HeadDim)
	}
	return o, nil
}
