// Command mkmodel writes a small deterministic random-weight GGUF model.
//
//	go run ./tools/mkmodel -arch qwen2 -type Q8_0 -embd 256 -layers 4 -o tiny.gguf
//
// Benchmark-sized models (tools/gpucheck) take a real vocabulary's size
// with -vocab-pad, llama.cpp's Q4_K_M mix with -type Q4_K_M, and every
// core with -workers:
//
//	mkmodel -type Q4_K_M -embd 4096 -layers 32 -heads 32 -kv-heads 8 -ffn 14336 -vocab-pad 128256 -workers 16 -o 8b.gguf
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/tools/modelgen"
)

func main() {
	var o modelgen.Options
	var typ, expertTyp, out string
	var pad int
	flag.StringVar(&o.Arch, "arch", "llama", "architecture: llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, gpt-oss or bert")
	flag.StringVar(&o.Vocab, "vocab", "bpe", "built-in vocabulary: bpe (byte-level BPE) or spm (SentencePiece); bert uses WordPiece")
	flag.IntVar(&o.VocabSize, "vocab-size", 1024, "at most this many tokens (the built-in corpus supports about 700 BPE, 850 SPM)")
	flag.StringVar(&typ, "type", "F32", "format of the 2-D weights: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, MXFP4, ..., or the mix Q4_K_M (Q4_K, some tensors Q6_K as llama-quantize does)")
	flag.IntVar(&pad, "vocab-pad", 0, "pad the vocabulary to this many tokens with reserved control tokens (a real vocabulary's size for benchmarks: 128256)")
	flag.IntVar(&o.Workers, "workers", 1, "goroutines generating the weights (more than 1: other random values than the sequential generator's)")
	flag.IntVar(&o.Embd, "embd", 64, "embedding width")
	flag.IntVar(&o.Layers, "layers", 2, "number of blocks")
	flag.IntVar(&o.Heads, "heads", 4, "attention heads")
	flag.IntVar(&o.KVHeads, "kv-heads", 0, "key/value heads (default heads/2)")
	flag.IntVar(&o.HeadDim, "head-dim", 0, "per-head width (default embd/heads)")
	flag.IntVar(&o.FFN, "ffn", 0, "feed-forward width (default 3*embd rounded to the format's block)")
	flag.IntVar(&o.Context, "ctx", 2048, "training context length written to the metadata")
	flag.BoolVar(&o.Tied, "tied", false, "omit output.weight (the output reuses token_embd.weight)")
	flag.Uint64Var(&o.Seed, "seed", 1, "random seed of the weights")
	flag.IntVar(&o.Experts, "experts", 0, "qwen3moe, gpt-oss, qwen35moe: experts per layer (default 8)")
	flag.IntVar(&o.ExpertsUsed, "experts-used", 0, "qwen3moe, gpt-oss, qwen35moe: experts each token uses (default 2)")
	flag.IntVar(&o.ExpertFFN, "expert-ffn", 0, "qwen3moe, gpt-oss, qwen35moe: an expert's feed-forward width (default ffn/2 rounded to the format's block)")
	flag.StringVar(&expertTyp, "expert-type", "", "qwen3moe, gpt-oss, qwen35moe: format of the experts' 3-D tensors (default -type; gpt-oss files use MXFP4)")
	flag.IntVar(&o.SSMGroups, "ssm-groups", 0, "qwen35, qwen35moe: key heads of the recurrent layers (default 2)")
	flag.IntVar(&o.SSMHeads, "ssm-heads", 0, "qwen35, qwen35moe: value heads of the recurrent layers (default 4)")
	flag.IntVar(&o.SSMState, "ssm-state", 0, "qwen35, qwen35moe: width of the recurrent layers' heads (default head-dim)")
	flag.IntVar(&o.FullAttnInterval, "full-attn-interval", 0, "qwen35, qwen35moe: a full-attention layer every so many (default 2; Qwen3.5 uses 4)")
	flag.StringVar(&out, "o", "", "output file (required)")
	flag.Parse()
	if out == "" {
		fmt.Fprintln(os.Stderr, "mkmodel: -o is required")
		os.Exit(2)
	}
	if strings.EqualFold(typ, "Q4_K_M") {
		typ, o.Mix = "Q4_K", "Q4_K_M"
	}
	t, err := ParseType(typ)
	if err == nil && pad > 0 {
		o.Specials, err = padding(o, pad)
	}
	if err == nil && expertTyp != "" {
		o.ExpertType, err = ParseType(expertTyp)
	}
	if err == nil {
		o.Type = t
		err = modelgen.WriteFile(out, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
}

// padding returns the reserved control tokens that bring o's built-in
// vocabulary to size tokens, named as Llama 3's.
func padding(o modelgen.Options, size int) ([]string, error) {
	n := o.VocabSize
	if o.Arch != "bert" {
		var v *modelgen.Vocab
		var err error
		if o.Vocab == "spm" {
			v, err = modelgen.SPMVocab(o.VocabSize)
		} else {
			v, err = modelgen.BPEVocab(o.VocabSize)
		}
		if err != nil {
			return nil, err
		}
		n = len(v.Tokens)
	}
	if size < n {
		return nil, fmt.Errorf("-vocab-pad %d is below the built-in vocabulary's %d tokens", size, n)
	}
	out := make([]string, 0, size-n)
	for i := range size - n {
		out = append(out, fmt.Sprintf("<|reserved_special_token_%d|>", i))
	}
	return out, nil
}

// ParseType returns the tensor type named s (case-insensitive ggml name).
func ParseType(s string) (gguf.GGMLType, error) {
	for id := gguf.GGMLType(0); id < 64; id++ {
		if _, ok := id.Info(); ok && strings.EqualFold(id.String(), s) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q", s)
}
