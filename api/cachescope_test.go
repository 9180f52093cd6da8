package api

import (
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/engine"
)

// TestCacheScopePerKey: with several API keys, a prompt that key A left in
// the prefix cache is not reused by key B (its timings.cache_n stays 0, so
// B cannot probe A's prompts), except the public prefix --cache-share
// names; A itself still reuses all of it. (Each probe leaves its own
// prompt in its own key's scope, so each probe uses another key.)
func TestCacheScopePerKey(t *testing.T) {
	m := loadTinyModel(t)
	be := newTestBackend(t, m, engine.SchedulerConfig{})
	const share = "You are a helpful assistant who answers briefly and truthfully to every question asked. "
	ts := newReadyServer(t, be, Config{APIKey: "key-a, key-b,key-c", CacheShare: share})
	shareToks, err := be.Tokenize(share, true, true)
	if err != nil {
		t.Fatal(err)
	}
	complete := func(key, prompt string) genResult {
		t.Helper()
		r := ts.do("POST", "/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":2,"temperature":0}`, prompt), "Authorization", "Bearer "+key)
		if r.status != 200 {
			t.Fatalf("%s: status %d: %s", key, r.status, r.body)
		}
		return completionResult(t, r.body)
	}
	cacheN := func(g genResult) int { return int(g.timings["cache_n"].(float64)) }

	const secret = "the vault code is 7C4F-19A2-88D0 and the backup is QX-5521"
	a := complete("key-a", secret)
	if got := cacheN(complete("key-b", secret)); got != 0 {
		t.Errorf("key B probing key A's prompt: cache_n = %d, want 0", got)
	}
	if got := cacheN(complete("key-c", secret[:30])); got != 0 {
		t.Errorf("key C probing a prefix of key A's prompt: cache_n = %d, want 0", got)
	}
	if got := cacheN(complete("key-a", secret)); got != a.prompt-1 {
		t.Errorf("key A repeating its prompt: cache_n = %d, want %d", got, a.prompt-1)
	}

	// Behind the public prefix: B reuses the shared part, not A's rest.
	a = complete("key-a", share+secret)
	got := cacheN(complete("key-b", share+secret))
	if got == 0 || got > len(shareToks) {
		t.Errorf("key B behind the shared prefix: cache_n = %d, want 1..%d (the shared prefix's pages only)", got, len(shareToks))
	}
	if got := cacheN(complete("key-a", share+secret)); got != a.prompt-1 {
		t.Errorf("key A repeating its prompt behind the shared prefix: cache_n = %d, want %d", got, a.prompt-1)
	}
	// A wrong key is still refused.
	if r := ts.do("POST", "/v1/completions", `{"prompt":"x","max_tokens":1}`, "Authorization", "Bearer key-d"); r.status != 401 {
		t.Errorf("an unknown key: status %d, want 401", r.status)
	}
}
