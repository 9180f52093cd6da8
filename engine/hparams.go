// Package engine turns a GGUF file into tokens: it reads the model's
// hyper-parameters and weights, puts the weights and the KV cache on the
// Vulkan device, and runs the forward pass as one recorded command buffer per
// batch. A plain-Go reference of the same forward pass (CPUModel) checks it.
package engine

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/engine/tensortag"
	"github.com/vkllm/vkllm/gguf"
)

// Options are a model's hyper-parameters, read from GGUF metadata keys
// prefixed with the architecture name. What only one architecture has
// (sliding windows, soft-capping, ...) its file reads into its own struct.
type Options struct {
	Arch     string
	Embd     int // embedding_length
	Layers   int // block_count
	FFN      int // feed_forward_length
	Heads    int // attention.head_count
	KVHeads  int // attention.head_count_kv (default Heads)
	HeadDim  int // attention.key_length (default Embd/Heads)
	HeadDimV int // attention.value_length (default HeadDim)
	Vocab    int // rows of token_embd.weight
	CtxTrain int // context_length
	// NormEps is attention.layer_norm_rms_epsilon, or
	// attention.layer_norm_epsilon for architectures with LayerNorm.
	NormEps   float32
	RopeBase  float32 // rope.freq_base (default 10000)
	RopeScale float32 // position multiplier: 1/rope.scaling.factor for linear and YaRN scaling, else 1
	RopeDim   int     // rope.dimension_count (default HeadDim)
	// RopeYaRN holds YaRN's settings when rope.scaling.type is yarn.
	RopeYaRN *YaRN
	// RopeAttnFactor is rope.scaling.attn_factor (default 1): it multiplies
	// cos and sin.
	RopeAttnFactor float32
	// RopeOrigCtx is rope.scaling.original_context_length (0 when absent).
	RopeOrigCtx int
	TiedOutput  bool // no output.weight: the output reuses token_embd.weight
	// Encoder models (BERT) attend in both directions, keep no KV cache
	// and produce hidden states, not logits.
	Encoder bool
	// Pooling is {arch}.pooling_type (PoolNone when absent).
	Pooling Pooling
	// Experts, ExpertsUsed and ExpertFFN are a mixture of experts'
	// expert_count, expert_used_count and expert_feed_forward_length
	// (default FFN); 0 experts: a dense FFN.
	Experts, ExpertsUsed, ExpertFFN int
	// SharedFFN is expert_shared_feed_forward_length, a shared expert's
	// width (default FFN).
	SharedFFN int
	// KVLayers is the number of layers with a KV cache: every layer but
	// a hybrid model's recurrent ones.
	KVLayers int
	// Recurrent describes a hybrid model's linear-attention layers (nil
	// for others).
	Recurrent *Recurrent
}

// Recurrent describes the Gated DeltaNet layers of a hybrid model (qwen35):
// which layers they are and the shapes of their per-sequence state, a
// convolution state and an SSM state per layer whose size does not depend
// on the sequence's length.
type Recurrent struct {
	// Layer[i] is layer i's index among the recurrent layers, or -1 for
	// a full-attention layer.
	Layer []int
	// Count is the number of recurrent layers.
	Count int
	// Kernel is ssm.conv_kernel: the convolution's taps.
	Kernel int
	// KHeads (ssm.group_count) key heads and VHeads (ssm.time_step_rank)
	// value heads, HeadK wide (ssm.state_size) and HeadV (ssm.inner_size /
	// VHeads).
	KHeads, VHeads, HeadK, HeadV int
}

// Channels is the width of the convolved q|k|v rows.
func (r *Recurrent) Channels() int { return 2*r.KHeads*r.HeadK + r.VHeads*r.HeadV }

// ConvLen is the number of f32 values of one sequence's convolution state
// in one layer.
func (r *Recurrent) ConvLen() int { return (r.Kernel - 1) * r.Channels() }

