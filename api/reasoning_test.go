package api

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/fixtures"
)

// The cases follow the reference's reasoning parser (its test-chat.cpp
// cases for DeepSeek R1, Qwen3, Magistral and Seed-OSS outputs): the
// reasoning between the markers at the answer's start, stripped; the
// content after the end marker without its leading whitespace; reasoning
// the prompt opened; an answer cut inside the reasoning; no parsing under
// "none"; the whole answer as content under "deepseek-legacy".
var thinkCases = []struct {
	name, start, end string
	forcedOpen       bool
	format           string
	answer           string
	reasoning        string
	content          string
}{
	{"deepseek", "<think>", "</think>", false, reasoningDeepSeek, "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", "I'm\nthinking", "Hello, world!\nWhat's up?"},
	{"auto", "<think>", "</think>", false, reasoningAuto, "<think>I'm\nthinking</think>Hello", "I'm\nthinking", "Hello"},
	{"whitespace stripped", "<think>", "</think>", false, reasoningAuto, "  <think>\n  I think.  \n</think>\n\nParis.\n", "I think.", "Paris.\n"},
	{"forced open", "<think>", "</think>", true, reasoningAuto, "I'm\nthinking</think>Hello, world!", "I'm\nthinking", "Hello, world!"},
	{"forced open, cut", "<think>", "</think>", true, reasoningAuto, "I'm\nthink", "I'm\nthink", ""},
	{"cut inside", "<think>", "</think>", false, reasoningAuto, "<think>partial thought\n", "partial thought", ""},
	{"no reasoning", "<think>", "</think>", false, reasoningAuto, "Hello, world!", "", "Hello, world!"},
	{"marker later", "<think>", "</think>", false, reasoningAuto, "Hello <think>x</think> there", "", "Hello <think>x</think> there"},
	{"empty reasoning", "<think>", "</think>", false, reasoningAuto, "<think>\n\n</think>\n\nHi", "", "Hi"},
	{"start only", "<think>", "</think>", false, reasoningAuto, "<thi", "", "<thi"},
	{"marker split by whitespace", "<think>", "</think>", false, reasoningAuto, "<think>a</think >b", "a</think >b", ""},
	{"magistral", "[THINK]", "[/THINK]", false, reasoningAuto, "[THINK]Let me see.[/THINK]Answer: 4", "Let me see.", "Answer: 4"},
	{"seed-oss", "<seed:think>", "</seed:think>", false, reasoningAuto, "<seed:think>hmm</seed:think>ok", "hmm", "ok"},
	{"legacy", "<think>", "</think>", false, reasoningLegacy, "<think>I'm\nthinking</think>Hello", "I'm\nthinking", "<think>I'm\nthinking</think>Hello"},
}

// TestThinkParser splits each case whole and streamed in every two-piece
// split and byte by byte: all give the case's reasoning and content.
func TestThinkParser(t *testing.T) {
	for _, c := range thinkCases {
		t.Run(c.name, func(t *testing.T) {
			rs := reasoningSplit{start: c.start, end: c.end, forcedOpen: c.forcedOpen, legacy: c.format == reasoningLegacy}
			r, ct := rs.split(c.answer)
			if r != c.reasoning || ct != c.content {
				t.Fatalf("whole: reasoning %q content %q, want %q and %q", r, ct, c.reasoning, c.content)
			}
			if c.format == reasoningLegacy {
				return // streamed, the content is the answer as it comes (TestChatThinking)
			}
			feed := func(pieces []string) (string, string) {
				p := rs.parser()
				var rb, cb []byte
				for _, s := range pieces {
					rb, cb = p.add([]byte(s), rb, cb)
				}
				rb, cb = p.finish(rb, cb)
				return string(rb), string(cb)
			}
			for i := 0; i <= len(c.answer); i++ {
				if r, ct := feed([]string{c.answer[:i], c.answer[i:]}); r != c.reasoning || ct != c.content {
					t.Fatalf("split at %d: reasoning %q content %q, want %q and %q", i, r, ct, c.reasoning, c.content)
				}
			}
			bytes := strings.Split(c.answer, "")
			if r, ct := feed(bytes); r != c.reasoning || ct != c.content {
				t.Fatalf("byte by byte: reasoning %q content %q, want %q and %q", r, ct, c.reasoning, c.content)
			}
		})
	}
}

