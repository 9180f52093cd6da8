package api

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// TestTemplateCollection renders the four standard conversations of
// ../shared/fixtures/templates/expected-prompts.json with every *.jinja
// template of the folder VKLLM_TEMPLATES_DIR (a local copy of a collection
// such as the reference's models/templates, which the project does not
// hold): every template must load and render the conversations without a
// Go-side failure (a raise_exception of the template itself is not one).
// Where the folder has an expected-prompts.json of its own
// (the same layout as the fixture's), the prompts are compared byte for
// byte; VKLLM_TEMPLATES_OUT, when set, receives each prompt as
// <template>.<request>.txt (or .err) for inspection. Skipped when
// VKLLM_TEMPLATES_DIR is unset.
func TestTemplateCollection(t *testing.T) {
	dir := os.Getenv("VKLLM_TEMPLATES_DIR")
	if dir == "" {
		t.Skip("VKLLM_TEMPLATES_DIR is unset (a folder of *.jinja chat templates)")
	}
	_, ep := loadExpectedPrompts(t, "templates")
	var want *expectedPrompts
	if _, err := os.Stat(filepath.Join(dir, "expected-prompts.json")); err == nil {
		_, want = loadExpectedPromptsFrom(t, dir)
	}
	out := os.Getenv("VKLLM_TEMPLATES_OUT")
	date, err := time.Parse("02 Jan 2006", ep.Context.DateString)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.jinja in %s (%v)", dir, err)
	}
	rqs := make([]string, 0, len(ep.Requests))
	for rq := range ep.Requests {
		rqs = append(rqs, rq)
	}
	sort.Strings(rqs)
	matched, compared := 0, 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jinja")
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := newChatTemplate("jinja", string(src))
		if err != nil {
			t.Errorf("%s does not load: %v", name, err)
			continue
		}
		for _, rq := range rqs {
			req, e := decodeChat(grammar.Budget{}, ep.Requests[rq])
			if e != nil {
				t.Fatal(e)
			}
			got, e := tmpl.renderRequest(req, ep.ModelTokens.BOS, ep.ModelTokens.EOS, date, 0, false)
			if out != "" {
				text, ext := got, ".txt"
				if e != nil {
					text, ext = e.Error(), ".err"
				}
				if err := os.WriteFile(filepath.Join(out, name+"."+rq+ext), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want == nil {
				// A template's own raise_exception is a refusal the
				// reference makes too; anything else is the engine's.
				if e != nil && !strings.Contains(e.Error(), "the chat template raised an error: ") {
					t.Errorf("%s/%s does not render: %v", name, rq, e)
				}
				continue
			}
			w, ok := want.Templates[name][rq]
			if !ok {
				continue
			}
			compared++
			switch {
			case e != nil:
				t.Errorf("%s/%s: render = error %v, want %q", name, rq, e, w.Prompt)
			case got != w.Prompt:
				t.Errorf("%s/%s: render =\n%s\nwant\n%s\nfirst difference at byte %d", name, rq, got, w.Prompt, firstDiff(got, w.Prompt))
			default:
				matched++
			}
		}
	}
	if want != nil {
		t.Logf("%d of %d prompts equal the expected ones", matched, compared)
	}
}
