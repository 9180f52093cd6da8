package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// TestTemplateFamilies renders small templates of our own that reproduce
// the constructs of the chat-template families the reference handles
// specially (testdata/families: Apertus's tools read off the OpenAI
// wrapper, so string + undefined refuses the tool requests, and its
// plain-text deliberation, RWKV World's </think> cut,
// SmolLM3's thinking default without tools, Gemma 4's member-by-member
// arguments, DeepSeek V3.2's defaults and DSML calls, Granite 3.3's
// dated system text and indented tools) with the four standard requests,
// and compares with testdata/families/expected.json: Python's jinja2
// renders with the context the reference passes (gen.py), including
// whether it finds reasoning support (enable_thinking) and wants object
// arguments.
func TestTemplateFamilies(t *testing.T) {
	_, ep := loadExpectedPrompts(t, "templates")
	b, err := os.ReadFile(filepath.Join("testdata", "families", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct {
		ObjectArguments bool               `json:"object_arguments"`
		Thinking        bool               `json:"thinking"`
		Prompts         map[string]*string `json:"prompts"` // nil: the template refuses the request
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	date, err := time.Parse("02 Jan 2006", ep.Context.DateString)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		w := want[name]
		src, err := os.ReadFile(filepath.Join("testdata", "families", name+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := newChatTemplate("jinja", string(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tmpl.caps.thinking != w.Thinking {
			t.Errorf("%s: thinking = %v, want %v", name, tmpl.caps.thinking, w.Thinking)
		}
		if tmpl.caps.objectArguments != w.ObjectArguments {
			t.Errorf("%s: object arguments = %v, want %v", name, tmpl.caps.objectArguments, w.ObjectArguments)
		}
		for rq, prompt := range w.Prompts {
			req, e := decodeChat(grammar.Budget{}, ep.Requests[rq])
			if e != nil {
				t.Fatal(e)
			}
			got, e := tmpl.renderRequest(req, ep.ModelTokens.BOS, ep.ModelTokens.EOS, date, 0, false)
			switch {
			case prompt == nil:
				if e == nil {
					t.Errorf("%s/%s: render = %q, want an error (jinja2 refuses it)", name, rq, got)
				}
			case e != nil:
				t.Errorf("%s/%s: render = error %v", name, rq, e)
			case got != *prompt:
				t.Errorf("%s/%s: render =\n%s\nwant\n%s\nfirst difference at byte %d", name, rq, got, *prompt, firstDiff(got, *prompt))
			}
		}
	}
}

// TestDetectThinking checks reasoning detection against the rules of the
// reference's template analysis (common/chat-diff-analyzer: reasoning
// presence, thinking enabled, and its workarounds), on small templates.
func TestDetectThinking(t *testing.T) {
	gen := "{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}A:"
	for _, c := range []struct {
		name, src string
		want      bool
	}{
		{"reasoning rendered between markers", "{% for m in messages %}{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}{% endfor %}", true},
		{"reasoning rendered before a closing marker only", "{% for m in messages %}{{ m.reasoning_content }}\n[END THOUGHT]{{ m.content }}{% endfor %}", true},
		{"reasoning rendered as plain text", "{% for m in messages %}{{ m.reasoning_content }} {{ m.content }}{% endfor %}", false},
		{"enable_thinking opens a marker at the end", gen + "{% if enable_thinking %}<think>{% endif %}{% endif %}", true},
		{"enable_thinking switches markers", gen + "{{ '<think>' if enable_thinking else '</think>' }}{% endif %}", true},
		{"only the disabled prompt has markers", gen + "{% if enable_thinking is false %}<think></think>{% endif %}{% endif %}", false},
		{"enable_thinking changes plain text", "Mode: {{ 'enabled' if enable_thinking else 'disabled' }}\n" + gen + "{% endif %}", false},
		{"old form cutting content at </think>", "{% for m in messages %}{{ m.content.split('</think>')[-1] }}{% endfor %}", true},
		{"harmony channels", "{% for m in messages %}<|start|>{{ m.role }}<|channel|>final<|message|>{{ m.content }}{% endfor %}", true},
		{"no reasoning at all", gen + "{% endif %}", false},
	} {
		tmpl, err := newChatTemplate("jinja", c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if tmpl.caps.thinking != c.want {
			t.Errorf("%s: thinking = %v, want %v", c.name, tmpl.caps.thinking, c.want)
		}
	}
}

// TestDetectReasoning: besides the thinking templates, answers are parsed
// for reasoning where the reference parses them without setting
// enable_thinking from the template: a template that renders
// reasoning_content before a marker only in a message with tool calls
// (Command R7B, Kimi K2 Thinking), and LFM2.5 (its reasoning read from
// the message's "thinking", as the reference passes it).
func TestDetectReasoning(t *testing.T) {
	for _, c := range []struct {
		name, src           string
		thinking, reasoning bool
	}{
		{"reasoning only beside calls", "{% for m in messages %}{% if m.tool_calls %}<|START_THINKING|>{{ m.reasoning_content }}<|END_THINKING|>{% endif %}{{ m.content }}{% endfor %}", false, true},
		{"reasoning only beside calls, as plain text", "{% for m in messages %}{% if m.tool_calls %}{{ m.reasoning_content }} {% endif %}{{ m.content }}{% endfor %}", false, false},
		{"reasoning always", "{% for m in messages %}<think>{{ m.reasoning_content }}</think>{{ m.content }}{% endfor %}", true, true},
		{"LFM2.5's thinking field", "List of tools: <|tool_call_start|>{% for m in messages %}{% if m.thinking %}<think>{{ m.thinking }}</think>{% endif %}{{ m.content }}{% endfor %}", false, true},
		{"no reasoning", "{% for m in messages %}{{ m.content }}{% for c in m.tool_calls %}{{ c.function.name }}{% endfor %}{% endfor %}", false, false},
	} {
		tmpl, err := newChatTemplate("jinja", c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if tmpl.caps.thinking != c.thinking || tmpl.caps.reasoning != c.reasoning {
			t.Errorf("%s: thinking %v, reasoning %v, want %v, %v", c.name, tmpl.caps.thinking, tmpl.caps.reasoning, c.thinking, c.reasoning)
		}
	}
	// LFM2.5 reads a message's reasoning from "thinking".
	tmpl, err := newChatTemplate("jinja", "List of tools: <|tool_call_start|>{% for m in messages %}{% if m.thinking %}<think>{{ m.thinking }}</think>{% endif %}{{ m.content }}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.render(renderInput{messages: []message{{role: "user", content: "q"}, {role: "assistant", content: "a", reasoning: "r"}}})
	if err != nil || got != "List of tools: <|tool_call_start|>q<think>r</think>a" {
		t.Errorf("render = %q, %v, want the reasoning in <think>", got, err)
	}
}
