package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"
)

func TestLoadingState(t *testing.T) {
	ts := startServer(t, Config{})
	ts.s.SetProgress(0.5)
	r := ts.do("GET", "/health", "")
	if r.status != 503 {
		t.Fatalf("GET /health while loading = %d, want 503", r.status)
	}
	m := decodeBody(t, r.body)
	if m["status"] != "loading" || m["progress"] != 0.5 || m["phase"] != nil {
		t.Errorf("GET /health while loading = %s, want status loading, progress 0.5, no phase", r.body)
	}
	ts.s.SetPhase("compiling kernels (3 of 21)")
	if m := decodeBody(t, ts.do("GET", "/health", "").body); m["phase"] != "compiling kernels (3 of 21)" || m["status"] != "loading" {
		t.Errorf("GET /health while compiling = %v, want the phase", m)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/models"}, {"POST", "/v1/completions"}, {"POST", "/v1/chat/completions"},
		{"POST", "/v1/embeddings"}, {"POST", "/rerank"}, {"POST", "/extras/tokenize"},
	} {
		r := ts.do(c.method, c.path, `{}`)
		if r.status != 503 || errorOf(t, r.body)["type"] != "unavailable_error" {
			t.Errorf("%s %s while loading = %d %s, want 503 unavailable_error", c.method, c.path, r.status, r.body)
		}
	}
	if err := ts.s.Ready(newFake()); err != nil {
		t.Fatal(err)
	}
	if r := ts.do("GET", "/health", ""); r.status != 200 || string(r.body) != `{"status":"ok"}` {
		t.Errorf("GET /health after load = %d %s, want 200 {\"status\":\"ok\"}", r.status, r.body)
	}
}

func TestAuthAndRoutes(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{APIKey: "sekret"})
	if r := ts.do("GET", "/v1/models", ""); r.status != 401 || errorOf(t, r.body)["type"] != "authentication_error" {
		t.Errorf("GET /v1/models without key = %d %s, want 401", r.status, r.body)
	}
	if r := ts.do("GET", "/v1/models", "", "Authorization", "Bearer wrong"); r.status != 401 {
		t.Errorf("GET /v1/models with a wrong key = %d, want 401", r.status)
	}
	r := ts.do("GET", "/v1/models", "", "Authorization", "Bearer sekret")
	if r.status != 200 {
		t.Fatalf("GET /v1/models with key = %d %s, want 200", r.status, r.body)
	}
	m := decodeBody(t, r.body)
	if jsonPath(m, "object") != "list" || jsonPath(m, "data", 0, "id") != "fake-model" ||
		jsonPath(m, "data", 0, "owned_by") != "vkllm" || jsonPath(m, "data", 0, "object") != "model" {
		t.Errorf("GET /v1/models = %s, want a list with model fake-model", r.body)
	}
	r = ts.do("GET", "/v1/nothing", "", "Authorization", "Bearer sekret")
	if r.status != 404 || errorOf(t, r.body)["type"] != "not_found_error" {
		t.Errorf("GET /v1/nothing = %d %s, want 404 not_found_error", r.status, r.body)
	}
}

