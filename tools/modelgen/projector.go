package modelgen

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/vkllm/vkllm/gguf"
)

// ProjectorOptions describes a vision projector (an mmproj GGUF) to
// generate. Zero fields take the defaults listed beside them.
type ProjectorOptions struct {
	Type      string // clip.projector_type: mlp (default), gemma3 or idefics3
	TextEmbd  int    // the text model's embedding width, the projector's output (default 64)
	Embd      int    // vision tower width (default 64)
	FF        int    // its FFN width (default 4*Embd; must differ from Embd)
	Blocks    int    // vision blocks (default 2; mlp runs Blocks-1 of them, as the reference)
	Heads     int    // attention heads (default 4)
	ImageSize int    // square input side (default 32)
	PatchSize int    // default 8 (mlp), 4 (gemma3), 4 (idefics3)
	Merge     int    // gemma3 pooling / idefics3 pixel-shuffle factor (default 2), written as projector.scale_factor
	// LongestEdge is idefics3's clip.vision.preproc_image_size, the side
	// images are scaled to before they are cut into ImageSize tiles (0:
	// not written, so images are not split).
	LongestEdge int
	Type2D      gguf.GGMLType // format of the matrices (default F16, as real files)
	// LegacyFFN stores an mlp tower's fc1 as ffn_down and fc2 as ffn_up,
	// as the legacy LLaVA converter does (real LLaVA-1.5 files).
	LegacyFFN bool
	// GELU sets clip.use_gelu (the tower's FFN uses GELU, not quick-GELU).
	GELU bool
	Seed uint64
}

func (o *ProjectorOptions) fill() error {
	if o.Type == "" {
		o.Type = "mlp"
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.TextEmbd, 64)
	def(&o.Embd, 64)
	def(&o.FF, 4*o.Embd)
	def(&o.Blocks, 2)
	def(&o.Heads, 4)
	def(&o.ImageSize, 32)
	def(&o.Merge, 2)
	switch o.Type {
	case "mlp":
		def(&o.PatchSize, 8)
	case "gemma3", "idefics3":
		def(&o.PatchSize, 4)
	default:
		return fmt.Errorf("modelgen: projector type %q (want mlp, gemma3 or idefics3)", o.Type)
	}
	if o.Type2D == 0 {
		o.Type2D = gguf.TypeF16
	}
	if o.LongestEdge != 0 && o.Type != "idefics3" {
		return fmt.Errorf("modelgen: LongestEdge is for idefics3 projectors, not %s", o.Type)
	}
	if o.FF == o.Embd || o.Embd%o.Heads != 0 || o.ImageSize%o.PatchSize != 0 || (o.ImageSize/o.PatchSize)%o.Merge != 0 {
		return fmt.Errorf("modelgen: projector shape %+v does not fit together", *o)
	}
	return nil
}

