package api

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// TestKVPoolTooSmall: with a KV pool smaller than --ctx-size, a prompt the
// pool cannot hold even alone is a 400 naming the pool's positions, and a
// prompt whose n candidates need more pages than the pool is a 400 naming
// the pages, both before anything runs; a prompt that fits is served.
func TestKVPoolTooSmall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	probe, err := engine.Load(path, engine.Config{CtxSize: 256, BatchSize: 64, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	o := probe.Opts
	probe.Close()
	// 4 pages of 16 positions: 64 positions, f16 keys and values.
	perPage := int64(16 * o.Layers * 2 * 2 * o.KVHeads * o.HeadDim)
	m, err := engine.Load(path, engine.Config{CtxSize: 256, BatchSize: 64, Parallel: 4, KVMemory: 4 * perPage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if kv := m.KV(); kv.Pages != 4 || kv.PageSize != 16 {
		t.Fatalf("pool of %d pages of %d, want 4 of 16", kv.Pages, kv.PageSize)
	}
	ts := newReadyServer(t, newTestBackend(t, m, engine.SchedulerConfig{}), Config{Parallel: 4, WriteTimeout: time.Minute})
	tokens := func(n int) string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprint(3 + i%50)
		}
		return "[" + strings.Join(ids, ",") + "]"
	}
	for _, c := range []struct {
		body   string
		status int
		want   []string
	}{
		{`{"prompt":` + tokens(70) + `,"max_tokens":1}`, 400, []string{"70 tokens", "context size is 64"}},
		{`{"prompt":` + tokens(40) + `,"max_tokens":1,"n":4}`, 400, []string{"needs 6 pages", "has 4"}},
		{`{"prompt":` + tokens(40) + `,"max_tokens":3,"n":2}`, 200, nil},
	} {
		r := ts.post("/v1/completions", c.body)
		if r.status != c.status {
			t.Errorf("%.60s...: status %d, want %d (%s)", c.body, r.status, c.status, r.body)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(string(r.body), w) {
				t.Errorf("%.60s...: %s, want it to say %q", c.body, r.body, w)
			}
		}
	}
}
