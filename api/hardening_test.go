package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// jsonString returns s as a JSON string literal.
func jsonQuoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestUnsatisfiableGrammarRequests checks that grammars and schemas no
// output can satisfy are 400s naming their field at validation, and that
// a grammar that reaches a dead end during generation is a 4xx (422)
// error, in a body or as the stream's error event, never a 500.
func TestUnsatisfiableGrammarRequests(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	var props []string
	for i := range 8000 {
		props = append(props, fmt.Sprintf(`"k%d":{"type":"integer"}`, i))
	}
	for _, tc := range []struct {
		name, body, param string
	}{
		{"surrogate", `{"prompt":"x","grammar":` + jsonQuoted(`root ::= "\uD800"`) + `}`, "grammar"},
		{"empty class", `{"prompt":"x","grammar":` + jsonQuoted(`root ::= [^\x00-\U0010FFFF]`) + `}`, "grammar"},
		{"8,000 optional properties", `{"prompt":"x","json_schema":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}`, "json_schema"},
	} {
		r := ts.post("/v1/completions", tc.body)
		if r.status != 400 || errorOf(t, r.body)["param"] != tc.param {
			t.Errorf("%s: POST /v1/completions = %d %.300s, want 400 naming %s", tc.name, r.status, r.body, tc.param)
		}
	}

	// Fine at the start, too ambiguous after the first character.
	var g strings.Builder
	g.WriteString("root ::= \"H\" (a | b)\n")
	for _, r := range []string{"a", "b"} {
		g.WriteString(r + " ::= ")
		for i := range 3000 {
			if i > 0 {
				g.WriteString(" | ")
			}
			fmt.Fprintf(&g, `"%s%d"`, r, i)
		}
		g.WriteString("\n")
	}
	body := `{"prompt":"x","max_tokens":4,"grammar":` + jsonQuoted(g.String())
	r := ts.post("/v1/completions", body+`}`)
	if r.status != 422 || errorOf(t, r.body)["type"] != "unprocessable_entity_error" {
		t.Errorf("POST /v1/completions with a grammar that dead-ends = %d %.300s, want 422", r.status, r.body)
	}
	r = ts.post("/v1/completions", body+`,"stream":true}`)
	evs := parseSSE(t, r.body)
	if last := evs[len(evs)-1]; last.event != "error" || errorOf(t, []byte(last.data))["code"] != 422.0 {
		t.Errorf("streamed completion with a grammar that dead-ends ends %+v, want an error event with code 422", last)
	}
}
