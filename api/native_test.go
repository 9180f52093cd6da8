package api

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// loadFIMModel generates a tiny llama whose vocabulary has Qwen's FIM
// tokens (found by their texts, as the reference finds them) and loads it.
func loadFIMModel(t *testing.T, path string) *engine.Model {
	t.Helper()
	m, err := engine.Load(path, engine.Config{CtxSize: 512, BatchSize: 64})
	if err != nil {
		t.Fatalf("engine.Load(%s) = %v", path, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestNativeAPI checks llama-server's native routes against the shapes of
// its tools/server/README.md, on a generated model, with the engine's own
// greedy decode (a second copy of the model) as the expected text.
func TestNativeAPI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fim.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Seed: 7,
		Specials: []string{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}}); err != nil {
		t.Fatal(err)
	}
	m, ref := loadFIMModel(t, path), loadFIMModel(t, path)
	be := newTestBackend(t, m, engine.SchedulerConfig{})
	ts := newReadyServer(t, be, Config{Parallel: 2})

	prompt := "the quick brown fox"
	toks, err := be.Tokenize(prompt, true, true)
	if err != nil {
		t.Fatal(err)
	}
	want := greedy(t, ref, toks, 8)
	if len(want) < 4 {
		t.Fatalf("the greedy text %q is too short for the checks below", want)
	}

	t.Run("completion", func(t *testing.T) {
		r := ts.post("/completion", `{"prompt":"`+prompt+`","n_predict":8,"temperature":0,"cache_prompt":true,"id_slot":-1}`)
		c := decodeBody(t, r.body)
		n := jsonPath(c, "tokens_predicted")
		stopType := map[bool]string{true: "limit", false: "eos"}[n == 8.0]
		for _, f := range []struct {
			key  string
			want any
		}{{"content", validText(want)}, {"stop", true}, {"model", "tiny"}, {"prompt", prompt}, {"stop_type", stopType},
			{"stopping_word", ""}, {"tokens_evaluated", float64(len(toks))}, {"index", 0.0}, {"id_slot", -1.0}, {"truncated", false}} {
			if got := c[f.key]; r.status != 200 || got != f.want {
				t.Errorf("/completion %s = %v (status %d), want %v", f.key, got, r.status, f.want)
			}
		}
		if fmt.Sprint(c["tokens"]) != "[]" || jsonPath(c, "generation_settings", "n_predict") != 8.0 ||
			jsonPath(c, "timings", "predicted_n") != n || c["completion_probabilities"] != nil {
			t.Errorf("/completion = %s, want tokens [], generation_settings.n_predict 8, timings.predicted_n = tokens_predicted, no probabilities", r.body)
		}
	})

	t.Run("n_predict 0 and /completions", func(t *testing.T) {
		c := decodeBody(t, ts.post("/completion", `{"prompt":"`+prompt+`","n_predict":0}`).body)
		if c["content"] != "" || c["tokens_predicted"] != 0.0 || c["stop_type"] != "limit" || c["tokens_evaluated"] != float64(len(toks)) {
			t.Errorf("/completion n_predict 0 = %v, want nothing generated from %d prompt tokens", c, len(toks))
		}
		c = decodeBody(t, ts.post("/completions", `{"prompt":"`+prompt+`","n_predict":8,"temperature":0}`).body)
		if c["content"] != validText(want) {
			t.Errorf("/completions = %v, want /completion's %q", c, want)
		}
		var arr []map[string]any
		decodeJSON(t, ts.post("/completion", `{"prompt":["`+prompt+`","x"],"n_predict":8,"temperature":0}`).body, &arr)
		if len(arr) != 2 || arr[0]["content"] != validText(want) || arr[1]["index"] != 1.0 {
			t.Errorf("/completion of two prompts = %v, want two answers, the first %q", arr, want)
		}
	})

	t.Run("n_probs", func(t *testing.T) {
		r := ts.post("/completion", `{"prompt":"`+prompt+`","n_predict":8,"temperature":0,"n_probs":3}`)
		c := decodeBody(t, r.body)
		probs, _ := c["completion_probabilities"].([]any)
		if r.status != 200 || len(probs) == 0 || float64(len(probs)) != c["tokens_predicted"] {
			t.Fatalf("/completion n_probs 3 = %d %s, want one entry per predicted token", r.status, r.body)
		}
		var text strings.Builder
		for i, p := range probs {
			tok := jsonPath(p, "token").(string)
			text.WriteString(tok)
			id := int32(jsonPath(p, "id").(float64))
			if string(be.Piece(id)) != tok {
				t.Errorf("probs[%d]: id %d is %q, want the token %q", i, id, be.Piece(id), tok)
			}
			var bytesText []byte
			for _, b := range jsonPath(p, "bytes").([]any) {
				bytesText = append(bytesText, byte(b.(float64)))
			}
			top := jsonPath(p, "top_logprobs").([]any)
			if string(bytesText) != tok || len(top) != 3 || jsonPath(top, 0, "logprob") != jsonPath(p, "logprob") ||
				jsonPath(top, 0, "token") != tok || jsonPath(p, "logprob").(float64) > 0 {
				t.Errorf("probs[%d] = %v, want bytes of %q and 3 alternatives, greedy's the first", i, p, tok)
			}
		}
		if text.String() != c["content"] {
			t.Errorf("probabilities' tokens make %q, want the content %q", text.String(), c["content"])
		}
	})

	t.Run("stream", func(t *testing.T) {
		r := ts.post("/completion", `{"prompt":"`+prompt+`","n_predict":8,"temperature":0,"stream":true,"n_probs":2}`)
		evs := parseSSE(t, r.body)
		var text strings.Builder
		for i, ev := range evs {
			c := decodeBody(t, []byte(ev.data))
			last := i == len(evs)-1
			if !last {
				var toks strings.Builder
				for _, p := range c["completion_probabilities"].([]any) {
					toks.WriteString(jsonPath(p, "token").(string))
					if len(jsonPath(p, "top_logprobs").([]any)) != 2 {
						t.Errorf("event %d: %v, want 2 alternatives per token", i, p)
					}
				}
				if toks.String() != c["content"] {
					t.Errorf("event %d: probabilities' tokens %q, want its content %q", i, toks.String(), c["content"])
				}
			}
			if c["stop"] != last {
				t.Errorf("event %d of %d: stop = %v, want %v", i, len(evs), c["stop"], last)
			}
			if last && (c["content"] != "" || c["stop_type"] == nil || c["timings"] == nil) {
				t.Errorf("last event %s, want empty content with stop_type and timings", ev.data)
			}
			text.WriteString(c["content"].(string))
		}
		if text.String() != validText(want) {
			t.Errorf("streamed %q, want %q", text.String(), want)
		}
	})

	t.Run("stop word", func(t *testing.T) {
		stop := want[2:4]
		body := fmt.Sprintf(`{"prompt":%q,"n_predict":8,"temperature":0,"stop":[%q]}`, prompt, stop)
		c := decodeBody(t, ts.post("/completion", body).body)
		if c["stop_type"] != "word" || c["stopping_word"] != stop || c["content"] != want[:strings.Index(want, stop)] {
			t.Errorf("/completion stop %q = %v, want stop_type word and the text before it", stop, c)
		}
	})

	t.Run("logit_bias and samplers", func(t *testing.T) {
		first := greedy(t, ref, toks, 1)
		ids, _ := be.Tokenize(first, false, false)
		body := fmt.Sprintf(`{"prompt":%q,"n_predict":1,"temperature":0,"logit_bias":[[%d,false]]}`, prompt, ids[0])
		c := decodeBody(t, ts.post("/completion", body).body)
		if c["content"] == validText(first) {
			t.Errorf("/completion banning token %d (%q) still answered it", ids[0], first)
		}
		body = `{"prompt":"` + prompt + `","n_predict":8,"temperature":0,"samplers":["top_k","temperature"],"ignore_eos":true}`
		c = decodeBody(t, ts.post("/completion", body).body)
		if !strings.HasPrefix(validText(want), c["content"].(string)) && !strings.HasPrefix(c["content"].(string), validText(want)) || c["tokens_predicted"] != 8.0 {
			t.Errorf("/completion with samplers and ignore_eos = %v, want the greedy text, 8 tokens", c)
		}
	})

	t.Run("tokenize", func(t *testing.T) {
		plain, _ := be.Tokenize(prompt, false, true)
		for _, tt := range []struct {
			body string
			want []int32
		}{{`{"content":"` + prompt + `"}`, plain}, {`{"content":"` + prompt + `","add_special":true}`, toks}} {
			c := decodeBody(t, ts.post("/tokenize", tt.body).body)
			if fmt.Sprint(c["tokens"]) != strings.ReplaceAll(fmt.Sprint(tt.want), " ", " ") {
				t.Errorf("/tokenize %s = %v, want %v", tt.body, c["tokens"], tt.want)
			}
		}
		c := decodeBody(t, ts.post("/tokenize", `{"content":"`+prompt+`","with_pieces":true}`).body)
		var text strings.Builder
		for i, p := range c["tokens"].([]any) {
			if jsonPath(p, "id") != float64(plain[i]) {
				t.Errorf("/tokenize with_pieces [%d] = %v, want id %d", i, p, plain[i])
			}
			text.WriteString(jsonPath(p, "piece").(string))
		}
		if text.String() != prompt {
			t.Errorf("/tokenize pieces make %q, want %q", text.String(), prompt)
		}
		ids := strings.Trim(strings.ReplaceAll(fmt.Sprint(plain), " ", ","), "[]")
		c = decodeBody(t, ts.post("/detokenize", `{"tokens":[`+ids+`]}`).body)
		if c["content"] != prompt {
			t.Errorf("/detokenize = %v, want %q", c, prompt)
		}
	})

	t.Run("embedding", func(t *testing.T) {
		r := ts.post("/embedding", `{"content":"`+prompt+`"}`)
		var out []map[string]any
		decodeJSON(t, r.body, &out)
		raw := decodeBody(t, ts.post("/v1/embeddings", `{"input":"`+prompt+`","normalize":false}`).body)
		rv := jsonPath(raw, "data", 0, "embedding").([]any)
		if len(out) != 1 || out[0]["index"] != 0.0 {
			t.Fatalf("/embedding = %s, want one item of index 0", r.body)
		}
		vec := jsonPath(out[0], "embedding", 0).([]any)
		var norm float64
		for _, x := range rv {
			norm += x.(float64) * x.(float64)
		}
		norm = math.Sqrt(norm)
		for i := range vec {
			if math.Abs(vec[i].(float64)-rv[i].(float64)/norm) > 1e-5 {
				t.Fatalf("/embedding[%d] = %v, want the raw vector's %v / %v", i, vec[i], rv[i], norm)
			}
		}
		decodeJSON(t, ts.post("/embedding", `{"content":["`+prompt+`","x"],"embd_normalize":-1}`).body, &out)
		if len(out) != 2 || fmt.Sprint(jsonPath(out[0], "embedding", 0)) != fmt.Sprint(rv) {
			t.Errorf("/embedding of two inputs, not normalized = %v, want two items, the first the raw vector", out)
		}
	})

	t.Run("infill", func(t *testing.T) {
		var fim []int32
		for _, s := range []string{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"} {
			id, ok := ref.Tok.TokenID(s)
			if !ok {
				t.Fatalf("the generated vocabulary lacks %s", s)
			}
			fim = append(fim, id)
		}
		pre, _ := ref.Tok.Encode("the quick", false, false)
		suf, _ := ref.Tok.Encode(" fox", false, false)
		mid, _ := ref.Tok.Encode(" brown", false, false)
		bos, _ := ref.Tok.Encode("", true, false)
		in := append(append(append(append(append(append(bos, fim[0]), pre...), fim[1]), suf...), fim[2]), mid...)
		want := greedy(t, ref, in, 6)
		r := ts.post("/infill", `{"input_prefix":"the quick","input_suffix":" fox","prompt":" brown","n_predict":6,"temperature":0}`)
		c := decodeBody(t, r.body)
		if r.status != 200 || c["content"] != validText(want) || c["tokens_evaluated"] != float64(len(in)) {
			t.Errorf("/infill = %d %s, want content %q from %d prompt tokens", r.status, r.body, want, len(in))
		}
	})

	t.Run("unprefixed", func(t *testing.T) {
		body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0}`
		a := jsonPath(decodeBody(t, ts.post("/chat/completions", body).body), "choices", 0, "message", "content")
		b := jsonPath(decodeBody(t, ts.post("/v1/chat/completions", body).body), "choices", 0, "message", "content")
		e := jsonPath(decodeBody(t, ts.post("/embeddings", `{"input":"hi"}`).body), "data", 0, "embedding")
		f := jsonPath(decodeBody(t, ts.post("/v1/embeddings", `{"input":"hi"}`).body), "data", 0, "embedding")
		if a == nil || a != b || e == nil || fmt.Sprint(e) != fmt.Sprint(f) {
			t.Errorf("/chat/completions %v and /embeddings %v, want what /v1 answers: %v, %v", a, e, b, f)
		}
	})

	t.Run("validation", func(t *testing.T) {
		for _, tt := range []struct{ route, body, param string }{
			{"/completion", `{"prompt":"a","n_predictt":1}`, "n_predictt"},
			{"/completion", `{"n_predict":1}`, "prompt"},
			{"/completion", `{"prompt":"a","n_predict":-2}`, "n_predict"},
			{"/completion", `{"prompt":"a","n_probs":21}`, "n_probs"},
			{"/completion", `{"prompt":"a","repeat_last_n":-2}`, "repeat_last_n"},
			{"/completion", `{"prompt":"a","mirostat":3}`, "mirostat"},
			{"/completion", `{"prompt":"a","temperature":-1}`, "temperature"},
			{"/completion", `{"prompt":"a","stop":[""]}`, "stop[0]"},
			{"/completion", `{"prompt":"a","grammar":"root ::= ("}`, "grammar"},
			{"/completion", `{"prompt":"a","id_slot":2}`, "id_slot"},
			{"/completion", `{"prompt":"a","return_tokens":true}`, "return_tokens"},
			{"/completion", `{"prompt":"a","dry_multiplier":0.8}`, "dry_multiplier"},
			{"/completion", `{"prompt":"a","samplers":["top_k","greedy"]}`, "samplers[1]"},
			{"/completion", `{"prompt":"a","logit_bias":[[1]]}`, "logit_bias[0]"},
			{"/completion", `{"prompt":"a","logit_bias":[["hello",1]]}`, "logit_bias[0][0]"},
			{"/completion", `{"prompt":[1,99999]}`, "prompt[1]"},
			{"/completion", `{"prompt":"a","ignore_eos":1}`, "ignore_eos"},
			{"/completion", `{"prompt":"a","cache_prompt":"yes"}`, "cache_prompt"},
			{"/infill", `{"input_prefix":"a","input_extra":[{"file":"x"}]}`, "input_extra[0].file"},
			{"/infill", `{"input_prefix":"a","input_extra":[{"filename":1}]}`, "input_extra[0].filename"},
			{"/tokenize", `{"text":"a"}`, "text"},
			{"/tokenize", `{}`, "content"},
			{"/tokenize", `{"content":"a","with_pieces":"yes"}`, "with_pieces"},
			{"/detokenize", `{"tokens":[99999]}`, "tokens[0]"},
			{"/detokenize", `{"content":"a"}`, "content"},
			{"/embedding", `{"input":"a"}`, "input"},
			{"/embedding", `{"content":"a","embd_normalize":"l2"}`, "embd_normalize"},
			{"/embedding", `{"content":""}`, "content"},
		} {
			r := ts.post(tt.route, tt.body)
			if m := decodeBody(t, r.body); r.status != 400 || jsonPath(m, "error", "param") != tt.param {
				t.Errorf("POST %s %s = %d %s, want 400 naming %s", tt.route, tt.body, r.status, r.body, tt.param)
			}
		}
	})
}

// TestInfillWithoutFIM checks that /infill on a model without FIM tokens
// is a 400 naming the model and what it lacks.
func TestInfillWithoutFIM(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	r := ts.post("/infill", `{"input_prefix":"def f(","input_suffix":"):"}`)
	if m := decodeBody(t, r.body); r.status != 400 || jsonPath(m, "error", "param") != "model" ||
		!strings.Contains(jsonPath(m, "error", "message").(string), "fill-in-the-middle") {
		t.Errorf("/infill without FIM tokens = %d %s, want 400 naming model and the missing tokens", r.status, r.body)
	}
}

// decodeJSON unmarshals b into v.
func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
}
