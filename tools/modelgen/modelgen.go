// Package modelgen writes small deterministic random-weight GGUF models for
// the architectures vkllm supports, in any weight format the CPU quantizers
// produce, with a built-in vocabulary. Tests use it to make the model they
// need in t.TempDir(); tools/mkmodel is its command-line front end.
//
// Which tensors a model has, their shapes and how their values are drawn
// come from the tags of the engine's architecture structs (package
// engine/tensortag), copied into archs.go by
// go test ./tools/modelgen -run TestArchTable -update: the engine's tests
// import this package, so it cannot import the engine.
package modelgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/vkllm/vkllm/engine/tensortag"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/gguf/quant"
)

// Options describes the model to generate. Zero fields take the defaults
// listed beside them.
type Options struct {
	Arch      string        // an architecture of archs.go: llama (default), qwen2, qwen3, gemma2, gemma3, phi3, bert
	Vocab     string        // bpe (default), spm; bert always uses its WordPiece vocabulary
	VocabSize int           // at most this many tokens (default 1024; the built-in corpus supports about 700 BPE and 850 SPM tokens)
	Type      gguf.GGMLType // format of the 2-D weights (default F32)
	Embd      int           // embedding width (default 64)
	Layers    int           // blocks (default 2)
	Heads     int           // attention heads (default 4)
	KVHeads   int           // key/value heads (default Heads/2, at least 1)
	HeadDim   int           // per-head width (default Embd/Heads)
	FFN       int           // feed-forward width (default 3*Embd, rounded to the format's block)
	Context   int           // training context length (default 2048)
	RopeBase  float32       // rope frequency base (default 10000; qwen2 1e6)
	Tied      bool          // no output.weight: the output reuses token_embd.weight
	Seed      uint64        // weights' random seed
	Name      string        // general.name (default "tiny-<arch>")
	// RopeFreqs adds Llama 3.1's rope_freqs.weight (per-pair divisors from
	// 1 to 8) to a model of the llama struct (llama, qwen2, qwen3).
	RopeFreqs bool
	// Window is gemma2's and gemma3's attention.sliding_window (default 4,
	// so short tests cross it; every other layer is local).
	Window int
	// Rerank makes a bert model a cross-encoder: pooling type rank and a
	// classification head (cls.*).
	Rerank bool
	// Specials are control tokens added after the built-in vocabulary,
	// for example a vision model's image markers (Idefics3's
	// <fake_token_around_image> and <global-img>).
	Specials []string
	// Words are normal tokens added to a BPE vocabulary after its own
	// (before Specials), each with the merge of its first byte and the
	// rest, which must be a token already: "\n\n" gives GPT-2's "ĊĊ",
	// which real vocabularies have and Idefics3's image layout uses.
	Words []string
	// Mix names a llama.cpp quantization mix that gives some tensors
	// another type than Type: "Q4_K_M" (Type Q4_K) makes output.weight,
	// and attn_v and ffn_down in the layers llama-quantize gives more
	// bits, Q6_K. Empty: every 2-D weight is Type.
	Mix string
	// Experts, ExpertsUsed and ExpertFFN shape the mixture-of-experts FFN
	// of qwen3moe and gpt-oss (defaults 8, 2 and FFN/2 rounded to the
	// format's block); ExpertType is the format of the experts' 3-D
	// tensors (default Type: gpt-oss files carry MXFP4 experts beside
	// Q8_0 matrices).
	Experts, ExpertsUsed, ExpertFFN int
	ExpertType                      gguf.GGMLType
	// SSMGroups, SSMHeads and SSMState shape a hybrid model's (qwen35)
	// recurrent layers: key heads (default 2), value heads (default 4)
	// and their width (default HeadDim); FullAttnInterval puts a
	// full-attention layer every so many (default 2, so that two layers
	// have one of each; Qwen3.5's files say 4).
	SSMGroups, SSMHeads, SSMState, FullAttnInterval int
	// Workers > 1 generates each large tensor in parallel, its rows in
	// chunks with random streams of their own: deterministic, but other
	// values than the sequential generator's. For benchmark-sized models.
	Workers int
}