func TestCompletions(t *testing.T) {
	f := newFake()
	f.reply = func(string) string { return "one two three four five" }
	ts := newReadyServer(t, f, Config{})
	cases := []struct {
		name, body string
		text       []string
		finish     string
	}{
		{"default max_tokens 16", `{"prompt":"x"}`, []string{"one two three fo"}, "length"},
		{"eos", `{"prompt":"x","max_tokens":100,"temperature":0}`, []string{"one two three four five"}, "stop"},
		{"stop spanning tokens", `{"prompt":"x","max_tokens":100,"stop":"thr"}`, []string{"one two "}, "stop"},
		{"stop array earliest", `{"prompt":"x","max_tokens":100,"stop":["five","two"]}`, []string{"one "}, "stop"},
		{"echo", `{"prompt":"abc","max_tokens":3,"echo":true}`, []string{"abcone"}, "length"},
		{"prompt array", `{"prompt":["a","b"],"max_tokens":2}`, []string{"on", "on"}, "length"},
		{"n 2", `{"prompt":"a","max_tokens":2,"n":2,"seed":5}`, []string{"on", "on"}, "length"},
		{"model and user ignored", `{"prompt":"a","max_tokens":1,"model":{"x":1},"user":"u"}`, []string{"o"}, "length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.post("/v1/completions", c.body)
			if r.status != 200 {
				t.Fatalf("POST %s = %d %s, want 200", c.body, r.status, r.body)
			}
			m := decodeBody(t, r.body)
			if !strings.HasPrefix(m["id"].(string), "cmpl-") || m["object"] != "text_completion" {
				t.Errorf("POST %s: id/object = %v/%v, want cmpl-…/text_completion", c.body, m["id"], m["object"])
			}
			ch := m["choices"].([]any)
			if len(ch) != len(c.text) {
				t.Fatalf("POST %s: %d choices, want %d", c.body, len(ch), len(c.text))
			}
			for i, want := range c.text {
				if got := jsonPath(ch, i, "text"); got != want {
					t.Errorf("POST %s: choices[%d].text = %q, want %q", c.body, i, got, want)
				}
				if got := jsonPath(ch, i, "finish_reason"); got != c.finish {
					t.Errorf("POST %s: choices[%d].finish_reason = %v, want %s", c.body, i, got, c.finish)
				}
				if got := jsonPath(ch, i, "index"); got != float64(i) {
					t.Errorf("POST %s: choices[%d].index = %v, want %d", c.body, i, got, i)
				}
			}
		})
	}
	t.Run("usage", func(t *testing.T) {
		m := decodeBody(t, ts.post("/v1/completions", `{"prompt":"abc","max_tokens":4}`).body)
		// The fake tokenizes one token per byte plus BOS.
		if jsonPath(m, "usage", "prompt_tokens") != 4.0 || jsonPath(m, "usage", "completion_tokens") != 4.0 || jsonPath(m, "usage", "total_tokens") != 8.0 {
			t.Errorf("usage = %v, want 4 prompt, 4 completion, 8 total", m["usage"])
		}
	})
	t.Run("logprobs", func(t *testing.T) {
		m := decodeBody(t, ts.post("/v1/completions", `{"prompt":"x","max_tokens":3,"logprobs":2}`).body)
		lp := jsonPath(m, "choices", 0, "logprobs").(map[string]any)
		toks := lp["tokens"].([]any)
		if fmt.Sprint(toks) != "[o n e]" || fmt.Sprint(lp["text_offset"]) != "[0 1 2]" {
			t.Errorf("logprobs tokens/text_offset = %v/%v, want [o n e]/[0 1 2]", toks, lp["text_offset"])
		}
		// The scripted token has logit 20 against fakeVocab-1 zeros.
		want := -math.Log1p((fakeVocab - 1) * math.Exp(-20))
		for i, v := range lp["token_logprobs"].([]any) {
			if math.Abs(v.(float64)-want) > 1e-6 {
				t.Errorf("token_logprobs[%d] = %v, want %v", i, v, want)
			}
		}
		top := lp["top_logprobs"].([]any)
		if len(top) != 3 || len(top[0].(map[string]any)) != 2 {
			t.Errorf("top_logprobs = %v, want 3 maps of 2 entries", top)
		}
	})
	t.Run("best_of picks the highest mean logprob", func(t *testing.T) {
		f.strength = func(seed int64) float32 { return float32(2 + (seed*7)%5) } // seeds 10,11,12 -> 2+0, 2+2, 2+4
		defer func() { f.strength = nil }()
		m := decodeBody(t, ts.post("/v1/completions", `{"prompt":"x","max_tokens":3,"best_of":3,"seed":10,"temperature":0}`).body)
		if got := len(m["choices"].([]any)); got != 1 {
			t.Fatalf("best_of 3, n 1: %d choices, want 1", got)
		}
		// Candidate strengths 2, 4, 6: with temperature 0 all texts agree, so
		// check the candidate through logprobs of a second request.
		m2 := decodeBody(t, ts.post("/v1/completions", `{"prompt":"x","max_tokens":3,"best_of":3,"n":3,"seed":10,"temperature":0,"logprobs":1}`).body)
		if got := len(m2["choices"].([]any)); got != 3 {
			t.Fatalf("best_of 3, n 3: %d choices, want 3", got)
		}
		m3 := decodeBody(t, ts.post("/v1/completions", `{"prompt":"x","max_tokens":3,"best_of":3,"n":1,"seed":10,"temperature":0,"logprobs":1}`).body)
		got := jsonPath(m3, "choices", 0, "logprobs", "token_logprobs", 0).(float64)
		want := -math.Log1p((fakeVocab - 1) * math.Exp(-6))
		if math.Abs(got-want) > 1e-5 {
			t.Errorf("best_of 3 chose a candidate with logprob %v, want the strongest one %v", got, want)
		}
	})
}

