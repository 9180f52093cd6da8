// Package vision is the image side of multimodal models: it loads a vision
// projector GGUF (the reference's "mmproj" files: clip.* metadata, v.* and
// mm.* tensors), turns an image into the encoder's input exactly as the
// reference's clip.cpp does (Preprocess), and runs the encoder and
// projector on the GPU (GPU.Encode) or on the CPU in plain Go (Model.
// EncodeCPU, the reference the GPU path is tested against). The output is
// one embedding row per image token, as wide as the text model's
// embeddings, which the engine feeds to the decoder in place of token
// embeddings.
//
// Each projector family is one file (family_*.go) whose forward pass is an
// engine.Net: written against engine.Graph like the text architectures,
// and run by the engine's GPU graph (engine.GPUNet) and CPU reference
// (engine.CPUNet).
package vision

import (
	"errors"
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
)

// Activation is the FFN activation of the vision tower's blocks.
type Activation int

const (
	// QuickGELU is x*sigmoid(1.702x), CLIP's (the default when neither
	// clip.use_gelu nor clip.use_silu is set).
	QuickGELU Activation = iota
	// GELU is the tanh-approximated GELU (clip.use_gelu).
	GELU
	// SiLU is x*sigmoid(x) (clip.use_silu).
	SiLU
)

func (a Activation) String() string {
	return [...]string{"quick-gelu", "gelu", "silu"}[a]
}

// Params are a projector's hyper-parameters from its clip.* metadata.
type Params struct {
	ProjectorType string // clip.projector_type: "mlp", "gemma3", "idefics3"
	ImageSize     int    // side of the square encoder input, pixels
	PatchSize     int
	Embd          int // vision tower width
	FF            int // its FFN width
	Blocks        int // clip.vision.block_count (stored blocks)
	Heads         int
	ProjectionDim int
	Eps           float32
	Mean, Std     [3]float32
	Act           Activation
	// Merge is Gemma 3's pooling side and Idefics3's pixel-shuffle factor
	// (clip.vision.projector.scale_factor); 1 for mlp.
	Merge int
	// FeatureLayer is clip.vision.feature_layer's deepest layer, or -1.
	FeatureLayer int
	// LongestEdge is Idefics3's clip.vision.preproc_image_size (0: absent).
	LongestEdge int
	// OutEmbd is the width of the image embeddings (the projector's
	// output), which must equal the text model's embedding width.
	OutEmbd int
}

// PatchesPerSide is the encoder input's patches along one side.
func (p *Params) PatchesPerSide() int { return p.ImageSize / p.PatchSize }

// Model is a loaded vision projector: parameters and weights (slices of
// the file mapping, so the file must stay open while the model is used).
type Model struct {
	P    Params
	f    *gguf.File
	fam  engine.Net // the projector family's forward pass
	w    *engine.Weights
	path string
}

// Open loads the projector GGUF at path: it checks the metadata and every
// tensor's shape and size, and returns an error naming the key or tensor
// that is missing or wrong. Close releases the file.
func Open(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	m, err := load(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("vision: %s: %w", path, err)
	}
	m.path = path
	return m, nil
}

// Close releases the file mapping; m must not be used afterwards (a GPU
// made from it holds its own copies).
func (m *Model) Close() error { return m.f.Close() }

// Path returns the file the model was opened from.
func (m *Model) Path() string { return m.path }

// Tokens returns the number of image embeddings (prompt positions) one
// image gives.
func (m *Model) Tokens() int { return m.fam.Shape().OutRows }

// Bytes returns the size of the projector's weights.
func (m *Model) Bytes() int64 {
	var n int64
	for _, t := range m.w.Tensors {
		n += int64(len(t.Data))
	}
	return n
}

// Describe returns a one-line summary for logs.
func (m *Model) Describe() string {
	p := &m.P
	return fmt.Sprintf("%s projector: %d-wide vision tower, %d blocks, %d heads, %dx%d input, patch %d, %d image tokens of %d",
		p.ProjectorType, p.Embd, p.Blocks, p.Heads, p.ImageSize, p.ImageSize, p.PatchSize, m.Tokens(), p.OutEmbd)
}

func load(f *gguf.File) (*Model, error) {
	m := &Model{f: f}
	if err := m.readParams(); err != nil {
		return nil, err
	}
	var err error
	switch m.P.ProjectorType {
	case "mlp":
		m.fam, err = newLLaVA(m)
	case "gemma3":
		m.fam, err = newGemma3(m)
	case "idefics3":
		m.fam, err = newIdefics3(m)
	default:
		return nil, fmt.Errorf("clip.projector_type %q is not supported (supported: mlp, gemma3, idefics3)", m.P.ProjectorType)
	}
	if err != nil {
		return nil, err
	}
	if m.P.OutEmbd <= 0 {
		return nil, errors.New("BUG: vision: the family did not set the output width")
	}
	m.w = engine.NetWeights("the "+m.P.ProjectorType+" projector", m.fam)
	return m, nil
}

func (m *Model) u32(key string, dst *int, required bool) error {
	if !m.f.Has(key) {
		if required {
			return fmt.Errorf("metadata key %s is missing", key)
		}
		return nil
	}
	v, err := m.f.Int(key)
	if err != nil {
		return err
	}
	if v <= 0 || v > 1<<20 {
		return fmt.Errorf("metadata key %s = %d is out of range", key, v)
	}
	*dst = int(v)
	return nil
}

