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
// Each projector family is one file (family_*.go) whose forward pass is
// written against the graph interface, which the GPU recorder and the CPU
// reference both implement.
package vision

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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

// Tensor is one weight of the projector.
type Tensor struct {
	Name string
	Type gguf.GGMLType
	Rows int // 1 for a vector
	Cols int
	Data []byte // raw, in Type's layout (a slice of the file, or a copy)
	idx  int    // index in Model.tensors
	// mat marks a weight of matrix products: it stays in its own format
	// on the GPU; every other tensor is uploaded as f32.
	mat bool
}

// f32 returns t's values as float32.
func (t *Tensor) f32() ([]float32, error) {
	out := make([]float32, t.Rows*t.Cols)
	ids := make([]int32, t.Rows)
	for i := range ids {
		ids[i] = int32(i)
	}
	if err := ops.GetRowsRef(t.Type, t.Data, t.Rows, t.Cols, ids, out); err != nil {
		return nil, fmt.Errorf("vision: tensor %s: %w", t.Name, err)
	}
	return out, nil
}

// block is one pre-norm transformer block of the vision tower.
type block struct {
	Q, QB, K, KB, V, VB, O, OB *Tensor
	LN1, LN1B, LN2, LN2B       *Tensor
	Up, UpB, Down, DownB       *Tensor // fc1 (Embd -> FF) and fc2 (FF -> Embd)
}

// family is one projector family's forward pass.
type family interface {
	// forward records the encoder and projector on g, returning the
	// image embeddings [Tokens][OutEmbd].
	forward(g graph) act
	// tokens is the number of image embeddings an image gives.
	tokens() int
}

// Model is a loaded vision projector: parameters and tensors (slices of the
// file mapping, so the file must stay open while the model is used).
type Model struct {
	P       Params
	f       *gguf.File
	fam     family
	tensors []*Tensor
	path    string
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
func (m *Model) Tokens() int { return m.fam.tokens() }

// Bytes returns the size of the projector's weights.
func (m *Model) Bytes() int64 {
	var n int64
	for _, t := range m.tensors {
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

// tensor binds the tensor name with the given shape (cols, rows; rows 0 for
// a vector). It is nil without error when optional and absent.
func (m *Model) tensor(name string, cols, rows int, optional bool) (*Tensor, error) {
	info, ok := m.f.Tensor(name)
	if !ok {
		if optional {
			return nil, nil
		}
		return nil, fmt.Errorf("tensor %s is missing", name)
	}
	var want []uint64
	switch rows {
	case 0:
		want = []uint64{uint64(cols)}
	default:
		want = []uint64{uint64(cols), uint64(rows)}
	}
	dims := info.Dims
	for len(dims) > len(want) && dims[len(dims)-1] == 1 {
		dims = dims[:len(dims)-1]
	}
	if fmt.Sprint(dims) != fmt.Sprint(want) {
		return nil, fmt.Errorf("tensor %s has shape %v, want %v", name, info.Dims, want)
	}
	return m.bind(info, max(rows, 1), cols)
}

// bind reads info's data as a rows x cols tensor.
func (m *Model) bind(info *gguf.TensorInfo, rows, cols int) (*Tensor, error) {
	if _, ok := info.Type.Info(); !ok {
		return nil, fmt.Errorf("tensor %s has unknown type %d", info.Name, info.Type)
	}
	data, err := m.f.TensorData(info)
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", info.Name, err)
	}
	rowBytes, err := info.Type.RowSize(uint64(cols))
	if err != nil || uint64(len(data)) != rowBytes*uint64(rows) {
		return nil, fmt.Errorf("tensor %s: %d bytes of %v for %d x %d values", info.Name, len(data), info.Type, rows, cols)
	}
	t := &Tensor{Name: info.Name, Type: info.Type, Rows: rows, Cols: cols, Data: data, idx: len(m.tensors)}
	m.tensors = append(m.tensors, t)
	return t, nil
}

// add registers a tensor made at load (a transposed or reshaped copy).
func (m *Model) add(t *Tensor) *Tensor {
	t.idx = len(m.tensors)
	m.tensors = append(m.tensors, t)
	return t
}

// patchEmbd binds the patch embedding kernel v.patch_embd.weight
// ([P][P][3][Embd], ggml order) as the matrix [Embd][3*P*P] that multiplies
// the unfolded patches.
func (m *Model) patchEmbd() (*Tensor, error) {
	p := &m.P
	const name = "v.patch_embd.weight"
	info, ok := m.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("tensor %s is missing", name)
	}
	want := []uint64{uint64(p.PatchSize), uint64(p.PatchSize), 3, uint64(p.Embd)}
	if fmt.Sprint(info.Dims) != fmt.Sprint(want) {
		return nil, fmt.Errorf("tensor %s has shape %v, want %v", name, info.Dims, want)
	}
	if _, ok := m.f.Tensor("v.patch_embd.weight.1"); ok {
		return nil, errors.New("tensor v.patch_embd.weight.1 (a temporal patch kernel, Qwen2-VL) is not supported")
	}
	t, err := m.bind(info, p.Embd, 3*p.PatchSize*p.PatchSize)
	if t != nil {
		t.mat = true
	}
	return t, err
}

// blocks binds the n vision blocks v.blk.N.*. Legacy LLaVA files store the
// FFN's first matrix (Embd -> FF) as ffn_down and the second as ffn_up; as
// the reference does, they are swapped back when ffn_down's rows are Embd
// wide (ne0 == Embd).
func (m *Model) blocks(n int) ([]block, error) {
	p := &m.P
	if p.FF == p.Embd {
		return nil, fmt.Errorf("clip.vision.feed_forward_length equals embedding_length (%d): the legacy FFN tensor names would be ambiguous", p.FF)
	}
	out := make([]block, n)
	for i := range out {
		b := &out[i]
		pre := fmt.Sprintf("v.blk.%d.", i)
		swapped := false
		if info, ok := m.f.Tensor(pre + "ffn_down.weight"); ok && len(info.Dims) > 0 && info.Dims[0] == uint64(p.Embd) {
			swapped = true
		}
		up, down := "ffn_up", "ffn_down"
		if swapped {
			up, down = down, up
		}
		E, F := p.Embd, p.FF
		for _, s := range []struct {
			dst        **Tensor
			name       string
			cols, rows int
			opt        bool
		}{
			{&b.Q, "attn_q.weight", E, E, false}, {&b.QB, "attn_q.bias", E, 0, true},
			{&b.K, "attn_k.weight", E, E, false}, {&b.KB, "attn_k.bias", E, 0, true},
			{&b.V, "attn_v.weight", E, E, false}, {&b.VB, "attn_v.bias", E, 0, true},
			{&b.O, "attn_out.weight", E, E, false}, {&b.OB, "attn_out.bias", E, 0, true},
			{&b.LN1, "ln1.weight", E, 0, false}, {&b.LN1B, "ln1.bias", E, 0, true},
			{&b.LN2, "ln2.weight", E, 0, false}, {&b.LN2B, "ln2.bias", E, 0, true},
			{&b.Up, up + ".weight", E, F, false}, {&b.UpB, up + ".bias", F, 0, true},
			{&b.Down, down + ".weight", F, E, false}, {&b.DownB, down + ".bias", E, 0, true},
		} {
			t, err := m.tensor(pre+s.name, s.cols, s.rows, s.opt)
			if err != nil {
				return nil, err
			}
			*s.dst = t
		}
		for _, t := range []*Tensor{b.Q, b.K, b.V, b.O, b.Up, b.Down} {
			t.mat = true
		}
	}
	if _, ok := m.f.Tensor("v.blk.0.ffn_gate.weight"); ok {
		return nil, errors.New("tensor v.blk.0.ffn_gate.weight: gated vision FFNs are not supported")
	}
	return out, nil
}

// matrix binds the 2-D tensor name with rows of cols values (cols < 0:
// any) and any number of rows, as a weight of matrix products.
func (m *Model) matrix(name string, cols int) (*Tensor, error) {
	info, ok := m.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("tensor %s is missing", name)
	}
	if len(info.Dims) != 2 || cols >= 0 && info.Dims[0] != uint64(cols) || info.Dims[1] == 0 || info.Dims[1] > 1<<20 {
		return nil, fmt.Errorf("tensor %s has shape %v, want [%d rows]", name, info.Dims, cols)
	}
	t, err := m.bind(info, int(info.Dims[1]), int(info.Dims[0]))
	if t != nil {
		t.mat = true
	}
	return t, err
}

