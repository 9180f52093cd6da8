package tokenizer

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/gguf"
)

// build writes kv into an in-memory GGUF file and parses it back.
func build(t *testing.T, kv map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for k, v := range kv {
		if err := w.Set(k, v); err != nil {
			t.Fatalf("Set(%s): %v", k, err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.NewFile(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// spmVocab is a tiny SentencePiece vocabulary: <unk>, <s>, </s>, the 256
// byte tokens, then pieces with scores.
func spmVocab(pieces map[string]float32) map[string]any {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{typeUnknown, typeControl, typeControl}
	scores := []float32{0, 0, 0}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, typeByte)
		scores = append(scores, 0)
	}
	keys := make([]string, 0, len(pieces))
	for k := range pieces {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		tokens = append(tokens, k)
		types = append(types, typeNormal)
		scores = append(scores, pieces[k])
	}
	return map[string]any{
		keyModel: "llama", keyTokens: tokens, keyTokenType: types, keyScores: scores,
	}
}

// TestNewErrors checks that bad metadata is an error naming the key.
func TestNewErrors(t *testing.T) {
	gpt2 := func(extra map[string]any) map[string]any {
		kv := map[string]any{keyModel: "gpt2", keyTokens: []string{"a", "b", "ab"}, keyMerges: []string{"a b"}}
		for k, v := range extra {
			kv[k] = v
		}
		return kv
	}
	cases := []struct {
		name string
		kv   map[string]any
		key  string
	}{
		{"no model", map[string]any{keyTokens: []string{"a"}}, keyModel},
		{"unknown model", map[string]any{keyModel: "nope", keyTokens: []string{"a"}}, keyModel},
		{"model not a string", map[string]any{keyModel: int32(3)}, keyModel},
		{"no tokens", map[string]any{keyModel: "llama"}, keyTokens},
		{"scores length", map[string]any{keyModel: "llama", keyTokens: []string{"a", "b"}, keyScores: []float32{1}}, keyScores},
		{"types length", map[string]any{keyModel: "llama", keyTokens: []string{"a", "b"}, keyTokenType: []int32{1}}, keyTokenType},
		{"unknown pre", gpt2(map[string]any{keyPre: "klingon"}), keyPre},
		{"no merges", map[string]any{keyModel: "gpt2", keyTokens: []string{"a"}}, keyMerges},
		{"add_bos not bool", gpt2(map[string]any{keyAddBOS: "yes"}), keyAddBOS},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(build(t, c.kv))
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Errorf("New() error = %v, want one naming %q", err, c.key)
			}
		})
	}
}

// TestSyntheticSPM checks the merge order by score, byte fallback and the
// space prefix on a vocabulary small enough to work out by hand.
func TestSyntheticSPM(t *testing.T) {
	kv := spmVocab(map[string]float32{"▁": -1, "a": -1, "b": -1, "c": -1, "▁a": -5, "ab": -2, "▁ab": -3, "bc": -1.5})
	tok, err := New(build(t, kv))
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int32 { v, _ := tok.TokenID(s); return v }
	cases := []struct {
		in   string
		want []int32
	}{
		// "▁ab": ab (-2) beats ▁a (-5); then ▁ab (-3).
		{"ab", []int32{id("▁ab")}},
		// "▁abc": bc (-1.5) first, which makes ab stale; then ▁a (-5).
		{"abc", []int32{id("▁a"), id("bc")}},
		// "x" is no token: its byte token.
		{"x", []int32{id("▁"), 3 + 'x'}},
		{"é", []int32{id("▁"), 3 + 0xc3, 3 + 0xa9}},
	}
	for _, c := range cases {
		got, err := tok.Encode(c.in, false, false)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, %v, want %v", c.in, got, err, c.want)
		}
		if back, _ := tok.Decode(got); back != c.in {
			t.Errorf("Decode(%v) = %q, want %q", got, back, c.in)
		}
	}
	if got, _ := tok.Encode("ab", true, false); !slices.Equal(got, []int32{1, id("▁ab")}) {
		t.Errorf("Encode(%q, true, false) = %v, want [1 %d]", "ab", got, id("▁ab"))
	}
}

