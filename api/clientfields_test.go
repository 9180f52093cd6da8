package api

import (
	"fmt"
	"strings"
	"testing"
)

// fakeTokens returns the fake backend's ids of text (byte b is id b+3),
// without BOS: the independent expectation of what a client that
// tokenized the text itself sends.
func fakeTokens(text string) string {
	ids := make([]string, len(text))
	for i := range len(text) {
		ids[i] = fmt.Sprint(int(text[i]) + 3)
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// TestMaxCompletionTokens checks OpenAI's newer name of max_tokens on both
// generation routes: it limits the answer alike, and contradicting
// max_tokens is a 400 naming it.
func TestMaxCompletionTokens(t *testing.T) {
	f := newFake()
	ts := newReadyServer(t, f, Config{})
	reply := f.reply("")
	for _, tt := range []struct{ route, body string }{
		{"/v1/completions", `{"prompt":"Say hi"`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Say hi"}]`},
	} {
		text := func(m map[string]any) any {
			if tt.route == "/v1/completions" {
				return jsonPath(m, "choices", 0, "text")
			}
			return jsonPath(m, "choices", 0, "message", "content")
		}
		for _, limits := range []string{`"max_completion_tokens":5`, `"max_completion_tokens":5,"max_tokens":5`} {
			r := ts.post(tt.route, tt.body+","+limits+"}")
			m := decodeBody(t, r.body)
			if r.status != 200 || text(m) != reply[:5] || jsonPath(m, "choices", 0, "finish_reason") != "length" {
				t.Errorf("POST %s with %s = %d %s, want %q cut at length", tt.route, limits, r.status, r.body, reply[:5])
			}
		}
		r := ts.post(tt.route, tt.body+`,"max_completion_tokens":100}`)
		if m := decodeBody(t, r.body); r.status != 200 || text(m) != reply {
			t.Errorf("POST %s with max_completion_tokens 100 = %d %s, want the whole reply", tt.route, r.status, r.body)
		}
		for _, limits := range []string{`"max_completion_tokens":5,"max_tokens":6`, `"max_completion_tokens":null,"max_tokens":6`, `"max_completion_tokens":"5"`} {
			r := ts.post(tt.route, tt.body+","+limits+"}")
			m := decodeBody(t, r.body)
			if r.status != 400 || jsonPath(m, "error", "param") != "max_completion_tokens" {
				t.Errorf("POST %s with %s = %d %s, want 400 naming max_completion_tokens", tt.route, limits, r.status, r.body)
			}
		}
	}
}

// TestTokenPrompts checks OpenAI's token-id forms of prompt and input:
// the ids reach the model as given (no BOS added), several arrays are
// several prompts, and bad ids are a 400 naming the place.
func TestTokenPrompts(t *testing.T) {
	f := newFake()
	var seen []string
	f.reply = func(p string) string { seen = append(seen, p); return "ok" }
	ts := newReadyServer(t, f, Config{Parallel: 1})

	r := ts.post("/v1/completions", `{"prompt":`+fakeTokens("Say hi")+`,"max_tokens":5,"echo":true}`)
	m := decodeBody(t, r.body)
	if r.status != 200 || len(seen) != 1 || seen[0] != "Say hi" || jsonPath(m, "choices", 0, "text") != "Say hiok" {
		t.Fatalf("token prompt: %d %s, model saw %q, want the prompt \"Say hi\" without BOS echoed", r.status, r.body, seen)
	}
	if got := jsonPath(m, "usage", "prompt_tokens"); got != 6.0 {
		t.Errorf("usage.prompt_tokens = %v, want 6", got)
	}
	seen = nil
	r = ts.post("/v1/completions", `{"prompt":[`+fakeTokens("ab")+`,`+fakeTokens("cde")+`],"max_tokens":5}`)
	m = decodeBody(t, r.body)
	if r.status != 200 || len(jsonPath(m, "choices").([]any)) != 2 || strings.Join(seen, "|") != "ab|cde" {
		t.Errorf("two token prompts: %d %s, model saw %q, want 2 choices for ab and cde", r.status, r.body, seen)
	}

	a := decodeBody(t, ts.post("/v1/embeddings", `{"input":"aabc","encoding_format":"float"}`).body)
	b := decodeBody(t, ts.post("/v1/embeddings", `{"input":`+fakeTokens("aabc")+`,"encoding_format":"float"}`).body)
	c := decodeBody(t, ts.post("/v1/embeddings", `{"input":[`+fakeTokens("aabc")+`,`+fakeTokens("zz")+`],"encoding_format":"float"}`).body)
	if fmt.Sprint(jsonPath(a, "data", 0, "embedding")) != fmt.Sprint(jsonPath(b, "data", 0, "embedding")) ||
		fmt.Sprint(jsonPath(c, "data", 0, "embedding")) != fmt.Sprint(jsonPath(a, "data", 0, "embedding")) ||
		len(jsonPath(c, "data").([]any)) != 2 {
		t.Errorf("embeddings of text, tokens and token arrays = %v, %v, %v; want the same vector for aabc", a, b, c)
	}

	for _, tt := range []struct{ route, body, param string }{
		{"/v1/completions", `{"prompt":[72,999]}`, "prompt[1]"},
		{"/v1/completions", `{"prompt":[72,-1]}`, "prompt[1]"},
		{"/v1/completions", `{"prompt":[72,1.5]}`, "prompt[1]"},
		{"/v1/completions", `{"prompt":[[72],[999]]}`, "prompt[1][0]"},
		{"/v1/completions", `{"prompt":[[72],[]]}`, "prompt[1]"},
		{"/v1/completions", `{"prompt":["a",[72]]}`, "prompt[1]"},
		{"/v1/completions", `{"prompt":[72,"a"]}`, "prompt[1]"},
		{"/v1/completions", `{"prompt":[true]}`, "prompt[0]"},
		{"/v1/embeddings", `{"input":[[72],[5000]]}`, "input[1][0]"},
		{"/v1/embeddings", `{"input":{"a":1}}`, "input"},
	} {
		r := ts.post(tt.route, tt.body)
		if m := decodeBody(t, r.body); r.status != 400 || jsonPath(m, "error", "param") != tt.param {
			t.Errorf("POST %s %s = %d %s, want 400 naming %s", tt.route, tt.body, r.status, r.body, tt.param)
		}
	}
}

// TestClientMessageFields checks the message fields clients send: name
// reaches templates that print it, refusal is accepted on assistant turns
// (and stands for empty content), parallel_tool_calls false keeps one
// call, and other unknown fields stay a 400.
func TestClientMessageFields(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	var prompt string
	f.template = "{% for m in messages %}[{{ m.role }}{% if m.name %}:{{ m.name }}{% endif %}] {{ m.content }}\n{% endfor %}"
	f.reply = func(p string) string { prompt = p; return "ok" }
	ts := newReadyServer(t, f, Config{})
	r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","name":"ann","content":"hi"},
		{"role":"assistant","content":null,"refusal":"I cannot."},{"role":"assistant","content":"","refusal":null},
		{"role":"user","content":"why"}]}`)
	if r.status != 200 {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	if want := "<s>[user:ann] hi\n[assistant] I cannot.\n[assistant] \n[user] why\n"; prompt != want {
		t.Errorf("rendered prompt = %q, want %q", prompt, want)
	}
	for _, tt := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"hi","refusal":"no"}]}`, "messages[0].refusal"},
		{`{"messages":[{"role":"assistant","content":"hi","refusal":5}]}`, "messages[0].refusal"},
		{`{"messages":[{"role":"user","content":"hi","audio":null}]}`, "messages[0].audio"},
		{`{"messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":"no"}`, "parallel_tool_calls"},
		{`{"messages":[{"role":"user","content":"hi"}],"stored":true}`, "stored"},
	} {
		r := ts.post("/v1/chat/completions", tt.body)
		if m := decodeBody(t, r.body); r.status != 400 || jsonPath(m, "error", "param") != tt.param {
			t.Errorf("POST %s = %d %s, want 400 naming %s", tt.body, r.status, r.body, tt.param)
		}
	}

	f.template = ""
	two := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"
	f.reply = func(string) string { return two }
	for _, tt := range []struct {
		parallel string
		want     []string
	}{{"true", []string{"Paris", "Rome"}}, {"false", []string{"Paris"}}} {
		for _, stream := range []bool{false, true} {
			r := ts.post("/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"weather?"}],"template":"chatml",
				"max_tokens":300,"stream":%v,"parallel_tool_calls":%s,%s}`, stream, tt.parallel, weatherTools))
			var cities []string
			if !stream {
				for _, c := range jsonPath(decodeBody(t, r.body), "choices", 0, "message", "tool_calls").([]any) {
					cities = append(cities, jsonPath(c, "function", "arguments").(string))
				}
			} else {
				args := map[float64]string{}
				for _, ev := range parseSSE(t, r.body) {
					if ev.data == "[DONE]" {
						continue
					}
					if tc, ok := jsonPath(decodeBody(t, []byte(ev.data)), "choices", 0, "delta", "tool_calls", 0).(map[string]any); ok {
						args[tc["index"].(float64)] += jsonPath(tc, "function", "arguments").(string)
					}
				}
				for i := range len(args) {
					cities = append(cities, args[float64(i)])
				}
			}
			var want []string
			for _, c := range tt.want {
				want = append(want, `{"city":"`+c+`"}`)
			}
			if fmt.Sprint(cities) != fmt.Sprint(want) {
				t.Errorf("parallel_tool_calls %s, stream %v: calls %v, want %v", tt.parallel, stream, cities, want)
			}
		}
	}
}
