package jinja

import (
	"errors"
	"testing"
)

// TestReferenceUndefinedMember: a member or item of undefined is undefined
// in the reference's engine (llama.cpp common/jinja, member_expression on an
// undefined object returns undefined), where Jinja2 raises. MiroThinker-v1's
// template calls render_tool_call() without the message it reads.
func TestReferenceUndefinedMember(t *testing.T) {
	runCases(t, []renderCase{
		{"attribute of undefined", "[{{ nope.x }}]", "[]"},
		{"chained attributes", "[{{ nope.x.y }}]", "[]"},
		{"item of undefined", "[{{ nope['x'] }}{{ nope[0] }}]", "[]"},
		{"defined test", "{{ nope.x is defined }} {{ nope.x is undefined }}", "False True"},
		{"falsy", "{% if nope.x %}yes{% else %}no{% endif %}", "no"},
		{"macro called without its argument",
			"{%- macro calls(message) %}{% if message.tool_calls %}calls{% endif %}{% endmacro -%}" +
				"[{{ calls() }}]", "[]"},
	}, nil)
}

// TestReferenceNewlines: the reference's lexer reads "\r\n" and "\r" as
// "\n" and drops one trailing newline of the source (as Jinja2 with
// keep_trailing_newline off); moonshotai-Kimi-K2.jinja has CRLF lines.
func TestReferenceNewlines(t *testing.T) {
	runCases(t, []renderCase{
		{"crlf text", "a\r\nb{{ 'x' }}\r\n", "a\nbx"},
		{"lone cr", "a\rb", "a\nb"},
		{"crlf after a block tag", "{% if true %}\r\nyes\r\n{% endif %}\r\nz", "yes\nz"},
		{"one trailing newline dropped", "{{ 'x' }}\n", "x"},
		{"only one", "ab\n\n", "ab\n"},
		{"crlf in a string literal", "{{ 'p\r\nq' }}", "p\nq"},
	}, nil)
	_, err := render(t, "a\r\n\r\n{{ 1 + }}", nil)
	var e *Error
	if !errors.As(err, &e) || e.Line != 3 {
		t.Errorf("error = %v, want one on line 3", err)
	}
}
