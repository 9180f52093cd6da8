package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// harmonyCases are the reference's gpt-oss parser cases (llama.cpp
// tests/test-chat.cpp), with vkllm's answers where a stream ends: a call
// whose arguments were cut short is dropped.
var harmonyCases = []struct {
	name      string
	text      string
	tools     bool
	reasoning string
	content   string
	calls     []struct{ name, args string }
}{
	{name: "analysis cut short", text: "<|channel|>analysis<|message|>I'm\nthink",
		reasoning: "I'm\nthink"},
	{name: "analysis ended", text: "<|channel|>analysis<|message|>I'm\nthinking<|end|>",
		reasoning: "I'm\nthinking"},
	{name: "analysis then final", text: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?",
		reasoning: "I'm\nthinking", content: "Hello, world!\nWhat's up?"},
	{name: "final ended by return", text: "<|channel|>final<|message|>Paris.<|return|>", content: "Paris."},
	{name: "call in channel with constrain", tools: true,
		text:      "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
		reasoning: "I'm\nthinking", calls: []struct{ name, args string }{{"special_function", `{"arg1":1}`}}},
	{name: "call ended by call token", tools: true,
		text:  "<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}<|call|>",
		calls: []struct{ name, args string }{{"special_function", `{"arg1":1}`}}},
	{name: "call in analysis channel", tools: true,
		text:      "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>analysis to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
		reasoning: "I'm\nthinking", calls: []struct{ name, args string }{{"special_function", `{"arg1":1}`}}},
	{name: "call arguments cut short", tools: true,
		text:      "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=functions.special_function<|message|>{\"arg1",
		reasoning: "I'm\nthinking"},
	{name: "commentary is content", text: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary<|message|>Hello, world!\nWhat's up?",
		reasoning: "I'm\nthinking", content: "Hello, world!\nWhat's up?"},
	{name: "commentary then call", tools: true,
		text:      "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary<|message|>Hello, world!\nWhat's up?<|end|><|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
		reasoning: "I'm\nthinking", content: "Hello, world!\nWhat's up?", calls: []struct{ name, args string }{{"special_function", `{"arg1":1}`}}},
	{name: "calls off: final kept", text: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?",
		reasoning: "I'm\nthinking", content: "Hello, world!\nWhat's up?"},
	{name: "calls off: call dropped", text: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
		reasoning: "I'm\nthinking"},
	{name: "recipient in role header", tools: true,
		text:  " to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}",
		calls: []struct{ name, args string }{{"special_function", `{"arg1":1}`}}},
	{name: "recipient in role header, analysis", tools: true,
		text:  " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
		calls: []struct{ name, args string }{{"special_function", `{"arg1":1}`}}},
	{name: "recipient after start", tools: true,
		text:      "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
		reasoning: "I'm\nthinking", calls: []struct{ name, args string }{{"special_function", `{"arg1":1}`}}},
	{name: "two calls", tools: true,
		text:  "<|channel|>commentary to=functions.special_function json<|message|>{\"arg1\": 1}<|call|><|start|>assistant<|channel|>commentary to=functions.special_function json<|message|>{\"arg1\": 2}<|call|>",
		calls: []struct{ name, args string }{{"special_function", `{"arg1":1}`}, {"special_function", `{"arg1":2}`}}},
	{name: "unknown function dropped", tools: true,
		text:    "<|channel|>commentary to=functions.nope json<|message|>{}<|end|><|start|>assistant<|channel|>final<|message|>ok",
		content: "ok"},
	{name: "not harmony", text: "Just an answer <|end|> with markers.", content: "Just an answer <|end|> with markers."},
	{name: "empty", text: ""},
	{name: "header cut short", text: "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|chan", reasoning: "hm"},
}

func TestParseHarmonyAnswer(t *testing.T) {
	known := []tool{{name: "special_function"}}
	for _, c := range harmonyCases {
		t.Run(c.name, func(t *testing.T) {
			var k []tool
			if c.tools {
				k = known
			}
			reasoning, content, calls := parseHarmonyAnswer(c.text, k)
			if reasoning != c.reasoning || content != c.content || len(calls) != len(c.calls) {
				t.Fatalf("parseHarmonyAnswer(%q) = %q, %q, %d calls, want %q, %q, %d calls", c.text, reasoning, content, len(calls), c.reasoning, c.content, len(c.calls))
			}
			for i, tc := range calls {
				if tc.name != c.calls[i].name || tc.arguments != c.calls[i].args {
					t.Errorf("parseHarmonyAnswer(%q) call %d = %s %s, want %s %s", c.text, i, tc.name, tc.arguments, c.calls[i].name, c.calls[i].args)
				}
			}
		})
	}
}

