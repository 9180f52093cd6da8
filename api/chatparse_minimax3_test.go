package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reference's MiniMax-M3 cases (models/templates/MiniMax-M3.jinja in
// test_template_output_peg_parsers), run by TestChatParserReferenceCases
// and TestChatParserStreaming. All parse reasoning (reasoning_format
// auto) with enable_thinking on; the template's generation prompt is only
// "]~b]ai\n", so the reasoning is not open: the model opens it, or writes
// a bare </mm:think> before a turn without it. Not ported: the two
// continuation (continue_final_message) cases.

// thinkMM are MiniMax-M3's reasoning markers.
var thinkMM = [2]string{"<mm:think>", "</mm:think>"}

// m3El writes the element key holding content (text or elements).
func m3El(key, content string) string {
	return m3NS + "<" + key + ">" + content + m3NS + "</" + key + ">"
}

// m3Calls writes a block of invokes, each a name and its parameters'
// elements.
func m3Calls(invokes ...[2]string) string {
	var b strings.Builder
	b.WriteString(m3CallsOpen + "\n")
	for _, in := range invokes {
		b.WriteString(m3NS + `<invoke name="` + in[0] + `">` + in[1] + m3NS + "</invoke>\n")
	}
	b.WriteString(m3NS + "</tool_call>")
	return b.String()
}

// m3Case is a MiniMax-M3 case.
func m3Case(in, reasoning, content string, calls ...refCall) refCase {
	return refCase{from: "MiniMax-M3", family: familyMiniMaxM3, think: thinkMM, in: in, reasoning: reasoning, content: content, calls: calls}
}

func init() {
	// The reference's union_args tool (the other tools of these cases
	// are in refTools).
	refTools = append(refTools, refTool("union_args", `{
		"filter": {"anyOf": [{"type": "array", "items": {"type": "string"}},
			{"type": "object", "properties": {"field": {"type": "string"}, "op": {"type": "string"}}, "required": ["field", "op"]}]},
		"label": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"text": {"type": "string"}}}]},
		"limit": {"oneOf": [{"type": "integer"}, {"type": "object", "properties": {"max": {"type": "integer"}}, "required": ["max"]}]}}`))

	city := func(c string) string { return m3El("city", c) }
	refCases = append(refCases,
		m3Case("</mm:think>Hello, world!\nWhat's up?", "", refHello),
		m3Case("<mm:think>I'm\nthinking</mm:think>Hello, world!\nWhat's up?", refThinking, refHello),
		m3Case("<mm:think>Let me check the time</mm:think>"+m3Calls([2]string{"get_time", city("Tokyo")}),
			"Let me check the time", "", refCall{"get_time", `{"city": "Tokyo"}`}),
		m3Case("</mm:think>"+m3Calls([2]string{"special_function", m3El("arg1", "1")}), "", "", sf1),
		m3Case("<mm:think>Let's call a tool:</mm:think>"+m3Calls([2]string{"empty_args", ""}),
			"Let's call a tool:", "", refCall{"empty_args", "{}"}),
		m3Case("<mm:think>Calling both</mm:think>"+m3Calls([2]string{"get_time", city("Paris")}, [2]string{"get_weather", city("Paris")}),
			"Calling both", "", refCall{"get_time", `{"city": "Paris"}`}, refCall{"get_weather", `{"city": "Paris"}`}),
		m3Case("<mm:think>Thinking about it</mm:think>Let me call the function."+m3Calls([2]string{"special_function", m3El("arg1", "1")}),
			"Thinking about it", "Let me call the function.", sf1),
		m3Case("<mm:think>Test negative</mm:think>"+m3Calls([2]string{"magic_int", m3El("ref", "-14")}),
			"Test negative", "", refCall{"magic_int", `{"ref": -14}`}),
		m3Case("<mm:think>Test decimal</mm:think>"+m3Calls([2]string{"amount", m3El("orig", "3.14")}),
			"Test decimal", "", refCall{"amount", `{"orig": 3.14}`}),
		m3Case("<mm:think>Test boolean</mm:think>"+m3Calls([2]string{"toggle", m3El("enabled", "true")}),
			"Test boolean", "", refCall{"toggle", `{"enabled": true}`}),
		m3Case("<mm:think>Multi-arg call</mm:think>"+m3Calls([2]string{"magic_int", m3El("ref", "42") + m3El("name", "foo bar")}),
			"Multi-arg call", "", refCall{"magic_int", `{"ref": 42, "name": "foo bar"}`}),
		// Nested object param, expanded into one element per key
		m3Case("<mm:think>Nested object</mm:think>"+m3Calls([2]string{"imaginary_number", m3El("number", m3El("real", "1.5")+m3El("imaginary", "-2.5"))}),
			"Nested object", "", refCall{"imaginary_number", `{"number": {"real": 1.5, "imaginary": -2.5}}`}),
		// Array params, expanded into <item> elements (of scalars and of objects)
		m3Case("<mm:think>Nested arrays</mm:think>"+m3Calls([2]string{"nested_args",
			m3El("tags", m3El("item", "alpha")+m3El("item", "beta")) + m3El("entries", m3El("item", m3El("id", "1")+m3El("label", "one")))}),
			"Nested arrays", "", refCall{"nested_args", `{"tags": ["alpha", "beta"], "entries": [{"id": 1, "label": "one"}]}`}),
		// Union params (anyOf/oneOf), expanded as a choice of the alternatives
		m3Case("<mm:think>Union array</mm:think>"+m3Calls([2]string{"union_args", m3El("filter", m3El("item", "alpha")+m3El("item", "beta"))}),
			"Union array", "", refCall{"union_args", `{"filter": ["alpha", "beta"]}`}),
		// oneOf between a scalar and an object
		m3Case("<mm:think>Union scalar</mm:think>"+m3Calls([2]string{"union_args", m3El("limit", "5")}),
			"Union scalar", "", refCall{"union_args", `{"limit": 5}`}),
		m3Case("<mm:think>Union nested</mm:think>"+m3Calls([2]string{"union_args", m3El("limit", m3El("max", "10"))}),
			"Union nested", "", refCall{"union_args", `{"limit": {"max": 10}}`}),
		// A union with a string alternative is a string ...
		m3Case("<mm:think>Union string</mm:think>"+m3Calls([2]string{"union_args", m3El("label", "hi")}),
			"Union string", "", refCall{"union_args", `{"label": "hi"}`}),
		// ... even when the value looks structured
		m3Case("<mm:think>Union string</mm:think>"+m3Calls([2]string{"union_args", m3El("label", m3El("text", "hi"))}),
			"Union string", "", refCall{"union_args", `{"label": "]<]minimax[>[<text>hi]<]minimax[>[</text>"}`}),
		// Edge case: empty reasoning followed by a tool call
		m3Case("<mm:think></mm:think>"+m3Calls([2]string{"get_time", city("XYZCITY")}),
			"", "", refCall{"get_time", `{"city": "XYZCITY"}`}),
	)
}