// TestThinkMarkers: a thinking template's markers are the family's it
// writes; a template that is not thinking, or gpt-oss's, splits nothing;
// "none" splits nothing; a prompt ending in the start marker opens the
// reasoning.
func TestThinkMarkers(t *testing.T) {
	for _, c := range []struct{ src, start, end string }{
		{"{{ '<think>' }}{{ m.reasoning_content }}{{ '</think>' }}", "<think>", "</think>"},
		{"[THINK]{{ x }}[/THINK]", "[THINK]", "[/THINK]"},
		{"<seed:think>{{ x }}</seed:think>", "<seed:think>", "</seed:think>"},
		{"{{ messages }}", "", ""},
	} {
		if s, e := thinkMarkersOf(c.src); s != c.start || e != c.end {
			t.Errorf("markers of %q = %q %q, want %q %q", c.src, s, e, c.start, c.end)
		}
	}
	tm := &chatTemplate{source: "<think></think>", caps: templateCaps{thinking: true, reasoning: true}}
	if rs := newReasoningSplit(tm, "<|im_start|>assistant\n<think>\n", reasoningAuto); !rs.on() || !rs.forcedOpen {
		t.Errorf("prompt ending in <think>: %+v, want a forced-open split", rs)
	}
	if rs := newReasoningSplit(tm, "<|im_start|>assistant\n", reasoningAuto); !rs.on() || rs.forcedOpen {
		t.Errorf("prompt without <think>: %+v, want a split, not forced open", rs)
	}
	if rs := newReasoningSplit(tm, "x", reasoningNone); rs.on() {
		t.Errorf("none: %+v, want no split", rs)
	}
	if rs := newReasoningSplit(&chatTemplate{source: "<think></think>"}, "x", reasoningAuto); rs.on() {
		t.Errorf("a template that is not thinking: %+v, want no split", rs)
	}
	if rs := newReasoningSplit(&chatTemplate{source: "<think></think>", family: familyHarmony, caps: templateCaps{thinking: true, reasoning: true}}, "x", reasoningAuto); rs.on() {
		t.Errorf("gpt-oss: %+v, want no split (harmony.go parses it)", rs)
	}
}

// qwen3Template is a Qwen3-style thinking template: an earlier answer's
// reasoning between <think> markers, and with enable_thinking false an
// empty reasoning in the generation prompt.
const qwen3Template = "{%- for m in messages -%}<|im_start|>{{ m.role }}\n" +
	"{% if m.role == 'assistant' and m.reasoning_content %}<think>\n{{ m.reasoning_content }}\n</think>\n\n{% endif %}" +
	"{{ m.content }}<|im_end|>\n{%- endfor -%}" +
	"{%- if add_generation_prompt %}<|im_start|>assistant\n" +
	"{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{%- endif %}{%- endif %}"