func (m *Model) flag(key string) (bool, error) {
	if !m.f.Has(key) {
		return false, nil
	}
	return m.f.Bool(key)
}

func (m *Model) readParams() error {
	f, p := m.f, &m.P
	if arch, err := f.Architecture(); err == nil && arch != "clip" {
		return fmt.Errorf("general.architecture is %q, not clip: this is not a vision projector (is it the text model?)", arch)
	}
	if ok, err := m.flag("clip.has_vision_encoder"); err != nil || !ok {
		return fmt.Errorf("clip.has_vision_encoder is not true: no vision encoder in this file")
	}
	switch {
	case f.Has("clip.projector_type"):
		s, err := f.String("clip.projector_type")
		if err != nil {
			return err
		}
		p.ProjectorType = s
	case f.Has("clip.vision.projector_type"):
		s, err := f.String("clip.vision.projector_type")
		if err != nil {
			return err
		}
		p.ProjectorType = s
	default:
		p.ProjectorType = "mlp" // as the reference assumes
	}
	for _, k := range []struct {
		key string
		dst *int
	}{
		{"clip.vision.embedding_length", &p.Embd}, {"clip.vision.feed_forward_length", &p.FF},
		{"clip.vision.block_count", &p.Blocks}, {"clip.vision.attention.head_count", &p.Heads},
		{"clip.vision.projection_dim", &p.ProjectionDim}, {"clip.vision.image_size", &p.ImageSize},
		{"clip.vision.patch_size", &p.PatchSize},
	} {
		if err := m.u32(k.key, k.dst, true); err != nil {
			return err
		}
	}
	if !f.Has("clip.vision.attention.layer_norm_epsilon") {
		return errors.New("metadata key clip.vision.attention.layer_norm_epsilon is missing")
	}
	eps, err := f.Float("clip.vision.attention.layer_norm_epsilon")
	if err != nil {
		return err
	}
	if !(eps > 0 && eps < 1) {
		return fmt.Errorf("clip.vision.attention.layer_norm_epsilon = %g is out of range", eps)
	}
	p.Eps = float32(eps)
	for _, k := range []struct {
		key string
		dst *[3]float32
	}{{"clip.vision.image_mean", &p.Mean}, {"clip.vision.image_std", &p.Std}} {
		if !f.Has(k.key) {
			return fmt.Errorf("metadata key %s is missing", k.key)
		}
		v, err := f.Float32s(k.key)
		if err != nil {
			return err
		}
		if len(v) < 3 {
			return fmt.Errorf("metadata key %s has %d values, want 3", k.key, len(v))
		}
		copy(k.dst[:], v)
		for _, x := range v[:3] {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || k.key == "clip.vision.image_std" && x == 0 {
				return fmt.Errorf("metadata key %s = %v is not usable", k.key, v)
			}
		}
	}
	gelu, err := m.flag("clip.use_gelu")
	if err != nil {
		return err
	}
	silu, err := m.flag("clip.use_silu")
	if err != nil {
		return err
	}
	switch {
	case gelu && silu:
		return errors.New("clip.use_gelu and clip.use_silu are both true")
	case gelu:
		p.Act = GELU
	case silu:
		p.Act = SiLU
	}
	if p.ImageSize%p.PatchSize != 0 {
		return fmt.Errorf("clip.vision.image_size %d is not a multiple of clip.vision.patch_size %d", p.ImageSize, p.PatchSize)
	}
	if p.Embd%p.Heads != 0 || p.Embd/p.Heads > ops.MaxHeadDim {
		return fmt.Errorf("clip.vision.embedding_length %d does not split into %d heads of at most %d", p.Embd, p.Heads, ops.MaxHeadDim)
	}
	if p.ImageSize > 4096 {
		return fmt.Errorf("clip.vision.image_size %d is larger than 4096", p.ImageSize)
	}
	p.FeatureLayer = -1
	if f.Has("clip.vision.feature_layer") {
		layers, err := f.Int32s("clip.vision.feature_layer")
		if err != nil {
			return err
		}
		if len(layers) > 1 {
			return fmt.Errorf("clip.vision.feature_layer lists %d layers %v: stacked feature layers (Granite vision) are not supported", len(layers), layers)
		}
		if len(layers) == 1 {
			if layers[0] < 0 || int(layers[0]) > p.Blocks {
				return fmt.Errorf("clip.vision.feature_layer %d outside 0..%d", layers[0], p.Blocks)
			}
			p.FeatureLayer = int(layers[0])
		}
	}
	if f.Has("clip.vision.image_grid_pinpoints") {
		return errors.New("clip.vision.image_grid_pinpoints is set: LLaVA-1.6 any-resolution tiling is not supported")
	}
	p.Merge = 1
	return m.u32("clip.vision.projector.scale_factor", &p.Merge, false)
}

// im2colParams are the unfolding of the encoder input for the patch kernel
// w: the reference unfolds into f16 for an f16 kernel.
func im2colParams(p *Params, w *engine.Tensor) ops.Im2ColParams {
	return ops.Im2ColParams{C: 3, H: p.ImageSize, W: p.ImageSize, P: p.PatchSize, RoundF16: w.Type == gguf.TypeF16}
}

// poolParams describe the side x side grid of patches of width c merged
// by k.
func poolParams(side, c, k int) ops.PoolParams { return ops.PoolParams{H: side, W: side, C: c, K: k} }
