package api

import (
	"strings"
	"testing"
)

// The reference's parser cases of Kimi K3 and Muse Glimmer
// (test_template_output_peg_parsers), in the style of
// chatparse_cases_test.go. Their tools (special_function,
// special_function_with_opt, python) are refTools already.

// Kimi K3's think markers; its generation prompt opens the think section
// (thinking is on by default), so a case with reasoning is open.
var thinkKimiK3 = [2]string{kimiK3Think, kimiK3ThinkEnd}

// kimiK3Call writes a Kimi K3 call; args are (key, type, value) triples.
func kimiK3Call(name, index string, args ...string) string {
	var b strings.Builder
	b.WriteString(`<|open|>call tool="` + name + `" index="` + index + `"<|sep|>`)
	for i := 0; i+2 < len(args); i += 3 {
		b.WriteString(`<|open|>argument key="` + args[i] + `" type="` + args[i+1] + `"<|sep|>` + args[i+2] + "<|close|>argument<|sep|>")
	}
	b.WriteString("<|close|>call<|sep|>")
	return b.String()
}

// kimiK3Tools writes an empty response section and a tools section
// holding calls, then the message's end.
func kimiK3Tools(calls ...string) string {
	return "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>" + strings.Join(calls, "") + "<|close|>tools<|sep|><|close|>message<|sep|>"
}

// museCall is the reference's call_markup: special_function(arg1=1) in
// ATEM invoke markup.
const museCall = "<atem:function_calls>\n<atem:invoke name=\"special_function\">\n<atem:parameter name=\"arg1\">1</atem:parameter>\n</atem:invoke>\n</atem:function_calls>"

func init() {
	refCases = append(refCases, []refCase{
		// Kimi-K3 (XTML tags; reasoning_format none gets no think markers)
		{from: "Kimi-K3", family: familyKimiK3, in: "<|open|>response<|sep|>Hello, world!\nWhat's up?<|close|>response<|sep|><|close|>message<|sep|>", content: refHello},
		{from: "Kimi-K3", family: familyKimiK3, think: thinkKimiK3, open: true,
			in:        "I'm thinking about this<|close|>think<|sep|><|open|>response<|sep|>Hello, world!\nWhat's up?<|close|>response<|sep|><|close|>message<|sep|>",
			reasoning: "I'm thinking about this", content: refHello},
		{from: "Kimi-K3", family: familyKimiK3, in: "<|open|>response<|sep|>Use the response tag, then message the handler.<|close|>response<|sep|><|close|>message<|sep|>",
			content: "Use the response tag, then message the handler."},
		{from: "Kimi-K3", family: familyKimiK3, think: thinkKimiK3, open: true, in: "I was still thinking when the budget ran out", reasoning: "I was still thinking when the budget ran out"},
		{from: "Kimi-K3", family: familyKimiK3, in: kimiK3Tools(kimiK3Call("special_function", "1", "arg1", "number", "1")), calls: []refCall{sf1}},
		{from: "Kimi-K3", family: familyKimiK3, think: thinkKimiK3, open: true,
			in:        "I should call it<|close|>think<|sep|><|open|>response<|sep|>On it.<|close|>response<|sep|><|open|>tools<|sep|>" + kimiK3Call("special_function", "1", "arg1", "number", "1") + "<|close|>tools<|sep|><|close|>message<|sep|>",
			reasoning: "I should call it", content: "On it.", calls: []refCall{sf1}},
		{from: "Kimi-K3", family: familyKimiK3, in: kimiK3Tools(kimiK3Call("special_function_with_opt", "1", "arg1", "number", "1", "arg2", "number", "2")), calls: []refCall{sfo12}},
		{from: "Kimi-K3", family: familyKimiK3, in: kimiK3Tools(kimiK3Call("special_function", "1", "arg1", "number", "1"), kimiK3Call("special_function_with_opt", "2", "arg1", "number", "1", "arg2", "number", "2")),
			calls: []refCall{sf1, sfo12}},
		{from: "Kimi-K3", family: familyKimiK3, in: kimiK3Tools(kimiK3Call("python", "1", "code", "string", "print('hey')")), calls: []refCall{{"python", `{"code":"print('hey')"}`}}},

		// muse-glimmer (messages after the prompt's <|start|>assistant; the
		// reasoning is a message to=self, so no think markers)
		{from: "muse-glimmer", family: familyMuse, in: " to=user<|message|>Hello, world!\nWhat's up?<|eot|>", content: refHello},
		{from: "muse-glimmer", family: familyMuse, in: " to=special_function<|message|>" + museCall, calls: []refCall{sf1}},
		{from: "muse-glimmer", family: familyMuse, in: " to=user<|message|>Hello, world!\nWhat's up?<|eom|><|start|>assistant to=special_function<|message|>" + museCall,
			content: refHello, calls: []refCall{sf1}},
		{from: "muse-glimmer", family: familyMuse, in: " to=user<|message|>You invoke it like this:\n" + museCall + "<|eot|>", content: "You invoke it like this:\n" + museCall},
		// (the json_schema cases: plain content and reasoning)
		{from: "muse-glimmer", family: familyMuse, in: " to=user<|message|>" + `{"amount": 123.45, "date": "2025-12-03"}`, content: `{"amount": 123.45, "date": "2025-12-03"}`},
		{from: "muse-glimmer", family: familyMuse, in: " to=self<|message|>I need to output the invoice details in JSON<|eom|><|start|>assistant to=user<|message|>" + `{"amount": 123.45, "date": "2025-12-03"}`,
			reasoning: "I need to output the invoice details in JSON", content: `{"amount": 123.45, "date": "2025-12-03"}`},
		{from: "muse-glimmer", family: familyMuse, in: " to=self<|message|>I could use " + museCall + " here<|eom|><|start|>assistant to=user<|message|>Hello!<|eot|>",
			reasoning: "I could use " + museCall + " here", content: "Hello!"},
	}...)
}