// TestChatThinking answers chat requests from a scripted Qwen3-style
// answer: the reasoning is reasoning_content and the rest content, streamed
// or not, cut inside the reasoning, under each reasoning_format, and a tool
// call after the reasoning is parsed; --reasoning-budget 0 renders the
// prompt with enable_thinking false.
func TestChatThinking(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.template = qwen3Template
	var prompt string
	answer := "<think>\nThe user asks for the capital.\n</think>\n\nParis."
	call := "<think>\nNeed the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	f.reply = func(p string) string {
		prompt = p
		if strings.Contains(p, "weather") {
			return call
		}
		return answer
	}
	ts := newReadyServer(t, f, Config{})
	user := func(q string) string { return `"messages":[{"role":"user","content":"` + q + `"}],"temperature":0` }
	whole := func(t *testing.T, body string) (reasoning, content any, m map[string]any) {
		r := ts.post("/v1/chat/completions", body)
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		m = decodeBody(t, r.body)
		return jsonPath(m, "choices", 0, "message", "reasoning_content"), jsonPath(m, "choices", 0, "message", "content"), m
	}
	stream := func(t *testing.T, body string) (reasoning, content, finish string) {
		reasoning, content, _, finish = chatStreamParts(t, ts, body)
		return reasoning, content, finish
	}

	t.Run("message", func(t *testing.T) {
		r, c, _ := whole(t, `{`+user("capital?")+`,"max_tokens":200}`)
		if r != "The user asks for the capital." || c != "Paris." {
			t.Errorf("reasoning %q, content %q, want the reasoning and Paris.", r, c)
		}
		if strings.Contains(prompt, "<think>") {
			t.Errorf("prompt %q: enable_thinking true renders no empty reasoning", prompt)
		}
	})
	t.Run("stream", func(t *testing.T) {
		r, c, fin := stream(t, `{`+user("capital?")+`,"max_tokens":200,"stream":true}`)
		if r != "The user asks for the capital." || c != "Paris." || fin != "stop" {
			t.Errorf("stream: reasoning %q, content %q, finish %q", r, c, fin)
		}
	})
	t.Run("stream cut inside the reasoning", func(t *testing.T) {
		n := len("<think>\nThe user as")
		r, c, fin := stream(t, `{`+user("capital?")+`,"max_tokens":`+strconv.Itoa(n)+`,"stream":true}`)
		if r != "The user as" || c != "" || fin != "length" {
			t.Errorf("stream: reasoning %q, content %q, finish %q, want The user as, nothing, length", r, c, fin)
		}
	})
	t.Run("reasoning_format none", func(t *testing.T) {
		r, c, _ := whole(t, `{`+user("capital?")+`,"max_tokens":200,"reasoning_format":"none"}`)
		if r != nil || c != answer {
			t.Errorf("reasoning %v, content %q, want none and the whole answer", r, c)
		}
		sr, sc, _ := stream(t, `{`+user("capital?")+`,"max_tokens":200,"stream":true,"reasoning_format":"none"}`)
		if sr != "" || sc != answer {
			t.Errorf("stream: reasoning %q, content %q, want none and the whole answer", sr, sc)
		}
	})
	t.Run("reasoning_format deepseek-legacy", func(t *testing.T) {
		r, c, _ := whole(t, `{`+user("capital?")+`,"max_tokens":200,"reasoning_format":"deepseek-legacy"}`)
		if r != "The user asks for the capital." || c != answer {
			t.Errorf("reasoning %v, content %q, want the reasoning and the whole answer", r, c)
		}
		sr, sc, _ := stream(t, `{`+user("capital?")+`,"max_tokens":200,"stream":true,"reasoning_format":"deepseek-legacy"}`)
		if sr != "The user asks for the capital." || sc != answer {
			t.Errorf("stream: reasoning %q, content %q, want the reasoning and the whole answer", sr, sc)
		}
	})
	t.Run("bad reasoning_format", func(t *testing.T) {
		r := ts.post("/v1/chat/completions", `{`+user("capital?")+`,"reasoning_format":"deep"}`)
		if r.status != 400 || !strings.Contains(string(r.body), "reasoning_format") {
			t.Errorf("status %d %s, want 400 naming reasoning_format", r.status, r.body)
		}
	})
	t.Run("tool call after the reasoning", func(t *testing.T) {
		r, c, m := whole(t, `{`+user("weather?")+`,"max_tokens":300,`+weatherTools+`}`)
		tc := jsonPath(m, "choices", 0, "message", "tool_calls", 0)
		if r != "Need the weather." || c != nil || jsonPath(tc, "function", "name") != "get_weather" ||
			jsonPath(tc, "function", "arguments") != `{"city":"Paris"}` || jsonPath(m, "choices", 0, "finish_reason") != "tool_calls" {
			t.Errorf("reasoning %v, content %v, call %v, finish %v", r, c, tc, jsonPath(m, "choices", 0, "finish_reason"))
		}
	})
	t.Run("no thinking", func(t *testing.T) {
		ts := newReadyServer(t, f, Config{NoThinking: true})
		if r := ts.post("/v1/chat/completions", `{`+user("capital?")+`,"max_tokens":1}`); r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		if !strings.HasSuffix(prompt, "<|im_start|>assistant<think>\n\n</think>") {
			t.Errorf("prompt %q, want the empty reasoning of enable_thinking false", prompt)
		}
		if r := ts.post("/v1/chat/completions", `{`+user("capital?")+`,"max_tokens":1,"chat_template_kwargs":{"enable_thinking":true}}`); r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		if strings.Contains(prompt, "</think>") {
			t.Errorf("prompt %q: the request's enable_thinking true holds over --reasoning-budget 0", prompt)
		}
	})
}

