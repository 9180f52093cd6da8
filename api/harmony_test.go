package api

import (
	"strconv"
	"strings"
	"testing"
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
const harmonyTemplate = `{%- for m in messages -%}<|start|>{{ m.role }}{% if m.role == 'assistant' %}<|channel|>final{% endif %}<|message|>{{ m.content }}<|end|>{%- endfor -%}<|start|>assistant`

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
	// stream returns the concatenated reasoning and content deltas, the
	// calls' names and arguments, and the finish reason.
	stream := func(t *testing.T, body string) (reasoning, content, calls, finish string) {
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
