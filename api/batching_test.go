package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// batchServer serves a tiny generated llama with slots KV-cache slots of
// ctx positions through the scheduler.
func batchServer(t *testing.T, slots, ctx int, cfg engine.SchedulerConfig) (*testServer, *EngineBackend) {
	t.Helper()
	b := batchBackend(t, slots, ctx, cfg)
	return newReadyServer(t, b, Config{Parallel: slots, WriteTimeout: 10 * time.Minute}), b
}

// batchBackend is batchServer's backend.
func batchBackend(t *testing.T, slots, ctx int, cfg engine.SchedulerConfig) *EngineBackend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(path, engine.Config{CtxSize: ctx, BatchSize: 64, Parallel: slots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return newTestBackend(t, m, cfg)
}

// smallSendListener gives each accepted connection a small send buffer,
// so that a client that stops reading blocks the server's writes after a
// few KiB instead of the megabytes the kernel would otherwise buffer.
type smallSendListener struct{ net.Listener }

func (l smallSendListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// waitFor polls cond until it holds, failing after a minute (a bound for
// a broken server, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// completionText returns the text and token logprobs of a completion body.
func completionText(t *testing.T, body []byte) (string, []float64) {
	t.Helper()
	m := decodeBody(t, body)
	text, ok := jsonPath(m, "choices", 0, "text").(string)
	if !ok {
		t.Fatalf("no choices[0].text in %s", body)
	}
	var lps []float64
	if lp, ok := jsonPath(m, "choices", 0, "logprobs").(map[string]any); ok {
		for _, v := range lp["token_logprobs"].([]any) {
			lps = append(lps, v.(float64))
		}
	}
	return text, lps
}

// TestBatchedRequestsMatchAlone sends 16 greedy completions at once and
// checks each against the same request sent alone: same text, logprobs
// within the rounding of another batch width.
func TestBatchedRequestsMatchAlone(t *testing.T) {
	ts, b := batchServer(t, 16, 256, engine.SchedulerConfig{PrefillChunk: 16})
	const n = 16
	bodies := make([]string, n)
	want := make([]string, n)
	wantLP := make([][]float64, n)
	for i := range bodies {
		prompt := strings.Repeat(fmt.Sprintf("word%d ", i), 1+i)
		bodies[i] = fmt.Sprintf(`{"prompt":%q,"max_tokens":16,"temperature":0,"logprobs":1}`, prompt)
		r := ts.post("/v1/completions", bodies[i])
		if r.status != 200 {
			t.Fatalf("alone: %d %s", r.status, r.body)
		}
		want[i], wantLP[i] = completionText(t, r.body)
	}
	stepsBefore := b.Stats().Steps
	got := make([]response, n)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = ts.post("/v1/completions", bodies[i]) }()
	}
	wg.Wait()
	for i, r := range got {
		if r.status != 200 {
			t.Fatalf("request %d among 16: %d %s", i, r.status, r.body)
		}
		text, lps := completionText(t, r.body)
		if text != want[i] || len(lps) != len(wantLP[i]) {
			t.Errorf("request %d among 16: %q (%d tokens), alone %q (%d tokens)", i, text, len(lps), want[i], len(wantLP[i]))
			continue
		}
		for k := range lps {
			if d := math.Abs(lps[k] - wantLP[i][k]); d > 2e-3 {
				t.Errorf("request %d token %d: logprob %v among 16, %v alone", i, k, lps[k], wantLP[i][k])
			}
		}
	}
	if steps := b.Stats().Steps - stepsBefore; steps >= n*16 {
		t.Errorf("16 concurrent requests of 16 tokens took %d steps: they did not share them", steps)
	}
}

// TestCandidatesTogether: n=3 with a seed gives the three texts that three
// requests with n=1 and seeds seed, seed+1, seed+2 give, and the prompt is
// fed once.
func TestCandidatesTogether(t *testing.T) {
	ts, b := batchServer(t, 4, 256, engine.SchedulerConfig{})
	const prompt = "the quick brown fox jumps over"
	var want []string
	for i := range 3 {
		r := ts.post("/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":12,"temperature":1,"seed":%d}`, prompt, 40+i))
		text, _ := completionText(t, r.body)
		want = append(want, text)
	}
	// Fill every slot with something else, so the prompt is not cached.
	for i := range 4 {
		ts.post("/v1/completions", fmt.Sprintf(`{"prompt":"zz %d yy","max_tokens":2}`, i))
	}
	before := b.Stats()
	r := ts.post("/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":12,"temperature":1,"seed":40,"n":3}`, prompt))
	after := b.Stats()
	choices := jsonPath(decodeBody(t, r.body), "choices").([]any)
	if len(choices) != 3 {
		t.Fatalf("n=3: %s", r.body)
	}
	for i, c := range choices {
		if got := jsonPath(c, "text"); got != want[i] {
			t.Errorf("choice %d = %q, want %q (the same seed alone)", i, got, want[i])
		}
	}
	toks, _ := b.Tokenize(prompt, true, true)
	fed, reused := after.PrefillRows-before.PrefillRows, after.ReusedTokens-before.ReusedTokens
	if fed+reused != int64(3*len(toks)) || fed > int64(len(toks)+2) {
		t.Errorf("n=3 fed %d prompt rows and reused %d, want at most %d fed (the prompt once and its last token for each other candidate) of %d",
			fed, reused, len(toks)+2, 3*len(toks))
	}
}