// TestResponsesThinking: /v1/responses returns a thinking model's
// reasoning as a reasoning item before its message, streamed as
// response.reasoning_text.delta events; a reasoning item sent back as
// input goes to the template as the next assistant message's
// reasoning_content.
func TestResponsesThinking(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.template = qwen3Template
	var prompt string
	f.reply = func(p string) string {
		prompt = p
		return "<think>\nThe user asks for the capital.\n</think>\n\nParis."
	}
	ts := newReadyServer(t, f, Config{})
	m := decodeBody(t, ts.post("/v1/responses", `{"input":"capital?"}`).body)
	if jsonPath(m, "output", 0, "type") != "reasoning" || jsonPath(m, "output", 0, "content", 0, "text") != "The user asks for the capital." ||
		jsonPath(m, "output", 1, "content", 0, "text") != "Paris." {
		t.Errorf("output %v, want the reasoning item, then Paris.", m["output"])
	}
	evs := respEvents(t, ts.post("/v1/responses", `{"input":"capital?","stream":true}`).body)
	var reasoning, text strings.Builder
	for _, ev := range evs {
		switch ev["type"] {
		case "response.reasoning_text.delta":
			reasoning.WriteString(ev["delta"].(string))
		case "response.output_text.delta":
			text.WriteString(ev["delta"].(string))
		}
	}
	if reasoning.String() != "The user asks for the capital." || text.String() != "Paris." {
		t.Errorf("stream: reasoning %q, text %q", reasoning.String(), text.String())
	}
	in := `{"input":[{"role":"user","content":"capital?"},` +
		`{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"Think first."}]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Paris."}]},` +
		`{"role":"user","content":"and Italy?"}]}`
	if r := ts.post("/v1/responses", in); r.status != 200 {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	if !strings.Contains(prompt, "<|im_start|>assistant\n<think>\nThink first.\n</think>\n\nParis.<|im_end|>") {
		t.Errorf("prompt %q, want the earlier reasoning before Paris.", prompt)
	}
}

// TestChatThinkingControlTokens: where a template's reasoning markers are
// control tokens of the vocabulary (Gemma 4's <|channel> and <channel|>,
// Command R7B's <|START_THINKING|>), the answer shows them as text so that
// the reasoning comes apart without tools in the request too (it came out
// as content, markers dropped), and with reasoning_format none the content
// keeps them as the reference shows preserved tokens.
func TestChatThinkingControlTokens(t *testing.T) {
	for _, c := range []struct {
		name     string
		template func(t *testing.T) string
		controls []string
		answer   string
		content  string
	}{
		{"gemma 4", func(t *testing.T) string {
			src, err := os.ReadFile(filepath.Join("testdata", "families", "declarations.jinja"))
			if err != nil {
				t.Fatal(err)
			}
			return string(src)
		}, []string{gemma4Channel, gemma4ChannelEnd}, gemma4Thought + "\nThe user greets me.<channel|>Hello there.", "Hello there."},
		{"command r7b", func(t *testing.T) string {
			src, err := os.ReadFile(filepath.Join(fixtures.Dir(t, "templates"), "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"))
			if err != nil {
				t.Fatal(err)
			}
			return string(src)
		}, []string{"<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>"},
			"<|START_THINKING|>The user greets me.<|END_THINKING|><|START_RESPONSE|>Hello there.<|END_RESPONSE|>", "Hello there."},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, body := answeringServer(t, c.template(t), c.controls, c.answer)
			if rc, got := answerMessage(t, ts, body+`}`); rc != "The user greets me." || got != c.content {
				t.Errorf("reasoning %v, content %v, want the reasoning and %q", rc, got, c.content)
			}
			if rs, cs, _, _ := chatStreamParts(t, ts, body+`,"stream":true}`); rs != "The user greets me." || cs != c.content {
				t.Errorf("stream: reasoning %q, content %q", rs, cs)
			}
			if rc, got := answerMessage(t, ts, body+`,"reasoning_format":"none"}`); rc != nil || !strings.Contains(got.(string), c.controls[1]) {
				t.Errorf("reasoning_format none: reasoning %v, content %q, want none and the markers in the content", rc, got)
			}
		})
	}
}

