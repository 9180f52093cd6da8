package api

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// gieSeries pairs each vkllm series with the vLLM-named one the Gateway API
// Inference Extension's endpoint picker reads by default.
var gieSeries = [][2]string{
	{"vkllm_queue_depth", "vllm:num_requests_waiting"},
	{"vkllm_sequences_running", "vllm:num_requests_running"},
	{"vkllm_kv_cache_utilization_ratio", "vllm:kv_cache_usage_perc"},
	{"vkllm_kv_cache_utilization_ratio", "vllm:gpu_cache_usage_perc"},
}

// checkGIE checks one scrape against the model-server protocol: the four
// series are gauges, each vLLM name equals its vkllm series, the queue and
// running counts are the want values, and the utilization is the share of
// the pool's pages held by running sequences (vkllm_kv_pages{state=used}
// over all pages) in [0, 1]. It returns the utilization.
func checkGIE(t *testing.T, what string, fams map[string]*dto.MetricFamily, waiting, running float64) float64 {
	t.Helper()
	for _, p := range gieSeries {
		for _, name := range p {
			if f := fams[name]; f == nil || f.GetType() != dto.MetricType_GAUGE || len(f.Metric) != 1 {
				t.Fatalf("%s: %s is %v, want one gauge", what, name, f)
			}
		}
		a, _ := metricValue(fams, p[0])
		b, _ := metricValue(fams, p[1])
		if a != b {
			t.Errorf("%s: %s = %v but %s = %v, want equal", what, p[1], b, p[0], a)
		}
	}
	if v, _ := metricValue(fams, "vllm:num_requests_waiting"); v != waiting {
		t.Errorf("%s: waiting = %v, want %v", what, v, waiting)
	}
	if v, _ := metricValue(fams, "vllm:num_requests_running"); v != running {
		t.Errorf("%s: running = %v, want %v", what, v, running)
	}
	util, _ := metricValue(fams, "vllm:kv_cache_usage_perc")
	if util < 0 || util > 1 {
		t.Errorf("%s: KV-cache utilization %v outside [0, 1]", what, util)
	}
	if _, ok := metricValue(fams, "vkllm_kv_pages", "state", "used"); ok {
		used, _ := metricValue(fams, "vkllm_kv_pages", "state", "used")
		cached, _ := metricValue(fams, "vkllm_kv_pages", "state", "cached")
		free, _ := metricValue(fams, "vkllm_kv_pages", "state", "free")
		if want := used / (used + cached + free); util != want {
			t.Errorf("%s: KV-cache utilization %v, want used pages / all pages = %v/%v", what, util, used, used+cached+free)
		}
	}
	return util
}

// TestInferenceExtensionMetrics checks the series the Gateway API
// Inference Extension's endpoint picker scrapes, with the Prometheus text
// parser: while loading (zeros), idle, with one sequence held in the only
// slot and a second request waiting, and idle again with the prefix cache
// holding pages (which count as free). The KV block size and count are
// labels of an info gauge that match the page pool.
func TestInferenceExtensionMetrics(t *testing.T) {
	loading := startServer(t, Config{})
	checkGIE(t, "loading", scrape(t, loading), 0, 0)

	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(path, engine.Config{CtxSize: 1200, BatchSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ts := newReadyServer(t, newTestBackend(t, m, engine.SchedulerConfig{}), Config{})

	idle := scrape(t, ts)
	if u := checkGIE(t, "idle", idle, 0, 0); u != 0 {
		t.Errorf("idle: KV-cache utilization %v, want 0", u)
	}
	kv := m.GPU.Config()
	for _, name := range []string{"vllm:cache_config_info", "vkllm_kv_cache_config_info"} {
		f := idle[name]
		if f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 1 {
			t.Fatalf("%s = %v, want one gauge of value 1", name, f)
		}
		labels := map[string]string{}
		for _, lp := range f.Metric[0].Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["block_size"] != strconv.Itoa(kv.PageSize) || labels["num_gpu_blocks"] != strconv.Itoa(kv.Pages) {
			t.Errorf("%s labels %v, want block_size %d and num_gpu_blocks %d", name, labels, kv.PageSize, kv.Pages)
		}
	}

	// A generation that cannot end (EOG banned, 1150 tokens) whose
	// consumer stops at its first text: it keeps the only slot.
	_, stop := holdCompletion(t, ts, m, "hello", 1150)
	queued := make(chan response, 1)
	go func() { queued <- ts.do("POST", "/v1/completions", `{"prompt":"hi","max_tokens":2}`) }()
	for {
		fams := scrape(t, ts)
		if v, _ := metricValue(fams, "vllm:num_requests_waiting"); v == 1 {
			if u := checkGIE(t, "busy", fams, 1, 1); u <= 0 {
				t.Errorf("busy: KV-cache utilization %v with a sequence holding pages, want > 0", u)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if r := <-queued; r.status != 200 {
		t.Fatalf("the queued request = %d %s", r.status, r.body)
	}
	after := scrape(t, ts)
	if u := checkGIE(t, "idle again", after, 0, 0); u != 0 {
		t.Errorf("idle again: KV-cache utilization %v, want 0: the prefix cache's pages are free to take", u)
	}
	if held, _ := metricValue(after, "vkllm_kv_cache_usage_ratio"); held <= 0 {
		t.Errorf("vkllm_kv_cache_usage_ratio = %v after two generations, want the prefix cache's positions counted", held)
	}
}