// TestSyntheticBPE checks merge ranks (lowest first, then leftmost) on a
// byte-level vocabulary worked out by hand.
func TestSyntheticBPE(t *testing.T) {
	kv := map[string]any{
		keyModel:  "gpt2",
		keyPre:    "gpt-2",
		keyTokens: []string{"a", "b", "c", "Ġ", "ab", "bc", "abc", "Ġa", "<|end|>"},
		keyMerges: []string{"b c", "a b", "a bc", "Ġ a"},
		keyTokenType: []int32{typeNormal, typeNormal, typeNormal, typeNormal, typeNormal, typeNormal, typeNormal,
			typeNormal, typeControl},
	}
	tok, err := New(build(t, kv))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in    string
		parse bool
		want  []int32
	}{
		{"abc", false, []int32{6}},         // b c (rank 0), then a bc (rank 2)
		{"ab", false, []int32{4}},          // a b
		{"cab a", false, []int32{2, 4, 7}}, // words "cab", " a"
		{"<|end|>", true, []int32{8}},
		{"a<|end|>", true, []int32{0, 8}},
	}
	for _, c := range cases {
		got, err := tok.Encode(c.in, false, c.parse)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q, false, %v) = %v, %v, want %v", c.in, c.parse, got, err, c.want)
		}
	}
	if !tok.IsEOG(8) {
		t.Errorf("IsEOG(8 <|end|>) = false, want true")
	}
	if got, _ := tok.Decode([]int32{2, 4, 7, 8}); got != "cab a" {
		t.Errorf("Decode = %q, want %q", got, "cab a")
	}
}

// TestSyntheticHarmony checks gpt-oss's (o200k_harmony) special tokens as
// the reference's vocabulary loader treats them: <|return|> and <|call|>
// end generation and are not rendered; <|end|> only ends a message, so it
// neither ends generation nor disappears from the text; the structure
// tokens are always rendered, so the chat parser sees the channels.
func TestSyntheticHarmony(t *testing.T) {
	specials := []string{"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"}
	tokens := append([]string{"a", "b", "ab"}, specials...)
	types := []int32{typeNormal, typeNormal, typeNormal}
	for range specials {
		types = append(types, typeControl)
	}
	id := func(s string) int32 { return int32(slices.Index(tokens, s)) }
	tok, err := New(build(t, map[string]any{keyModel: "gpt2", keyPre: "gpt-4o", keyTokens: tokens,
		keyMerges: []string{"a b"}, keyTokenType: types}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tok      string
		eog      bool
		rendered bool
	}{
		{"<|return|>", true, false},
		{"<|call|>", true, false},
		{"<|end|>", false, true},
		{"<|start|>", false, true},
		{"<|channel|>", false, true},
		{"<|message|>", false, true},
		{"<|constrain|>", false, true},
	} {
		if got := tok.IsEOG(id(c.tok)); got != c.eog {
			t.Errorf("IsEOG(%s) = %v, want %v", c.tok, got, c.eog)
		}
		want := ""
		if c.rendered {
			want = c.tok
		}
		if got, err := tok.Decode([]int32{id(c.tok)}); err != nil || got != want {
			t.Errorf("Decode(%s) = %q, %v, want %q", c.tok, got, err, want)
		}
	}
	text := "<|channel|>ab<|message|>ab<|end|>"
	ids, err := tok.Encode(text, false, true)
	want := []int32{id("<|channel|>"), 2, id("<|message|>"), 2, id("<|end|>")}
	if err != nil || !slices.Equal(ids, want) {
		t.Errorf("Encode(%q) = %v, %v, want %v", text, ids, err, want)
	}
}