// openStream sends a streamed completion on a raw connection with a small
// receive buffer and returns the connection unread.
func openRawStream(t *testing.T, ts *testServer, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return c
}

// TestStalledReader: a client that opens a long stream and never reads
// does not hold up the others, which finish with the text they get alone;
// closing it frees its slot.
func TestStalledReader(t *testing.T) {
	ts, b := batchServer(t, 4, 2048, engine.SchedulerConfig{})
	const body = `{"prompt":"a b c","max_tokens":12,"temperature":0}`
	alone, _ := completionText(t, ts.post("/v1/completions", body).body)
	// Big chunks (20 alternatives each) fill the socket buffers quickly.
	stalled := openRawStream(t, ts, `{"prompt":"stall","max_tokens":1900,"min_tokens":1900,"stream":true,"logprobs":20}`)
	defer stalled.Close()
	waitFor(t, "the stalled stream to run", func() bool { return b.Stats().Active == 1 })
	waitFor(t, "the stalled stream to fill the socket's buffers", func() bool { return b.Stats().DecodeRows > 400 })
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := ts.post("/v1/completions", body)
			if text, _ := completionText(t, r.body); text != alone {
				t.Errorf("request %d beside a stalled reader: %q, want %q", i, text, alone)
			}
		}()
	}
	wg.Wait()
	// The stalled stream was not cut off: it still reads as a stream.
	head := make([]byte, 64)
	if _, err := io.ReadFull(stalled, head); err != nil || !strings.HasPrefix(string(head), "HTTP/1.1 200") {
		t.Errorf("the stalled stream: %q, %v", head, err)
	}
	stalled.Close()
	waitFor(t, "the stalled stream's slot to be freed", func() bool { return b.Stats().Active == 0 })
}

// postWithin posts body to path and returns the response, failing the
// test when none came within a minute (a bound for a hung server, not a
// timing assertion).
func postWithin(t *testing.T, ts *testServer, path, body string) response {
	t.Helper()
	done := make(chan response, 1)
	go func() { done <- ts.post(path, body) }()
	select {
	case r := <-done:
		return r
	case <-time.After(time.Minute):
		t.Fatalf("POST %s %s: no answer after a minute", path, body)
		return response{}
	}
}

