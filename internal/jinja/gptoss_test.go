package jinja

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vkllm/vkllm/internal/fixtures"
)

// TestGPTOSSTemplateAgainstJinja2 renders gpt-oss's chat template (the
// shared fixture) over contexts beyond the reference's expected prompts
// (developer role, model_identity, every tool parameter form the
// template's TypeScript rendering has, an earlier call followed by a final
// answer, a training render) and compares with what Python's jinja2
// renders for them as Hugging Face does (testdata/gpt-oss-jinja2.json).
func TestGPTOSSTemplateAgainstJinja2(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "gpt-oss-jinja2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Template string `json:"template"`
		Cases    []struct {
			Name    string          `json:"name"`
			Context json.RawMessage `json:"context"`
			Want    string          `json:"want"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("gpt-oss-jinja2.json: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(fixtures.Dir(t, ""), doc.Template))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Parse(string(src))
	if err != nil {
		t.Fatalf("Parse(%s) = %v", doc.Template, err)
	}
	for _, c := range doc.Cases {
		t.Run(c.Name, func(t *testing.T) {
			v, err := ParseJSON(c.Context)
			if err != nil {
				t.Fatal(err)
			}
			d := v.(*Dict)
			vars := map[string]any{}
			for _, k := range d.Keys() {
				vars[k.(string)], _ = d.Get(k)
			}
			got, err := tpl.Render(vars, Options{Now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)})
			if err != nil || got != c.Want {
				t.Errorf("Render = %q, %v, want (jinja2) %q", got, err, c.Want)
			}
		})
	}
}
