package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/sampling/grammar"

	"github.com/vkllm/vkllm/internal/fixtures"
)

// expectedPrompts is ../shared/fixtures/templates/expected-prompts.json:
// what the reference rendered for each template and request.
type expectedPrompts struct {
	ModelTokens struct {
		BOS string `json:"bos_token"`
		EOS string `json:"eos_token"`
	} `json:"model_tokens"`
	Context struct {
		DateString string `json:"date_string"`
	} `json:"context"`
	ThinkingTemplates []string                             `json:"thinking_templates"`
	Requests          map[string]json.RawMessage           `json:"requests"`
	Templates         map[string]map[string]expectedPrompt `json:"templates"`
}

type expectedPrompt struct {
	Prompt string `json:"prompt"`
}

func loadExpectedPrompts(t *testing.T) (string, *expectedPrompts) {
	dir := fixtures.Dir(t, "templates")
	b, err := os.ReadFile(filepath.Join(dir, "expected-prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ep expectedPrompts
	if err := json.Unmarshal(b, &ep); err != nil {
		t.Fatalf("expected-prompts.json: %v", err)
	}
	return dir, &ep
}

// toolLessDivergence reports whether vkllm renders this pair differently
// from the reference on purpose: a template that mentions no tools gets
// vkllm's own tool prompt (and earlier calls as text), where the reference
// drops the tools.
func toolLessDivergence(tmpl *chatTemplate, req *chatRequest) bool {
	return !tmpl.caps.nativeTools && (len(req.tools) > 0 || hasToolUse(req.messages))
}

// TestExpectedPrompts renders every request of expected-prompts.json with
// every fixture template through the same path as POST /apply-template
// and compares the text byte for byte with the reference's.
func TestExpectedPrompts(t *testing.T) {
	dir, ep := loadExpectedPrompts(t)
	date, err := time.Parse("02 Jan 2006", ep.Context.DateString)
	if err != nil {
		t.Fatalf("date_string %q: %v", ep.Context.DateString, err)
	}
	names := make([]string, 0, len(ep.Templates))
	for n := range ep.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	matched, templateOnly, total := 0, 0, 0
	for _, name := range names {
		src, err := os.ReadFile(filepath.Join(dir, name+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := newChatTemplate("jinja", string(src))
		if err != nil {
			t.Fatalf("newChatTemplate(jinja, %s) = %v", name, err)
		}
		if got, want := tmpl.caps.thinking, slices.Contains(ep.ThinkingTemplates, name); got != want {
			t.Errorf("%s: thinking detected = %v, want %v (the reference's enable_thinking)", name, got, want)
		}
		for _, rq := range []string{"a", "b", "c", "c2"} {
			t.Run(name+"/"+rq, func(t *testing.T) {
				req, e := decodeChat(grammar.Budget{}, ep.Requests[rq])
				if e != nil {
					t.Fatalf("decodeChat(grammar.Budget{}, request %s) = %v", rq, e)
				}
				got, e := tmpl.renderRequest(req, ep.ModelTokens.BOS, ep.ModelTokens.EOS, date, 0)
				want, ok := ep.Templates[name][rq]
				if !ok {
					// The reference refused this pair; vkllm may refuse
					// it too or render it, but never panic.
					return
				}
				total++
				if e != nil {
					t.Fatalf("render = error %v, want the reference's prompt %q", e, want.Prompt)
				}
				if toolLessDivergence(tmpl, req) {
					// The template itself renders as the reference does
					// when given the request without vkllm's tool prompt.
					bare := renderInput{messages: req.messages, tools: req.tools, toolsValue: req.toolsValue,
						bos: ep.ModelTokens.BOS, eos: ep.ModelTokens.EOS, now: date}
					native := *tmpl
					native.caps.nativeTools = true
					if out, err := native.render(bare); err != nil || out != want.Prompt {
						t.Errorf("template alone = %q, %v, want %q", out, err, want.Prompt)
					} else {
						templateOnly++
					}
					if !strings.Contains(got, "You can call the following functions") {
						t.Errorf("render = %q, want vkllm's tool prompt for a template without tool support", got)
					}
					return
				}
				if got != want.Prompt {
					t.Errorf("render =\n%s\nwant (reference)\n%s\nfirst difference at byte %d", got, want.Prompt, firstDiff(got, want.Prompt))
					return
				}
				matched++
			})
		}
	}
	t.Logf("%d of %d expected prompts match the reference exactly through the request path; %d more match with the template alone (vkllm adds its tool prompt there on purpose)",
		matched, total, templateOnly)
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