func (o *Options) fill() error {
	if o.Arch == "" {
		o.Arch = "llama"
	}
	decls := archDeclsOf(o.Arch)
	if decls == nil {
		return fmt.Errorf("modelgen: unsupported architecture %q (want one of %s)", o.Arch, archNames())
	}
	for _, opt := range []struct {
		set        bool
		name, when string
	}{{o.RopeFreqs, "RopeFreqs", "rope_freqs"}, {o.Rerank, "Rerank", "rerank"}} {
		if opt.set && !slices.ContainsFunc(decls, func(d tensortag.Decl) bool {
			g, err := tensortag.ParseGen(d.Gen)
			return err == nil && g.When == opt.when
		}) {
			return fmt.Errorf("modelgen: %s declares no tensor that %s adds (gen:%q)", o.Arch, opt.name, opt.when)
		}
	}
	if o.Window == 0 {
		o.Window = 4
	}
	if o.Vocab == "" {
		o.Vocab = "bpe"
	}
	if o.VocabSize == 0 {
		o.VocabSize = 1024
	}
	if o.Embd == 0 {
		o.Embd = 64
	}
	if o.Layers == 0 {
		o.Layers = 2
	}
	if o.Heads == 0 {
		o.Heads = 4
	}
	if o.KVHeads == 0 {
		o.KVHeads = max(o.Heads/2, 1)
	}
	if o.HeadDim == 0 {
		o.HeadDim = o.Embd / o.Heads
	}
	bs := max(o.Type.BlockSize(), 1)
	if o.FFN == 0 {
		o.FFN = (3*o.Embd + bs - 1) / bs * bs
	}
	if o.Context == 0 {
		o.Context = 2048
	}
	if moeArch(o.Arch) {
		if o.Experts == 0 {
			o.Experts = 8
		}
		if o.ExpertsUsed == 0 {
			o.ExpertsUsed = min(2, o.Experts)
		}
		if o.ExpertType == gguf.TypeF32 {
			o.ExpertType = o.Type
		}
		if ebs := max(o.ExpertType.BlockSize(), 1); o.ExpertFFN == 0 {
			o.ExpertFFN = max((o.FFN/2+ebs-1)/ebs*ebs, ebs)
		}
		if o.ExpertsUsed > o.Experts {
			return fmt.Errorf("modelgen: %d experts used of %d", o.ExpertsUsed, o.Experts)
		}
		if o.ExpertType != gguf.TypeF32 && !quant.CanQuantize(o.ExpertType) {
			return fmt.Errorf("modelgen: no quantizer for %v", o.ExpertType)
		}
		ebs := max(o.ExpertType.BlockSize(), 1)
		if o.Embd%ebs != 0 || o.ExpertFFN%ebs != 0 {
			return fmt.Errorf("modelgen: widths %d and %d are not multiples of the %v block size %d", o.Embd, o.ExpertFFN, o.ExpertType, ebs)
		}
	} else if o.Experts != 0 || o.ExpertsUsed != 0 || o.ExpertFFN != 0 {
		return fmt.Errorf("modelgen: %s has no experts", o.Arch)
	}
	if hybridArch(o.Arch) {
		for _, d := range []struct {
			v   *int
			def int
		}{{&o.SSMGroups, 2}, {&o.SSMHeads, 4}, {&o.SSMState, o.HeadDim}, {&o.FullAttnInterval, 2}} {
			if *d.v == 0 {
				*d.v = d.def
			}
		}
		if o.SSMHeads%o.SSMGroups != 0 {
			return fmt.Errorf("modelgen: %d value heads is not a multiple of %d key heads", o.SSMHeads, o.SSMGroups)
		}
		if v := o.SSMHeads * o.SSMState; v%bs != 0 {
			return fmt.Errorf("modelgen: value width %d is not a multiple of the %v block size %d", v, o.Type, bs)
		}
	} else if o.SSMGroups != 0 || o.SSMHeads != 0 || o.SSMState != 0 || o.FullAttnInterval != 0 {
		return fmt.Errorf("modelgen: %s has no recurrent layers", o.Arch)
	}
	if o.RopeBase == 0 {
		o.RopeBase = 10000
		if o.Arch == "qwen2" {
			o.RopeBase = 1e6
		}
	}
	if o.Name == "" {
		o.Name = "tiny-" + o.Arch
	}
	if o.Heads%o.KVHeads != 0 {
		return fmt.Errorf("modelgen: %d heads is not a multiple of %d KV heads", o.Heads, o.KVHeads)
	}
	if o.HeadDim%2 != 0 {
		return fmt.Errorf("modelgen: head width %d must be even for RoPE", o.HeadDim)
	}
	if o.Type != gguf.TypeF32 && !quant.CanQuantize(o.Type) {
		return fmt.Errorf("modelgen: no quantizer for %v", o.Type)
	}
	switch {
	case o.Mix == "":
	case o.Mix == "Q4_K_M" && o.Type == gguf.TypeQ4_K:
	default:
		return fmt.Errorf("modelgen: mix %q of %v weights is not supported (want Q4_K_M with Q4_K)", o.Mix, o.Type)
	}
	for _, in := range []int{o.Embd, o.FFN, o.Heads * o.HeadDim} {
		if in%bs != 0 {
			return fmt.Errorf("modelgen: width %d is not a multiple of the %v block size %d", in, o.Type, bs)
		}
	}
	return nil
}

