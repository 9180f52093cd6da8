package jinja

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzRender parses and renders arbitrary templates over a chat-like
// context: no input may panic or run unbounded. The seeds are the shared
// fixture templates (when present) and snippets of every feature.
func FuzzRender(f *testing.F) {
	root := os.Getenv("VKLLM_FIXTURES")
	if root == "" {
		root = filepath.Join("..", "..", "..", "shared", "fixtures")
	}
	files, _ := filepath.Glob(filepath.Join(root, "templates", "*.jinja"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		"{% for m in messages %}{{ m.role }}: {{ m.content|trim }}{% if not loop.last %}\n{% endif %}{% endfor %}",
		"{% set ns = namespace(x=[]) %}{% set _ = ns.x.append(1) %}{{ ns.x|tojson(indent=2) }}",
		"{{ (messages[0].content if messages else 'none') ~ '!' }}{{ tools|map(attribute='function')|tojson }}",
		"{% macro m(a, b=2) %}{{ a * b }}{% endmacro %}{{ m(3) }}{% raw %}{{ x }}{% endraw %}",
		"{%- if x is defined and x.y is not none -%}{{ x['y'][1:-1] }}{%- endif -%}{# c #}",
		"{{ 'a,b'.split(',')|join('|') }}{{ {1: 'a'}[1] }}{{ '%s' % 1 }}{{ raise_exception('r') }}",
		"{% for k, v in d|dictsort %}{{ k }}{{ v }}{% else %}e{% endfor %}{% filter upper %}x{% endfilter %}",
	} {
		f.Add(s)
	}
	msgs, err := ParseJSON([]byte(`[{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
		{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "R"}]`))
	if err != nil {
		f.Fatal(err)
	}
	tools, err := ParseJSON([]byte(`[{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}]`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		tpl, err := Parse(src)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse(%q) = %T %v, want an *Error", src, err, err)
			}
			return
		}
		_, _ = tpl.Render(map[string]any{"messages": msgs, "tools": tools, "add_generation_prompt": true,
			"bos_token": "<s>", "eos_token": "</s>"}, Options{MaxWork: 200_000, MaxOutput: 1 << 16})
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Render(%q) took %v", src, d)
		}
	})
}
