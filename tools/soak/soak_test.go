package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeServer answers like a server would: SSE with [DONE] for streams,
// JSON otherwise; fail, when set, answers its path with that status (a
// 503 only every fourth time, as a queue that is full now and then).
func fakeServer(t *testing.T, failPath string, failStatus int) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == failPath && (failStatus != 503 || n.Add(1)%4 == 0) {
			w.WriteHeader(failStatus)
			w.Write([]byte(`{"error":{"message":"no"}}`))
			return
		}
		var req struct{ Stream bool }
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(400)
			return
		}
		if req.Stream {
			w.Write([]byte("data: {\"choices\":[]}\n\ndata: [DONE]\n\n"))
			return
		}
		w.Write([]byte(`{"choices":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSoakVerdict: the soak passes a server that answers every request
// well, and fails one that answers a kind of request with a 500 (naming
// it), while 503s (a full queue) are no failure.
func TestSoakVerdict(t *testing.T) {
	args := []string{"-d", "500ms", "-every", "1h", "-c", "3", "-give-up", "0", "-backoff", "0"}
	var out bytes.Buffer
	if err := run(append(args, "-url", fakeServer(t, "", 0).URL), &out); err != nil {
		t.Errorf("a healthy server: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(append(args, "-url", fakeServer(t, "/tokenize", 503).URL), &out); err != nil {
		t.Errorf("a server answering 503 (a full queue): %v\n%s", err, out.String())
	}
	out.Reset()
	err := run(append(args, "-url", fakeServer(t, "/tokenize", 500).URL), &out)
	if err == nil || !strings.Contains(out.String(), "answers with status 500") {
		t.Errorf("a server answering 500: %v, want a failure naming the status\n%s", err, out.String())
	}
}
