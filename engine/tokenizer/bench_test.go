package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/fixtures"
)

// benchText returns War and Peace chapter 1 repeated to at least 1 MiB.
func benchText(b *testing.B) string {
	b.Helper()
	p := filepath.Join(fixtures.Dir(b, "models"), "war-and-peace-ch1.txt")
	raw, err := os.ReadFile(p)
	if err != nil {
		b.Skipf("%s: %v", p, err)
	}
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.Write(raw)
	}
	return sb.String()
}

func benchmarkEncode(b *testing.B, vocab string) {
	tok := loadVocab(b, vocab)
	text := benchText(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	var n int
	for i := 0; i < b.N; i++ {
		ids, err := tok.Encode(text, false, false)
		if err != nil {
			b.Fatal(err)
		}
		n += len(ids)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncodeSPM encodes 1 MiB of English with the Llama SentencePiece
// vocabulary.
func BenchmarkEncodeSPM(b *testing.B) { benchmarkEncode(b, "llama-spm") }

// BenchmarkEncodeBPE encodes 1 MiB of English with the GPT-2 vocabulary.
func BenchmarkEncodeBPE(b *testing.B) { benchmarkEncode(b, "gpt-2") }

// BenchmarkEncodeLongWord encodes one 1 MiB word without spaces, the input
// that would expose a merge loop worse than n log n.
func BenchmarkEncodeLongWord(b *testing.B) {
	for _, v := range []string{"llama-spm", "gpt-2"} {
		b.Run(v, func(b *testing.B) {
			tok := loadVocab(b, v)
			text := longWord(1 << 20)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := tok.Encode(text, false, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