// TestKimiK3Template: Kimi K3's template builds its tags with macros, so
// its source spells no marker out; its family and think markers are read
// off the macros.
func TestKimiK3Template(t *testing.T) {
	src := "{%- macro open_tag(tag) -%}{{- '<|open|>' + tag + '<|sep|>' -}}{%- endmacro -%}" +
		"{%- macro close_tag(tag) -%}{{- '<|close|>' + tag + '<|sep|>' -}}{%- endmacro -%}" +
		"{%- if add_generation_prompt -%}{{- open_tag('think' if thinking else 'response') -}}{%- endif -%}"
	if f := detectToolFamily(src); f != familyKimiK3 {
		t.Errorf("family %v, want kimi-k3", f)
	}
	if s, e := thinkMarkersOf(src); s != kimiK3Think || e != kimiK3ThinkEnd {
		t.Errorf("think markers %q, %q, want %q, %q", s, e, kimiK3Think, kimiK3ThinkEnd)
	}
}

// TestKimiK3Arguments: the forms of arguments the template writes besides
// the reference's cases: a string value as written (only attributes are
// escaped), a JSON block, values without a type (typed by the schema), a
// typed value that is not JSON; and a call outside a tools section.
func TestKimiK3Arguments(t *testing.T) {
	for _, c := range []struct{ in, name, args string }{
		{`<|open|>tools<|sep|><|open|>call tool="magic" index="1"<|sep|><|open|>argument key="name" type="string"<|sep|>a &amp; "b"<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>`,
			"magic", `{"name":"a &amp; \"b\""}`},
		{`<|open|>tools<|sep|><|open|>call tool="set_config" index="1"<|sep|><|open|>json type="object"<|sep|>{"config": {"a": [1, 2]}}<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|>`,
			"set_config", `{"config":{"a":[1,2]}}`},
		{`<|open|>call tool="magic_int" index="1"<|sep|><|open|>argument key="ref"<|sep|>42<|close|>argument<|sep|><|open|>argument key="name"<|sep|>42<|close|>argument<|sep|><|close|>call<|sep|>`,
			"magic_int", `{"ref":42,"name":"42"}`},
		{`<|open|>tools<|sep|><|open|>call tool="amount" index="1"<|sep|><|open|>argument key="orig" type="number"<|sep|>about 3<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>`,
			"amount", `{"orig":"about 3"}`},
	} {
		_, calls := familyKimiK3.parse(c.in, refTools)
		if len(calls) != 1 || calls[0].name != c.name || !sameJSON(calls[0].arguments, c.args) {
			t.Errorf("%q: calls %v, want %s(%s)", c.in, calls, c.name, c.args)
		}
	}
	// An attribute's escapes are undone.
	if _, calls := familyKimiK3.parse(`<|open|>call tool="a&amp;b&quot;" index="1"<|sep|><|close|>call<|sep|>`, []tool{{name: `a&b"`}}); len(calls) != 1 || calls[0].name != `a&b"` {
		t.Errorf("escaped name: calls %v", calls)
	}
}
