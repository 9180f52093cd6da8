package api

import (
	"strings"
	"testing"
)

func TestToolFamilyParse(t *testing.T) {
	known := []tool{{name: "get_weather"}, {name: "add"}}
	type call struct{ name, args string }
	cases := []struct {
		name    string
		family  toolFamily
		text    string
		content string
		calls   []call
	}{
		{"hermes", familyHermes, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			"Sure.", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"qwen3-coder xml", familyQwen3Coder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
			"", []call{{"get_weather", `{"city":"Paris","days":3}`}}},
		{"llama3 json", familyLlama3, `{"name": "get_weather", "parameters": {"city": "Paris"}}`,
			"", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"mistral array", familyMistral, `[TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}]`,
			"", []call{{"add", `{"a":1}`}}},
		{"mistral small 3.2 args", familyMistral, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]add[ARGS]{"a": 1}`,
			"", []call{{"get_weather", `{"city":"Paris"}`}, {"add", `{"a":1}`}}},
		{"deepseek r1", familyDeepSeek, "ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
			"ok", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"deepseek v3.1", familyDeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
			"", []call{{"get_weather", `{"city":"Paris"}`}, {"add", `{"a":1}`}}},
		{"gpt-oss harmony", familyHarmony, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
			"", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"glm", familyGLM, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
			"", []call{{"get_weather", `{"city":"Paris","days":3}`}}},
		{"kimi", familyKimi, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
			"", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"functionary", familyFunctionary, `<function=get_weather>{"city": "Paris"}</function>`,
			"", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"command r7b", familyCommandR7B, `<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}]<|END_ACTION|>`,
			"", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"firefunction", familyFirefunction, `functools[{"name": "add", "arguments": {"a": 1}}]`,
			"", []call{{"add", `{"a":1}`}}},
		{"generic fallback in any family", familyDeepSeek, `{"tool_call": {"name": "add", "arguments": {"a": 1}}}`,
			"", []call{{"add", `{"a":1}`}}},
		{"unknown function is content", familyKimi, "<|tool_call_begin|>functions.nope:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
			"<|tool_call_begin|>functions.nope:0<|tool_call_argument_begin|>{}<|tool_call_end|>", nil},
		{"plain text", familyGLM, "Just an answer.", "Just an answer.", nil},
		{"granite", familyGranite, `Sure.<|tool_call|>[{"name": "add", "arguments": {"a": 1}}]`, "Sure.", []call{{"add", `{"a":1}`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			content, calls := c.family.parse(c.text, known)
			var got []call
			for _, tc := range calls {
				got = append(got, call{tc.name, tc.arguments})
			}
			if content != c.content || len(got) != len(c.calls) {
				t.Fatalf("%v.parse(%q) = %q, %v, want %q, %v", c.family, c.text, content, got, c.content, c.calls)
			}
			for i := range got {
				if got[i] != c.calls[i] {
					t.Errorf("%v.parse(%q) call %d = %v, want %v", c.family, c.text, i, got[i], c.calls[i])
				}
			}
		})
	}
}

func TestDetectToolFamily(t *testing.T) {
	cases := []struct {
		src  string
		want toolFamily
	}{
		{"{{ '<tool_call>' }}{{ tool_call.arguments|tojson }}", familyHermes},
		{"<tool_call>\n<function={{ name }}>", familyQwen3Coder},
		{"<tool_call>{{ name }}<arg_key>k</arg_key>", familyGLM},
		{"<｜tool▁calls▁begin｜>", familyDeepSeek},
		{"<|start|>assistant<|channel|>commentary to=functions.x", familyHarmony},
		{"<|tool_calls_section_begin|>", familyKimi},
		{"[TOOL_CALLS]", familyMistral},
		{"<|START_ACTION|>", familyCommandR7B},
		{"functools[", familyFirefunction},
		{"<function={{ n }}>", familyFunctionary},
		{"<|python_tag|>", familyLlama3},
		{"<seed:tool_call>\n<function={{ name }}>", familySeedOSS},
		{"<|tool_call|>{{ tool_calls|tojson }}", familyGranite},
		{"<|tools_prefix|>[{{ calls }}]<|tools_suffix|>", familyApertus},
		{">>>all\n{{ content }}", familyFunctionaryV32},
		{"<TOOLCALL>{{ calls }}</TOOLCALL>", familyNemotron},
		{"<|tool_call_start|>[{{ calls }}]<|tool_call_end|>", familyLFM2},
		{"<minimax:tool_call>\n<invoke name=", familyMiniMax},
		{"<｜DSML｜function_calls>", familyDSML},
		{"<tool_calls>{{ calls }}</tool_calls>", familyApriel},
		{"{{- '<|tool_call>call:' + function['name'] + '{' -}}{{ '<|channel>thought\\n<channel|>' }}", familyGemma4},
		{"<tool_call>{{ name }}<arg_key>k</arg_key>{{ '<|role_end|>' }}", familyLing},
		{"{{ '<|open|>' + tag }}{{ '<|close|>' + tag + '<|sep|>' }}{{ open_tag('think') }}", familyKimiK3},
		{"<|start|>assistant to={{ name }}<|message|><atem:function_calls>", familyMuse},
		{"{{ messages }}", familyGeneric},
	}
	for _, c := range cases {
		if got := detectToolFamily(c.src); got != c.want {
			t.Errorf("detectToolFamily(%q) = %v, want %v", c.src, got, c.want)
		}
	}
}

func TestToolFamilyMayStart(t *testing.T) {
	cases := []struct {
		family toolFamily
		text   string
		want   bool
	}{
		{familyKimi, "<|tool_calls_sec", true},
		{familyDeepSeek, "<｜tool▁calls▁begin｜><｜tool", true},
		{familyGLM, "Hello", false},
		{familyHarmony, "<|channel|>commentary to=functions.get", true},
		{familyGeneric, "{", true},
	}
	for _, c := range cases {
		if got := c.family.mayStart(c.text); got != c.want {
			t.Errorf("%v.mayStart(%q) = %v, want %v", c.family, c.text, got, c.want)
		}
	}
}

// TestLlama3BuiltinDeclared checks that Llama 3.x's built-in form is a
// call only to a tool the request declares, and only when it declares a
// built-in one (the reference parses the form only then).
func TestLlama3BuiltinDeclared(t *testing.T) {
	text := `<|python_tag|>brave_search.call(query="x")`
	cases := []struct {
		name  string
		known []tool
		calls int
	}{
		{"declared", []tool{{name: "brave_search"}}, 1},
		{"another built-in declared", []tool{{name: "python"}}, 0},
		{"no built-in declared", []tool{{name: "get_weather"}}, 0},
	}
	for _, c := range cases {
		content, calls := familyLlama3.parse(text, c.known)
		if len(calls) != c.calls || c.calls == 0 && content != text {
			t.Errorf("%s: parse = %q, %v; want %d calls (the text as content without one)", c.name, content, calls, c.calls)
		}
	}
}

// TestUnwrapWithoutTools checks that Command R7B's response markers are
// stripped from an answer to a request without tools, streamed in single
// runes and whole, as the reference strips them.
func TestUnwrapWithoutTools(t *testing.T) {
	in := "<|START_RESPONSE|>Hello, world!\nWhat's up? a < b<|END_RESPONSE|>"
	want := "Hello, world!\nWhat's up? a < b"
	req := &chatRequest{}
	pc := &preparedChat{tmpl: &chatTemplate{family: familyCommandR7B}}
	if _, content, _, _ := req.splitAnswer(pc, in); content != want {
		t.Errorf("whole answer: content %q, want %q", content, want)
	}
	a := newAnswerStream(req, pc)
	var got strings.Builder
	for _, p := range runePieces(in) {
		for _, part := range a.add([]byte(p), nil) {
			got.Write(part.text)
		}
	}
	for _, part := range a.end().parts {
		got.Write(part.text)
	}
	if got.String() != want {
		t.Errorf("streamed content %q, want %q", got.String(), want)
	}
}