func TestCompletionStream(t *testing.T) {
	f := newFake()
	f.reply = func(string) string { return "héllo wörld" }
	ts := newReadyServer(t, f, Config{})
	r := ts.post("/v1/completions", `{"prompt":"x","max_tokens":100,"stream":true,"stop":"wö","stream_options":{"include_usage":true}}`)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream status/content-type = %d %q, want 200 text/event-stream", r.status, r.header.Get("Content-Type"))
	}
	evs := parseSSE(t, r.body)
	if last := evs[len(evs)-1]; last.data != "[DONE]" {
		t.Fatalf("last frame = %q, want [DONE]", last.data)
	}
	var text strings.Builder
	var finish any
	for _, ev := range evs[:len(evs)-2] {
		m := decodeBody(t, []byte(ev.data))
		s := jsonPath(m, "choices", 0, "text").(string)
		if strings.ContainsRune(s, '\uFFFD') {
			t.Errorf("chunk text %q splits a UTF-8 character", s)
		}
		text.WriteString(s)
		if fr := jsonPath(m, "choices", 0, "finish_reason"); fr != nil {
			finish = fr
		}
	}
	if text.String() != "héllo " || finish != "stop" {
		t.Errorf("streamed text, finish = %q, %v, want %q, stop", text.String(), finish, "héllo ")
	}
	u := decodeBody(t, []byte(evs[len(evs)-2].data))
	if jsonPath(u, "usage", "prompt_tokens") != 2.0 || len(u["choices"].([]any)) != 0 {
		t.Errorf("usage chunk = %s, want prompt_tokens 2 and no choices", evs[len(evs)-2].data)
	}
}