// SSMLen is the number of f32 values of one sequence's SSM state in one
// layer.
func (r *Recurrent) SSMLen() int { return r.VHeads * r.HeadV * r.HeadK }

// StateBytes is the recurrent state of one sequence, every layer.
func (r *Recurrent) StateBytes() int64 { return 4 * int64(r.Count) * int64(r.ConvLen()+r.SSMLen()) }

// readRecurrent reads a hybrid model's ssm.* keys and the layer pattern
// (full_attention_interval, default 4: layers 3, 7, ... attend).
func readRecurrent(f *gguf.File, p string, o *Options) error {
	r := &Recurrent{}
	inner := 0
	for _, k := range []struct {
		key string
		dst *int
	}{{"ssm.conv_kernel", &r.Kernel}, {"ssm.state_size", &r.HeadK}, {"ssm.group_count", &r.KHeads},
		{"ssm.time_step_rank", &r.VHeads}, {"ssm.inner_size", &inner}} {
		v, err := f.Int(p + k.key)
		if err != nil {
			return err
		}
		if v <= 0 || v > 1<<20 {
			return fmt.Errorf("engine: %s%s = %d is out of range", p, k.key, v)
		}
		*k.dst = int(v)
	}
	interval := int64(4)
	if v, err := f.Int(p + "full_attention_interval"); err == nil {
		interval = v
	}
	switch {
	case interval < 1 || interval > 1<<20:
		return fmt.Errorf("engine: %sfull_attention_interval = %d is out of range", p, interval)
	case inner%r.VHeads != 0:
		return fmt.Errorf("engine: %sssm.inner_size %d is not a multiple of ssm.time_step_rank %d", p, inner, r.VHeads)
	case r.VHeads%r.KHeads != 0:
		return fmt.Errorf("engine: %sssm.time_step_rank %d is not a multiple of ssm.group_count %d", p, r.VHeads, r.KHeads)
	case r.Kernel > ops.SSMConvMaxKernel:
		return fmt.Errorf("engine: %sssm.conv_kernel %d exceeds %d", p, r.Kernel, ops.SSMConvMaxKernel)
	}
	r.HeadV = inner / r.VHeads
	if r.HeadK != r.HeadV || r.HeadK > ops.DeltaNetMaxHead {
		return fmt.Errorf("engine: %sssm.state_size %d and value heads of %d: want equal, at most %d", p, r.HeadK, r.HeadV, ops.DeltaNetMaxHead)
	}
	r.Layer = make([]int, o.Layers)
	o.KVLayers = 0
	for i := range r.Layer {
		if (i+1)%int(interval) != 0 {
			r.Layer[i] = r.Count
			r.Count++
		} else {
			r.Layer[i] = -1
			o.KVLayers++
		}
	}
	o.Recurrent = r
	return nil
}

// YaRN are the settings of YaRN RoPE scaling, as the reference's defaults.
type YaRN struct {
	ExtFactor          float32 // 1
	BetaFast, BetaSlow float32 // 32, 1
}

// archSpec is what the loader needs to know of an architecture before its
// file takes over.
type archSpec struct {
	layerNorm bool // eps from attention.layer_norm_epsilon
	encoder   bool
	recurrent bool // a hybrid model: ssm.* keys (Options.Recurrent)
	// load binds the architecture's tensors and reads its own settings.
	load func(f *gguf.File, o Options) (archModel, error)
	// weights is the struct load binds, whose tags declare the tensors.
	weights reflect.Type
}

