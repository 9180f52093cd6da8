package api

import (
	"encoding/json"
	"testing"

	"github.com/vkllm/vkllm/engine"
)

// TestDetokenizeSpecialEngine checks /extras/detokenize over the engine's
// tokenizer, whose decoder leaves control tokens out: the special tokens
// that /extras/tokenize reads in a text come back as their text.
func TestDetokenizeSpecialEngine(t *testing.T) {
	m := loadTinyModel(t)
	b := newTestBackend(t, m, engine.SchedulerConfig{})
	info := b.Info()
	if info.BOSText == "" || info.EOSText == "" {
		t.Skip("the tiny model has no BOS and EOS tokens")
	}
	ts := newReadyServer(t, b, Config{})
	in := info.BOSText + "hello world" + info.EOSText
	r := ts.post("/extras/tokenize", `{"input":`+jsonQuoted(in)+`}`)
	toks, _ := json.Marshal(decodeBody(t, r.body)["tokens"])
	plain, err := b.Detokenize(mustTokenize(t, b, "hello world"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := ""
	if info.AddBOS {
		prefix = info.BOSText
	}
	want := prefix + info.BOSText + plain + info.EOSText
	r = ts.post("/extras/detokenize", `{"tokens":`+string(toks)+`}`)
	if got := decodeBody(t, r.body)["text"]; got != want {
		t.Errorf("detokenize(tokenize(%q)) = %q, want %q", in, got, want)
	}
}

func mustTokenize(t *testing.T, b Backend, text string) []int32 {
	t.Helper()
	toks, err := b.Tokenize(text, true, true)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}