func TestChat(t *testing.T) {
	f := newFake()
	f.reply = func(p string) string { return "Hi there." }
	ts := newReadyServer(t, f, Config{})
	t.Run("plain template prompt", func(t *testing.T) {
		var prompt string
		f.reply = func(p string) string { prompt = p; return "ok" }
		defer func() { f.reply = func(string) string { return "Hi there." } }()
		r := ts.post("/v1/chat/completions", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`)
		if r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		// Text parts are joined with "\n", as the reference joins them
		// (TestJoinTextParts).
		if want := "<s>system: S\nuser: a\nb\nassistant:"; prompt != want {
			t.Errorf("plain prompt = %q, want %q", prompt, want)
		}
	})
	t.Run("non-stream", func(t *testing.T) {
		r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"template":"chatml","logprobs":true,"top_logprobs":2}`)
		m := decodeBody(t, r.body)
		if r.status != 200 || m["object"] != "chat.completion" || !strings.HasPrefix(m["id"].(string), "chatcmpl-") {
			t.Fatalf("chat = %d %s", r.status, r.body)
		}
		if jsonPath(m, "choices", 0, "message", "content") != "Hi there." || jsonPath(m, "choices", 0, "message", "role") != "assistant" ||
			jsonPath(m, "choices", 0, "finish_reason") != "stop" {
			t.Errorf("chat choice = %v, want assistant \"Hi there.\" stop", jsonPath(m, "choices", 0))
		}
		c := jsonPath(m, "choices", 0, "logprobs", "content").([]any)
		if len(c) != 9 || jsonPath(c, 0, "token") != "H" || fmt.Sprint(jsonPath(c, 0, "bytes")) != "[72]" ||
			len(jsonPath(c, 0, "top_logprobs").([]any)) != 2 {
			t.Errorf("logprobs.content = %v, want 9 entries starting with H [72] and 2 alternatives", c)
		}
	})
	t.Run("stream order", func(t *testing.T) {
		r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`)
		evs := parseSSE(t, r.body)
		if len(evs) < 4 {
			t.Fatalf("%d frames, want role, content, terminal, [DONE]", len(evs))
		}
		first := decodeBody(t, []byte(evs[0].data))
		if d := jsonPath(first, "choices", 0, "delta"); fmt.Sprint(d) != "map[role:assistant]" {
			t.Errorf("first delta = %v, want {role: assistant} only", d)
		}
		var text strings.Builder
		for _, ev := range evs[1 : len(evs)-2] {
			m := decodeBody(t, []byte(ev.data))
			d := jsonPath(m, "choices", 0, "delta").(map[string]any)
			if _, ok := d["role"]; ok || jsonPath(m, "choices", 0, "finish_reason") != nil {
				t.Errorf("content chunk %s carries role or finish_reason", ev.data)
			}
			text.WriteString(d["content"].(string))
		}
		term := decodeBody(t, []byte(evs[len(evs)-2].data))
		if fmt.Sprint(jsonPath(term, "choices", 0, "delta")) != "map[]" || jsonPath(term, "choices", 0, "finish_reason") != "stop" {
			t.Errorf("terminal chunk = %s, want delta {} and finish_reason stop", evs[len(evs)-2].data)
		}
		if evs[len(evs)-1].data != "[DONE]" || text.String() != "Hi there." {
			t.Errorf("text %q, last %q, want \"Hi there.\", [DONE]", text.String(), evs[len(evs)-1].data)
		}
	})
}

const weatherTools = `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

func TestChatToolCalls(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	ts := newReadyServer(t, f, Config{})
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	// A forced call is constrained to compact JSON: the scripted model
	// writes it so.
	compactCall := "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>"
	f.reply = func(string) string { return call }
	for _, choice := range []string{`"auto"`, `"required"`, `{"type":"function","function":{"name":"get_weather"}}`} {
		t.Run("non-stream "+choice, func(t *testing.T) {
			if choice != `"auto"` {
				f.reply = func(string) string { return compactCall }
				defer func() { f.reply = func(string) string { return call } }()
			}
			r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"template":"chatml","temperature":0,"max_tokens":200,`+weatherTools+`,"tool_choice":`+choice+`}`)
			m := decodeBody(t, r.body)
			if r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			tc := jsonPath(m, "choices", 0, "message", "tool_calls", 0)
			if jsonPath(tc, "function", "name") != "get_weather" || jsonPath(tc, "function", "arguments") != `{"city":"Paris"}` ||
				jsonPath(tc, "type") != "function" || len(jsonPath(tc, "id").(string)) != 9 {
				t.Errorf("tool call = %v, want get_weather {\"city\":\"Paris\"} with a 9-character id", tc)
			}
			if jsonPath(m, "choices", 0, "finish_reason") != "tool_calls" || jsonPath(m, "choices", 0, "message", "content") != nil {
				t.Errorf("finish/content = %v/%v, want tool_calls/null", jsonPath(m, "choices", 0, "finish_reason"), jsonPath(m, "choices", 0, "message", "content"))
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"template":"chatml","stream":true,"max_tokens":200,`+weatherTools+`}`)
		evs := parseSSE(t, r.body)
		var args strings.Builder
		sawFirst := false
		for _, ev := range evs[1 : len(evs)-2] {
			m := decodeBody(t, []byte(ev.data))
			tc := jsonPath(m, "choices", 0, "delta", "tool_calls", 0)
			if tc == nil {
				t.Errorf("chunk %s has no tool_calls delta", ev.data)
				continue
			}
			if jsonPath(tc, "index") != 0.0 {
				t.Errorf("tool call delta %v has no index 0", tc)
			}
			if !sawFirst {
				sawFirst = true
				if jsonPath(tc, "function", "name") != "get_weather" || jsonPath(tc, "function", "arguments") != "" || jsonPath(tc, "id") == nil {
					t.Errorf("first tool call delta = %v, want id, name and empty arguments", tc)
				}
				continue
			}
			args.WriteString(jsonPath(tc, "function", "arguments").(string))
		}
		term := decodeBody(t, []byte(evs[len(evs)-2].data))
		if args.String() != `{"city":"Paris"}` || jsonPath(term, "choices", 0, "finish_reason") != "tool_calls" {
			t.Errorf("streamed arguments %q, finish %v, want {\"city\":\"Paris\"}, tool_calls", args.String(), jsonPath(term, "choices", 0, "finish_reason"))
		}
	})
	t.Run("forced call is grammar-constrained", func(t *testing.T) {
		// The scripted model would go on talking after the call; the grammar
		// ends the output where the call is complete.
		f.reply = func(p string) string {
			if strings.Contains(p, "FORCED") {
				return compactCall + " and some more prose"
			}
			return call + " and some more prose"
		}
		defer func() { f.reply = func(string) string { return call } }()
		var texts []string
		for _, choice := range []string{`"none"`, `"required"`} {
			content := "weather?"
			if choice != `"none"` {
				content = "weather? FORCED"
			}
			r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"`+content+`"}],"template":"chatml","temperature":0,"max_tokens":300,`+weatherTools+`,"tool_choice":`+choice+`}`)
			m := decodeBody(t, r.body)
			if choice == `"none"` {
				texts = append(texts, fmt.Sprint(jsonPath(m, "choices", 0, "message", "content")))
				continue
			}
			args := jsonPath(m, "choices", 0, "message", "tool_calls", 0, "function", "arguments")
			var parsed map[string]any
			if s, ok := args.(string); !ok || json.Unmarshal([]byte(s), &parsed) != nil {
				t.Fatalf("forced call arguments = %v (%s), want a JSON object", args, r.body)
			}
			if parsed["city"] != "Paris" || jsonPath(m, "choices", 0, "message", "content") != nil || jsonPath(m, "choices", 0, "finish_reason") != "tool_calls" {
				t.Errorf("forced call = %s, want city Paris, no content, finish tool_calls", r.body)
			}
		}
		if texts[0] != call+" and some more prose" {
			t.Errorf("tool_choice none content = %q, want the unconstrained text", texts[0])
		}
	})
	t.Run("mistral control token kept with tools", func(t *testing.T) {
		f.reply = func(string) string { return `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}]` }
		defer func() { f.reply = func(string) string { return call } }()
		for _, choice := range []string{`"auto"`, `"required"`} {
			if choice == `"required"` {
				f.reply = func(string) string { return `[TOOL_CALLS][{"name":"get_weather","arguments":{"city":"Rome"}}]` }
			}
			r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"template":"mistral-instruct","temperature":0,"max_tokens":200,`+weatherTools+`,"tool_choice":`+choice+`}`)
			m := decodeBody(t, r.body)
			if jsonPath(m, "choices", 0, "message", "tool_calls", 0, "function", "arguments") != `{"city":"Rome"}` {
				t.Errorf("tool_choice %s: [TOOL_CALLS] output = %s, want a get_weather call for Rome", choice, r.body)
			}
		}
		// Without tools the control token renders nothing.
		f.reply = func(string) string { return `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}]` }
		r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"template":"mistral-instruct","temperature":0,"max_tokens":200}`)
		if got := jsonPath(decodeBody(t, r.body), "choices", 0, "message", "content"); got != `[{"name": "get_weather", "arguments": {"city": "Rome"}}]` {
			t.Errorf("content without tools = %v, want the text without the control token", got)
		}
	})
	t.Run("earlier tool use rendered", func(t *testing.T) {
		var prompt string
		f.reply = func(p string) string { prompt = p; return "It is sunny." }
		defer func() { f.reply = func(string) string { return call } }()
		r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"abc123def","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			{"role":"tool","tool_call_id":"abc123def","content":"SUNNY"}],"template":"chatml",`+weatherTools+`}`)
		if r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		for _, want := range []string{`"name": "get_weather", "arguments": {"city":"Paris"}`, "<|im_start|>tool\nSUNNY<|im_end|>", "get_weather"} {
			if !strings.Contains(prompt, want) {
				t.Errorf("prompt %q does not contain %q", prompt, want)
			}
		}
	})
}