// archFor returns the architecture called name. Adding one is a file with
// its struct (its tensors declared in tags: package tensortag), loader
// and forward pass, and a case here.
func archFor(name string) (archSpec, error) {
	switch name {
	case "llama", "qwen2", "qwen3", "qwen3moe":
		return archSpec{load: loadLlama, weights: reflect.TypeFor[llamaModel]()}, nil
	case "gemma2":
		return archSpec{load: loadGemma2, weights: reflect.TypeFor[gemmaModel]()}, nil
	case "gemma3":
		return archSpec{load: loadGemma3, weights: reflect.TypeFor[gemmaModel]()}, nil
	case "phi3":
		return archSpec{load: loadPhi3, weights: reflect.TypeFor[phi3Model]()}, nil
	case "gpt-oss":
		return archSpec{load: loadGptOss, weights: reflect.TypeFor[gptossModel]()}, nil
	case "qwen35", "qwen35moe":
		return archSpec{load: loadQwen35, weights: reflect.TypeFor[qwen35Model](), recurrent: true}, nil
	case "bert":
		return archSpec{load: loadBert, weights: reflect.TypeFor[bertModel](), layerNorm: true, encoder: true}, nil
	}
	return archSpec{}, fmt.Errorf("engine: unsupported architecture %q (supported: %s)", name, supportedArchs)
}

// supportedArchs lists the architectures archFor knows, for errors.
const supportedArchs = "llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe, gemma2, gemma3, phi3, gpt-oss, bert"

// Architectures returns the names of the architectures the engine loads.
func Architectures() []string { return strings.Split(supportedArchs, ", ") }