// GenerateProjector builds the projector described by opts: random
// weights (scaled so activations stay of order 1), the clip.* metadata the
// reference's loader requires.
func GenerateProjector(opts ProjectorOptions) (*gguf.Writer, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	w.MustSet("general.architecture", "clip")
	w.MustSet("general.name", "tiny-"+opts.Type+"-projector")
	w.MustSet("clip.has_vision_encoder", true)
	w.MustSet("clip.has_text_encoder", false)
	w.MustSet("clip.projector_type", opts.Type)
	w.MustSet("clip.vision.image_size", uint32(opts.ImageSize))
	w.MustSet("clip.vision.patch_size", uint32(opts.PatchSize))
	w.MustSet("clip.vision.embedding_length", uint32(opts.Embd))
	w.MustSet("clip.vision.feed_forward_length", uint32(opts.FF))
	w.MustSet("clip.vision.projection_dim", uint32(opts.TextEmbd))
	w.MustSet("clip.vision.attention.head_count", uint32(opts.Heads))
	w.MustSet("clip.vision.block_count", uint32(opts.Blocks))
	w.MustSet("clip.vision.attention.layer_norm_epsilon", float32(1e-6))
	w.MustSet("clip.vision.image_mean", []float32{0.5, 0.45, 0.4})
	w.MustSet("clip.vision.image_std", []float32{0.25, 0.27, 0.3})
	w.MustSet("clip.use_gelu", opts.GELU || opts.Type != "mlp")
	if opts.Type != "mlp" {
		w.MustSet("clip.vision.projector.scale_factor", uint32(opts.Merge))
	}
	if opts.LongestEdge > 0 {
		w.MustSet("clip.vision.preproc_image_size", uint32(opts.LongestEdge))
	}
	g := &generator{w: w, rng: rand.New(rand.NewPCG(opts.Seed, 0x5eed)), typ: opts.Type2D}
	E, F, P := opts.Embd, opts.FF, opts.PatchSize
	np := (opts.ImageSize / P) * (opts.ImageSize / P)
	type spec struct {
		name      string
		mean, std float64
		dims      []int
	}
	var ts []spec
	mat := func(name string, in, out int) spec { return spec{name, 0, 1 / float64(in), []int{in, out}} }
	vec := func(name string, n int, mean, std float64) spec { return spec{name, mean, std, []int{n}} }
	// The patch kernel is 4-D (P, P, 3, E) like real files: the generator
	// writes it in the matrix format too.
	ts = append(ts, spec{"v.patch_embd.weight", 0, 1 / float64(3*P), []int{P, P, 3, E}})
	npos := np
	if opts.Type == "mlp" {
		ts = append(ts, vec("v.class_embd", E, 0, 0.5))
		npos++
	} else {
		ts = append(ts, vec("v.patch_embd.bias", E, 0, 0.1))
	}
	ts = append(ts, spec{"v.position_embd.weight", 0, 0.3, []int{E, npos}})
	if opts.Type == "mlp" {
		ts = append(ts, vec("v.pre_ln.weight", E, 1, 0.1), vec("v.pre_ln.bias", E, 0, 0.1))
	}
	for i := range opts.Blocks {
		b := fmt.Sprintf("v.blk.%d.", i)
		up, down := "ffn_up", "ffn_down"
		if opts.LegacyFFN {
			up, down = down, up
		}
		ts = append(ts,
			mat(b+"attn_q.weight", E, E), vec(b+"attn_q.bias", E, 0, 0.1),
			mat(b+"attn_k.weight", E, E), vec(b+"attn_k.bias", E, 0, 0.1),
			mat(b+"attn_v.weight", E, E), vec(b+"attn_v.bias", E, 0, 0.1),
			mat(b+"attn_out.weight", E, E), vec(b+"attn_out.bias", E, 0, 0.1),
			vec(b+"ln1.weight", E, 1, 0.1), vec(b+"ln1.bias", E, 0, 0.1),
			vec(b+"ln2.weight", E, 1, 0.1), vec(b+"ln2.bias", E, 0, 0.1),
			mat(b+up+".weight", E, F), vec(b+up+".bias", F, 0, 0.1),
			mat(b+down+".weight", F, E), vec(b+down+".bias", E, 0, 0.1))
	}
	switch opts.Type {
	case "mlp":
		ts = append(ts, mat("mm.0.weight", E, opts.TextEmbd), vec("mm.0.bias", opts.TextEmbd, 0, 0.1),
			mat("mm.2.weight", opts.TextEmbd, opts.TextEmbd), vec("mm.2.bias", opts.TextEmbd, 0, 0.1))
	case "gemma3":
		ts = append(ts, vec("v.post_ln.weight", E, 1, 0.1), vec("v.post_ln.bias", E, 0, 0.1),
			vec("mm.soft_emb_norm.weight", E, 1, 0.1),
			// Stored [vision width][text width] (ne = [text, vision]).
			spec{"mm.input_projection.weight", 0, 1 / float64(E), []int{opts.TextEmbd, E}})
	case "idefics3":
		ts = append(ts, vec("v.post_ln.weight", E, 1, 0.1), vec("v.post_ln.bias", E, 0, 0.1),
			mat("mm.model.fc.weight", E*opts.Merge*opts.Merge, opts.TextEmbd))
	}
	for _, s := range ts {
		if err := g.tensorAny(s.name, s.mean, s.std, len(s.dims) >= 2, s.dims...); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// tensorAny is tensor with the matrix format for any tensor of two or more
// dimensions when mat is set (the patch kernel is 4-D).
func (g *generator) tensorAny(name string, mean, std float64, mat bool, dims ...int) error {
	if !mat || len(dims) == 2 {
		return g.tensor(name, mean, std, dims...)
	}
	n := 1
	udims := make([]uint64, len(dims))
	for i, d := range dims {
		n *= d
		udims[i] = uint64(d)
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(mean + std*g.rng.NormFloat64())
	}
	// Quantized files keep the kernel in F16, as the reference's converter
	// does (its rows, P wide, are shorter than a quantization block).
	typ := g.typ
	if typ.IsQuantized() {
		typ = gguf.TypeF16
	}
	data, err := encode(typ, vals)
	if err != nil {
		return fmt.Errorf("modelgen: tensor %s: %w", name, err)
	}
	return g.w.AddTensor(name, typ, udims, data)
}

// WriteProjector generates the projector described by opts into the named
// file.
func WriteProjector(path string, opts ProjectorOptions) error {
	w, err := GenerateProjector(opts)
	if err != nil {
		return err
	}
	if err := w.WriteFile(path); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
