// Command mkmodel writes a small deterministic random-weight GGUF model.
//
//	go run ./tools/mkmodel -arch qwen2 -type Q8_0 -embd 256 -layers 4 -o tiny.gguf
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
	var typ, out string
	flag.StringVar(&o.Arch, "arch", "llama", "architecture: llama, qwen2, qwen3 or bert")
	flag.StringVar(&o.Vocab, "vocab", "bpe", "built-in vocabulary: bpe (byte-level BPE) or spm (SentencePiece); bert uses WordPiece")
	flag.IntVar(&o.VocabSize, "vocab-size", 1024, "at most this many tokens (the built-in corpus supports about 700 BPE, 850 SPM)")
	flag.StringVar(&typ, "type", "F32", "format of the 2-D weights: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, ...")
	flag.IntVar(&o.Embd, "embd", 64, "embedding width")
	flag.IntVar(&o.Layers, "layers", 2, "number of blocks")
	flag.IntVar(&o.Heads, "heads", 4, "attention heads")
	flag.IntVar(&o.KVHeads, "kv-heads", 0, "key/value heads (default heads/2)")
	flag.IntVar(&o.HeadDim, "head-dim", 0, "per-head width (default embd/heads)")
	flag.IntVar(&o.FFN, "ffn", 0, "feed-forward width (default 3*embd rounded to the format's block)")
	flag.IntVar(&o.Context, "ctx", 2048, "training context length written to the metadata")
	flag.BoolVar(&o.Tied, "tied", false, "omit output.weight (the output reuses token_embd.weight)")
	flag.Uint64Var(&o.Seed, "seed", 1, "random seed of the weights")
	flag.StringVar(&out, "o", "", "output file (required)")
	flag.Parse()
	if out == "" {
		fmt.Fprintln(os.Stderr, "mkmodel: -o is required")
		os.Exit(2)
	}
	t, err := ParseType(typ)
	if err == nil {
		o.Type = t
		err = modelgen.WriteFile(out, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
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
