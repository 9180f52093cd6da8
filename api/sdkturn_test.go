package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// sdkTemplate prints each message, its tool calls and the
// reasoning_effort variable, so a test sees what reached the template.
const sdkTemplate = "{% for m in messages %}[{{ m.role }}] " +
	"{% for c in m.tool_calls or [] %}{{ c.function.name }}({{ c.function.arguments }}){% endfor %}{{ m.content }}\n{% endfor %}" +
	"{% if reasoning_effort is defined %}effort={{ reasoning_effort }}{% endif %}"

// TestSDKSecondTurn sends a second turn as the official SDKs build it from
// the server's own first answer: Python's message.model_dump() (every
// field of ChatCompletionMessage, unset ones null) and Node's parse()
// result (parsed, tool_calls with parsed_arguments), with the request
// fields the SDKs pass through (store, metadata, reasoning_effort, ...).
// They are accepted and ignored but for reasoning_effort, which reaches
// the template; a field no SDK sends stays a 400 naming it.
func TestSDKSecondTurn(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.template = sdkTemplate
	var prompt string
	f.reply = func(p string) string { prompt = p; return "Paris." }
	ts := newReadyServer(t, f, Config{})

	first := ts.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Capital of France?"}]}`)
	if first.status != 200 {
		t.Fatalf("first turn: %d %s", first.status, first.body)
	}
	answer, _ := jsonPath(decodeBody(t, first.body), "choices", 0, "message", "content").(string)
	if answer != "Paris." {
		t.Fatalf("first turn answered %q, want %q", answer, "Paris.")
	}
	content, _ := json.Marshal(answer)
	python := `{"content":` + string(content) + `,"refusal":null,"role":"assistant","annotations":null,"audio":null,"function_call":null,"tool_calls":null}`
	pythonCall := `{"content":null,"refusal":null,"role":"assistant","annotations":null,"audio":null,"function_call":null,` +
		`"tool_calls":[{"id":"call_1","function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"type":"function"}]}`
	node := `{"role":"assistant","content":` + string(content) + `,"refusal":null,"annotations":[],"parsed":null,"tool_calls":[]}`
	nodeCall := `{"role":"assistant","content":null,"refusal":null,"parsed":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}","parsed_arguments":{"city":"Paris"}}}]}`
	user := `{"role":"user","content":"Capital of France?"}`
	second := `{"role":"user","content":[{"type":"text","text":"And of Italy?","cache_control":{"type":"ephemeral"}}]}`
	tool := `{"role":"tool","tool_call_id":"call_1","content":"sunny"}`
	// want: the texts the rendered prompt holds, separated by |.
	for _, tt := range []struct {
		name, messages, extra, want string
	}{
		{"python text", user + "," + python + "," + second, "", "[assistant] Paris.\n"},
		{"python tool call", user + "," + pythonCall + "," + tool + "," + second, "", "get_weather|sunny"},
		{"node parse", user + "," + node + "," + second, "", "[assistant] Paris.\n"},
		{"node tool call", user + "," + nodeCall + "," + tool + "," + second, "", "get_weather|sunny"},
		{"request fields", user + "," + python + "," + second,
			`,"store":false,"metadata":{"k":"v"},"service_tier":"auto","prompt_cache_key":"c1","safety_identifier":"s",` +
				`"modalities":["text"],"verbosity":"low","prediction":{"type":"content","content":"Rome"},"user":"u1"`, "[user] And of Italy?\n"},
		{"reasoning effort", user + "," + python + "," + second, `,"reasoning_effort":"high"`, "effort=high"},
		// As the reference: the request's reasoning_effort overwrites the
		// kwargs' variable of the same name.
		{"field over kwargs", user + "," + python + "," + second, `,"reasoning_effort":"high","chat_template_kwargs":{"reasoning_effort":"low"}`, "effort=high"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prompt = ""
			r := ts.post("/v1/chat/completions", `{"model":"m","messages":[`+tt.messages+`]`+tt.extra+`}`)
			for _, want := range append(strings.Split(tt.want, "|"), "And of Italy?") {
				if r.status != 200 || !strings.Contains(prompt, want) {
					t.Errorf("second turn = %d %s, rendered %q; want 200 with %q rendered", r.status, r.body, prompt, want)
				}
			}
			if tt.name != "reasoning effort" && tt.name != "field over kwargs" && strings.Contains(prompt, "effort=") {
				t.Errorf("rendered %q sets reasoning_effort though the request gives none", prompt)
			}
		})
	}

	for _, tt := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"hi"}],"frobnicate":1}`, "frobnicate"},
		{`{"messages":[{"role":"user","content":"hi","annotations":[]}]}`, "messages[0].annotations"},
		{`{"messages":[{"role":"assistant","content":"hi","annotations":"x"}]}`, "messages[0].annotations"},
		{`{"messages":[{"role":"assistant","content":"hi","audio":5}]}`, "messages[0].audio"},
		{`{"messages":[{"role":"assistant","content":"hi","parsed":null,"parse":null}]}`, "messages[0].parse"},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":"x"}]}]}`, "messages[0].content[0].cache_control"},
		{`{"messages":[{"role":"user","content":"hi"}],"store":"yes"}`, "store"},
		{`{"messages":[{"role":"user","content":"hi"}],"metadata":{"a":1}}`, "metadata.a"},
		{`{"messages":[{"role":"user","content":"hi"}],"modalities":["audio"]}`, "modalities[0]"},
		{`{"messages":[{"role":"user","content":"hi"}],"verbosity":"loud"}`, "verbosity"},
		{`{"messages":[{"role":"user","content":"hi"}],"prediction":{"type":"x"}}`, "prediction.type"},
		{`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"max"}`, "reasoning_effort"},
		{`{"messages":[{"role":"user","content":"hi"}],"reasoning":{"effort":"low"}}`, "reasoning"},
	} {
		r := ts.post("/v1/chat/completions", tt.body)
		if m := decodeBody(t, r.body); r.status != 400 || jsonPath(m, "error", "param") != tt.param {
			t.Errorf("POST %s = %d %s, want 400 naming %s", tt.body, r.status, r.body, tt.param)
		}
	}
}

