package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// sweepServer answers /v1/completions as a server does for a prompt of
// token ids, recording each prompt; usageOff is added to the
// prompt_tokens it reports.
type sweepServer struct {
	mu       sync.Mutex
	prompts  [][]int
	usageOff int
}

func (f *sweepServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Prompt    []int `json:"prompt"`
		MaxTokens int   `json:"max_tokens"`
	}
	if r.URL.Path != "/v1/completions" || json.NewDecoder(r.Body).Decode(&body) != nil || body.MaxTokens != 1 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.prompts = append(f.prompts, body.Prompt)
	f.mu.Unlock()
	fmt.Fprintf(w, `{"choices":[{"text":"x"}],"usage":{"prompt_tokens":%d,"completion_tokens":1}}`, len(body.Prompt)+f.usageOff)
}

// TestSweep: every pass sends prompts of exactly 1..N tokens in order,
// each prompt's first token is its own (so no prompt cache can serve one
// from another), and the result has a time per length and pass.
func TestSweep(t *testing.T) {
	f := &sweepServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	res, err := Sweep(context.Background(), SweepConfig{URL: srv.URL, MaxTokens: 20, Passes: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.prompts) != 60 || len(res.Millis) != 3 || len(res.Slowest) != 3 || len(res.Total) != 3 {
		t.Fatalf("%d prompts sent, %d passes reported, want 60 and 3", len(f.prompts), len(res.Millis))
	}
	first := map[int]bool{}
	for i, p := range f.prompts {
		if want := i%20 + 1; len(p) != want {
			t.Errorf("prompt %d has %d tokens, want %d", i, len(p), want)
		}
		if first[p[0]] {
			t.Errorf("prompt %d starts with token %d, as an earlier one did", i, p[0])
		}
		first[p[0]] = true
		for _, id := range p {
			if id < 100 || id >= 100+sweepSpan {
				t.Errorf("prompt %d has token %d outside [100, %d)", i, id, 100+sweepSpan)
			}
		}
	}
	for p, ms := range res.Millis {
		if len(ms) != 20 {
			t.Fatalf("pass %d: %d times, want 20", p, len(ms))
		}
		for k, v := range ms {
			if v <= 0 {
				t.Errorf("pass %d, %d tokens: %v ms", p, k+1, v)
			}
			if v > res.Slowest[p].Value {
				t.Errorf("pass %d: %d tokens took %v ms, more than the slowest %v", p, k+1, v, res.Slowest[p])
			}
		}
	}
	k := res.WorstRatio.Tokens
	if k < 1 || k > 20 || res.WorstRatio.Value != res.Millis[0][k-1]/res.Millis[2][k-1] {
		t.Errorf("worst ratio %+v does not match the times", res.WorstRatio)
	}
	var out bytes.Buffer
	writeSweep(&out, &res)
	if !strings.Contains(out.String(), "pass 3 ") || !strings.Contains(out.String(), "worst ratio") {
		t.Errorf("report lacks a pass or the worst ratio:\n%s", out.String())
	}
}

// TestSweepErrors: a server that counts the prompt otherwise, a refused
// request and out-of-range settings are errors.
func TestSweepErrors(t *testing.T) {
	f := &sweepServer{usageOff: 1}
	srv := httptest.NewServer(f)
	defer srv.Close()
	if _, err := Sweep(context.Background(), SweepConfig{URL: srv.URL, MaxTokens: 3}); err == nil || !strings.Contains(err.Error(), "prompt_tokens") {
		t.Errorf("usage off by one: err = %v, want one naming prompt_tokens", err)
	}
	if _, err := Sweep(context.Background(), SweepConfig{URL: srv.URL + "/nope", MaxTokens: 3}); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("refused request: err = %v, want HTTP 400", err)
	}
	for _, c := range []SweepConfig{{URL: srv.URL, MaxTokens: 0}, {URL: srv.URL, MaxTokens: 5000}, {URL: srv.URL, MaxTokens: 300, Passes: 4}} {
		if _, err := Sweep(context.Background(), c); err == nil {
			t.Errorf("Sweep(%+v) = nil error", c)
		}
	}
}
