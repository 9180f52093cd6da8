package api

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/internal/jinja"
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
// <template>.<request>.txt (or .err) for inspection, and the variables it
// rendered with as <template>.<request>.ctx.json (tools/jinja2check renders
// the same templates with them in Python's jinja2). Skipped when
// VKLLM_TEMPLATES_DIR is unset.
func TestTemplateCollection(t *testing.T) {
	dir := os.Getenv("VKLLM_TEMPLATES_DIR")
	if dir == "" {
		t.Skip("VKLLM_TEMPLATES_DIR is unset (a folder of *.jinja chat templates)")
	}
	renderCollection(t, dir, os.Getenv("VKLLM_TEMPLATES_OUT"))
}

// TestTemplatesAgainstJinja2 renders the fixture templates (gpt-oss's too, and those of
// VKLLM_TEMPLATES_DIR when set) with the four standard conversations and
// has tools/jinja2check render them again in Python's jinja2 with the same
// variables: every prompt, and every refusal, must be the same. On the
// fixtures this checks the checker too, since there our prompts are the
// reference's (TestExpectedPrompts). Skipped where python3 cannot import
// jinja2 (make test-deps installs python3-jinja2).
func TestTemplatesAgainstJinja2(t *testing.T) {
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		t.Skipf("python3 with jinja2 is not installed (make test-deps): %v", err)
	}
	dirs := []string{fixtures.Dir(t, "templates"), fixtures.Dir(t, "archs-next/moe/gpt-oss-chat")}
	if d := os.Getenv("VKLLM_TEMPLATES_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		out := t.TempDir()
		renderCollection(t, dir, out)
		cmd := exec.Command("python3", filepath.Join("..", "tools", "jinja2check", "check.py"), dir, out)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		t.Logf("%s: %s", dir, strings.TrimSpace(b.String()))
		if err != nil {
			t.Errorf("%s: our renders differ from jinja2's: %v", dir, err)
		}
	}
}

// renderCollection renders the standard conversations with every *.jinja
// template of dir, as TestTemplateCollection describes; out, when not
// empty, receives the prompts and contexts.
// undefinedOperation matches the engine's error for an operation on an
// undefined value ("line 100, column 19: 'description' is undefined").
var undefinedOperation = regexp.MustCompile(`column \d+: '[^']+' is undefined$`)

func renderCollection(t *testing.T, dir, out string) {
	_, ep := loadExpectedPrompts(t, "templates")
	var want *expectedPrompts
	if _, err := os.Stat(filepath.Join(dir, "expected-prompts.json")); err == nil {
		_, want = loadExpectedPromptsFrom(t, dir)
	}
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
				if err := os.WriteFile(filepath.Join(out, name+"."+rq+".ctx.json"), []byte(contextJSON(t, tmpl, req, ep, date)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want == nil {
				// A template's own raise_exception is a refusal the
				// reference makes too, and so is an operation on an
				// undefined value (Apertus's tool list reads fields the
				// request's tools do not have at top level; the reference's
				// engine raises there as Jinja2 does); anything else is the
				// engine's.
				if e != nil && !strings.Contains(e.Error(), "the chat template raised an error: ") && !undefinedOperation.MatchString(e.Error()) {
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
		t.Logf("%s: %d of %d prompts equal the expected ones", dir, matched, compared)
	}
}

// contextJSON is the context a request renders the template with, as JSON
// (our engine's tojson, which keeps key order).
func contextJSON(t *testing.T, tmpl *chatTemplate, req *chatRequest, ep *expectedPrompts, now time.Time) string {
	t.Helper()
	in := renderInput{messages: req.messages, kwargs: req.kwargs, reasoningEffort: req.reasoningEffort,
		bos: ep.ModelTokens.BOS, eos: ep.ModelTokens.EOS, now: now}
	if len(req.tools) > 0 && req.toolChoice != toolChoiceNone {
		in.tools, in.toolsValue = req.tools, req.toolsValue
	}
	if tmpl.jinja == nil {
		return "null"
	}
	vars, _ := tmpl.templateVars(in)
	d := jinja.NewDict()
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d.Set(k, vars[k])
	}
	tpl, err := jinja.Parse("{{ ctx | tojson }}")
	if err != nil {
		t.Fatal(err)
	}
	s, err := tpl.Render(map[string]any{"ctx": d}, jinja.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