// TestMiniMaxM3Values checks how MiniMax-M3 values are typed by the
// tool's schema beyond the reference's cases, and that markup that does
// not read as calls stays content.
func TestMiniMaxM3Values(t *testing.T) {
	known := []tool{refTool("deep", `{"outer": {"type": "object", "properties": {"code": {"type": "string"},
		"list": {"type": "array", "items": {"type": "integer"}}, "opt": {"type": ["string", "null"]}}},
		"any": {}, "empty": {"type": "object"}, "none": {"type": "array"}}`)}
	call := func(params string) string { return "Sure." + m3Calls([2]string{"deep", params}) }
	for _, c := range []struct {
		name, in, content, args string // args "": no call
	}{
		{"nested string stays text", call(m3El("outer", m3El("code", "007")+m3El("list", m3El("item", "1")+m3El("item", "2"))+m3El("opt", " x "))),
			"Sure.", `{"outer": {"code": "007", "list": [1, 2], "opt": " x "}}`},
		{"untyped values", call(m3El("any", m3El("item", "a")+m3El("item", "2")) + m3El("empty", "") + m3El("none", "")),
			"Sure.", `{"any": ["a", 2], "empty": {}, "none": []}`},
		{"white space between tags", "Sure." + m3CallsOpen + "\n\n" + m3NS + `<invoke name="deep">` + "\n" + m3El("any", "\n"+m3El("k", "1")+"\n") + "\n" + m3NS + "</invoke>",
			"Sure.", `{"any": {"k": 1}}`},
	} {
		content, calls := familyMiniMaxM3.parse(c.in, known)
		if content != c.content || len(calls) != 1 || calls[0].name != "deep" || !sameJSON(calls[0].arguments, c.args) {
			t.Errorf("%s: parse = %q, %v, want %q, %s", c.name, content, calls, c.content, c.args)
		}
	}
	// Unknown tools and markup cut or broken are content, whole.
	for _, in := range []string{
		m3Calls([2]string{"nope", m3El("a", "1")}),
		m3Calls([2]string{"deep", m3NS + "<any>1"}),
		m3Calls([2]string{"deep", m3NS + "<any>" + m3NS + "<item>1" + m3NS + "</any>"}),
		m3Calls([2]string{"deep", m3El("outer", m3NS+"<code>x")}),
		m3CallsOpen + "\n" + m3NS + `<invoke name="deep`,
		m3CallsOpen,
	} {
		content, calls := familyMiniMaxM3.parse(in, known)
		if content != in || len(calls) != 0 {
			t.Errorf("parse(%q) = %q, %v, want the text as content", in, content, calls)
		}
	}
}

// TestDetectMiniMaxM3 checks the MiniMax templates of the reference's
// collection: M3's calls are its own family, M2's stay MiniMax's.
func TestDetectMiniMaxM3(t *testing.T) {
	for src, want := range map[string]toolFamily{
		"{%- set ns_token = ']<]minimax[>[' -%}{%- set toolcall_begin_token = ns_token ~ '<tool_call>' -%}": familyMiniMaxM3,
		"<minimax:tool_call>\n<invoke name=": familyMiniMax,
	} {
		if got := detectToolFamily(src); got != want {
			t.Errorf("detectToolFamily(%q) = %v, want %v", src, got, want)
		}
	}
	// The real templates, where VKLLM_TEMPLATES_DIR holds the reference's
	// collection (TestTemplateCollection).
	if dir := os.Getenv("VKLLM_TEMPLATES_DIR"); dir != "" {
		for name, want := range map[string]toolFamily{"MiniMax-M3.jinja": familyMiniMaxM3,
			"MiniMax-M2.jinja": familyMiniMax, "unsloth-MiniMax-M2.jinja": familyMiniMax} {
			if src, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
				if got := detectToolFamily(string(src)); got != want {
					t.Errorf("%s is detected as %v, want %v", name, got, want)
				}
			}
		}
	}
	if start, end := thinkMarkersOf("{{ '<mm:think>' ~ r ~ '</mm:think>' }}"); start != "<mm:think>" || end != "</mm:think>" {
		t.Errorf("thinkMarkersOf = %q %q, want MiniMax-M3's", start, end)
	}
}
