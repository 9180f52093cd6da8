//go:build !mtmd

package api

import (
	"strings"
	"testing"
)

// TestImageWithoutMTMD: a build without the mtmd feature answers image
// parts with a 400 that says so, even when told it has a projector.
func TestImageWithoutMTMD(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{HasProjector: true})
	r := ts.post("/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}, {"type": "text", "text": "hi"}]}]}`)
	e := errorOf(t, r.body)
	if r.status != 400 || e["param"] != "messages[0].content" || !strings.Contains(e["message"].(string), "without multimodal support") {
		t.Errorf("status %d, error %v: want 400 saying the build lacks multimodal support", r.status, e)
	}
	for _, f := range Features() {
		if f == "mtmd" {
			t.Error("Features lists mtmd in a build without it")
		}
	}
}

// docImageFixtureServer: a build without mtmd has no server for the
// documents' image examples (TestDocExamples skips them, saying so).
func docImageFixtureServer(t *testing.T) (*testServer, string) { return nil, "" }
