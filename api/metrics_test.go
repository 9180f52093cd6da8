package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkllm/vkllm/sampling/grammar"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// scrape reads /metrics (with the extra headers) and parses it with the
// Prometheus text parser.
func scrape(t *testing.T, ts *testServer, hdr ...string) map[string]*dto.MetricFamily {
	t.Helper()
	r := ts.do("GET", "/metrics", "", hdr...)
	if r.status != 200 {
		t.Fatalf("GET /metrics = %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /metrics Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, r.body)
	}
	return fams
}

// metricValue returns the value of the metric name whose labels include
// labels (name=value pairs): a counter's or gauge's value, or a histogram's
// sample count. ok is false when there is no such metric.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// metricDelta compares name between two scrapes (a missing metric counts 0).
func metricDelta(before, after map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	a, _ := metricValue(after, name, labels...)
	b, _ := metricValue(before, name, labels...)
	return a - b
}

// genResult is what a test needs of a completion or chat response.
type genResult struct {
	prompt, completion int
	finish             string
	timings            map[string]any
}

func completionResult(t *testing.T, body []byte) genResult {
	t.Helper()
	m := decodeBody(t, body)
	tm, _ := m["timings"].(map[string]any)
	return genResult{prompt: int(jsonPath(m, "usage", "prompt_tokens").(float64)), completion: int(jsonPath(m, "usage", "completion_tokens").(float64)),
		finish: jsonPath(m, "choices", 0, "finish_reason").(string), timings: tm}
}

// checkTimings checks a timings object against the request's usage and
// the reference server's formulas.
func checkTimings(t *testing.T, what string, tm map[string]any, prompt, completion, cached int) {
	t.Helper()
	if tm == nil {
		t.Errorf("%s: no timings", what)
		return
	}
	num := func(k string) float64 {
		v, ok := tm[k].(float64)
		if !ok {
			t.Errorf("%s: timings.%s = %v, want a number", what, k, tm[k])
		}
		return v
	}
	if got := num("prompt_n"); got != float64(prompt-cached) {
		t.Errorf("%s: timings.prompt_n = %v, want %d prompt tokens less %d cached", what, got, prompt, cached)
	}
	if got := num("cache_n"); got != float64(cached) {
		t.Errorf("%s: timings.cache_n = %v, want %d", what, got, cached)
	}
	if got := num("predicted_n"); got != float64(completion) {
		t.Errorf("%s: timings.predicted_n = %v, want usage.completion_tokens %d", what, got, completion)
	}
	pms, gms := num("prompt_ms"), num("predicted_ms")
	if pms <= 0 || gms < 0 {
		t.Errorf("%s: prompt_ms %v, predicted_ms %v; want > 0 and >= 0", what, pms, gms)
	}
	near := func(k string, want float64) {
		if got := num(k); math.Abs(got-want) > 1e-6*math.Max(1, want) {
			t.Errorf("%s: timings.%s = %v, want %v", what, k, got, want)
		}
	}
	near("prompt_per_second", num("prompt_n")*1000/pms)
	near("prompt_per_token_ms", pms/num("prompt_n"))
	if gms > 0 {
		near("predicted_per_second", num("predicted_n")*1000/gms)
		near("predicted_per_token_ms", gms/num("predicted_n"))
	}
}

// TestMetricsAndTimings runs real requests on a generated model and checks
// that /metrics moved by what the responses report, and that each response's
// timings agree with its usage.
func TestMetricsAndTimings(t *testing.T) {
	m := loadTinyModel(t)
	be := newTestBackend(t, m, engine.SchedulerConfig{})
	ts := newReadyServer(t, be, Config{Version: "test-1"})
	before := scrape(t, ts)
	if v, _ := metricValue(before, "vkllm_model_ready"); v != 1 {
		t.Errorf("vkllm_model_ready = %v, want 1", v)
	}
	for name, want := range map[string]float64{"vkllm_kv_cache_slots": 1, "vkllm_kv_cache_capacity_tokens": 512,
		"vkllm_context_size_tokens": 512, "vkllm_queue_depth": 0, "vkllm_sequences_running": 0} {
		if v, ok := metricValue(before, name); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}

	// A completion, the same again (its prompt comes from the cache), and
	// a streamed chat.
	const body = `{"prompt":"the quick brown fox","max_tokens":6,"temperature":0}`
	first := completionResult(t, ts.post("/v1/completions", body).body)
	checkTimings(t, "first completion", first.timings, first.prompt, first.completion, 0)
	second := completionResult(t, ts.post("/v1/completions", body).body)
	// A repeated prompt reuses all but its last token (fed again for its logits).
	checkTimings(t, "repeated completion", second.timings, second.prompt, second.completion, second.prompt-1)
	r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0,"stream":true}`)
	chat := genResult{}
	events := parseSSE(t, r.body)
	for i, ev := range events {
		if ev.data == "[DONE]" {
			continue
		}
		c := decodeBody(t, []byte(ev.data))
		tm, has := c["timings"].(map[string]any)
		final := i == len(events)-2
		if has != final {
			t.Errorf("chat chunk %d of %d has timings %v, want them on the final chunk only", i, len(events), has)
		}
		if has {
			chat.timings = tm
		}
		if d, ok := jsonPath(c, "choices", 0, "delta", "content").(string); ok && d != "" {
			chat.completion++ // the tiny model's tokens are single bytes: one chunk each
		}
	}
	if r := ts.post("/v1/completions", `{"prompt":"x","bogus":1}`); r.status != 400 {
		t.Errorf("a request with an unknown field = %d, want 400", r.status)
	}

	after := scrape(t, ts)
	prompts := first.prompt + second.prompt + int(chat.timings["prompt_n"].(float64)+chat.timings["cache_n"].(float64))
	generated := first.completion + second.completion + int(chat.timings["predicted_n"].(float64))
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vkllm_requests_total", []string{"route", "completions", "status", "200"}, 2},
		{"vkllm_requests_total", []string{"route", "completions", "status", "400"}, 1},
		{"vkllm_requests_total", []string{"route", "chat", "status", "200"}, 1},
		{"vkllm_request_duration_seconds", []string{"route", "chat"}, 1},
		{"vkllm_prompt_tokens_total", nil, float64(prompts)},
		{"vkllm_generation_tokens_total", nil, float64(generated)},
		{"vkllm_time_to_first_token_seconds", nil, 3},
		{"vkllm_prompt_processing_seconds", nil, 3},
		// Every token but each sequence's first follows another.
		{"vkllm_inter_token_latency_seconds", nil, float64(generated - 3)},
		{"vkllm_prompt_cache_reused_tokens_total", nil, float64(second.prompt - 1 + int(chat.timings["cache_n"].(float64)))},
		// Every request is greedy: each token is the device's argmax, and
		// only its id (4 bytes) comes back.
		{"vkllm_gpu_argmax_tokens_total", nil, float64(generated)},
		{"vkllm_gpu_topk_tokens_total", nil, 0},
		{"vkllm_readback_bytes_total", nil, float64(4 * generated)},
	} {
		if _, ok := metricValue(after, c.name, c.labels...); !ok {
			t.Errorf("%s%v is not exported", c.name, c.labels)
		}
		if got := metricDelta(before, after, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Every forward pass is timed, and its rows add up to the tokens fed.
	steps := metricDelta(before, after, "vkllm_steps_total")
	if got := metricDelta(before, after, "vkllm_step_duration_seconds"); got != steps || steps == 0 {
		t.Errorf("vkllm_step_duration_seconds counted %v passes, vkllm_steps_total %v; want equal and > 0", got, steps)
	}
	reused := metricDelta(before, after, "vkllm_prompt_cache_reused_tokens_total")
	if got, want := metricDelta(before, after, "vkllm_step_rows_total", "kind", "prompt"), float64(prompts)-reused; got != want {
		t.Errorf("prompt rows moved by %v, want %v prompt tokens less %v reused", got, want, reused)
	}
	// The prefix cache holds the chat's prompt and the tokens fed after it
	// (all generated ones but the last when it ran out of max_tokens), and
	// the first completion's (the second's are the same tokens: its pages
	// were not cached twice).
	held := int(chat.timings["prompt_n"].(float64)+chat.timings["cache_n"].(float64)) + chat.completion
	if chat.completion == 5 {
		held--
	}
	held += first.prompt + first.completion
	if first.completion == 6 {
		held--
	}
	if got, _ := metricValue(after, "vkllm_kv_cache_used_tokens"); got != float64(held) {
		t.Errorf("vkllm_kv_cache_used_tokens = %v, want %d", got, held)
	}
	if got, _ := metricValue(after, "vkllm_kv_cache_usage_ratio"); math.Abs(got-float64(held)/512) > 1e-9 {
		t.Errorf("vkllm_kv_cache_usage_ratio = %v, want %v", got, float64(held)/512)
	}
	if _, ok := metricValue(after, "go_goroutines"); !ok {
		t.Error("no Go runtime metrics")
	}
}

// TestMetricsWhileLoading: /metrics answers while the model loads, with
// its progress, and wants the API key when one is set.
func TestMetricsWhileLoading(t *testing.T) {
	ts := startServer(t, Config{APIKey: "k"})
	ts.s.SetProgress(0.25)
	if r := ts.do("GET", "/metrics", ""); r.status != 401 {
		t.Errorf("GET /metrics without the key = %d, want 401", r.status)
	}
	fams := scrape(t, ts, "Authorization", "Bearer k")
	if v, _ := metricValue(fams, "vkllm_model_ready"); v != 0 {
		t.Errorf("vkllm_model_ready while loading = %v, want 0", v)
	}
	if v, _ := metricValue(fams, "vkllm_model_load_progress_ratio"); v != 0.25 {
		t.Errorf("vkllm_model_load_progress_ratio = %v, want 0.25", v)
	}
	if v, _ := metricValue(fams, "vkllm_requests_total", "route", "metrics", "status", "401"); v != 1 {
		t.Errorf("the refused scrape counted %v times, want 1", v)
	}
	// Readiness probes see 503 until Ready.
	if r := ts.do("GET", "/health", ""); r.status != 503 {
		t.Errorf("GET /health while loading = %d, want 503", r.status)
	}
	for _, p := range []string{"/props", "/slots"} {
		if r := ts.do("GET", p, "", "Authorization", "Bearer k"); r.status != 503 {
			t.Errorf("GET %s while loading = %d, want 503", p, r.status)
		}
	}
}

// TestPropsAndSlots checks /props against the loaded model and /slots
// against a generation held in its slot: a sequence whose consumer stops
// reading keeps decoding until its event buffer (1024) is full and then
// waits there, so the state seen is exact, not a matter of timing. A
// second request then takes its slot, the held one parked.
func TestPropsAndSlots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(path, engine.Config{CtxSize: 1200, BatchSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	be := newTestBackend(t, m, engine.SchedulerConfig{})
	ts := newReadyServer(t, be, Config{APIKey: "k", Version: "9.9", ModelPath: path})
	auth := []string{"Authorization", "Bearer k"}

	if r := ts.do("GET", "/props", ""); r.status != 401 {
		t.Errorf("GET /props without the key = %d, want 401", r.status)
	}
	if r := ts.do("GET", "/slots", ""); r.status != 401 {
		t.Errorf("GET /slots without the key = %d, want 401", r.status)
	}
	r := ts.do("GET", "/props", "", auth...)
	p := decodeBody(t, r.body)
	want := map[string]any{"model": "tiny", "model_path": filepath.Base(path), "architecture": "llama", "n_ctx": 1200.0,
		"n_ctx_train": float64(m.Opts.CtxTrain), "n_vocab": float64(m.Opts.Vocab), "n_embd": 64.0, "n_layer": 1.0,
		"total_slots": 1.0, "build_info": "vkllm 9.9", "size": float64(m.File.Size), "chat_template": m.Tok.ChatTemplate()}
	if m.Tok.ChatTemplate() == "" {
		t.Fatal("the generated model has no chat template; the test wants one")
	}
	want["chat_template_name"] = "jinja" // the model's own, by default
	for k, v := range want {
		if p[k] != v {
			t.Errorf("/props %s = %v, want %v", k, p[k], v)
		}
	}
	if got := jsonPath(p, "device", "name"); got != m.Device().Info().Name {
		t.Errorf("/props device.name = %v, want %q", got, m.Device().Info().Name)
	}
	if got := jsonPath(p, "default_generation_settings", "n_ctx"); got != 1200.0 {
		t.Errorf("/props default_generation_settings.n_ctx = %v, want 1200", got)
	}
	var params float64
	for i := range m.File.Tensors {
		params += float64(m.File.Tensors[i].NumElements())
	}
	if p["n_params"] != params {
		t.Errorf("/props n_params = %v, want %v", p["n_params"], params)
	}

	// A generation that cannot end before its buffer fills: EOG banned.
	prompts, stop := holdCompletion(t, ts, m, "hello", 1150)
	// Wait (bounded by the test timeout) until it has run past 1024
	// tokens: the consumer took the first few events (until one released
	// text), so from then on the sequence stays in its slot, decoding or
	// parked, with at least 1150-1030 tokens left.
	var slot map[string]any
	for {
		var slots []map[string]any
		if err := json.Unmarshal(ts.do("GET", "/slots", "", auth...).body, &slots); err != nil || len(slots) != 1 {
			t.Fatalf("GET /slots = %v (%v), want one slot", slots, err)
		}
		slot = slots[0]
		if n, _ := jsonPath(slot, "next_token", "n_decoded").(float64); n >= 1024 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := len(prompts[0].tokens)
	decoded := int(jsonPath(slot, "next_token", "n_decoded").(float64))
	for k, v := range map[string]any{"id": 0.0, "n_ctx": 1200.0, "is_processing": true, "state": "decoding", "id_task": "cmpl-held",
		"n_prompt_tokens": float64(n), "n_prompt_tokens_processed": float64(n), "n_prompt_tokens_cache": 0.0,
		// Every generated token but the newest has been fed.
		"n_cached": float64(n + decoded - 1)} {
		if slot[k] != v {
			t.Errorf("/slots[0].%s = %v, want %v", k, slot[k], v)
		}
	}
	if got := jsonPath(slot, "next_token", "n_remain"); got != float64(1150-decoded) {
		t.Errorf("/slots[0].next_token.n_remain = %v, want %d", got, 1150-decoded)
	}
	// A second request takes the only slot: the held sequence, whose
	// consumer is behind, is parked (it gives its slot up and waits in the
	// queue until its consumer reads again), so the request completes while
	// the held one still waits.
	if r := ts.do("POST", "/v1/completions", `{"prompt":"hi","max_tokens":2}`, auth...); r.status != 200 {
		t.Fatalf("the second request = %d %s, want 200 (the held sequence parked)", r.status, r.body)
	}
	fams := scrape(t, ts, auth...)
	for name, want := range map[string]float64{"vkllm_parked_total": 1, "vkllm_queue_depth": 1, "vkllm_sequences_running": 0, "vkllm_sequences_decoding": 0} {
		if v, _ := metricValue(fams, name); v != want {
			t.Errorf("%s = %v with the held sequence parked, want %v", name, v, want)
		}
	}
	stop()
	var slots []map[string]any
	json.Unmarshal(ts.do("GET", "/slots", "", auth...).body, &slots)
	if len(slots) != 1 || slots[0]["state"] != "idle" || slots[0]["is_processing"] != false || slots[0]["id_task"] != "" {
		t.Errorf("/slots after the requests = %v, want one idle slot", slots)
	}
}

// holdCompletion starts a greedy completion of prompt with every
// end-of-generation token banned, whose consumer stops reading at its
// first piece of text: the sequence stays in its slot (decoding until its
// event buffer is full, then waiting) until stop, which cancels it and
// checks that it ended with the context's error.
func holdCompletion(t *testing.T, ts *testServer, m *engine.Model, prompt string, maxTokens int) (prompts []preparedPrompt, stop func()) {
	t.Helper()
	var bias []string
	for _, id := range m.Tok.EOGIDs() {
		bias = append(bias, fmt.Sprintf("%q:-1000", fmt.Sprint(id)))
	}
	req, e := decodeCompletion(grammar.Budget{}, []byte(fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0,"logit_bias":{%s}}`,
		prompt, maxTokens, strings.Join(bias, ","))))
	if e != nil {
		t.Fatal(e)
	}
	prompts, e = ts.s.prepareCompletion(req)
	if e != nil {
		t.Fatal(e)
	}
	gctx, cancel := context.WithCancel(withReqStats(context.Background(), "cmpl-held"))
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		specs := ts.s.candidateSpecs(1, genSpec{prompt: prompts[0].tokens, g: req.genRequest})
		_, err := ts.s.generateAll(gctx, specs, func(int, []byte, []tokenLogprob) error {
			<-release // the consumer stops at the first piece of text
			return nil
		})
		done <- err
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			close(release)
			if err := <-done; err == nil {
				t.Error("the held generation ended without its context's error")
			}
		})
	}
	t.Cleanup(stop)
	return prompts, stop
}