// TestHarmonyParserStream feeds every case in pieces of every size: the
// deltas add up to the whole answer's parts, so a stream splits reasoning
// from content wherever the tokens break the markers.
func TestHarmonyParserStream(t *testing.T) {
	known := []tool{{name: "special_function"}}
	for _, c := range harmonyCases {
		var k []tool
		if c.tools {
			k = known
		}
		for size := 1; size <= 12; size++ {
			p := newHarmonyParser(k)
			var reasoning, content []byte
			for i := 0; i < len(c.text); i += size {
				var r, ct []byte
				r, ct = p.add([]byte(c.text[i:min(i+size, len(c.text))]), nil, nil)
				reasoning, content = append(reasoning, r...), append(content, ct...)
			}
			reasoning, content, calls := p.finish(reasoning, content)
			if string(reasoning) != c.reasoning || string(content) != c.content || len(calls) != len(c.calls) {
				t.Errorf("%s in pieces of %d = %q, %q, %d calls, want %q, %q, %d calls", c.name, size, reasoning, content, len(calls), c.reasoning, c.content, len(c.calls))
			}
		}
	}
}

func TestMarkerPrefixLen(t *testing.T) {
	cases := []struct {
		b    string
		want int
	}{
		{"abc<|e", 3},
		{"abc<|end|", 6},
		{"abc<", 1},
		{"abc", 0},
		{"<|sta", 5},
	}
	for _, c := range cases {
		if got := markerPrefixLen([]byte(c.b), harmonyBodyEnds); got != c.want {
			t.Errorf("markerPrefixLen(%q) = %d, want %d", c.b, got, c.want)
		}
	}
}

// harmonyTemplate is a small template in gpt-oss's format: enough for the
// server to find the Harmony family.
const harmonyTemplate = `<|start|>system<|message|>Reasoning: {{ reasoning_effort if reasoning_effort is defined else 'medium' }}<|end|>{%- for m in messages -%}<|start|>{{ m.role }}{% if m.role == 'assistant' %}<|channel|>final{% endif %}<|message|>{{ m.content }}<|end|>{%- endfor -%}<|start|>assistant`