// TestStalledCandidates: a client that asks for as many candidates as
// there are slots and never reads does not hold up the others, which
// finish with the text they get alone; once it reads, each of its
// candidates has generated every token, in order, none lost or repeated
// while it gave its slot up.
func TestStalledCandidates(t *testing.T) {
	const maxTokens = 400
	b := batchBackend(t, 4, 1024, engine.SchedulerConfig{EventBuffer: 16})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(Config{Parallel: 4, WriteTimeout: 10 * time.Minute})
	go srv.Serve(smallSendListener{ln})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	if err := srv.Ready(b); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, s: srv, base: "http://" + ln.Addr().String()}
	const body = `{"prompt":"a b c","max_tokens":12,"temperature":0}`
	alone, _ := completionText(t, ts.post("/v1/completions", body).body)
	// Big chunks (20 alternatives each) fill the socket buffers quickly.
	stalled := openRawStream(t, ts, fmt.Sprintf(`{"prompt":"stall","n":4,"max_tokens":%d,"min_tokens":%d,"stream":true,"logprobs":20}`, maxTokens, maxTokens))
	defer stalled.Close()
	waitFor(t, "the stalled candidates to run", func() bool { return b.Stats().Active == 4 })
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := postWithin(t, ts, "/v1/completions", body)
			if text, _ := completionText(t, r.body); text != alone {
				t.Errorf("request %d beside stalled candidates: %q, want %q", i, text, alone)
			}
		}()
	}
	wg.Wait()
	if st := b.Stats(); st.Parked == 0 {
		t.Errorf("Stats = %+v: nothing parked, yet the others ran", st)
	}
	if m := ts.do("GET", "/metrics", ""); !regexp.MustCompile(`(?m)^vkllm_parked_total [1-9]`).Match(m.body) {
		t.Errorf("/metrics has no positive vkllm_parked_total:\n%s", m.body)
	}
	resp, err := http.ReadResponse(bufio.NewReader(stalled), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the stalled stream: %v, %v", resp, err)
	}
	all, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the stalled stream: %v", err)
	}
	tokens := make([]int, 4)
	finished := make([]string, 4)
	events := parseSSE(t, all)
	for _, ev := range events[:len(events)-1] {
		var c struct {
			Choices []struct {
				Index        int     `json:"index"`
				FinishReason *string `json:"finish_reason"`
				Logprobs     struct {
					Tokens []string `json:"tokens"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil || len(c.Choices) != 1 || c.Choices[0].Index > 3 {
			t.Fatalf("stalled stream event %q: %v", ev.data, err)
		}
		ch := c.Choices[0]
		if finished[ch.Index] != "" {
			t.Fatalf("stalled stream: candidate %d has an event after its finish: %s", ch.Index, ev.data)
		}
		tokens[ch.Index] += len(ch.Logprobs.Tokens)
		if ch.FinishReason != nil {
			finished[ch.Index] = *ch.FinishReason
		}
	}
	if last := events[len(events)-1].data; last != "[DONE]" {
		t.Errorf("the stalled stream ends with %q, want [DONE]", last)
	}
	for i := range 4 {
		if tokens[i] != maxTokens || finished[i] != "length" {
			t.Errorf("stalled candidate %d: %d tokens, finish %q; want %d, length", i, tokens[i], finished[i], maxTokens)
		}
	}
}

// TestManyPromptsQueueFair: a request of many prompts (or embedding
// inputs) takes the queue places of the sequences it runs at once, not one
// per prompt: with a queue of 2, other clients are served beside it, not
// answered 503.
func TestManyPromptsQueueFair(t *testing.T) {
	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf("%q", fmt.Sprintf("prompt %d", i))
	}
	list := "[" + strings.Join(words, ",") + "]"
	for _, c := range []struct{ name, path, body string }{
		{"completion prompts", "/v1/completions", `{"prompt":` + list + `,"max_tokens":20,"min_tokens":20}`},
		{"embedding inputs", "/v1/embeddings", `{"input":` + list + `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Seed: 7}); err != nil {
				t.Fatal(err)
			}
			m, err := engine.Load(path, engine.Config{CtxSize: 512, BatchSize: 64, Parallel: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			b := newTestBackend(t, m, engine.SchedulerConfig{MaxRequestSeqs: 1})
			ts := newReadyServer(t, b, Config{Parallel: 2, QueueSize: 2, MaxRequestSeqs: 1, WriteTimeout: 10 * time.Minute})
			var bigDone atomic.Bool
			big := make(chan response, 1)
			go func() { r := ts.post(c.path, c.body); bigDone.Store(true); big <- r }()
			waitFor(t, "the big request to run", func() bool { return b.Stats().Active > 0 })
			for i := range 3 {
				r := postWithin(t, ts, "/v1/completions", fmt.Sprintf(`{"prompt":"other %d","max_tokens":4}`, i))
				if r.status != 200 {
					t.Errorf("request %d beside a request of 300 prompts: %d %s", i, r.status, r.body)
				}
			}
			if bigDone.Load() {
				t.Fatal("the big request ended before the others were answered: the test proves nothing (make it bigger)")
			}
			select {
			case r := <-big:
				if r.status != 200 {
					t.Fatalf("the request of 300 prompts: %d %s", r.status, r.body)
				}
				key := "choices"
				if c.path == "/v1/embeddings" {
					key = "data"
				}
				if n := len(jsonPath(decodeBody(t, r.body), key).([]any)); n != 300 {
					t.Errorf("the request of 300 prompts has %d %s, want 300", n, key)
				}
			case <-time.After(5 * time.Minute):
				t.Fatal("the request of 300 prompts: no answer after five minutes")
			}
		})
	}
}

// TestDisconnectsFreeSlots drops 100 clients mid-request, streamed and
// not: every slot comes back, no goroutine is left behind, and the server
// still answers.
func TestDisconnectsFreeSlots(t *testing.T) {
	ts, b := batchServer(t, 2, 512, engine.SchedulerConfig{})
	ts.post("/v1/completions", `{"prompt":"warm up","max_tokens":2}`)
	goroutines := runtime.NumGoroutine()
	var heap0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&heap0)
	for i := range 100 {
		stream := i%2 == 0
		body := fmt.Sprintf(`{"prompt":"drop %d","max_tokens":400,"min_tokens":400,"stream":%v}`, i, stream)
		c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		rows := b.Stats().DecodeRows
		waitFor(t, "the request to decode", func() bool { return b.Stats().DecodeRows > rows+2 })
		c.Close()
		// The engine drops a cancelled sequence before its next step
		// (TestSchedulerCancelBeforeNextStep); here the close must reach it.
		waitFor(t, "the slot to be freed", func() bool { st := b.Stats(); return st.Active == 0 && st.Queued == 0 })
	}
	r := ts.post("/v1/completions", `{"prompt":"still there","max_tokens":3}`)
	if r.status != 200 {
		t.Fatalf("after 100 disconnects: %d %s", r.status, r.body)
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines+10 })
	var heap1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&heap1)
	if grow := int64(heap1.HeapInuse) - int64(heap0.HeapInuse); grow > 16<<20 {
		t.Errorf("the heap grew by %d MiB over 100 disconnects", grow>>20)
	}
}