type generator struct {
	w       *gguf.Writer
	rng     *rand.Rand
	typ     gguf.GGMLType
	mix     string
	layers  int
	seed    uint64
	workers int
	n       uint64 // tensors generated, for the parallel streams
	// expertTyp is the format of the experts' 3-D tensors.
	expertTyp gguf.GGMLType
}

// moeArch reports whether arch has a mixture-of-experts FFN.
func moeArch(arch string) bool { return arch == "qwen3moe" || arch == "gpt-oss" || arch == "qwen35moe" }

// hybridArch reports whether arch has recurrent (Gated DeltaNet) layers.
func hybridArch(arch string) bool { return arch == "qwen35" || arch == "qwen35moe" }

// hybridKernel is generated hybrid models' convolution taps.
const hybridKernel = 4

// recurrentLayer reports whether layer l of a model of opts is a recurrent
// one (a hybrid model's layers but every FullAttnInterval-th).
func recurrentLayer(opts Options, l int) bool {
	return hybridArch(opts.Arch) && (l+1)%opts.FullAttnInterval != 0
}

// typeOf returns the type of the 2-D weight or 3-D expert tensor name:
// g.typ (g.expertTyp for experts), or what the mix gives it, as
// llama.cpp's llama_tensor_get_type does for Q4_K_M.
func (g *generator) typeOf(name string) gguf.GGMLType {
	if strings.Contains(name, "ssm_conv1d") {
		return gguf.TypeF32 // the convolution's taps, as the real files
	}
	typ := g.typ
	if strings.Contains(name, "_exps.") {
		typ = g.expertTyp
	}
	if g.mix != "Q4_K_M" {
		return typ
	}
	// use_more_bits: the first and last eighth of the layers and every
	// third between.
	moreBits := func(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }
	layer := -1
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		fmt.Sscanf(rest, "%d.", &layer)
	}
	switch {
	case name == "output.weight":
		return gguf.TypeQ6_K
	case layer >= 0 && (strings.HasSuffix(name, ".attn_v.weight") || strings.HasSuffix(name, ".ffn_down.weight") ||
		strings.HasSuffix(name, ".ffn_down_exps.weight")) && moreBits(layer, g.layers):
		return gguf.TypeQ6_K
	}
	return typ
}

// tensor adds a tensor of normally distributed values with the given mean
// and standard deviation. dims are fastest-varying first; 2-D tensors and
// 3-D expert tensors take the model's weight format, others stay F32.
func (g *generator) tensor(name string, mean, std float64, dims ...int) error {
	n := 1
	udims := make([]uint64, len(dims))
	for i, d := range dims {
		n *= d
		udims[i] = uint64(d)
	}
	typ := gguf.TypeF32
	if len(dims) >= 2 && !strings.HasSuffix(name, ".bias") {
		typ = g.typeOf(name)
	}
	g.n++
	if g.workers > 1 && len(dims) >= 2 && n >= 1<<16 {
		data, err := g.parallel(typ, mean, std, dims[0], n/dims[0])
		if err != nil {
			return fmt.Errorf("modelgen: tensor %s: %w", name, err)
		}
		return g.w.AddTensor(name, typ, udims, data)
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(mean + std*g.rng.NormFloat64())
	}
	data, err := encode(typ, vals)
	if err != nil {
		return fmt.Errorf("modelgen: tensor %s: %w", name, err)
	}
	return g.w.AddTensor(name, typ, udims, data)
}