// TestChatHarmony answers chat requests from a scripted gpt-oss answer:
// the analysis channel is reasoning_content, the final channel the
// content, a message to functions.NAME a call, streamed or not.
func TestChatHarmony(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.template = harmonyTemplate
	ts := newReadyServer(t, f, Config{})
	answer := "<|channel|>analysis<|message|>User asks capital.<|end|><|start|>assistant<|channel|>final<|message|>Paris."
	call := "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}"
	f.reply = func(p string) string {
		if strings.Contains(p, "weather") {
			return call
		}
		return answer
	}
	user := func(q string) string { return `"messages":[{"role":"user","content":"` + q + `"}],"temperature":0` }

	t.Run("message", func(t *testing.T) {
		r := ts.post("/v1/chat/completions", `{`+user("capital?")+`,"max_tokens":200}`)
		m := decodeBody(t, r.body)
		if got := jsonPath(m, "choices", 0, "message", "content"); got != "Paris." {
			t.Errorf("content = %v, want Paris. (%s)", got, r.body)
		}
		if got := jsonPath(m, "choices", 0, "message", "reasoning_content"); got != "User asks capital." {
			t.Errorf("reasoning_content = %v, want User asks capital.", got)
		}
	})
	t.Run("tool call", func(t *testing.T) {
		r := ts.post("/v1/chat/completions", `{`+user("weather?")+`,"max_tokens":300,`+weatherTools+`}`)
		m := decodeBody(t, r.body)
		tc := jsonPath(m, "choices", 0, "message", "tool_calls", 0)
		if jsonPath(tc, "function", "name") != "get_weather" || jsonPath(tc, "function", "arguments") != `{"city":"Paris"}` {
			t.Errorf("tool call = %v, want get_weather {\"city\":\"Paris\"} (%s)", tc, r.body)
		}
		if jsonPath(m, "choices", 0, "finish_reason") != "tool_calls" || jsonPath(m, "choices", 0, "message", "content") != nil ||
			jsonPath(m, "choices", 0, "message", "reasoning_content") != "Need weather." {
			t.Errorf("finish, content, reasoning = %v, %v, %v, want tool_calls, null, Need weather.", jsonPath(m, "choices", 0, "finish_reason"),
				jsonPath(m, "choices", 0, "message", "content"), jsonPath(m, "choices", 0, "message", "reasoning_content"))
		}
	})
	t.Run("forced call", func(t *testing.T) {
		// A required call is written under the grammar in gpt-oss's own
		// form, a commentary message to the function.
		reply := f.reply
		f.reply = func(string) string {
			return `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}`
		}
		defer func() { f.reply = reply }()
		r := ts.post("/v1/chat/completions", `{`+user("weather?")+`,"max_tokens":300,"tool_choice":"required",`+weatherTools+`}`)
		m := decodeBody(t, r.body)
		tc := jsonPath(m, "choices", 0, "message", "tool_calls", 0)
		if jsonPath(tc, "function", "name") != "get_weather" || jsonPath(tc, "function", "arguments") != `{"city":"Paris"}` ||
			jsonPath(m, "choices", 0, "message", "content") != nil {
			t.Errorf("forced call = %s, want get_weather {\"city\":\"Paris\"} and no content", r.body)
		}
	})
	stream := func(t *testing.T, body string) (reasoning, content, calls, finish string) {
		return chatStreamParts(t, ts, body)
	}
	t.Run("stream", func(t *testing.T) {
		r, c, k, fin := stream(t, `{`+user("capital?")+`,"max_tokens":200,"stream":true}`)
		if r != "User asks capital." || c != "Paris." || k != "" || fin != "stop" {
			t.Errorf("stream = reasoning %q, content %q, calls %q, finish %q, want User asks capital., Paris., none, stop", r, c, k, fin)
		}
	})
	t.Run("stream cut inside analysis", func(t *testing.T) {
		n := len("<|channel|>analysis<|message|>User as")
		r, c, k, fin := stream(t, `{`+user("capital?")+`,"max_tokens":`+strconv.Itoa(n)+`,"stream":true}`)
		if r != "User as" || c != "" || k != "" || fin != "length" {
			t.Errorf("stream = reasoning %q, content %q, calls %q, finish %q, want User as, nothing, none, length", r, c, k, fin)
		}
	})
	t.Run("stream tool call", func(t *testing.T) {
		r, c, k, fin := stream(t, `{`+user("weather?")+`,"max_tokens":300,"stream":true,`+weatherTools+`}`)
		if r != "Need weather." || c != "" || k != `get_weather {"city":"Paris"}` || fin != "tool_calls" {
			t.Errorf("stream = reasoning %q, content %q, calls %q, finish %q, want Need weather., nothing, get_weather {\"city\":\"Paris\"}, tool_calls", r, c, k, fin)
		}
	})
}

