package api

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/jinja"
)

// manyProps returns a tool whose parameters have properties until the JSON
// has n bytes: the shape whose parsed form costs the most per byte.
func manyProps(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}}}`)
	return b.String()
}

// TestDecodedJSONCost: decodedJSONCost covers what the template values of
// tools and chat_template_kwargs really hold per byte of their JSON, for
// the costliest shape (many small objects) and long arrays.
func TestDecodedJSONCost(t *testing.T) {
	longArray := `{"a":[` + strings.Repeat(`1,`, 128<<10) + `1]}`
	for name, js := range map[string]string{"properties": manyProps(256 << 10), "array": longArray} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		v, err := jinja.ParseJSON([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		runtime.KeepAlive(v)
		if held > int64(decodedJSONCost*len(js)) {
			t.Errorf("%s: %d bytes of JSON hold %d bytes parsed (%.1fx), more than decodedJSONCost (%dx)",
				name, len(js), held, float64(held)/float64(len(js)), decodedJSONCost)
		}
		if held < int64(len(js)) {
			t.Errorf("%s: %d bytes of JSON hold %d bytes parsed: the measurement saw nothing", name, len(js), held)
		}
	}
}

// TestToolsChargedDecoded: tools and chat_template_kwargs are counted
// against --max-inflight-bytes at their decoded size (decodedJSONCost
// times their JSON), not at their JSON's: a request whose tools decode to
// more than the whole budget is a 413 naming the field, one that fits is
// served, and the charge is given back when the request ends.
func TestToolsChargedDecoded(t *testing.T) {
	const budget = 2 << 20
	ts := newReadyServer(t, newFake(), Config{MaxRequestBytes: 1 << 20, MaxBodyBytesInFlight: budget})
	chat := func(extra string) response {
		return ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2`+extra+`}`)
	}
	// (the fake's context is too small for a prompt with these tools:
	// /apply-template decodes them just as a chat does, and renders them)
	apply := func(extra string) response {
		return ts.post("/apply-template", `{"messages":[{"role":"user","content":"hi"}]`+extra+`}`)
	}
	big := manyProps(budget/decodedJSONCost + 1024) // its JSON fits; decoded, it does not
	if r := apply(`,"tools":[` + big + `]`); r.status != 413 || !strings.Contains(string(r.body), `"param":"tools"`) {
		t.Errorf("tools decoding to more than --max-inflight-bytes: %d %s, want 413 naming tools", r.status, r.body)
	}
	// /v1/responses charges its tools (the Responses shape) the same way.
	respTool := strings.Replace(strings.Replace(big, `"function":{"name":"f",`, `"name":"f",`, 1), `}}}}`, `}}}`, 1)
	if r := ts.post("/v1/responses", `{"input":"hi","max_output_tokens":2,"tools":[`+respTool+`]}`); r.status != 413 || !strings.Contains(string(r.body), `"param":"tools"`) {
		t.Errorf("/v1/responses tools decoding to more than --max-inflight-bytes: %d %.300s, want 413 naming tools", r.status, r.body)
	}
	kw := `{"big":` + strings.Repeat(`[`, 1) + strings.Repeat(`"x",`, budget/decodedJSONCost/4+1024) + `"x"]}`
	if r := chat(`,"chat_template_kwargs":` + kw); r.status != 413 || !strings.Contains(string(r.body), `"param":"chat_template_kwargs"`) {
		t.Errorf("chat_template_kwargs decoding to more than --max-inflight-bytes: %d %.300s, want 413 naming chat_template_kwargs", r.status, r.body)
	}
	// Tools that fit are served, again and again: each request's charge
	// goes back when it ends.
	var tools []string // the same JSON in tools of a few hundred properties each
	for n := 0; n < budget/decodedJSONCost/2; n += len(tools[len(tools)-1]) {
		tools = append(tools, strings.Replace(manyProps(4000), `"name":"f"`, fmt.Sprintf(`"name":"f%d"`, len(tools)), 1))
	}
	small := strings.Join(tools, ",")
	for i := range 4 {
		if r := apply(`,"tools":[` + small + `]`); r.status != 200 {
			t.Fatalf("request %d with tools that fit: %d %.300s", i, r.status, r.body)
		}
	}
	if n := ts.s.bodyBytes.Load(); n != 0 {
		t.Errorf("after the requests, %d bytes of the in-flight budget are still held", n)
	}
}