// ArchTensors returns the tensors the architecture arch declares in the
// tags of its weight struct (package tensortag), in declaration order;
// tools/modelgen writes models from them.
func ArchTensors(arch string) ([]tensortag.Decl, error) {
	spec, err := archFor(arch)
	if err != nil {
		return nil, err
	}
	return tensortag.List(spec.weights)
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
	o := Options{Arch: arch, Encoder: spec.encoder}
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
	for _, r := range []struct {
		key string
		dst *int
	}{{p + "expert_count", &o.Experts}, {p + "expert_used_count", &o.ExpertsUsed}, {p + "expert_feed_forward_length", &o.ExpertFFN},
		{p + "expert_shared_feed_forward_length", &o.SharedFFN}} {
		v, err := f.Int(r.key)
		switch {
		case errors.Is(err, gguf.ErrKeyNotFound):
			v = 0
		case err != nil:
			return Options{}, err
		case v < 0 || v > 1<<24:
			return Options{}, fmt.Errorf("engine: %s = %d is out of range", r.key, v)
		}
		*r.dst = int(v)
	}
	if o.ExpertFFN == 0 {
		o.ExpertFFN = o.FFN
	}
	if o.SharedFFN == 0 {
		o.SharedFFN = o.FFN
	}
	o.HeadDimV = o.HeadDim
	if v, err := f.Int(p + "attention.value_length"); err == nil {
		o.HeadDimV = int(v)
	}
	o.RopeDim = o.HeadDim
	if v, err := f.Int(p + "rope.dimension_count"); err == nil {
		o.RopeDim = int(v)
	}
	epsKey := p + "attention.layer_norm_rms_epsilon"
	if spec.layerNorm {
		epsKey = p + "attention.layer_norm_epsilon"
	}
	eps, err := f.Float(epsKey)
	if err != nil {
		return Options{}, err
	}
	o.NormEps = float32(eps)
	o.KVLayers = o.Layers
	if spec.recurrent {
		if err := readRecurrent(f, p, &o); err != nil {
			return Options{}, err
		}
	}
	if err := readRope(f, p, &o); err != nil {
		return Options{}, err
	}
	if v, err := f.Int(p + "pooling_type"); err == nil {
		if v < 0 || v > int64(PoolRank) {
			return Options{}, fmt.Errorf("engine: %spooling_type %d is not supported (0 none, 1 mean, 2 cls, 3 last, 4 rank)", p, v)
		}
		o.Pooling = Pooling(v)
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
	o.TiedOutput = !hasOutput && !o.Encoder
	switch {
	case o.Heads%o.KVHeads != 0:
		return Options{}, fmt.Errorf("engine: %d heads is not a multiple of %d KV heads", o.Heads, o.KVHeads)
	case o.Experts > 0 && (o.ExpertsUsed <= 0 || o.ExpertsUsed > min(o.Experts, maxExpertsUsed)):
		return Options{}, fmt.Errorf("engine: %sexpert_used_count %d must be 1..%d for %d experts", p, o.ExpertsUsed, min(o.Experts, maxExpertsUsed), o.Experts)
	case o.RopeDim > o.HeadDim || o.RopeDim%2 != 0:
		return Options{}, fmt.Errorf("engine: rope dimension %d must be even and at most the head width %d", o.RopeDim, o.HeadDim)
	}
	return o, nil
}

// readRope reads the RoPE keys: base, scaling type and factor, YaRN's and
// LongRoPE's settings. A scaling type the engine does not implement is an
// error naming it, never ignored.
func readRope(f *gguf.File, p string, o *Options) error {
	o.RopeBase = 10000
	if v, err := f.Float(p + "rope.freq_base"); err == nil {
		o.RopeBase = float32(v)
	}
	o.RopeScale, o.RopeAttnFactor = 1, 1
	if v, err := f.Float(p + "rope.scaling.attn_factor"); err == nil && v > 0 {
		o.RopeAttnFactor = float32(v)
	}
	if v, err := f.Int(p + "rope.scaling.original_context_length"); err == nil && v > 0 && v <= 1<<24 {
		o.RopeOrigCtx = int(v)
	}
	kind, err := f.String(p + "rope.scaling.type")
	if err != nil {
		if v, err := f.Float(p + "rope.scale_linear"); err == nil && v > 0 {
			o.RopeScale = float32(1 / v)
		}
		return nil
	}
	switch kind {
	case "none":
		return nil
	case "linear", "yarn":
	default:
		return fmt.Errorf("engine: %srope.scaling.type %q is not supported (none, linear and yarn are; Llama 3's scaling comes as rope_freqs.weight, LongRoPE as rope_factors_long/short.weight)", p, kind)
	}
	if factor, err := f.Float(p + "rope.scaling.factor"); err == nil && factor > 0 {
		o.RopeScale = float32(1 / factor)
	}
	if kind == "yarn" {
		if o.RopeOrigCtx == 0 {
			return fmt.Errorf("engine: %srope.scaling.type yarn needs %srope.scaling.original_context_length", p, p)
		}
		y := &YaRN{ExtFactor: 1, BetaFast: 32, BetaSlow: 1}
		if v, err := f.Float(p + "rope.scaling.yarn_beta_fast"); err == nil {
			y.BetaFast = float32(v)
		}
		if v, err := f.Float(p + "rope.scaling.yarn_beta_slow"); err == nil {
			y.BetaSlow = float32(v)
		}
		o.RopeYaRN = y
	}
	return nil
}

// rope returns the Rope of a layer with base and scale, from o's RoPE
// settings (factors nil).
func (o *Options) rope(neox bool, base, scale float32) Rope {
	r := Rope{HeadDim: o.HeadDim, Dims: o.RopeDim, NeoX: neox, Base: base, Scale: scale, AttnFactor: o.RopeAttnFactor}
	if y := o.RopeYaRN; y != nil && scale != 1 {
		r.ExtFactor = y.ExtFactor
		r.CorrDims = yarnCorrDims(o.RopeDim, o.RopeOrigCtx, base, y.BetaFast, y.BetaSlow)
	}
	return r
}

// yarnCorrDims is the reference's ggml_rope_yarn_corr_dims: the dimensions
// where YaRN's ramp starts and ends.
func yarnCorrDims(dims, origCtx int, base, betaFast, betaSlow float32) [2]float32 {
	corr := func(rot float32) float64 {
		return float64(dims) * math.Log(float64(origCtx)/(float64(rot)*2*math.Pi)) / (2 * math.Log(float64(base)))
	}
	start := math.Floor(corr(betaFast))
	end := math.Ceil(corr(betaSlow))
	return [2]float32{float32(max(0, start)), float32(min(float64(dims-1), end))}
}
