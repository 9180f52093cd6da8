package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// testServer is a real server on a loopback port.
type testServer struct {
	t    *testing.T
	s    *Server
	base string
}

// startServer starts a server in the loading state; call ready to install b.
func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg)
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return &testServer{t: t, s: s, base: "http://" + ln.Addr().String()}
}

// newReadyServer starts a server with b loaded.
func newReadyServer(t *testing.T, b Backend, cfg Config) *testServer {
	t.Helper()
	ts := startServer(t, cfg)
	if err := ts.s.Ready(b); err != nil {
		t.Fatal(err)
	}
	return ts
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (ts *testServer) do(method, path, body string, hdr ...string) response {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.base+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func (ts *testServer) post(path, body string) response { return ts.do("POST", path, body) }

// decode unmarshals a response body into a generic map.
func decodeBody(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", b, err)
	}
	return m
}

// errorOf returns the error object of an error body.
func errorOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	e, ok := decodeBody(t, b)["error"].(map[string]any)
	if !ok {
		t.Fatalf("body %s has no error object", b)
	}
	return e
}

// sseEvent is one parsed SSE event.
type sseEvent struct {
	event string
	data  string
}

// parseSSE splits a stream body into events, checking the framing: every
// line is "event: x" or "data: x", events end with a blank line.
func parseSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("stream %q does not end with a blank line", body)
	}
	var out []sseEvent
	for _, frame := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(frame, "\n") {
			switch {
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[len("event: "):]
			default:
				t.Fatalf("stream line %q is neither data: nor event:", line)
			}
		}
		out = append(out, ev)
	}
	return out
}

func jsonPath(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// streamLines reads an SSE response incrementally (for disconnect tests).
func openStream(t *testing.T, url, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp, bufio.NewReader(resp.Body)
}
