package jinja

import "testing"

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
