//go:build stress

package api

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// TestStress runs the server under mixed load for VKLLM_STRESS_TIME (2m by
// default; `make test-race` runs it under the race detector): 12 clients
// under two API keys send completions, chats, streams, tool calls,
// grammars, schemas, embeddings and n/best_of requests, a fifth of them
// given up at a random moment, one client opens a stream and never reads
// it; every quarter of the time the server is shut down under that load
// and a new one serves the same model. Every answer must be a 200 (or a
// 503 of a full queue or a shutdown), every 200 free of errors, and after
// each shutdown the scheduler must hold no sequence.
func TestStress(t *testing.T) {
	total := 2 * time.Minute
	if v := os.Getenv("VKLLM_STRESS_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("VKLLM_STRESS_TIME=%q: %v", v, err)
		}
		total = d
	}
	b := batchBackend(t, 4, 512, engine.SchedulerConfig{PrefillChunk: 16})
	kinds := []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"stress one","max_tokens":8}`},
		{"/v1/completions", `{"prompt":"stress two","max_tokens":12,"stream":true,"logprobs":2}`},
		{"/v1/chat/completions", `{"messages":[{"role":"system","content":"shared system prompt of the stress clients"},{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"max_tokens":30,"tool_choice":"auto","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`},
		{"/v1/completions", `{"prompt":"grammar","max_tokens":8,"grammar":"root ::= [a-z]+"}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"json"}],"max_tokens":20,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}}`},
		{"/v1/embeddings", `{"input":["one","two","three"]}`},
		{"/v1/completions", `{"prompt":"candidates","max_tokens":6,"n":2,"best_of":3,"seed":5}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"several"}],"max_tokens":6,"n":3,"stream":true}`},
		{"/v1/completions", `{"prompt":"long one","max_tokens":120,"min_tokens":120,"stream":true}`},
		{"/tokenize", `{"content":"tokenize this"}`},
		{"/v1/completions", `{"prompt":"bad","max_tokens":-5}`}, // a 400, answered as such
	}
	keys := []string{"key-a", "key-b"}
	rounds := 4
	var served, cancelled, refused atomic.Int64
	for round := range rounds {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := NewServer(Config{Parallel: 4, QueueSize: 16, APIKey: strings.Join(keys, ","), WriteTimeout: time.Minute,
			CacheShare: "<|im_start|>system\nshared system prompt"})
		go s.Serve(ln)
		if err := s.Ready(b); err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		var stopping atomic.Bool
		stop := make(chan struct{})
		var wg sync.WaitGroup
		// The client that never reads its stream.
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			body := `{"prompt":"never read","max_tokens":400,"min_tokens":400,"stream":true}`
			fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer key-a\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			defer c.Close()
		}
		for w := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := kinds[rng.IntN(len(kinds))]
					ctx, cancel := context.WithCancel(context.Background())
					giveUp := rng.IntN(5) == 0
					if giveUp {
						time.AfterFunc(time.Duration(rng.IntN(100))*time.Millisecond, cancel)
					}
					req, _ := http.NewRequestWithContext(ctx, "POST", base+k.path, strings.NewReader(k.body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+keys[w%len(keys)])
					resp, err := http.DefaultClient.Do(req)
					var body []byte
					if err == nil {
						body, err = io.ReadAll(resp.Body)
						resp.Body.Close()
					}
					cancel()
					late := stopping.Load()
					switch {
					case err != nil && (giveUp || late):
						cancelled.Add(1)
					case err != nil:
						t.Errorf("round %d: %s %s: %v", round, k.path, k.body, err)
					case resp.StatusCode == 503:
						refused.Add(1)
					case strings.Contains(k.body, "-5"):
						if resp.StatusCode != 400 {
							t.Errorf("round %d: %s: status %d, want 400: %s", round, k.body, resp.StatusCode, body)
						}
					case resp.StatusCode != 200:
						t.Errorf("round %d: %s %s: status %d: %s", round, k.path, k.body, resp.StatusCode, body)
					case !late && !giveUp && strings.Contains(string(body), `"error"`):
						t.Errorf("round %d: %s %s: an error in a 200: %s", round, k.path, k.body, body)
					default:
						served.Add(1)
					}
					if late {
						return // the server is going: this client is done
					}
				}
			}()
		}
		time.Sleep(total / time.Duration(rounds))
		// Shut down under load, then let the clients see it.
		stopping.Store(true)
		ctx, cancelShutdown := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("round %d: Shutdown under load = %v", round, err)
		}
		cancelShutdown()
		close(stop)
		wg.Wait()
		waitFor(t, "every sequence to end after the shutdown", func() bool { st := b.Stats(); return st.Active == 0 && st.Queued == 0 })
	}
	t.Logf("%d answered, %d given up or cut by a shutdown, %d refused with 503", served.Load(), cancelled.Load(), refused.Load())
	if served.Load() == 0 {
		t.Errorf("no request was served")
	}
}