// parallel generates and encodes a rows x cols matrix of type typ on
// g.workers goroutines, in chunks of whole rows, each chunk from a random
// stream of its own (seeded by the model's seed, the tensor's number and
// the chunk's).
func (g *generator) parallel(typ gguf.GGMLType, mean, std float64, cols, rows int) ([]byte, error) {
	row, err := encode(typ, make([]float32, cols))
	if err != nil {
		return nil, err
	}
	rowBytes := len(row)
	chunkRows := max(1, (1<<16)/cols)
	chunks := (rows + chunkRows - 1) / chunkRows
	out := make([]byte, rows*rowBytes)
	errs := make([]error, chunks)
	next := make(chan int)
	var wg sync.WaitGroup
	for range g.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals := make([]float32, chunkRows*cols)
			for c := range next {
				r0, r1 := c*chunkRows, min((c+1)*chunkRows, rows)
				rng := rand.New(rand.NewPCG(g.seed^g.n<<32, uint64(c)))
				v := vals[:(r1-r0)*cols]
				for i := range v {
					v[i] = float32(mean + std*rng.NormFloat64())
				}
				data, err := encode(typ, v)
				if err == nil && len(data) != (r1-r0)*rowBytes {
					err = fmt.Errorf("BUG: %d rows encoded to %d bytes, want %d", r1-r0, len(data), (r1-r0)*rowBytes)
				}
				if err != nil {
					errs[c] = err
					continue
				}
				copy(out[r0*rowBytes:], data)
			}
		}()
	}
	for c := range chunks {
		next <- c
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}

// generate adds the tensor d declares (named prefix+d.Name) if the model
// opts describes has it: a required one, an optional one its need tag asks
// for in this architecture, or one its gen tag's condition selects. Values
// follow d's gen tag, else the rule of its kind: norms 1 +- 0.1, biases
// 0 +- 0.1, other weights normal with a deviation of 1/sqrt(row length).
func (g *generator) generate(d tensortag.Decl, prefix string, layer int, opts Options, env tensortag.Env) error {
	name := prefix + d.Name
	gen, err := tensortag.ParseGen(d.Gen)
	if err != nil {
		return fmt.Errorf("modelgen: tensor %s: %w", name, err)
	}
	switch {
	case gen.When == "recurrent" || gen.When == "attention":
		if (gen.When == "recurrent") != recurrentLayer(opts, layer) {
			return nil
		}
	case !d.Needed(opts.Arch) && !when(gen.When, opts):
		return nil
	}
	shape, err := tensortag.ParseShape(d.Shape)
	if err != nil {
		return fmt.Errorf("modelgen: tensor %s: %w", name, err)
	}
	dims, err := shape.Generate(env)
	if err != nil {
		return fmt.Errorf("modelgen: tensor %s: %w", name, err)
	}
	if gen.Divisors > 0 {
		return g.divisors(name, dims[0], gen.Divisors)
	}
	mean, std := 0.0, 1/math.Sqrt(float64(dims[0]))
	switch {
	case gen.Std > 0:
		std = gen.Std
	case strings.HasSuffix(name, "ssm_a"):
		mean, std = -1, 0.2 // -exp(A_log): a decay
	case strings.HasSuffix(name, ".bias"):
		std = 0.1
	case strings.Contains(name, "norm"):
		mean, std = 1, 0.1
	}
	return g.tensor(name, mean, std, dims...)
}

// when reports whether the gen tag condition c (see tensortag.Gen) holds
// for opts; "" never does.
func when(c string, opts Options) bool {
	switch c {
	case "always":
		return true
	case "untied":
		return !opts.Tied
	case "rope_freqs":
		return opts.RopeFreqs
	case "rerank":
		return opts.Rerank
	}
	return false
}

// divisors adds an F32 vector of n RoPE frequency divisors rising from 1 to
// top, like the real files'.
func (g *generator) divisors(name string, n int, top float64) error {
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(1 + (top-1)*float64(i)/float64(max(n-1, 1)))
	}
	data, _ := encode(gguf.TypeF32, vals)
	return g.w.AddTensor(name, gguf.TypeF32, []uint64{uint64(n)}, data)
}

// archDecls are the tensors an architecture declares.
type archDecls struct {
	arch  string
	decls []tensortag.Decl
}

// archDeclsOf returns the tensors arch declares; nil if it is unknown.
func archDeclsOf(arch string) []tensortag.Decl {
	for _, a := range archTable() {
		if a.arch == arch {
			return a.decls
		}
	}
	return nil
}

// archNames lists the architectures of archTable.
func archNames() string {
	var names []string
	for _, a := range archTable() {
		names = append(names, a.arch)
	}
	return strings.Join(names, ", ")
}

// ropeDims is the rotated width: three quarters of a head for phi3 and a
// quarter for qwen35 (partial rotations, even), the whole head otherwise.
func ropeDims(o Options) int {
	switch o.Arch {
	case "phi3":
		return o.HeadDim * 3 / 4 &^ 1
	case "qwen35", "qwen35moe":
		return max(o.HeadDim/4&^1, 2) // a quarter, as Qwen3.5's 64 of 256
	}
	return o.HeadDim
}