// TestApplyTemplateHarmony posts the reference's conversations to
// /apply-template with gpt-oss's own template: the prompts equal the
// reference's; reasoning_effort reaches the template, and the reasoning
// before an earlier call goes back into the prompt as its analysis.
func TestApplyTemplateHarmony(t *testing.T) {
	dir, ep := loadExpectedPrompts(t, "archs-next/moe/gpt-oss-chat")
	src, err := os.ReadFile(filepath.Join(dir, "openai-gpt-oss-120b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	date, err := time.Parse("02 Jan 2006", ep.Context.DateString)
	if err != nil {
		t.Fatalf("date_string %q: %v", ep.Context.DateString, err)
	}
	f := newFake()
	f.ctxSize = 4096
	f.template = string(src)
	ts := newReadyServer(t, f, Config{Now: func() time.Time { return date }})
	want := ep.Templates["openai-gpt-oss-120b"]
	// with returns request rq with the JSON fields extra added.
	with := func(rq, extra string) string {
		b := ep.Requests[rq]
		return string(b[:bytes.LastIndexByte(b, '}')]) + extra + "}"
	}
	cases := []struct {
		name, body, want string
	}{
		{"system and user", with("a", ""), want["a"].Prompt},
		{"earlier turn", with("b", ""), want["b"].Prompt},
		{"tool call and result", with("c", ""), want["c"].Prompt},
		{"reasoning_effort high", with("a", `,"reasoning_effort":"high"`),
			strings.Replace(want["a"].Prompt, "Reasoning: medium", "Reasoning: high", 1)},
		{"reasoning_effort over chat_template_kwargs", with("a", `,"reasoning_effort":"low","chat_template_kwargs":{"reasoning_effort":"high"}`),
			strings.Replace(want["a"].Prompt, "Reasoning: medium", "Reasoning: low", 1)},
		{"reasoning_effort none leaves the template's default", with("a", `,"reasoning_effort":"none"`), want["a"].Prompt},
		{"reasoning before a call", strings.Replace(with("c", ""), `"content": null,`, `"content": null, "reasoning_content": "Need the weather.",`, 1),
			strings.Replace(want["c"].Prompt, "<|start|>assistant to=functions.get_weather",
				"<|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant to=functions.get_weather", 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.do("POST", "/apply-template", c.body)
			var got applyTemplateBody
			if r.status != 200 || json.Unmarshal(r.body, &got) != nil || got.Prompt != c.want {
				t.Errorf("POST /apply-template %s = %d %s, want prompt\n%s", c.body, r.status, r.body, c.want)
			}
		})
	}
	if r := ts.do("POST", "/apply-template", with("a", `,"reasoning_effort":"extreme"`)); r.status != 400 || !strings.Contains(string(r.body), "reasoning_effort") {
		t.Errorf("reasoning_effort extreme = %d %s, want a 400 naming reasoning_effort", r.status, r.body)
	}
}

// TestResponsesHarmony answers /v1/responses from scripted gpt-oss
// answers: the message is the final channel (the analysis left out), a
// message to functions.NAME a function_call item, streamed or not.
func TestResponsesHarmony(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.template = harmonyTemplate
	ts := newReadyServer(t, f, Config{})
	f.reply = func(p string) string {
		if strings.Contains(p, "weather") {
			return "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}"
		}
		return "<|channel|>analysis<|message|>User asks capital.<|end|><|start|>assistant<|channel|>final<|message|>Paris."
	}
	// isReasoning reports whether item is a reasoning item of text.
	isReasoning := func(item any, text string) bool {
		return jsonPath(item, "type") == "reasoning" && jsonPath(item, "content", 0, "type") == "reasoning_text" &&
			jsonPath(item, "content", 0, "text") == text
	}
	r := ts.post("/v1/responses", `{"input":"capital?"}`)
	m := decodeBody(t, r.body)
	if out, _ := jsonPath(m, "output").([]any); len(out) != 2 || !isReasoning(out[0], "User asks capital.") || jsonPath(out, 1, "content", 0, "text") != "Paris." {
		t.Errorf("output = %s, want the reasoning, then one message with Paris.", r.body)
	}
	r = ts.post("/v1/responses", `{"input":"weather?",`+responsesWeatherTool+`}`)
	m = decodeBody(t, r.body)
	if out, _ := jsonPath(m, "output").([]any); len(out) != 2 || !isReasoning(out[0], "Need weather.") || jsonPath(out, 1, "type") != "function_call" ||
		jsonPath(out, 1, "name") != "get_weather" || jsonPath(out, 1, "arguments") != `{"city":"Paris"}` {
		t.Errorf("output = %s, want the reasoning, then one get_weather call for Paris", r.body)
	}
	t.Run("reasoning.effort", func(t *testing.T) {
		var prompt string
		reply := f.reply
		f.reply = func(p string) string { prompt = p; return reply(p) }
		defer func() { f.reply = reply }()
		r := ts.post("/v1/responses", `{"input":"capital?","reasoning":{"effort":"high","summary":"auto"}}`)
		if m := decodeBody(t, r.body); !strings.Contains(prompt, "Reasoning: high") || jsonPath(m, "reasoning", "effort") != "high" {
			t.Errorf("reasoning.effort high: prompt %q, body %s, want Reasoning: high in the prompt and effort high echoed", prompt, r.body)
		}
		for _, bad := range []string{`{"effort":"extreme"}`, `{"summary":"long"}`, `{"nope":1}`} {
			r := ts.post("/v1/responses", `{"input":"capital?","reasoning":`+bad+`}`)
			if r.status != 400 || !strings.Contains(string(r.body), `"reasoning`) {
				t.Errorf("reasoning %s = %d %s, want a 400 naming the field", bad, r.status, r.body)
			}
		}
	})
	t.Run("stream", func(t *testing.T) {
		evs := respEvents(t, ts.post("/v1/responses", `{"input":"capital?","stream":true}`).body)
		var text, reasoning strings.Builder
		for _, ev := range evs {
			switch ev["type"] {
			case "response.output_text.delta":
				text.WriteString(ev["delta"].(string))
				if ev["output_index"] != 1.0 {
					t.Errorf("text delta at output %v, want 1 (after the reasoning)", ev["output_index"])
				}
			case "response.reasoning_text.delta":
				reasoning.WriteString(ev["delta"].(string))
			}
		}
		last := evs[len(evs)-1]
		if text.String() != "Paris." || reasoning.String() != "User asks capital." || !isReasoning(jsonPath(last, "response", "output", 0), "User asks capital.") ||
			jsonPath(last, "response", "output", 1, "content", 0, "text") != "Paris." {
			t.Errorf("streamed text %q, reasoning %q, final %v, want the reasoning, then Paris.", text.String(), reasoning.String(), last)
		}
		evs = respEvents(t, ts.post("/v1/responses", `{"input":"weather?","stream":true,`+responsesWeatherTool+`}`).body)
		final := jsonPath(evs[len(evs)-1], "response", "output", 1)
		if jsonPath(final, "type") != "function_call" || jsonPath(final, "arguments") != `{"city":"Paris"}` {
			t.Errorf("final output %v, want a get_weather call for Paris after the reasoning", final)
		}
	})
}

// FuzzHarmonyParser feeds arbitrary answers in pieces of a fuzzed size:
// no input may panic, and the pieces must split exactly as the whole.
func FuzzHarmonyParser(f *testing.F) {
	for _, c := range harmonyCases {
		f.Add(c.text, uint8(3))
	}
	f.Add("<|start|><|start|><|message|><|end|><|call|>x to=functions.special_function<|message|>{", uint8(1))
	known := []tool{{name: "special_function"}}
	f.Fuzz(func(t *testing.T, text string, size uint8) {
		n := int(size%16) + 1
		wantR, wantC, wantCalls := parseHarmonyAnswer(text, known)
		p := newHarmonyParser(known)
		var reasoning, content []byte
		for i := 0; i < len(text); i += n {
			reasoning, content = p.add([]byte(text[i:min(i+n, len(text))]), reasoning, content)
		}
		reasoning, content, calls := p.finish(reasoning, content)
		if string(reasoning) != wantR || string(content) != wantC || len(calls) != len(wantCalls) {
			t.Errorf("%q in pieces of %d = %q, %q, %d calls, whole = %q, %q, %d calls", text, n, reasoning, content, len(calls), wantR, wantC, len(wantCalls))
		}
	})
}

// chatStreamParts posts a streamed chat request and returns the
// concatenated reasoning and content deltas, the calls' names and
// arguments, and the finish reason.
func chatStreamParts(t *testing.T, ts *testServer, body string) (reasoning, content, calls, finish string) {
	t.Helper()
	r := ts.post("/v1/chat/completions", body)
	evs := parseSSE(t, r.body)
	var rb, cb, kb strings.Builder
	for _, ev := range evs[1 : len(evs)-1] {
		m := decodeBody(t, []byte(ev.data))
		d, _ := jsonPath(m, "choices", 0, "delta").(map[string]any)
		if s, ok := d["reasoning_content"].(string); ok {
			rb.WriteString(s)
		}
		if s, ok := d["content"].(string); ok {
			cb.WriteString(s)
		}
		if tc := jsonPath(m, "choices", 0, "delta", "tool_calls", 0); tc != nil {
			if n, ok := jsonPath(tc, "function", "name").(string); ok {
				kb.WriteString(n + " ")
			}
			kb.WriteString(jsonPath(tc, "function", "arguments").(string))
		}
		if fr, ok := jsonPath(m, "choices", 0, "finish_reason").(string); ok {
			finish = fr
		}
	}
	return rb.String(), cb.String(), kb.String(), finish
}