// TestSDKSecondTurnResponses does the same on /v1/responses: the output
// items of the first answer sent back as Python's model_dump writes them,
// with reasoning (null or an object) and the fields chat takes.
func TestSDKSecondTurnResponses(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.template = sdkTemplate
	var prompt string
	f.reply = func(p string) string { prompt = p; return "Paris." }
	ts := newReadyServer(t, f, Config{})

	first := ts.post("/v1/responses", `{"model":"m","input":"Capital of France?"}`)
	if first.status != 200 {
		t.Fatalf("first turn: %d %s", first.status, first.body)
	}
	out := jsonPath(decodeBody(t, first.body), "output", 0).(map[string]any)
	// model_dump of ResponseOutputMessage: every field, logprobs null.
	part := jsonPath(out, "content", 0).(map[string]any)
	dumped, _ := json.Marshal(map[string]any{
		"id": out["id"], "role": "assistant", "status": "completed", "type": "message",
		"content": []any{map[string]any{"annotations": []any{}, "text": part["text"], "type": "output_text", "logprobs": nil}},
	})
	items := `[{"role":"user","content":"Capital of France?"},` + string(dumped) +
		`,{"role":"user","content":[{"type":"input_text","text":"And of Italy?","cache_control":{"type":"ephemeral"}}]}]`
	for _, tt := range []struct{ name, extra, want string }{
		{"reasoning null", `,"reasoning":null,"store":false,"metadata":{"k":"v"},"prompt_cache_key":"c","user":"u"`, "[assistant] Paris.\n"},
		{"reasoning effort", `,"reasoning":{"effort":"medium","summary":"auto"},"modalities":["text"],"verbosity":"high","prediction":{"type":"content","content":"x"}`, "effort=medium"},
	} {
		prompt = ""
		r := ts.post("/v1/responses", `{"model":"m","input":`+items+tt.extra+`}`)
		if r.status != 200 || !strings.Contains(prompt, tt.want) || !strings.Contains(prompt, "[user] And of Italy?") {
			t.Errorf("%s: second turn = %d %s, rendered %q; want 200 with %q rendered", tt.name, r.status, r.body, prompt, tt.want)
		}
	}
	for _, tt := range []struct{ extra, param string }{
		{`,"frobnicate":1`, "frobnicate"},
		{`,"reasoning":{"effort":"max"}`, "reasoning.effort"},
		{`,"reasoning":{"effort":"low","level":1}`, "reasoning.level"},
		{`,"reasoning":"low"`, "reasoning"},
		{`,"reasoning_effort":"low"`, "reasoning_effort"},
	} {
		r := ts.post("/v1/responses", `{"model":"m","input":"hi"`+tt.extra+`}`)
		if m := decodeBody(t, r.body); r.status != 400 || jsonPath(m, "error", "param") != tt.param {
			t.Errorf("POST /v1/responses with %s = %d %s, want 400 naming %s", tt.extra, r.status, r.body, tt.param)
		}
	}
}
