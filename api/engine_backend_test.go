package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// loadTinyModel generates a tiny deterministic llama and loads it on the
// Vulkan device (lavapipe in CI).
func loadTinyModel(t *testing.T) *engine.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(path, engine.Config{CtxSize: 512, BatchSize: 64})
	if err != nil {
		t.Fatalf("engine.Load(%s) = %v", path, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// greedy is the independent expectation: prefill and argmax decode with
// the engine directly, then the tokenizer's decoder.
func greedy(t *testing.T, m *engine.Model, prompt []int32, n int) string {
	t.Helper()
	logits, err := m.Prefill(context.Background(), 0, 0, prompt)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	pos := len(prompt)
	for range n {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		id := int32(best)
		if m.Tok.IsEOG(id) {
			break
		}
		if !m.Tok.IsControl(id) {
			out = append(out, m.Tok.Piece(id)...)
		}
		if logits, err = m.Step(0, pos, id); err != nil {
			t.Fatal(err)
		}
		pos++
	}
	return string(out)
}

// newTestBackend starts the scheduler of m for the test's duration.
func newTestBackend(t *testing.T, m *engine.Model, cfg engine.SchedulerConfig) *EngineBackend {
	t.Helper()
	b := NewEngineBackend(m, "tiny", engine.PoolNone, cfg)
	t.Cleanup(b.Close)
	return b
}

// reusedBy returns how many prompt tokens the requests f sends took from
// the cache.
func reusedBy(b *EngineBackend, f func()) int {
	before := b.Stats().ReusedTokens
	f()
	return int(b.Stats().ReusedTokens - before)
}

func TestRealBackend(t *testing.T) {
	m := loadTinyModel(t)
	ref := loadTinyModel(t) // the same weights, for the expectations
	be := newTestBackend(t, m, engine.SchedulerConfig{})
	ts := newReadyServer(t, be, Config{})
	b := ts.s.backend

	if r := ts.do("GET", "/health", ""); r.status != 200 {
		t.Fatalf("GET /health = %d %s, want 200", r.status, r.body)
	}
	if r := ts.do("GET", "/v1/models", ""); jsonPath(decodeBody(t, r.body), "data", 0, "id") != "tiny" {
		t.Errorf("GET /v1/models = %s, want id tiny", r.body)
	}

	prompt := "the quick brown fox"
	toks, err := b.Tokenize(prompt, true, true)
	if err != nil {
		t.Fatal(err)
	}
	want := greedy(t, ref, toks, 12)
	body := `{"prompt":"` + prompt + `","max_tokens":12,"temperature":0,"logprobs":3}`
	r := ts.post("/v1/completions", body)
	mm := decodeBody(t, r.body)
	if got := jsonPath(mm, "choices", 0, "text"); got != validText(want) {
		t.Errorf("greedy completion = %q, want the engine's greedy %q", got, want)
	}
	if got := jsonPath(mm, "usage", "prompt_tokens"); got != float64(len(toks)) {
		t.Errorf("usage.prompt_tokens = %v, want %d", got, len(toks))
	}
	// Greedy picks the most likely token: its logprob is the top one.
	lp := jsonPath(mm, "choices", 0, "logprobs").(map[string]any)
	for i, v := range lp["token_logprobs"].([]any) {
		top := lp["top_logprobs"].([]any)[i].(map[string]any)
		best := math.Inf(-1)
		for _, x := range top {
			best = math.Max(best, x.(float64))
		}
		if math.Abs(v.(float64)-best) > 1e-5 || v.(float64) > 0 {
			t.Errorf("token_logprobs[%d] = %v, want the best of top_logprobs %v (<= 0)", i, v, best)
		}
	}

	// The stream carries the same text.
	reused := reusedBy(be, func() {
		r = ts.post("/v1/completions", `{"prompt":"`+prompt+`","max_tokens":12,"temperature":0,"stream":true}`)
	})
	var streamed strings.Builder
	evs := parseSSE(t, r.body)
	for _, ev := range evs[:len(evs)-1] {
		streamed.WriteString(jsonPath(decodeBody(t, []byte(ev.data)), "choices", 0, "text").(string))
	}
	if streamed.String() != jsonPath(mm, "choices", 0, "text") {
		t.Errorf("streamed text = %q, want the non-stream text %q", streamed.String(), jsonPath(mm, "choices", 0, "text"))
	}
	// The repeated prompt came from the cache, all but its last token.
	if reused != len(toks)-1 {
		t.Errorf("the repeated prompt reused %d cached tokens, want %d", reused, len(toks)-1)
	}
	// A prompt that continues the previous one (the next turn) reuses it and
	// still gives the engine's greedy text.
	prompt2 := prompt + want + " and"
	toks2, err := b.Tokenize(prompt2, true, true)
	if err != nil {
		t.Fatal(err)
	}
	want2 := greedy(t, ref, toks2, 8)
	reused = reusedBy(be, func() {
		r = ts.post("/v1/completions", `{"prompt":`+jsonString(prompt2)+`,"max_tokens":8,"temperature":0}`)
	})
	if got := jsonPath(decodeBody(t, r.body), "choices", 0, "text"); got != validText(want2) {
		t.Errorf("greedy continuation = %q, want the engine's greedy %q", got, want2)
	}
	if reused < len(toks) {
		t.Errorf("the continued prompt reused %d cached tokens, want at least the %d of the first prompt", reused, len(toks))
	}

	// Chat with the model's own template, streamed.
	r = ts.post("/v1/chat/completions", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hello"}],"max_tokens":6,"temperature":0,"stream":true}`)
	evs = parseSSE(t, r.body)
	if len(evs) < 3 || fmt.Sprint(jsonPath(decodeBody(t, []byte(evs[0].data)), "choices", 0, "delta")) != "map[role:assistant]" || evs[len(evs)-1].data != "[DONE]" {
		t.Errorf("chat stream = %s, want role frame first and [DONE] last", r.body)
	}

	// Tokenize and detokenize round trip.
	r = ts.post("/extras/tokenize", `{"input":"hello world"}`)
	ids := decodeBody(t, r.body)["tokens"].([]any)
	var list []string
	for _, id := range ids {
		list = append(list, fmt.Sprint(id))
	}
	r = ts.post("/extras/detokenize", `{"tokens":[`+strings.Join(list, ",")+`]}`)
	if got := decodeBody(t, r.body)["text"]; !strings.HasSuffix(fmt.Sprint(got), "hello world") {
		t.Errorf("detokenize(tokenize(hello world)) = %q, want it to end in hello world", got)
	}

	// Embeddings are unit vectors of the model's width.
	r = ts.post("/v1/embeddings", `{"input":"hello world"}`)
	vec := jsonPath(decodeBody(t, r.body), "data", 0, "embedding").([]any)
	var norm float64
	for _, x := range vec {
		norm += x.(float64) * x.(float64)
	}
	if len(vec) != m.Opts.Embd || math.Abs(norm-1) > 1e-4 {
		t.Errorf("embedding: %d values of norm² %v, want %d values of norm 1", len(vec), norm, m.Opts.Embd)
	}

	// Rerank: scores are the cosine similarities of the pooled embeddings,
	// computed here from the engine directly, sorted.
	docs := []string{"hello world", "the quick brown fox", "zzz"}
	r = ts.post("/v1/rerank", `{"query":"quick fox","documents":["hello world","the quick brown fox","zzz"]}`)
	embed := func(text string) []float32 {
		toks, err := b.Tokenize(text, true, false)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ref.Embed(context.Background(), 0, toks, engine.PoolMean)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cosine := func(a, b []float32) float64 {
		var ab, aa, bb float64
		for i := range a {
			ab += float64(a[i]) * float64(b[i])
			aa += float64(a[i]) * float64(a[i])
			bb += float64(b[i]) * float64(b[i])
		}
		return ab / math.Sqrt(aa*bb)
	}
	qv := embed("quick fox")
	results := jsonPath(decodeBody(t, r.body), "results").([]any)
	if len(results) != len(docs) {
		t.Fatalf("rerank = %s, want %d results", r.body, len(docs))
	}
	prev := math.Inf(1)
	for _, res := range results {
		i := int(jsonPath(res, "index").(float64))
		score := jsonPath(res, "relevance_score").(float64)
		if want := cosine(qv, embed(docs[i])); math.Abs(score-want) > 1e-4 {
			t.Errorf("rerank score of document %d = %v, want the cosine similarity %v", i, score, want)
		}
		if score > prev {
			t.Errorf("rerank results not sorted by score: %s", r.body)
		}
		prev = score
	}
	if r := ts.post("/extras/tokenize/count", `{"input":"hello world"}`); decodeBody(t, r.body)["count"] != float64(len(ids)) {
		t.Errorf("tokenize/count = %s, want %d", r.body, len(ids))
	}

	// A forced tool call from the real model is a valid call whose arguments
	// fit the schema, whatever the random weights prefer.
	r = ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"max_tokens":200,"temperature":0,
		"tool_choice":"required","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
		"properties":{"city":{"type":"string","maxLength":8},"days":{"type":"integer","minimum":1,"maximum":9}},"required":["city","days"],"additionalProperties":false}}}]}`)
	mm = decodeBody(t, r.body)
	if fr := jsonPath(mm, "choices", 0, "finish_reason"); fr != "tool_calls" {
		t.Fatalf("forced tool call: finish_reason %v, want tool_calls: %s", fr, r.body)
	}
	args := jsonPath(mm, "choices", 0, "message", "tool_calls", 0, "function", "arguments").(string)
	var call struct {
		City *string `json:"city"`
		Days *int    `json:"days"`
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&call); err != nil || call.City == nil || call.Days == nil ||
		len([]rune(*call.City)) > 8 || *call.Days < 1 || *call.Days > 9 {
		t.Errorf("forced tool call arguments %s (%v) do not fit the schema", args, err)
	}

	// A prompt over the context is a 400 naming both numbers.
	long := strings.Repeat("fox ", 700)
	ltoks, _ := b.Tokenize(long, true, true)
	r = ts.post("/v1/completions", `{"prompt":"`+long+`"}`)
	if msg := fmt.Sprint(errorOf(t, r.body)["message"]); r.status != 400 ||
		!strings.Contains(msg, fmt.Sprintf("%d tokens", len(ltoks))) || !strings.Contains(msg, "context size is 512") {
		t.Errorf("long prompt = %d %s, want 400 naming %d tokens and context 512", r.status, r.body, len(ltoks))
	}
}

// jsonString returns s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestSlotCaches checks that with two KV-cache slots two alternating
// conversations each keep their cache: a request that repeats an earlier
// prompt after another, unrelated one still reuses all but its last token,
// and the text is what the same request gave the first time.
func TestSlotCaches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(path, engine.Config{CtxSize: 256, BatchSize: 64, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := newTestBackend(t, m, engine.SchedulerConfig{})
	ts := newReadyServer(t, b, Config{Parallel: 2})
	complete := func(prompt string) string {
		r := ts.post("/v1/completions", `{"prompt":`+jsonString(prompt)+`,"max_tokens":10,"temperature":0}`)
		return fmt.Sprint(jsonPath(decodeBody(t, r.body), "choices", 0, "text"))
	}
	a, c := "the quick brown fox jumps over the lazy dog", "zz yy xx ww vv"
	first := complete(a)
	complete(c)
	var got string
	reused := reusedBy(b, func() { got = complete(a) })
	if got != first {
		t.Errorf("repeated prompt gave %q, first %q", got, first)
	}
	toks, _ := b.Tokenize(a, true, true)
	if reused != len(toks)-1 {
		t.Errorf("the repeated prompt reused %d cached tokens, want %d: the other conversation took the other slot", reused, len(toks)-1)
	}
	// An embedding takes the least recently used slot (c's), not a's.
	if r := ts.post("/v1/embeddings", `{"input":"hello"}`); r.status != 200 {
		t.Fatalf("embeddings: %d %s", r.status, r.body)
	}
	if reused := reusedBy(b, func() { complete(a) }); reused != len(toks)-1 {
		t.Errorf("after an embedding, the repeated prompt reused %d cached tokens, want %d", reused, len(toks)-1)
	}
}
