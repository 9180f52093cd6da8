package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// SweepConfig is a prompt-length sweep: one request at a time with a
// prompt of exactly 1, 2, ... MaxTokens tokens (given as token ids) and
// max_tokens 1, repeated Passes times. On a server that has just started,
// the first pass finds out whether any prompt length still compiles
// something on the request path; the later passes give each length's warm
// time.
type SweepConfig struct {
	URL string
	// MaxTokens is the longest prompt, in tokens.
	MaxTokens int
	// Passes is how many times the sweep runs (at least 1).
	Passes int
	// Model is sent as "model" when set.
	Model  string
	APIKey string
	Client *http.Client
}

// SweepResult holds each pass's time per prompt length (Millis[pass][k-1]
// for a k-token prompt).
type SweepResult struct {
	URL       string      `json:"url"`
	MaxTokens int         `json:"max_tokens"`
	Millis    [][]float64 `json:"millis"`
	// Slowest is each pass's slowest request: its prompt length and time.
	Slowest []SweepPoint `json:"slowest"`
	// WorstRatio is the largest first-pass time over the last pass's time
	// of the same length (when there are two passes or more).
	WorstRatio SweepPoint `json:"worst_ratio"`
	// Total is each pass's wall time in seconds.
	Total []float64 `json:"total_s"`
}

// SweepPoint is one prompt length and a value for it.
type SweepPoint struct {
	Tokens int     `json:"tokens"`
	Value  float64 `json:"value"`
}

// sweepSpan is the range of token ids the sweep's prompts use: ids 100 and
// up, clear of the special tokens at the bottom of most vocabularies.
const sweepSpan = 900

// sweepPrompt returns pass p's prompt of k tokens. Its first token differs
// from every other prompt's of the sweep (for up to 900 prompts), so the
// server's prompt cache reuses nothing and every prompt is processed
// whole.
func sweepPrompt(p, k, maxTokens int) []int {
	ids := make([]int, k)
	ids[0] = 100 + (p*maxTokens+k-1)%sweepSpan
	for i := 1; i < k; i++ {
		ids[i] = 100 + (ids[i-1]*31+7*i)%sweepSpan
	}
	return ids
}

// Sweep runs the prompt-length sweep.
func Sweep(ctx context.Context, cfg SweepConfig) (SweepResult, error) {
	if cfg.MaxTokens < 1 || cfg.MaxTokens > 4096 {
		return SweepResult{}, fmt.Errorf("loadtest: sweep of %d tokens: want 1..4096", cfg.MaxTokens)
	}
	if cfg.Passes < 1 {
		cfg.Passes = 1
	}
	if cfg.Passes*cfg.MaxTokens > sweepSpan {
		return SweepResult{}, fmt.Errorf("loadtest: %d passes of %d prompts: at most %d prompts have a first token of their own", cfg.Passes, cfg.MaxTokens, sweepSpan)
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	res := SweepResult{URL: cfg.URL, MaxTokens: cfg.MaxTokens}
	endpoint := strings.TrimSuffix(cfg.URL, "/") + "/v1/completions"
	for p := range cfg.Passes {
		ms := make([]float64, cfg.MaxTokens)
		start := time.Now()
		slow := SweepPoint{}
		for k := 1; k <= cfg.MaxTokens; k++ {
			d, err := sweepRequest(ctx, client, endpoint, &cfg, sweepPrompt(p, k, cfg.MaxTokens))
			if err != nil {
				return res, fmt.Errorf("pass %d, %d-token prompt: %w", p+1, k, err)
			}
			ms[k-1] = d
			if d > slow.Value {
				slow = SweepPoint{k, d}
			}
		}
		res.Millis = append(res.Millis, ms)
		res.Slowest = append(res.Slowest, slow)
		res.Total = append(res.Total, time.Since(start).Seconds())
	}
	if n := len(res.Millis); n > 1 {
		for k := range cfg.MaxTokens {
			if r := res.Millis[0][k] / res.Millis[n-1][k]; r > res.WorstRatio.Value {
				res.WorstRatio = SweepPoint{k + 1, r}
			}
		}
	}
	return res, nil
}

// sweepRequest sends one completion of max_tokens 1 and returns its wall
// time in milliseconds.
func sweepRequest(ctx context.Context, client *http.Client, endpoint string, cfg *SweepConfig, prompt []int) (float64, error) {
	body := map[string]any{"prompt": prompt, "max_tokens": 1, "temperature": 0}
	if cfg.Model != "" {
		body["model"] = cfg.Model
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	d := ms(time.Since(start))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST %s: HTTP %d: %s", req.URL.Path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(msg, &out); err != nil {
		return 0, fmt.Errorf("POST %s: %w", req.URL.Path, err)
	}
	if out.Usage.PromptTokens != len(prompt) {
		return 0, fmt.Errorf("POST %s: usage.prompt_tokens %d, sent %d", req.URL.Path, out.Usage.PromptTokens, len(prompt))
	}
	return d, nil
}

// writeSweep prints res for people.
func writeSweep(w io.Writer, res *SweepResult) {
	fmt.Fprintf(w, "%s: prompts of 1..%d tokens, max_tokens 1, one at a time, %d passes\n", res.URL, res.MaxTokens, len(res.Millis))
	for p, ms := range res.Millis {
		sum := 0.0
		for _, v := range ms {
			sum += v
		}
		fmt.Fprintf(w, "pass %d        %.1f s, mean %.1f ms, slowest %.1f ms (%d tokens)\n",
			p+1, res.Total[p], sum/float64(len(ms)), res.Slowest[p].Value, res.Slowest[p].Tokens)
	}
	if len(res.Millis) > 1 {
		k := res.WorstRatio.Tokens
		fmt.Fprintf(w, "worst ratio   %.2fx first pass over last at %d tokens (%.1f ms against %.1f ms)\n",
			res.WorstRatio.Value, k, res.Millis[0][k-1], res.Millis[len(res.Millis)-1][k-1])
	}
}
