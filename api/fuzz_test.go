package api

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/engine"
)

// fuzzRoutes are the POST routes FuzzServe drives.
var fuzzRoutes = []string{"/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/rerank",
	"/extras/tokenize", "/extras/tokenize/count", "/extras/detokenize"}

// FuzzServe sends arbitrary bodies through the whole handler (decoding,
// templates, grammars, generation against the fake backend, response
// writing): every answer must be a 2xx or a 4xx with a JSON error body, and
// no input may panic (the handler's recover would turn a panic into a 500,
// which fails here).
func FuzzServe(f *testing.F) {
	seeds := []string{
		`{"prompt":"hi","max_tokens":4}`,
		`{"prompt":["a","b"],"n":2,"best_of":3,"echo":true,"logprobs":2,"stop":["x"]}`,
		`{"prompt":"hi","stream":true,"max_tokens":3,"grammar":"root ::= \"a\"+"}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"max_tokens":4,"template":"chatml"}`,
		`{"messages":[{"role":"user","content":"w?"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],"tool_choice":"required","max_tokens":40}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":true,"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"array","items":{"type":"string","maxLength":3}}}},"max_tokens":20}`,
		`{"input":["a","bb"],"encoding_format":"base64"}`,
		`{"query":"q","documents":["a","b"],"top_n":1}`,
		`{"input":"hello"}`,
		`{"tokens":[3,4,5]}`,
		`{"prompt":"x","logit_bias":{"3":-100},"seed":1,"temperature":2,"top_k":0,"mirostat_mode":2}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i%len(fuzzRoutes)), []byte(s))
		f.Add(uint8((i+1)%len(fuzzRoutes)), []byte(s))
	}
	s := NewServer(Config{})
	if err := s.Ready(newFake()); err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.SetRequestURI(path)
		ctx.Request.SetBody(body)
		h(&ctx)
		status, out := ctx.Response.StatusCode(), ctx.Response.Body()
		if status >= 500 || (status >= 300 && status < 400) {
			t.Fatalf("POST %s %q: status %d: %s", path, body, status, out)
		}
		if bytes.HasPrefix(ctx.Response.Header.ContentType(), []byte("text/event-stream")) {
			for _, frame := range bytes.Split(out, []byte("\n\n")) {
				if bytes.Contains(frame, []byte(`"code":500`)) {
					t.Fatalf("POST %s %q: stream error: %s", path, body, frame)
				}
			}
			if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) && !bytes.HasPrefix(out, []byte("event: error\n")) {
				t.Fatalf("POST %s %q: stream neither ends with [DONE] nor is an error event: %q", path, body, out)
			}
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("POST %s %q: status %d, body is not a JSON object: %v: %s", path, body, status, err, out)
		}
		if status >= 400 {
			if e, ok := v["error"].(map[string]any); !ok || e["message"] == "" {
				t.Fatalf("POST %s %q: status %d without an error message: %s", path, body, status, out)
			}
		}
	})
}

// panicky is a backend whose embedding and generation panic.
type panicky struct{ *fakeBackend }

func (p panicky) Embed(context.Context, []int32) ([]float32, error) { panic("embed bug") }
func (p panicky) Generate(context.Context, []*GenerateRequest, func(int, *engine.Event) error) error {
	panic("generate bug")
}

// TestPanicRecovered checks that a panic in a handler or in a stream writer
// becomes a 500 error (a JSON body, or an SSE error event) and the server
// keeps serving.
func TestPanicRecovered(t *testing.T) {
	ts := newReadyServer(t, panicky{newFake()}, Config{})
	r := ts.do("POST", "/v1/embeddings", `{"input":"hi"}`)
	if r.status != 500 || !strings.Contains(string(r.body), "embed bug") {
		t.Errorf("embeddings with a panicking backend: %d %s, want 500 naming the panic", r.status, r.body)
	}
	r = ts.do("POST", "/v1/completions", `{"prompt":"hi","stream":true}`)
	if r.status != 200 || !strings.HasPrefix(string(r.body), "event: error\n") || !strings.Contains(string(r.body), `"code":500`) {
		t.Errorf("streamed completion with a panicking backend: %d %q, want an SSE error event with code 500", r.status, r.body)
	}
	if r := ts.do("GET", "/health", ""); r.status != 200 {
		t.Errorf("health after the panics: %d %s", r.status, r.body)
	}
}