// TestEmbeddingBesideGenerations: an embedding sent while two long
// generations decode returns while they are still running, and equals the
// embedding computed alone.
func TestEmbeddingBesideGenerations(t *testing.T) {
	ts, b := batchServer(t, 3, 1024, engine.SchedulerConfig{PrefillChunk: 32})
	const emb = `{"input":"the embedding of this sentence"}`
	alone := ts.post("/v1/embeddings", emb)
	var streams []net.Conn
	for i := range 2 {
		c := openRawStream(t, ts, fmt.Sprintf(`{"prompt":"long %d","max_tokens":900,"min_tokens":900,"stream":true}`, i))
		defer c.Close()
		streams = append(streams, c)
	}
	for _, c := range streams {
		go io.Copy(io.Discard, c) // read along
	}
	waitFor(t, "both generations to decode", func() bool { return b.Stats().Active == 2 && b.Stats().DecodeRows > 20 })
	rows := b.Stats().DecodeRows
	r := ts.post("/v1/embeddings", emb)
	during := b.Stats().DecodeRows - rows
	if r.status != 200 {
		t.Fatalf("embedding: %d %s", r.status, r.body)
	}
	if b.Stats().Active != 2 {
		t.Errorf("the generations ended before the embedding returned")
	}
	if during > 2*40 {
		t.Errorf("the embedding took %d decode rows of the others (about 2 per step), want a handful of steps", during)
	}
	va := jsonPath(decodeBody(t, alone.body), "data", 0, "embedding").([]any)
	vb := jsonPath(decodeBody(t, r.body), "data", 0, "embedding").([]any)
	for i := range va {
		if d := math.Abs(va[i].(float64) - vb[i].(float64)); d > 1e-3 {
			t.Fatalf("embedding[%d] = %v beside generations, %v alone", i, vb[i], va[i])
		}
	}
}

// TestMixedRequests runs 32 concurrent requests of every kind (plain and
// streamed completions, chat with tools and grammars, JSON schemas,
// embeddings, n > 1, and clients that give up midway); CI runs it under
// the race detector.
func TestMixedRequests(t *testing.T) {
	ts, b := batchServer(t, 6, 512, engine.SchedulerConfig{PrefillChunk: 16})
	kinds := []struct {
		path, body string
		cancel     bool
	}{
		{"/v1/completions", `{"prompt":"mixed one","max_tokens":8}`, false},
		{"/v1/completions", `{"prompt":"mixed two","max_tokens":8,"stream":true,"logprobs":2}`, false},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}`, false},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],"max_tokens":40,"tool_choice":"auto","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`, false},
		{"/v1/completions", `{"prompt":"grammar","max_tokens":8,"grammar":"root ::= [a-z]+"}`, false},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"json"}],"max_tokens":30,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}}`, false},
		{"/v1/embeddings", `{"input":["one","two","three"]}`, false},
		{"/v1/completions", `{"prompt":"candidates","max_tokens":6,"n":2,"best_of":3,"seed":5}`, false},
		{"/v1/completions", `{"prompt":"given up","max_tokens":300,"min_tokens":300,"stream":true}`, true},
		{"/v1/completions", `{"prompt":"given up too","max_tokens":300,"min_tokens":300}`, true},
	}
	var wg sync.WaitGroup
	for i := range 32 {
		k := kinds[i%len(kinds)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.base+k.path, strings.NewReader(k.body))
			req.Header.Set("Content-Type", "application/json")
			if k.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if !k.cancel {
					t.Errorf("request %d %s: %v", i, k.body, err)
				}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(bufio.NewReader(resp.Body))
			if k.cancel {
				return
			}
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("request %d %s: %d %v %s", i, k.body, resp.StatusCode, err, body)
				return
			}
			if strings.Contains(string(body), `"error"`) {
				t.Errorf("request %d %s: an error in the answer: %s", i, k.body, body)
			}
			if !strings.Contains(k.body, `"stream":true`) && !json.Valid(body) {
				t.Errorf("request %d: invalid JSON %s", i, body)
			}
		}()
	}
	wg.Wait()
	waitFor(t, "every sequence to end", func() bool { st := b.Stats(); return st.Active == 0 && st.Queued == 0 })
}