func TestEmbeddingsRerankTokenize(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	r := ts.post("/v1/embeddings", `{"input":["aaaa","ab"]}`)
	m := decodeBody(t, r.body)
	v0 := jsonPath(m, "data", 0, "embedding").([]any)
	// "aaaa": byte 'a' = 97, bucket 97%8 = 1: the unit vector e1.
	if len(v0) != 8 || v0[1] != 1.0 || v0[0] != 0.0 || jsonPath(m, "data", 1, "index") != 1.0 || jsonPath(m, "usage", "prompt_tokens") != 8.0 {
		t.Errorf("embeddings = %s, want e1 for aaaa, 2 entries, 8 prompt tokens", r.body)
	}
	r = ts.post("/v1/embeddings", `{"input":"ab","encoding_format":"base64","normalize":false}`)
	s := jsonPath(decodeBody(t, r.body), "data", 0, "embedding").(string)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != 32 {
		t.Fatalf("base64 embedding %q: %v, want 32 bytes", s, err)
	}
	got := make([]float32, 8)
	for i := range got {
		got[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if fmt.Sprint(got) != "[0 1 1 0 0 0 0 0]" {
		t.Errorf("decoded base64 embedding = %v, want [0 1 1 0 0 0 0 0]", got)
	}
	for _, path := range []string{"/v1/rerank", "/v1/reranking", "/rerank", "/reranking"} {
		r = ts.post(path, `{"query":"aaa","documents":["bcd","aab","aaaa"],"top_n":2}`)
		m = decodeBody(t, r.body)
		res := m["results"].([]any)
		if len(res) != 2 || jsonPath(res, 0, "index") != 2.0 || jsonPath(res, 1, "index") != 1.0 ||
			jsonPath(res, 0, "document", "text") != "aaaa" || math.Abs(jsonPath(res, 0, "relevance_score").(float64)-1) > 1e-9 {
			t.Errorf("POST %s = %s, want documents 2 (score 1) then 1", path, r.body)
		}
	}
	if r = ts.post("/extras/tokenize", `{"input":"hi"}`); string(r.body) != `{"tokens":[1,107,108]}` {
		t.Errorf("tokenize hi = %s, want {\"tokens\":[1,107,108]}", r.body)
	}
	if r = ts.post("/extras/tokenize/count", `{"input":"hi"}`); string(r.body) != `{"count":3}` {
		t.Errorf("tokenize/count hi = %s, want {\"count\":3}", r.body)
	}
	if r = ts.post("/extras/detokenize", `{"tokens":[107,108]}`); string(r.body) != `{"text":"hi"}` {
		t.Errorf("detokenize = %s, want {\"text\":\"hi\"}", r.body)
	}
}

func TestErrors(t *testing.T) {
	f := newFake()
	f.ctxSize = 64
	ts := newReadyServer(t, f, Config{})
	long := strings.Repeat("x", 100)
	cases := []struct {
		name, path, body string
		status           int
		param            any
		msg              string
	}{
		{"malformed", "/v1/completions", `{"prompt":`, 400, nil, "malformed JSON: unexpected end of input at byte 10"},
		{"unknown field", "/v1/completions", `{"prompt":"x","temprature":1}`, 400, "temprature", "unknown field"},
		{"nested unknown", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b","foo":1}]}`, 400, "messages[1].foo", "unknown field"},
		{"nested part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","txt":"a"}]}]}`, 400, "messages[0].content[0].txt", "unknown field"},
		{"wrong type", "/v1/completions", `{"prompt":"x","max_tokens":"5"}`, 400, "max_tokens", "want integer"},
		{"wrong content type", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content", "want string, null or array"},
		{"negative max_tokens", "/v1/completions", `{"prompt":"x","max_tokens":-1}`, 400, "max_tokens", "out of range"},
		{"temperature", "/v1/completions", `{"prompt":"x","temperature":-0.5}`, 400, "temperature", "out of range"},
		{"top_p", "/v1/completions", `{"prompt":"x","top_p":1.5}`, 400, "top_p", "out of range"},
		{"mirostat_mode", "/v1/completions", `{"prompt":"x","mirostat_mode":3}`, 400, "mirostat_mode", "not one of"},
		{"best_of < n", "/v1/completions", `{"prompt":"x","n":3,"best_of":2}`, 400, "best_of", "less than n"},
		{"missing prompt", "/v1/completions", `{}`, 400, "prompt", "missing"},
		{"prompt too long", "/v1/completions", `{"prompt":"` + long + `"}`, 400, "prompt", "101 tokens, the context size is 64"},
		{"chat too long", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "messages", "the context size is 64"},
		{"bad template", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"template":"nope"}`, 400, "template", "unknown template"},
		{"jinja without model template", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"template":"jinja"}`, 400, "template", "no tokenizer.chat_template"},
		{"schema fails", "/v1/completions", `{"prompt":"x","json_schema":{"type":"object","not":{}}}`, 400, "json_schema", "does not compile"},
		{"bad grammar", "/v1/completions", `{"prompt":"x","grammar":"root ::= ("}`, 400, "grammar", ""},
		{"image without projector", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///x.png"}}]}]}`, 400, "messages[0].content", "--mmproj"},
		{"unknown tool choice", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}}`, 422, "tool_choice", "not among"},
		{"bad role", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"a"}]}`, 400, "messages[0].role", "not one of"},
		{"embed input type", "/v1/embeddings", `{"input":[true]}`, 400, "input[0]", "want string or array of token ids"},
		{"encoding_format", "/v1/embeddings", `{"input":"a","encoding_format":"hex"}`, 400, "encoding_format", "not one of"},
		{"detokenize out of vocab", "/extras/detokenize", `{"tokens":[5,999]}`, 400, "tokens[1]", "outside the vocabulary"},
		{"rerank documents", "/v1/rerank", `{"query":"a","documents":"b"}`, 400, "documents", "array"},
		{"audio parsed and ignored", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"audio_url","audio_url":{"url":"a.wav"}},{"type":"text","text":"hi"}]}],"max_tokens":1}`, 200, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.post(c.path, c.body)
			if r.status != c.status {
				t.Fatalf("POST %s %s = %d %s, want %d", c.path, c.body, r.status, r.body, c.status)
			}
			if c.status == 200 {
				return
			}
			e := errorOf(t, r.body)
			if e["param"] != c.param || !strings.Contains(e["message"].(string), c.msg) || e["code"] != float64(c.status) ||
				e["type"] != errorType(c.status) {
				t.Errorf("POST %s %s = %s, want param %v, message containing %q, type %s", c.path, c.body, r.body, c.param, c.msg, errorType(c.status))
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{MaxRequestBytes: 1024})
	r := ts.post("/v1/completions", `{"prompt":"`+strings.Repeat("x", 2000)+`"}`)
	if r.status != 413 || !strings.Contains(fmt.Sprint(errorOf(t, r.body)["message"]), "1024 bytes") {
		t.Errorf("2 KB body with a 1 KB limit = %d %s, want 413 naming the limit", r.status, r.body)
	}
}

func TestStreamValidationError(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"a"}],"stream":true,"template":"nope"}`,
		`{"messages":[{"role":"user","content":"a"}],"stream":true,"temperature":-1}`,
	} {
		r := ts.post("/v1/chat/completions", body)
		if r.status != 200 {
			t.Fatalf("POST %s = %d, want 200 with an error event", body, r.status)
		}
		evs := parseSSE(t, r.body)
		if len(evs) != 1 || evs[0].event != "error" {
			t.Fatalf("POST %s stream = %q, want exactly one error event", body, r.body)
		}
		if e := errorOf(t, []byte(evs[0].data)); e["code"] != 400.0 {
			t.Errorf("error event = %s, want code 400", evs[0].data)
		}
	}
}