// transposed returns a copy of the matrix t transposed, in f16 when t is
// f16 (exact) and f32 otherwise.
func (m *Model) transposed(t *Tensor) (*Tensor, error) {
	v, err := t.f32()
	if err != nil {
		return nil, err
	}
	out := &Tensor{Name: t.Name + " (transposed)", Rows: t.Cols, Cols: t.Rows, mat: true}
	if t.Type == gguf.TypeF16 {
		out.Type, out.Data = gguf.TypeF16, make([]byte, 2*len(v))
		for r := range t.Rows {
			for c := range t.Cols {
				binary.LittleEndian.PutUint16(out.Data[2*(c*t.Rows+r):], ops.F16FromF32(v[r*t.Cols+c]))
			}
		}
	} else {
		out.Type, out.Data = gguf.TypeF32, make([]byte, 4*len(v))
		for r := range t.Rows {
			for c := range t.Cols {
				binary.LittleEndian.PutUint32(out.Data[4*(c*t.Rows+r):], math.Float32bits(v[r*t.Cols+c]))
			}
		}
	}
	return m.add(out), nil
}

// im2colParams are the unfolding of the encoder input for the patch kernel
// w: the reference unfolds into f16 for an f16 kernel.
func im2colParams(p *Params, w *Tensor) ops.Im2ColParams {
	return ops.Im2ColParams{C: 3, H: p.ImageSize, W: p.ImageSize, P: p.PatchSize, RoundF16: w.Type == gguf.TypeF16}
}

// poolParams describe the side x side grid of patches of width c merged
// by k.
func poolParams(side, c, k int) ops.PoolParams { return ops.PoolParams{H: side, W: side, C: c, K: k} }