// TestEnableThinkingString: chat_template_kwargs.enable_thinking given as
// a string is a 400, as the reference answers it ("false" would be true to
// a template); a boolean is taken.
func TestEnableThinkingString(t *testing.T) {
	f := newFake()
	f.template = qwen3Template
	ts := newReadyServer(t, f, Config{})
	for body, status := range map[string]int{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"chat_template_kwargs":{"enable_thinking":"false"}}`: 400,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"chat_template_kwargs":{"enable_thinking":false}}`:   200,
	} {
		r := ts.post("/v1/chat/completions", body)
		if r.status != status || status == 400 && !strings.Contains(string(r.body), `"param":"chat_template_kwargs.enable_thinking"`) {
			t.Errorf("%s: %d %s, want %d", body, r.status, r.body, status)
		}
	}
}

// TestThinkTokensOfTemplateOnly: a thinking template's answers render its
// own reasoning marker tokens only; another family's (Kimi K3's <|sep|>,
// Gemma 4's <|channel>) stay unrendered control tokens, as they were
// before any family needed them.
func TestThinkTokensOfTemplateOnly(t *testing.T) {
	ts, body := answeringServer(t, qwen3Template, []string{"<|sep|>", gemma4Channel}, "<think>I think.</think>Hello<|sep|> there<|channel>.")
	if rc, got := answerMessage(t, ts, body+`}`); rc != "I think." || got != "Hello there." {
		t.Errorf("reasoning %v, content %v, want %q and %q", rc, got, "I think.", "Hello there.")
	}
	if rs, cs, _, _ := chatStreamParts(t, ts, body+`,"stream":true}`); rs != "I think." || cs != "Hello there." {
		t.Errorf("stream: reasoning %q, content %q", rs, cs)
	}
}

// answeringServer serves template over a fake backend whose answer is
// answer, controls its control tokens; body is a chat request to it,
// open for more fields.
func answeringServer(t *testing.T, template string, controls []string, answer string) (*testServer, string) {
	f := newFake()
	f.ctxSize = 4096
	f.template = template
	f.controls = controls
	f.reply = func(string) string { return answer }
	return newReadyServer(t, f, Config{}), `{"messages":[{"role":"user","content":"hi"}],"temperature":0,"max_tokens":200`
}

// answerMessage posts body and returns the answer's reasoning_content and
// content.
func answerMessage(t *testing.T, ts *testServer, body string) (reasoning, content any) {
	t.Helper()
	r := ts.post("/v1/chat/completions", body)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	m := decodeBody(t, r.body)
	return jsonPath(m, "choices", 0, "message", "reasoning_content"), jsonPath(m, "choices", 0, "message", "content")
}