func TestQueueFull(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	ts := newReadyServer(t, f, Config{Parallel: 1, QueueSize: 1})
	done := make(chan response, 2)
	for range 2 {
		go func() { done <- ts.post("/v1/completions", `{"prompt":"x","max_tokens":2}`) }()
	}
	// Both requests hold their places: the first waits on the gate, the
	// second behind it. No deadline: however slow the machine, they get
	// there (go test's -timeout catches a hang).
	for ts.s.waiting.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	r := ts.post("/v1/completions", `{"prompt":"x","max_tokens":2}`)
	if r.status != 503 || !strings.Contains(errorOf(t, r.body)["message"].(string), "queue is full") {
		t.Errorf("third request with a full queue = %d %s, want 503 queue full", r.status, r.body)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("third request with a full queue: Retry-After %q, want \"1\"", got)
	}
	if r := ts.post("/v1/embeddings", `{"input":"x"}`); r.status != 503 || r.header.Get("Retry-After") != "1" {
		t.Errorf("embeddings with a full queue = %d, Retry-After %q %s; want 503 with Retry-After 1", r.status, r.header.Get("Retry-After"), r.body)
	}
	close(f.gate)
	for range 2 {
		if r := <-done; r.status != 200 {
			t.Errorf("queued request = %d %s, want 200", r.status, r.body)
		}
	}
	if got := f.maxSeen.Load(); got != 1 {
		t.Errorf("most concurrent Generate calls = %d, want 1 (parallel 1)", got)
	}
}

