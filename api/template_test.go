package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// toolConversation is system + user + assistant(tool_calls) + tool.
func toolConversation() renderInput {
	return renderInput{
		messages: []message{
			{role: "system", content: "SYSTEM-TEXT"},
			{role: "user", content: "USER-TEXT"},
			{role: "assistant", null: true, toolCalls: []toolCall{{id: "abc123def", name: "get_weather", arguments: `{"city":"Paris"}`}}},
			{role: "tool", toolCallID: "abc123def", content: "TOOL-RESULT"},
		},
		tools: []tool{{name: "get_weather", description: "Weather of a city", parameters: jsonValue(
			`{"properties":{"city":{"description":"city","type":"string"}},"required":["city"],"type":"object"}`)}},
		bos: "<s>", eos: "</s>", now: time.Date(2024, 7, 26, 0, 0, 0, 0, time.UTC),
	}
}

// TestFixtureTemplates loads every fixture template and renders a system +
// user + assistant-with-tool-call + tool-result conversation: each renders
// (keeping the user's text) or fails as the reference does, with the line
// and column of the failure. TestExpectedPrompts checks the exact texts.
func TestFixtureTemplates(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtures.Dir(t, "templates"), "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates in the fixtures: %v", err)
	}
	// Templates the reference cannot render at all: the error they give.
	wantErr := map[string]string{
		// It reads the variables functions and datetime, which no server sets.
		"fireworks-ai-llama-3-firefunction-v2.jinja": "line 21, column 60: 'functions' is undefined",
		// A tool result is a turn of its own, which it refuses (the
		// reference refuses its tool requests too).
		"google-gemma-2-2b-it.jinja": "Conversation roles must alternate",
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := newChatTemplate("jinja", string(src))
			if err != nil {
				t.Fatalf("newChatTemplate(jinja, %s) = %v", filepath.Base(f), err)
			}
			out, err := tmpl.render(toolConversation())
			if want, ok := wantErr[filepath.Base(f)]; ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("render(%s) = %q, %v, want an error saying %q", filepath.Base(f), out, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("render(%s) = %v", filepath.Base(f), err)
			}
			if !strings.Contains(out, "USER-TEXT") {
				t.Errorf("render(%s) = %q, want it to contain USER-TEXT", filepath.Base(f), out)
			}
		})
	}
}

func TestNamedTemplates(t *testing.T) {
	in := renderInput{messages: []message{{role: "system", content: "S"}, {role: "user", content: "U"},
		{role: "assistant", content: "A"}, {role: "user", content: "V"}}}
	cases := []struct{ name, want string }{
		{"plain", "system: S\nuser: U\nassistant: A\nuser: V\nassistant:"},
		{"chatml", "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nV<|im_end|>\n<|im_start|>assistant\n"},
		{"llama-2", "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST] A </s><s>[INST] V [/INST]"},
		{"llama-3", "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nV<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"mistral-instruct", "<s>[INST] S\n\nU [/INST] A</s>[INST] V [/INST]"},
		{"gemma", "<bos><start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>user\nV<end_of_turn>\n<start_of_turn>model\n"},
		{"phi-3", "<|system|>\nS<|end|>\n<|user|>\nU<|end|>\n<|assistant|>\nA<|end|>\n<|user|>\nV<|end|>\n<|assistant|>\n"},
		{"zephyr", "<|system|>\nS</s>\n<|user|>\nU</s>\n<|assistant|>\nA</s>\n<|user|>\nV</s>\n<|assistant|>\n"},
		{"vicuna", "S\n\nUSER: U\nASSISTANT: A</s>\nUSER: V\nASSISTANT:"},
		{"alpaca", "S\n\n### Instruction:\nU\n\n### Response:\nA</s>\n\n### Instruction:\nV\n\n### Response:\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := newChatTemplate(c.name, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.render(in)
			if err != nil || got != c.want {
				t.Errorf("render(%s) = %q, %v, want %q", c.name, got, err, c.want)
			}
		})
	}
	if _, err := newChatTemplate("nope", ""); err == nil {
		t.Errorf("newChatTemplate(nope) = nil error, want unknown template")
	}
}

func TestJinjaFeatures(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"namespace and loop.last", `{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% if not loop.last %},{% endif %}{% endfor %}={{ ns.n }}`, "U ,A=2"},
		{"string methods", `{{ messages[0].content.strip().startswith("U") }} {{ "a b".split(" ")[-1] }}`, "True b"},
		{"tojson and bos", `{{ bos_token }}{{ {"a": 1}|tojson }}`, `<s>{"a": 1}`},
		{"raise_exception", `{{ raise_exception("nope") }}`, "ERROR"},
		{"strftime_now", `{{ strftime_now("%d %b %Y") }}`, "26 Jul 2024"},
		{"add_generation_prompt", `{% if add_generation_prompt %}GEN{% endif %}`, "GEN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := newChatTemplate("jinja", c.src)
			if err != nil {
				t.Fatalf("newChatTemplate(%q) = %v", c.src, err)
			}
			in := renderInput{messages: []message{{role: "user", content: " U "}, {role: "assistant", content: "A"}},
				bos: "<s>", now: time.Date(2024, 7, 26, 0, 0, 0, 0, time.UTC)}
			got, err := tmpl.render(in)
			if c.want == "ERROR" {
				if err == nil || !strings.Contains(err.Error(), "nope") {
					t.Errorf("render(%q) = %q, %v, want an error saying nope", c.src, got, err)
				}
				return
			}
			if err != nil || strings.TrimSpace(got) != c.want {
				t.Errorf("render(%q) = %q, %v, want %q", c.src, got, err, c.want)
			}
		})
	}
}

func TestDetectToolFormat(t *testing.T) {
	dir := fixtures.Dir(t, "templates")
	cases := []struct {
		file string
		want grammar.ToolFormat
	}{
		{"Qwen-Qwen2.5-7B-Instruct.jinja", grammar.ToolFormatHermes},
		{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", grammar.ToolFormatHermes},
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", grammar.ToolFormatLlama3},
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", grammar.ToolFormatMistral},
		{"google-gemma-2-2b-it.jinja", grammar.ToolFormatGeneric},
	}
	for _, c := range cases {
		src, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := detectToolFormat(string(src)); got != c.want {
			t.Errorf("detectToolFormat(%s) = %v, want %v", c.file, got, c.want)
		}
	}
}

// TestRenderLeavesRequestAsIs: a template that changes what it is given
// (MiroThinker-v1 sets tool.mt_visited on each tool it prints; others
// append to lists) changes only its own render's copy, so a request
// rendered twice (tokenizeChat renders again when message text holds
// special tokens) gets the same prompt both times.
func TestRenderLeavesRequestAsIs(t *testing.T) {
	src := `{% for tool in tools %}{% if tool.seen is not defined %}[{{ tool.function.name }}]{% endif %}{% set tool.seen = 1 %}{% endfor %}` +
		`{% set l = extra.items %}{{ l.append(3) or '' }}{{ l | length }}{% do extra.update({'x': 1}) %}{{ messages[0].content }}`
	tmpl, err := newChatTemplate("jinja", src)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],` +
		`"chat_template_kwargs":{"extra":{"items":[1,2]}}}`
	req, e := decodeChat(grammar.Budget{}, []byte(body))
	if e != nil {
		t.Fatal(e)
	}
	const want = "[get_weather]3hi"
	for i := range 3 {
		got, e := tmpl.renderRequest(req, "", "", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), 0, false)
		if e != nil || got != want {
			t.Fatalf("render %d = %q, %v, want %q", i+1, got, e, want)
		}
	}
}
