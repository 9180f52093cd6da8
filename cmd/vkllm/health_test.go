package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestHealth runs `vkllm health` against a server that answers /health
// with each status: only 200 succeeds, and the error names the status and
// the body. VKLLM_HOST=0.0.0.0 (the image's) is asked on loopback.
func TestHealth(t *testing.T) {
	status := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(`{"status":"x"}`))
	}))
	defer ts.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	t.Setenv("VKLLM_HOST", "0.0.0.0")
	t.Setenv("VKLLM_PORT", port)
	for _, c := range []struct {
		status int
		ok     bool
	}{{200, true}, {503, false}, {500, false}} {
		status = c.status
		err := cmdHealth(nil)
		if (err == nil) != c.ok {
			t.Errorf("health with /health answering %d = %v, want success %v", c.status, err, c.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), strconv.Itoa(c.status)) || !strings.Contains(err.Error(), `{"status":"x"}`)) {
			t.Errorf("health error %q does not name the status %d and the body", err, c.status)
		}
	}
	ts.Close()
	if err := cmdHealth(nil); err == nil || !strings.Contains(err.Error(), "/health") {
		t.Errorf("health with no server = %v, want an error naming the URL", err)
	}
	if err := cmdHealth([]string{"--port", "x"}); err == nil {
		t.Error("health --port x succeeded")
	}
}