// TestQueueCountsSequences: the queue counts the sequences a request runs
// at once (its candidates, at most MaxRequestSeqs), so a request for 3
// candidates does not fit where one more request would, one larger than
// the whole queue still runs on an idle server, and its prompts, which
// run one after another, do not count.
func TestQueueCountsSequences(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	ts := newReadyServer(t, f, Config{Parallel: 1, QueueSize: 1, MaxRequestSeqs: 3})
	done := make(chan response, 1)
	go func() { done <- ts.post("/v1/completions", `{"prompt":"x","max_tokens":2}`) }()
	waitFor(t, "the first request to queue", func() bool { return ts.s.waiting.Load() == 1 })
	r := ts.post("/v1/completions", `{"prompt":"x","max_tokens":2,"n":3}`)
	if r.status != 503 || !strings.Contains(errorOf(t, r.body)["message"].(string), "queue is full") {
		t.Errorf("3 candidates behind 1 request with room for 2 = %d %s, want 503 queue full", r.status, r.body)
	}
	prompts := make(chan response, 1)
	go func() { prompts <- ts.post("/v1/completions", `{"prompt":["a","b","c","d"],"max_tokens":2}`) }()
	waitFor(t, "4 prompts of one candidate to queue", func() bool { return ts.s.waiting.Load() == 2 })
	close(f.gate)
	if r := <-done; r.status != 200 {
		t.Errorf("queued request = %d %s", r.status, r.body)
	}
	if r := <-prompts; r.status != 200 || len(jsonPath(decodeBody(t, r.body), "choices").([]any)) != 4 {
		t.Errorf("4 prompts of one candidate behind 1 request with room for 2 = %d %s, want 200 with 4 choices", r.status, r.body)
	}
	waitFor(t, "the queue to empty", func() bool { return ts.s.waiting.Load() == 0 })
	r = ts.post("/v1/completions", `{"prompt":["a","b"],"max_tokens":2,"n":3}`)
	if r.status != 200 || len(jsonPath(decodeBody(t, r.body), "choices").([]any)) != 6 {
		t.Errorf("3 candidates on an idle server with a queue of 2 = %d %s, want 200 with 6 choices", r.status, r.body)
	}
}

func TestDisconnectCancels(t *testing.T) {
	f := newFake()
	f.hold = make(chan struct{})
	f.ended = make(chan error, 1)
	f.reply = func(string) string { return strings.Repeat("z", 400) }
	ts := newReadyServer(t, f, Config{})
	body := `{"messages":[{"role":"user","content":"a"}],"stream":true,"max_tokens":400}`
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before a data frame: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	// The client is gone (the socket closed, not just the response body)
	// before the generation goes on past its first token, so one of the
	// next 399 writes fails, whatever the speed.
	c.Close()
	close(f.hold)
	<-f.ended
	if f.cancelled.Load() != 1 {
		t.Errorf("generation cancelled %d times after the client left, want 1", f.cancelled.Load())
	}
}

