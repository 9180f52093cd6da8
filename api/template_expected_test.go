package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/sampling/grammar"
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

func loadExpectedPrompts(t *testing.T, sub string) (string, *expectedPrompts) {
	return loadExpectedPromptsFrom(t, fixtures.Dir(t, sub))
}

// loadExpectedPromptsFrom reads dir/expected-prompts.json.
func loadExpectedPromptsFrom(t *testing.T, dir string) (string, *expectedPrompts) {
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

// TestExpectedPrompts renders every request of expected-prompts.json with
// every fixture template through the same path as POST /apply-template
// and compares the text byte for byte with the reference's.
func TestExpectedPrompts(t *testing.T) {
	for _, sub := range []string{"templates", "archs-next/moe/gpt-oss-chat"} {
		t.Run(sub, func(t *testing.T) { testExpectedPrompts(t, sub) })
	}
}

// testExpectedPrompts is TestExpectedPrompts for the fixture folder sub.
func testExpectedPrompts(t *testing.T, sub string) {
	dir, ep := loadExpectedPrompts(t, sub)
	date, err := time.Parse("02 Jan 2006", ep.Context.DateString)
	if err != nil {
		t.Fatalf("date_string %q: %v", ep.Context.DateString, err)
	}
	names := make([]string, 0, len(ep.Templates))
	for n := range ep.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	matched, total := 0, 0
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
		rqs := make([]string, 0, len(ep.Requests))
		for rq := range ep.Requests {
			rqs = append(rqs, rq)
		}
		sort.Strings(rqs)
		for _, rq := range rqs {
			t.Run(name+"/"+rq, func(t *testing.T) {
				req, e := decodeChat(grammar.Budget{}, ep.Requests[rq])
				if e != nil {
					t.Fatalf("decodeChat(grammar.Budget{}, request %s) = %v", rq, e)
				}
				got, e := tmpl.renderRequest(req, ep.ModelTokens.BOS, ep.ModelTokens.EOS, date, 0, false)
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
				if got != want.Prompt {
					t.Errorf("render =\n%s\nwant (reference)\n%s\nfirst difference at byte %d", got, want.Prompt, firstDiff(got, want.Prompt))
					return
				}
				matched++
			})
		}
	}
	t.Logf("%d of %d expected prompts match the reference exactly through the request path", matched, total)
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