// TestTimingsPlacement: streams carry timings on their last chunk only
// (the usage chunk when asked for), non-streamed bodies at the top level,
// for completions and chat alike.
func TestTimingsPlacement(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"hi","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/completions", `{"prompt":"hi","max_tokens":4,"n":2,"stream":true}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}`},
	} {
		events := parseSSE(t, ts.post(c.path, c.body).body)
		if len(events) < 3 || events[len(events)-1].data != "[DONE]" {
			t.Fatalf("%s %s: stream %v does not end with [DONE]", c.path, c.body, events)
		}
		generated := 0
		for i, ev := range events[:len(events)-1] {
			m := decodeBody(t, []byte(ev.data))
			_, has := m["timings"]
			if last := i == len(events)-2; has != last {
				t.Errorf("%s %s: chunk %d has timings %v, want them on the last chunk only", c.path, c.body, i, has)
			}
			for _, ch := range m["choices"].([]any) {
				if s, _ := jsonPath(ch, "text").(string); s != "" {
					generated += len(s) // the fake's tokens are single bytes
				}
				if s, _ := jsonPath(ch, "delta", "content").(string); s != "" {
					generated += len(s)
				}
			}
			if has {
				if got := jsonPath(m, "timings", "predicted_n"); got != float64(generated) {
					t.Errorf("%s %s: timings.predicted_n = %v, want the %d tokens streamed", c.path, c.body, got, generated)
				}
			}
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"hi","max_tokens":4}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`},
	} {
		m := decodeBody(t, ts.post(c.path, c.body).body)
		if got, want := jsonPath(m, "timings", "predicted_n"), jsonPath(m, "usage", "completion_tokens"); got != want || got == nil {
			t.Errorf("%s: timings.predicted_n = %v, want usage.completion_tokens %v", c.path, got, want)
		}
		if got, want := jsonPath(m, "timings", "prompt_n"), jsonPath(m, "usage", "prompt_tokens"); got != want {
			t.Errorf("%s: timings.prompt_n = %v, want usage.prompt_tokens %v (the fake caches nothing)", c.path, got, want)
		}
	}
}

// TestHybridMetrics checks the recurrent-state gauges of a hybrid model
// (qwen35): the memory of the slots' and the checkpoints' states, computed
// here from the generated shape, and the checkpoints a long prompt fills.
func TestHybridMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hybrid.gguf")
	// Two layers: one recurrent (2 key and 4 value heads of 16, 4 taps),
	// one full attention.
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "qwen35", Embd: 64, Layers: 2, Heads: 4, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(path, engine.Config{CtxSize: 256, Parallel: 2, BatchSize: 64, Checkpoints: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// A small event buffer: a sequence whose consumer stops reading stays
	// in its slot after a few tokens.
	ts := newReadyServer(t, newTestBackend(t, m, engine.SchedulerConfig{EventBuffer: 4}), Config{})
	const conv, ssm = 3 * (2*2 + 4) * 16 * 4, 4 * 16 * 16 * 4 // bytes: (taps-1) x channels, value heads x 16 x 16, f32
	fams := scrape(t, ts)
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{{"vkllm_recurrent_state_bytes", "for", "slots", 2 * (conv + ssm)}, {"vkllm_recurrent_state_bytes", "for", "checkpoints", 3 * (conv + ssm)},
		{"vkllm_recurrent_checkpoints", "state", "used", 0}, {"vkllm_recurrent_checkpoints", "state", "free", 3}} {
		if v, ok := metricValue(fams, c.name, c.label, c.value); !ok || v != c.want {
			t.Errorf("%s{%s=%q} = %v (%v), want %v", c.name, c.label, c.value, v, ok, c.want)
		}
	}
	// A prompt of some 150 tokens leaves checkpoints at 64 and 128.
	text := strings.Repeat("a b c d e f ", 25)
	if r := ts.post("/v1/completions", `{"prompt":"`+text+`","max_tokens":1}`); r.status != 200 {
		t.Fatalf("completion = %d %s", r.status, r.body)
	}
	if v, _ := metricValue(scrape(t, ts), "vkllm_recurrent_checkpoints", "state", "used"); v != 2 {
		t.Errorf("checkpoints used after a prompt of about 150 tokens: %v, want 2", v)
	}
	// /slots shows each slot's recurrent state, of its fixed size: none in
	// a free slot, and in the slot of a sequence held there (its consumer
	// stops reading) every position it has fed. The held prompt is the
	// same: it starts from the checkpoint at 128.
	prompts, _ := holdCompletion(t, ts, m, text, 60)
	n := len(prompts[0].tokens)
	for {
		var slots []map[string]any
		if err := json.Unmarshal(ts.do("GET", "/slots", "").body, &slots); err != nil || len(slots) != 2 {
			t.Fatalf("/slots = %v (%v), want 2 slots", slots, err)
		}
		var held, free map[string]any
		for _, sl := range slots {
			if b := jsonPath(sl, "recurrent", "bytes"); b != float64(conv+ssm) {
				t.Fatalf("/slots[%v].recurrent.bytes = %v, want %d", sl["id"], b, conv+ssm)
			}
			if sl["state"] == "decoding" {
				held = sl
			} else {
				free = sl
			}
		}
		if held == nil || jsonPath(held, "next_token", "n_decoded").(float64) < 2 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		// Every generated token but the newest has been fed.
		want := float64(n) + jsonPath(held, "next_token", "n_decoded").(float64) - 1
		if got := jsonPath(held, "recurrent", "n_pos"); got != want || held["n_cached"] != want {
			t.Errorf("held slot: recurrent.n_pos %v, n_cached %v, want both %v", got, held["n_cached"], want)
		}
		if held["n_prompt_tokens_cache"] != 128.0 {
			t.Errorf("held slot: n_prompt_tokens_cache %v, want 128 (the checkpoint)", held["n_prompt_tokens_cache"])
		}
		if got := jsonPath(free, "recurrent", "n_pos"); got != 0.0 {
			t.Errorf("free slot: recurrent.n_pos %v, want 0", got)
		}
		break
	}
}
