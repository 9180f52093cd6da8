package modelgen

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/tokenizer"
	"github.com/vkllm/vkllm/gguf"
)

func TestGenerate(t *testing.T) {
	cases := []struct {
		opts    Options
		tensors []string // a few that must be present
		absent  []string
	}{
		{Options{Arch: "llama", Vocab: "spm"}, []string{"output.weight", "blk.1.ffn_gate.weight"}, []string{"blk.0.attn_q.bias"}},
		{Options{Arch: "qwen2", Tied: true, Type: gguf.TypeQ8_0}, []string{"blk.0.attn_q.bias", "blk.0.attn_v.bias"}, []string{"output.weight"}},
		{Options{Arch: "qwen3", Type: gguf.TypeF16}, []string{"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight"}, nil},
		{Options{Arch: "bert"}, []string{"position_embd.weight", "blk.0.layer_output_norm.bias"}, []string{"output.weight", "cls.weight"}},
		{Options{Arch: "bert", Rerank: true}, []string{"cls.weight", "cls.output.bias"}, nil},
		{Options{Arch: "phi3"}, []string{"blk.1.attn_qkv.weight", "rope_factors_long.weight"}, []string{"blk.0.attn_q.weight", "rope_freqs.weight"}},
		{Options{Arch: "gemma3", Tied: true}, []string{"blk.0.attn_q_norm.weight", "blk.1.post_ffw_norm.weight"}, []string{"output.weight"}},
		{Options{Arch: "gemma2"}, []string{"output.weight"}, []string{"blk.0.attn_q_norm.weight"}},
		{Options{Arch: "llama", Type: gguf.TypeMXFP4}, []string{"output.weight", "blk.1.ffn_down.weight"}, nil},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%v", c.opts.Arch, c.opts.Type), func(t *testing.T) {
			start := time.Now()
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := WriteFile(path, c.opts); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Logf("generation took %v", d)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, name := range c.tensors {
				if _, ok := f.Tensor(name); !ok {
					t.Errorf("tensor %s missing", name)
				}
			}
			for _, name := range c.absent {
				if _, ok := f.Tensor(name); ok {
					t.Errorf("tensor %s present, want absent", name)
				}
			}
			emb, _ := f.Tensor("token_embd.weight")
			want := gguf.TypeF32
			if c.opts.Type != 0 {
				want = c.opts.Type
			}
			if emb.Type != want {
				t.Errorf("token_embd.weight type %v, want %v", emb.Type, want)
			}
			if c.opts.Type == gguf.TypeMXFP4 {
				// llama.cpp's LLAMA_FTYPE_MOSTLY_MXFP4_MOE.
				if ft, err := f.Uint32("general.file_type"); err != nil || ft != 38 {
					t.Errorf("general.file_type = %d, %v, want 38", ft, err)
				}
			}
			tok, err := tokenizer.New(f)
			if err != nil {
				t.Fatal(err)
			}
			if tok.VocabSize() != int(emb.Dims[1]) {
				t.Errorf("vocabulary %d tokens, embedding %d rows", tok.VocabSize(), emb.Dims[1])
			}
			text := "The quick brown fox jumps over the lazy dog."
			ids, err := tok.Encode(text, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if c.opts.Arch != "bert" {
				if len(ids) >= len(text)/3 {
					t.Errorf("Encode(%q) = %d tokens; the merges should make fewer than %d", text, len(ids), len(text)/3)
				}
				if got, _ := tok.Decode(ids); got != text {
					t.Errorf("Decode(Encode(%q)) = %q", text, got)
				}
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	gen := func(seed uint64) []byte {
		w, err := Generate(Options{Arch: "qwen3", Seed: seed, Type: gguf.TypeQ8_0})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, b, c := gen(1), gen(1), gen(2)
	if !bytes.Equal(a, b) {
		t.Error("two models with seed 1 differ")
	}
	if bytes.Equal(a, c) {
		t.Error("models with seeds 1 and 2 are identical")
	}
}

func TestOptionErrors(t *testing.T) {
	for _, o := range []Options{
		{Arch: "gpt9"},
		{Heads: 4, KVHeads: 3},
		{Type: gguf.TypeQ4_K, Embd: 64},
		{Vocab: "wordpiece"},
		{Arch: "gemma2", RopeFreqs: true},
		{Arch: "llama", Rerank: true},
	} {
		if _, err := Generate(o); err == nil {
			t.Errorf("Generate(%+v) succeeded, want an error", o)
		}
	}
}

// TestWordsAndSpecials: added words are one token each (the piece they
// stand for), added specials are control tokens that special parsing
// finds, and the BPE vocabulary's own special tokens keep their roles.
func TestWordsAndSpecials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	specials := []string{"<fake_token_around_image>", "<global-img>"}
	if err := WriteFile(path, Options{Words: []string{"\n\n"}, Specials: specials}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.New(f)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode("a\n\n", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || string(tok.Piece(ids[1])) != "\n\n" {
		t.Errorf("Encode(%q) = %v, want the word %q as one token after a", "a\n\n", ids, "\n\n")
	}
	for _, s := range specials {
		ids, err := tok.Encode(s, false, true)
		if err != nil || len(ids) != 1 || !tok.IsControl(ids[0]) || tok.TokenText(ids[0]) != s {
			t.Errorf("Encode(%q) = %v, %v: want one control token", s, ids, err)
		}
	}
	if bos, _ := tok.BOS(); tok.TokenText(bos) != "<|endoftext|>" {
		t.Errorf("BOS is %q, want <|endoftext|>", tok.TokenText(bos))
	}
	if eot, _ := tok.EOT(); tok.TokenText(eot) != "<|im_end|>" {
		t.Errorf("EOT is %q, want <|im_end|>", tok.TokenText(eot))
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "s.gguf"), Options{Vocab: "spm", Words: []string{"\n\n"}}); err == nil {
		t.Error("Words with an SPM vocabulary: no error")
	}
}

// TestMixAndWorkers generates llama.cpp's Q4_K_M mix (output, and attn_v
// and ffn_down in the layers with more bits, Q6_K) on several workers:
// the types follow the mix, and a second generation is identical.
func TestMixAndWorkers(t *testing.T) {
	opts := Options{Arch: "llama", Type: gguf.TypeQ4_K, Mix: "Q4_K_M", Embd: 256, Layers: 8, FFN: 1024, VocabSize: 600, Workers: 3}
	gen := func() (map[string]gguf.GGMLType, []byte) {
		w, err := Generate(opts)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		types := map[string]gguf.GGMLType{}
		for _, ti := range f.Tensors {
			types[ti.Name] = ti.Type
		}
		return types, buf.Bytes()
	}
	types, first := gen()
	// use_more_bits(i, 8): i < 1, i >= 7, (i-1)%3 == 2: layers 0, 3, 6, 7.
	want := map[string]gguf.GGMLType{
		"output.weight": gguf.TypeQ6_K, "token_embd.weight": gguf.TypeQ4_K,
		"blk.0.attn_v.weight": gguf.TypeQ6_K, "blk.1.attn_v.weight": gguf.TypeQ4_K, "blk.3.ffn_down.weight": gguf.TypeQ6_K,
		"blk.4.ffn_down.weight": gguf.TypeQ4_K, "blk.7.ffn_down.weight": gguf.TypeQ6_K, "blk.6.attn_q.weight": gguf.TypeQ4_K,
		"blk.2.attn_norm.weight": gguf.TypeF32,
	}
	for name, typ := range want {
		if types[name] != typ {
			t.Errorf("%s is %v, want %v", name, types[name], typ)
		}
	}
	if _, second := gen(); !bytes.Equal(first, second) {
		t.Error("two generations on 3 workers differ")
	}
	if _, err := Generate(Options{Type: gguf.TypeQ8_0, Mix: "Q4_K_M"}); err == nil {
		t.Error("Mix Q4_K_M with Q8_0 weights succeeded")
	}
}