func encode(t gguf.GGMLType, vals []float32) ([]byte, error) {
	if t == gguf.TypeF32 {
		out := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out, nil
	}
	return quant.Quantize(t, vals)
}

// Generate builds the model described by opts.
func Generate(opts Options) (*gguf.Writer, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	var vocab *Vocab
	var err error
	switch {
	case opts.Arch == "bert":
		vocab, err = WPMVocab(opts.VocabSize)
	case opts.Vocab == "bpe":
		vocab, err = BPEVocab(opts.VocabSize)
	case opts.Vocab == "spm":
		vocab, err = SPMVocab(opts.VocabSize)
	default:
		err = fmt.Errorf("modelgen: unknown vocabulary %q (want bpe or spm)", opts.Vocab)
	}
	if err != nil {
		return nil, err
	}
	if len(opts.Words) > 0 {
		if vocab.Model != "gpt2" {
			return nil, fmt.Errorf("modelgen: Words are for BPE vocabularies, not %s", vocab.Model)
		}
		if err := vocab.addWords(opts.Words); err != nil {
			return nil, err
		}
	}
	for _, sp := range opts.Specials {
		vocab.Tokens = append(vocab.Tokens, sp)
		vocab.Types = append(vocab.Types, tokenControl)
		if vocab.Scores != nil {
			vocab.Scores = append(vocab.Scores, 0)
		}
	}
	nVocab := len(vocab.Tokens)
	w := gguf.NewWriter()
	g := &generator{w: w, rng: rand.New(rand.NewPCG(opts.Seed, 0x766b6c6c6d)), typ: opts.Type,
		mix: opts.Mix, layers: opts.Layers, seed: opts.Seed, workers: opts.Workers, expertTyp: opts.ExpertType}
	a := opts.Arch
	w.MustSet("general.architecture", a)
	w.MustSet("general.name", opts.Name)
	w.MustSet("general.quantization_version", uint32(2))
	w.MustSet(a+".context_length", uint32(opts.Context))
	w.MustSet(a+".embedding_length", uint32(opts.Embd))
	w.MustSet(a+".block_count", uint32(opts.Layers))
	w.MustSet(a+".feed_forward_length", uint32(opts.FFN))
	w.MustSet(a+".attention.head_count", uint32(opts.Heads))
	if a == "bert" {
		w.MustSet(a+".attention.layer_norm_epsilon", float32(1e-12))
		w.MustSet(a+".attention.causal", false)
		w.MustSet(a+".pooling_type", uint32(1)) // mean
		w.MustSet("tokenizer.ggml.token_type_count", uint32(2))
		if opts.Rerank {
			w.MustSet(a+".pooling_type", uint32(4)) // rank
		}
	} else {
		w.MustSet(a+".attention.head_count_kv", uint32(opts.KVHeads))
		w.MustSet(a+".attention.layer_norm_rms_epsilon", float32(1e-5))
		w.MustSet(a+".rope.freq_base", opts.RopeBase)
		w.MustSet(a+".rope.dimension_count", uint32(ropeDims(opts)))
		w.MustSet(a+".attention.key_length", uint32(opts.HeadDim))
		w.MustSet(a+".attention.value_length", uint32(opts.HeadDim))
	}
	switch a {
	case "gemma3":
		// Layers 0, 2, ... local (windowed, base 10000, unscaled); the others
		// global with linear scaling.
		w.MustSet(a+".attention.sliding_window", uint32(opts.Window))
		w.MustSet(a+".attention.sliding_window_pattern", uint32(2))
		w.MustSet(a+".rope.freq_base_swa", float32(10000))
		w.MustSet(a+".rope.scaling.type", "linear")
		w.MustSet(a+".rope.scaling.factor", float32(4))
	case "gemma2":
		// Caps low enough to bend random weights' scores and logits.
		w.MustSet(a+".attention.sliding_window", uint32(opts.Window))
		w.MustSet(a+".attn_logit_softcapping", float32(2))
		w.MustSet(a+".final_logit_softcapping", float32(5))
	case "phi3":
		w.MustSet(a+".rope.scaling.original_context_length", uint32(opts.Context))
		w.MustSet(a+".rope.scaling.attn_factor", float32(1.19))
	case "gpt-oss":
		// As the real files: every other layer windowed, YaRN ×32 over an
		// original context of 4096.
		w.MustSet(a+".attention.sliding_window", uint32(opts.Window))
		w.MustSet(a+".rope.scaling.type", "yarn")
		w.MustSet(a+".rope.scaling.factor", float32(32))
		w.MustSet(a+".rope.scaling.original_context_length", uint32(4096))
	}
	if hybridArch(a) {
		n := ropeDims(opts) / 2 // rotated pairs, in three sections (text: all the position)
		w.MustSet(a+".rope.dimension_sections", []int32{int32(n+2) / 3, int32(n+1) / 3, int32(n) / 3, 0})
		w.MustSet(a+".ssm.conv_kernel", uint32(hybridKernel))
		w.MustSet(a+".ssm.state_size", uint32(opts.SSMState))
		w.MustSet(a+".ssm.group_count", uint32(opts.SSMGroups))
		w.MustSet(a+".ssm.time_step_rank", uint32(opts.SSMHeads))
		w.MustSet(a+".ssm.inner_size", uint32(opts.SSMHeads*opts.SSMState))
		w.MustSet(a+".full_attention_interval", uint32(opts.FullAttnInterval))
	}
	if moeArch(a) {
		w.MustSet(a+".expert_count", uint32(opts.Experts))
		w.MustSet(a+".expert_used_count", uint32(opts.ExpertsUsed))
		w.MustSet(a+".expert_feed_forward_length", uint32(opts.ExpertFFN))
		if a == "qwen35moe" {
			w.MustSet(a+".expert_shared_feed_forward_length", uint32(opts.ExpertFFN))
		}
	}
	w.MustSet(a+".vocab_size", uint32(nVocab))
	vocab.set(w)

	E := opts.Embd
	q, kv := opts.Heads*opts.HeadDim, opts.KVHeads*opts.HeadDim
	if a == "bert" {
		q, kv = E, E // no grouped heads: the file has no head_count_kv
	}
	env := tensortag.Env{"E": E, "V": nVocab, "F": opts.FFN, "D": opts.HeadDim, "q": q, "kv": kv, "qv": q, "kvv": kv,
		"R": ropeDims(opts), "C": opts.Context, "X": opts.Experts, "FX": opts.ExpertFFN, "FS": opts.ExpertFFN, "H": opts.Heads,
		"SC": (2*opts.SSMGroups + opts.SSMHeads) * opts.SSMState, "SK": hybridKernel, "SH": opts.SSMHeads,
		"SD": opts.SSMState, "SV": opts.SSMHeads * opts.SSMState}
	decls := archDeclsOf(a)
	for i := 0; i < len(decls); {
		if !decls[i].Block {
			if err := g.generate(decls[i], "", -1, opts, env); err != nil {
				return nil, err
			}
			i++
			continue
		}
		// The block struct's tensors, for each layer.
		j := i
		for j < len(decls) && decls[j].Block {
			j++
		}
		for l := range opts.Layers {
			for _, d := range decls[i:j] {
				if err := g.generate(d, fmt.Sprintf("blk.%d.", l), l, opts, env); err != nil {
					return nil, err
				}
			}
		}
		i = j
	}
	w.MustSet("general.file_type", fileType(opts.Type))
	return w, nil
}

// fileType maps a weight format to llama.cpp's general.file_type value.
func fileType(t gguf.GGMLType) uint32 {
	switch t {
	case gguf.TypeF32:
		return 0
	case gguf.TypeF16:
		return 1
	case gguf.TypeQ4_0:
		return 2
	case gguf.TypeQ4_1:
		return 3
	case gguf.TypeQ8_0:
		return 7
	case gguf.TypeQ5_0:
		return 8
	case gguf.TypeQ5_1:
		return 9
	case gguf.TypeQ2_K:
		return 10
	case gguf.TypeQ3_K:
		return 12
	case gguf.TypeQ4_K:
		return 15
	case gguf.TypeQ5_K:
		return 17
	case gguf.TypeQ6_K:
		return 18
	case gguf.TypeIQ4_NL:
		return 25
	case gguf.TypeIQ4_XS:
		return 30
	case gguf.TypeBF16:
		return 32
	case gguf.TypeMXFP4:
		return 38 // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
	}
	return 0
}

// WriteFile generates the model described by opts into the named file.
func WriteFile(path string, opts Options) error {
	w, err := Generate(opts)
	if err != nil {
		return err
	}
	if err := w.WriteFile(path); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