// TestGracefulShutdown checks Shutdown: a stream in flight finishes within
// the grace period; one that would outlast it is cancelled and ends with an
// error event; Shutdown returns only once no generation runs. The
// generation waits after its first token until the test has seen Shutdown
// close the listener, so the order of events, not the machine's speed,
// decides the outcome.
func TestGracefulShutdown(t *testing.T) {
	for _, tc := range []struct {
		name string
		done bool // the grace period outlasts the stream, which ends with [DONE]
	}{
		{"finishes", true},
		{"cut", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.hold = make(chan struct{})
			f.reply = func(string) string { return strings.Repeat("z", 20) }
			ts := startServer(t, Config{})
			if err := ts.s.Ready(f); err != nil {
				t.Fatal(err)
			}
			resp, br := openStream(t, ts.base+"/v1/completions", `{"prompt":"a","stream":true,"max_tokens":20}`)
			defer resp.Body.Close()
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
				t.Fatalf("first line %q, %v, want a data frame", line, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- ts.s.Shutdown(ctx) }()
			waitListenerClosed(ts.base)
			if tc.done {
				close(f.hold) // the stream goes on and finishes in the grace period
			} else {
				cancel() // the grace period ends with the stream held
			}
			rest, _ := io.ReadAll(br)
			if tc.done != strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
				t.Errorf("stream after Shutdown ends %q, want [DONE]: %v", tail(string(rest), 200), tc.done)
			}
			if !tc.done && (!strings.Contains(string(rest), "event: error\n") || !strings.Contains(string(rest), "shutting down")) {
				t.Errorf("cut stream ends %q, want an error event saying the server shuts down", tail(string(rest), 200))
			}
			<-shut
			if n := ts.s.waiting.Load(); n != 0 {
				t.Errorf("Shutdown returned with %d requests running", n)
			}
			if f.running.Load() != 0 {
				t.Errorf("Shutdown returned with %d generations running", f.running.Load())
			}
		})
	}
}

// waitListenerClosed returns once the server at base refuses connections.
func waitListenerClosed(base string) {
	for {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(time.Millisecond)
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// TestDefaultMaxTokens: Config.DefaultMaxTokens (--n-predict) is the
// max_tokens of requests that give none, on completions and chat; -1 is up
// to the context; a request's own max_tokens still wins.
func TestDefaultMaxTokens(t *testing.T) {
	for _, tc := range []struct {
		def  int
		body string
		want string
	}{
		{3, `{"prompt":"x"}`, "one"},
		{3, `{"prompt":"x","max_tokens":5}`, "one t"},
		{-1, `{"prompt":"x"}`, "one two three four five"},
		{3, `{"messages":[{"role":"user","content":"x"}]}`, "one"},
	} {
		f := newFake()
		f.reply = func(string) string { return "one two three four five" }
		ts := newReadyServer(t, f, Config{DefaultMaxTokens: tc.def})
		path, text := "/v1/completions", []any{"choices", 0, "text"}
		if strings.Contains(tc.body, "messages") {
			path, text = "/v1/chat/completions", []any{"choices", 0, "message", "content"}
		}
		r := ts.post(path, tc.body)
		if got := jsonPath(decodeBody(t, r.body), text...); r.status != 200 || got != tc.want {
			t.Errorf("DefaultMaxTokens %d, POST %s %s = %d %v, want %q", tc.def, path, tc.body, r.status, got, tc.want)
		}
	}
}

// TestTextOffsetCharacters: logprobs.text_offset counts characters of the
// choice text, as OpenAI's completions do, not UTF-8 bytes. The fake
// model's tokens are bytes, so a two-byte character is two tokens, both at
// the character's offset; an echoed prompt of two characters (four bytes)
// puts the first generated token at 2.
func TestTextOffsetCharacters(t *testing.T) {
	f := newFake()
	f.reply = func(string) string { return "ééx" }
	ts := newReadyServer(t, f, Config{})
	for _, c := range []struct {
		body, want string
	}{
		{`{"prompt":"a","max_tokens":5,"logprobs":1}`, "[0 0 1 1 2]"},
		{`{"prompt":"éé","max_tokens":5,"logprobs":1,"echo":true}`, "[0 0 0 1 1 2 2 3 3 4]"},
	} {
		m := decodeBody(t, ts.post("/v1/completions", c.body).body)
		if got := fmt.Sprint(jsonPath(m, "choices", 0, "logprobs", "text_offset")); got != c.want {
			t.Errorf("%s: text_offset %s, want %s (text %q)", c.body, got, c.want, jsonPath(m, "choices", 0, "text"))
		}
	}
}
