package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestApplyTemplate posts chat requests to /apply-template with a model
// whose template reads the request's variables, and checks the prompt.
func TestApplyTemplate(t *testing.T) {
	f := newFake()
	f.template = "{% if enable_thinking is defined %}[think={{ enable_thinking }}]{% endif %}" +
		"{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments|tojson }}{% endif %}{% endfor %}" +
		"{% if tools %}|{{ tools[0].function.parameters|tojson }}{% endif %}" +
		"{% if messages|length > 3 %}{{ raise_exception('too many messages: ' ~ messages|length) }}{% endif %}" +
		"{% if custom is defined %}|custom={{ custom }}{% endif %}{% if enable_thinking %}<think>{% endif %}"
	ts := newReadyServer(t, f, Config{})
	cases := []struct {
		name, body string
		status     int
		want       string // the prompt, or a part of the error message
	}{
		{"plain conversation", `{"messages": [{"role": "user", "content": "hi"}]}`, 200,
			"[think=True]<user>hi<think>"},
		{"chat_template_kwargs override enable_thinking and add variables",
			`{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": false, "custom": [1, "x"]}}`, 200,
			"[think=False]<user>hi|custom=[1, 'x']"},
		{"tools and arguments keep the client's key order; null content is empty; a template printing arguments with tojson gets objects",
			`{"messages": [{"role": "user", "content": "w?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": 2}"}}]}],
			  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"z": {"type": "integer"}}, "required": ["z"]}}}]}`, 200,
			`[think=True]<user>w?<assistant>{"z": 1, "a": 2}|{"type": "object", "properties": {"z": {"type": "integer"}}, "required": ["z"]}<think>`},
		{"raise_exception is a 400 with the template's message",
			`{"messages": [{"role": "user", "content": "1"}, {"role": "assistant", "content": "2"}, {"role": "user", "content": "3"}, {"role": "assistant", "content": "4"}]}`, 400,
			"too many messages: 4"},
		{"chat_template_kwargs must be an object", `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": [1]}`, 400,
			"chat_template_kwargs"},
		{"unknown fields are refused", `{"messages": [{"role": "user", "content": "hi"}], "nope": 1}`, 400, "nope"},
		{"a named template", `{"messages": [{"role": "user", "content": "hi"}], "template": "chatml"}`, 200,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.do("POST", "/apply-template", c.body)
			if r.status != c.status {
				t.Fatalf("POST /apply-template %s = %d %s, want %d", c.body, r.status, r.body, c.status)
			}
			if c.status != 200 {
				if msg, _ := errorOf(t, r.body)["message"].(string); !strings.Contains(msg, c.want) {
					t.Errorf("POST /apply-template %s = %s, want an error saying %q", c.body, r.body, c.want)
				}
				return
			}
			var got applyTemplateBody
			if err := json.Unmarshal(r.body, &got); err != nil || got.Prompt != c.want {
				t.Errorf("POST /apply-template %s = %s, want prompt %q", c.body, r.body, c.want)
			}
		})
	}
	if r := ts.do("POST", "/apply-template", cases[len(cases)-1].body); string(r.body) != `{"prompt":"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}` {
		t.Errorf("POST /apply-template body = %s, want the prompt's markup unescaped", r.body)
	}
	// The chat route renders the same prompt and refuses the same way.
	r := ts.do("POST", "/v1/chat/completions", cases[3].body)
	if r.status != 400 || !strings.Contains(string(r.body), "too many messages: 4") {
		t.Errorf("POST /v1/chat/completions with a raising template = %d %s, want 400 with the template's message", r.status, r.body)
	}
}

// TestTemplateParseErrorAtStart checks that a model whose template does not
// parse keeps the server from starting, with the line and column, unless a
// named template was asked for.
func TestTemplateParseErrorAtStart(t *testing.T) {
	f := newFake()
	f.template = "{% for m in messages %}\n{{ m.content + }}\n{% endfor %}"
	ts := startServer(t, Config{})
	err := ts.s.Ready(f)
	if err == nil || !strings.Contains(err.Error(), "line 2, column 16") {
		t.Errorf("Ready(model with a broken template) = %v, want an error at line 2, column 16", err)
	}
	ts2 := startServer(t, Config{ChatTemplate: "chatml"})
	if err := ts2.s.Ready(f); err != nil {
		t.Errorf("Ready(broken template, --chat-template chatml) = %v, want nil", err)
	}
}

// TestChatTemplateFile checks that --chat-template-file (ChatTemplateText)
// is the default template whether or not the model has one of its own,
// and that a named --chat-template still wins.
func TestChatTemplateFile(t *testing.T) {
	const file = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}>"
	const body = `{"messages": [{"role": "user", "content": "hi"}]}`
	for _, tc := range []struct {
		name, modelTemplate, chatTemplate, want string
	}{
		{"model without a template", "", "", "[user:hi]>"},
		{"model with a template", "{% for m in messages %}{{ m.content }}{% endfor %}", "", "[user:hi]>"},
		{"named jinja", "", "jinja", "[user:hi]>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.template = tc.modelTemplate
			ts := newReadyServer(t, f, Config{ChatTemplate: tc.chatTemplate, ChatTemplateText: file})
			r := ts.do("POST", "/apply-template", body)
			var got applyTemplateBody
			if err := json.Unmarshal(r.body, &got); r.status != 200 || err != nil || got.Prompt != tc.want {
				t.Errorf("POST /apply-template %s = %d %s, want prompt %q", body, r.status, r.body, tc.want)
			}
		})
	}
	// Without the file, a model without a template is served with plain.
	ts := newReadyServer(t, newFake(), Config{})
	r := ts.do("POST", "/apply-template", body)
	var got applyTemplateBody
	if err := json.Unmarshal(r.body, &got); err != nil || got.Prompt != "user: hi\nassistant:" {
		t.Errorf("POST /apply-template without a template = %d %s, want the plain prompt", r.status, r.body)
	}
}
