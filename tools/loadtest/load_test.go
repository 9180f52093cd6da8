package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"1..100 p50", ms(hundred...), 50, 50 * time.Millisecond},
		{"1..100 p99", ms(hundred...), 99, 99 * time.Millisecond},
		{"1..100 p100", ms(hundred...), 100, 100 * time.Millisecond},
		{"1..100 p0.5", ms(hundred...), 0.5, 1 * time.Millisecond},
		{"one value p50", ms(7), 50, 7 * time.Millisecond},
		{"one value p99", ms(7), 99, 7 * time.Millisecond},
		{"two values p50", ms(1, 2), 50, 1 * time.Millisecond},
		{"two values p99", ms(1, 2), 99, 2 * time.Millisecond},
		{"ten values p99", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 1000), 99, 1000 * time.Millisecond},
		{"ten values p50", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 1000), 50, 5 * time.Millisecond},
		{"none", nil, 50, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("percentile(%v, %g) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
	t.Run("latencyOf sorts", func(t *testing.T) {
		got := latencyOf(ms(30, 10, 20, 40))
		want := Latency{Count: 4, P50: 20, P99: 40, Max: 40}
		if got != want {
			t.Errorf("latencyOf(30,10,20,40 ms) = %+v, want %+v", got, want)
		}
		if got := latencyOf(nil); got != (Latency{}) {
			t.Errorf("latencyOf(nil) = %+v, want zero", got)
		}
	})
}

// fakeClock returns t0+offsets[0], t0+offsets[1], ... and fails the test
// when called more often.
func fakeClock(t *testing.T, t0 time.Time, offsets ...time.Duration) func() time.Time {
	i := 0
	return func() time.Time {
		if i >= len(offsets) {
			t.Fatalf("clock read %d times, want %d", i+1, len(offsets))
		}
		i++
		return t0.Add(offsets[i-1])
	}
}

func TestReadStream(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name    string
		body    string
		clock   []time.Duration // arrival of each content chunk
		usage   int
		wantErr string
	}{
		{
			name: "completion",
			body: "data: {\"choices\":[{\"text\":\"Hel\"}]}\n\n" +
				"data: {\"choices\":[{\"text\":\"\"}]}\n\n" + // held-back text: no token counted
				": keep-alive comment\n\n" +
				"data: {\"choices\":[{\"text\":\"lo\"}]}\n\n" +
				"data:{\"choices\":[{\"text\":\"!\",\"finish_reason\":\"length\"}]}\n\n" +
				"data: {\"choices\":[],\"usage\":{\"completion_tokens\":4}}\n\n" +
				"data: [DONE]\n\n",
			clock: []time.Duration{10 * ms, 30 * ms, 60 * ms},
			usage: 4,
		},
		{
			name: "chat",
			body: "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
				"data: [DONE]\n\n",
			clock: []time.Duration{5 * ms, 6 * ms},
		},
		{
			name:    "error event",
			body:    "data: {\"choices\":[{\"text\":\"x\"}]}\n\nevent: error\ndata: {\"error\":{\"message\":\"model failed\"}}\n\n",
			clock:   []time.Duration{1 * ms},
			wantErr: "error event after 1 content chunks: {\"error\":{\"message\":\"model failed\"}}",
		},
		{
			name:    "error chunk",
			body:    "data: {\"error\":{\"message\":\"too long\"}}\n\n",
			wantErr: "error chunk after 0 content chunks",
		},
		{
			name:    "cut short",
			body:    "data: {\"choices\":[{\"text\":\"x\"}]}\n\n",
			clock:   []time.Duration{1 * ms},
			wantErr: "stream ended without [DONE] after 1 content chunks",
		},
		{
			name:    "not JSON",
			body:    "data: {\"choices\":\n\n",
			wantErr: "chunk 1 is not JSON",
		},
		{
			name:    "line too long",
			body:    "data: " + strings.Repeat("x", maxLine+1) + "\n\n",
			wantErr: "token too long",
		},
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			times, usage, err := readStream(strings.NewReader(tc.body), fakeClock(t, t0, tc.clock...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("readStream error = %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("readStream error = %v", err)
			}
			if len(times) != len(tc.clock) {
				t.Fatalf("readStream = %d content chunks, want %d", len(times), len(tc.clock))
			}
			for i, d := range tc.clock {
				if !times[i].Equal(t0.Add(d)) {
					t.Errorf("chunk %d arrived at %v, want %v", i, times[i].Sub(t0), d)
				}
			}
			if usage != tc.usage {
				t.Errorf("readStream usage = %d, want %d", usage, tc.usage)
			}
		})
	}
}

func TestGapsOverlapping(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		ts := make([]time.Time, len(ms))
		for i, m := range ms {
			ts[i] = t0.Add(time.Duration(m) * time.Millisecond)
		}
		return ts
	}
	streams := [][]time.Time{
		at(0, 10, 20, 100, 110), // gaps 10 [0,10], 10 [10,20], 80 [20,100], 10 [100,110]
		at(5, 50, 55),           // gaps 45 [5,50], 5 [50,55]
		at(200),                 // no gaps
	}
	// The window 15..60 ms overlaps [10,20], [20,100], [5,50] and [50,55].
	got := gapsOverlapping(streams, t0.Add(15*time.Millisecond), t0.Add(60*time.Millisecond))
	slices.Sort(got)
	want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 45 * time.Millisecond, 80 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("gapsOverlapping(15..60 ms) = %v, want %v", got, want)
	}
	if got := gapsOverlapping(streams, t0.Add(120*time.Millisecond), t0.Add(130*time.Millisecond)); len(got) != 0 {
		t.Errorf("gapsOverlapping(120..130 ms) = %v, want none", got)
	}
}

func TestPromptWords(t *testing.T) {
	for _, n := range []int{1, 4, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a, b, c := promptWords(n, 1), promptWords(n, 1), promptWords(n, 2)
			if got := len(strings.Fields(a)); got != n {
				t.Errorf("promptWords(%d, 1) has %d words", n, got)
			}
			if a != b {
				t.Errorf("promptWords(%d, 1) = %q, then %q", n, a, b)
			}
			if n >= 4 && a == c {
				t.Errorf("promptWords(%d, 1) = promptWords(%d, 2) = %q", n, n, a)
			}
			if d := promptWords(n, promptSeed(5, 1)); n >= 4 && d == a {
				t.Errorf("prompt 1 of a run seeded 5 = prompt 1 of an unseeded run = %q", a)
			}
		})
	}
}

// fakeServer is an OpenAI-style streaming server on loopback. Each request
// gets the role chunk (chat), then max_tokens content chunks, each followed
// by an empty one, a usage chunk when asked for, and [DONE].
type fakeServer struct {
	apiKey    string        // required Bearer key ("" = none)
	delay     time.Duration // between content chunks
	failEvery int           // every failEvery-th request gets an error event instead of its 2nd chunk
	hang      bool          // send one chunk, then wait until the client leaves
	// longWords marks the injected request: ordinary requests wait (up to
	// 10 s) until a request with at least this many prompt words arrived.
	longWords int

	mu       sync.Mutex
	paths    []string
	prompts  []string
	inFlight int
	most     int // most requests in flight at once
	count    atomic.Int64
	long     chan struct{}
	longOnce sync.Once
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+f.apiKey {
		http.Error(w, `{"error":{"message":"invalid API key"}}`, http.StatusUnauthorized)
		return
	}
	var req struct {
		Prompt        string `json:"prompt"`
		Messages      []struct{ Role, Content string }
		MaxTokens     int  `json:"max_tokens"`
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || req.MaxTokens <= 0 {
		http.Error(w, fmt.Sprintf("bad request %+v: %v", req, err), http.StatusBadRequest)
		return
	}
	chat := r.URL.Path == "/v1/chat/completions"
	prompt := req.Prompt
	if chat {
		if len(req.Messages) != 1 || req.Messages[0].Role != "user" {
			http.Error(w, "want one user message", http.StatusBadRequest)
			return
		}
		prompt = req.Messages[0].Content
	} else if r.URL.Path != "/v1/completions" {
		http.NotFound(w, r)
		return
	}
	n := f.count.Add(1)
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.Path)
	f.prompts = append(f.prompts, prompt)
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	f.mu.Unlock()
	// done takes the request out of the in-flight count before the last
	// bytes go out: a client that has read them may start its next
	// request before this handler returns.
	var once sync.Once
	done := func() {
		once.Do(func() {
			f.mu.Lock()
			f.inFlight--
			f.mu.Unlock()
		})
	}
	defer done()
	if f.longWords > 0 {
		if len(strings.Fields(prompt)) >= f.longWords {
			f.longOnce.Do(func() { close(f.long) })
		} else {
			select {
			case <-f.long:
			case <-time.After(10 * time.Second):
			}
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		fl.Flush()
	}
	content := func(s string) string {
		if chat {
			return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%q}}]}`, s)
		}
		return fmt.Sprintf(`{"choices":[{"index":0,"text":%q}]}`, s)
	}
	if chat {
		send(`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`)
	}
	for i := range req.MaxTokens {
		if f.hang {
			send(content("x"))
			<-r.Context().Done()
			return
		}
		if f.failEvery > 0 && n%int64(f.failEvery) == 0 && i == 1 {
			done()
			fmt.Fprintf(w, "event: error\ndata: {\"error\":{\"message\":\"injected failure\"}}\n\n")
			fl.Flush()
			return
		}
		time.Sleep(f.delay)
		send(content(fmt.Sprintf("t%d ", i)))
		send(content(""))
	}
	if req.StreamOptions.IncludeUsage {
		send(fmt.Sprintf(`{"choices":[],"usage":{"completion_tokens":%d}}`, req.MaxTokens))
	}
	done()
	send("[DONE]")
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		server *fakeServer
		cfg    Config
		// want: completed, errors, not started ordinary requests; content
		// chunks of the ordinary requests and of the server's usage.
		completed, errors, notStarted, tokens, usage int
		path                                         string
		errSample                                    string
	}{
		{
			name:      "completions",
			server:    &fakeServer{delay: time.Millisecond},
			cfg:       Config{Concurrency: 3, Requests: 7, MaxTokens: 5, PromptWords: 4},
			completed: 7, tokens: 35, usage: 35, path: "/v1/completions",
		},
		{
			name:      "completions seeded",
			server:    &fakeServer{},
			cfg:       Config{Concurrency: 2, Requests: 3, MaxTokens: 2, PromptWords: 6, Seed: 9},
			completed: 3, tokens: 6, usage: 6, path: "/v1/completions",
		},
		{
			name:      "shared prefix",
			server:    &fakeServer{},
			cfg:       Config{Concurrency: 2, Requests: 4, MaxTokens: 2, PromptWords: 3, PrefixWords: 5, Seed: 4},
			completed: 4, tokens: 8, usage: 8, path: "/v1/completions",
		},
		{
			name:      "chat with key",
			server:    &fakeServer{apiKey: "sekrit"},
			cfg:       Config{Chat: true, Concurrency: 2, Requests: 3, MaxTokens: 4, Prompt: "hi there", APIKey: "sekrit"},
			completed: 3, tokens: 12, usage: 12, path: "/v1/chat/completions",
		},
		{
			name:   "wrong key",
			server: &fakeServer{apiKey: "sekrit"},
			cfg:    Config{Concurrency: 2, Requests: 3, MaxTokens: 4, APIKey: "guess"},
			errors: 3, path: "",
			errSample: "HTTP 401",
		},
		{
			name:   "error events",
			server: &fakeServer{failEvery: 2},
			cfg:    Config{Concurrency: 3, Requests: 6, MaxTokens: 4},
			// 3 requests fail after their first chunk.
			completed: 3, errors: 3, tokens: 3*4 + 3*1, usage: 12, path: "/v1/completions",
			errSample: "injected failure",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.server
			srv := httptest.NewServer(f)
			defer srv.Close()
			cfg := tc.cfg
			cfg.URL = srv.URL
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Completed != tc.completed || res.Errors != tc.errors || res.NotStarted != tc.notStarted {
				t.Errorf("Run = %d completed, %d errors, %d not started, want %d, %d, %d (errors %q)",
					res.Completed, res.Errors, res.NotStarted, tc.completed, tc.errors, tc.notStarted, res.ErrorSamples)
			}
			if res.Tokens != tc.tokens || res.UsageTokens != tc.usage {
				t.Errorf("Run = %d tokens, %d usage tokens, want %d, %d", res.Tokens, res.UsageTokens, tc.tokens, tc.usage)
			}
			if res.TimedOut {
				t.Errorf("Run timed out, want it to finish")
			}
			if tc.errSample != "" && (len(res.ErrorSamples) == 0 || !strings.Contains(res.ErrorSamples[0], tc.errSample)) {
				t.Errorf("Run error samples = %q, want one containing %q", res.ErrorSamples, tc.errSample)
			}
			// Every ordinary stream with a content chunk has a first-token
			// time and one gap per further chunk.
			streams, gaps := 0, 0
			if tc.tokens > 0 {
				streams = tc.completed + tc.errors
				gaps = tc.tokens - streams
			}
			if res.TTFT.Count != streams || res.ITL.Count != gaps {
				t.Errorf("Run TTFT over %d streams, ITL over %d gaps, want %d, %d", res.TTFT.Count, res.ITL.Count, streams, gaps)
			}
			for _, l := range []Latency{res.TTFT, res.ITL} {
				if l.Count > 0 && !(0 <= l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) {
					t.Errorf("Run latency %+v, want 0 <= p50 <= p99 <= max", l)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			sent := tc.completed + tc.errors
			if tc.path == "" { // rejected before the handler counted it
				sent = 0
			}
			if len(f.paths) != sent {
				t.Errorf("server saw %d requests, want %d", len(f.paths), sent)
			}
			for _, p := range f.paths {
				if p != tc.path {
					t.Errorf("server saw POST %s, want %s", p, tc.path)
				}
			}
			if f.most > cfg.Concurrency {
				t.Errorf("server saw %d requests at once, want at most %d", f.most, cfg.Concurrency)
			}
			if cfg.PromptWords > 0 {
				var want []string
				for i := range cfg.Requests {
					p := promptWords(cfg.PromptWords, promptSeed(cfg.Seed, uint64(i)+1))
					if cfg.PrefixWords > 0 {
						// The same words before each: the seed's own list.
						p = promptWords(cfg.PrefixWords, promptSeed(cfg.Seed, 0)) + " " + p
					}
					want = append(want, p)
				}
				if cfg.PrefixWords > 0 {
					first := strings.Fields(want[0])[:cfg.PrefixWords]
					for _, p := range want {
						if !slices.Equal(strings.Fields(p)[:cfg.PrefixWords], first) || len(strings.Fields(p)) != cfg.PrefixWords+cfg.PromptWords {
							t.Fatalf("prompt %q: want the shared %d words %q, then %d of its own", p, cfg.PrefixWords, first, cfg.PromptWords)
						}
					}
				}
				got := slices.Clone(f.prompts)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("server saw prompts %q, want %q", got, want)
				}
			} else if cfg.Prompt != "" {
				for _, p := range f.prompts {
					if p != cfg.Prompt {
						t.Errorf("server saw prompt %q, want %q", p, cfg.Prompt)
					}
				}
			}
		})
	}
}

// TestRunStops checks that a run whose streams never end stops by itself
// at the timeout, or when its context is cancelled, with the open streams
// counted as errors and the others as not started.
func TestRunStops(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		srv := httptest.NewServer(&fakeServer{hang: true})
		defer srv.Close()
		res, err := Run(context.Background(), Config{URL: srv.URL, Concurrency: 2, Requests: 5, MaxTokens: 4, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// How many streams opened before the second passed depends on the
		// machine; every request is an error or not started either way.
		if !res.TimedOut || res.Completed != 0 || res.Errors+res.NotStarted != 5 || res.Errors > 2 || res.Tokens > res.Errors {
			t.Errorf("Run = %+v, want it timed out with no request completed, at most 2 errors and the rest not started", res)
		}
		if res.Errors > 0 && !strings.Contains(res.ErrorSamples[0], "context deadline exceeded") {
			t.Errorf("Run error samples = %q, want the deadline", res.ErrorSamples)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		f := &fakeServer{hang: true}
		srv := httptest.NewServer(f)
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { // cancel once both streams are open
			for f.count.Load() < 2 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		res, err := Run(ctx, Config{URL: srv.URL, Concurrency: 2, Requests: 5, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.Completed != 0 || res.Errors != 2 || res.NotStarted != 3 || f.count.Load() != 2 {
			t.Errorf("Run = %+v after %d requests, want 2 errors and 3 not started after 2 requests", res, f.count.Load())
		}
	})
}

// TestRunInject checks that the injected request is sent once, with its
// long prompt, and reported apart from the ordinary streams.
func TestRunInject(t *testing.T) {
	f := &fakeServer{longWords: 50, long: make(chan struct{})}
	srv := httptest.NewServer(f)
	defer srv.Close()
	// The ordinary requests wait on the server until the injected one
	// arrives, so the run cannot end before it is sent.
	res, err := Run(context.Background(), Config{URL: srv.URL, Concurrency: 2, Requests: 4, MaxTokens: 3, InjectWords: 50})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 4 || res.Errors != 0 || res.Tokens != 12 || res.TTFT.Count != 4 || res.ITL.Count != 8 {
		t.Errorf("Run ordinary = %d completed, %d errors, %d tokens, TTFT over %d, ITL over %d; want 4, 0, 12, 4, 8",
			res.Completed, res.Errors, res.Tokens, res.TTFT.Count, res.ITL.Count)
	}
	in := res.Inject
	if in == nil || !in.Sent || in.PromptWords != 50 || in.Tokens != 3 || in.Error != "" {
		t.Fatalf("Run inject = %+v, want a sent 50-word request with 3 content chunks", in)
	}
	if in.ITLUntilFirstToken.Count > res.ITL.Count {
		t.Errorf("ITL until the injected first token over %d gaps, more than the %d of the whole run", in.ITLUntilFirstToken.Count, res.ITL.Count)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	long := 0
	for _, p := range f.prompts {
		if len(strings.Fields(p)) == 50 {
			long++
		}
	}
	if len(f.prompts) != 5 || long != 1 {
		t.Errorf("server saw %d requests, %d with a 50-word prompt; want 5, 1", len(f.prompts), long)
	}

	t.Run("after the run", func(t *testing.T) {
		f := &fakeServer{}
		srv := httptest.NewServer(f)
		defer srv.Close()
		res, err := Run(context.Background(), Config{URL: srv.URL, Requests: 1, MaxTokens: 2, InjectWords: 10, InjectAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if res.Inject == nil || res.Inject.Sent || f.count.Load() != 1 {
			t.Errorf("Run inject = %+v with %d requests, want it not sent and 1 request", res.Inject, f.count.Load())
		}
	})
}

func TestRunConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"scheme", Config{URL: "ftp://127.0.0.1:21"}, "want http://"},
		{"no host", Config{URL: "http://"}, "want http://"},
		{"unparsable", Config{URL: "http://[::1"}, "URL"},
		{"negative", Config{URL: "http://127.0.0.1:1", Concurrency: -1}, "negative"},
		{"too many", Config{URL: "http://127.0.0.1:1", Concurrency: 1 << 20}, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
			}
		})
	}
}

// TestCommand runs the command line against a fake server: text and JSON.
func TestCommand(t *testing.T) {
	srv := httptest.NewServer(&fakeServer{})
	defer srv.Close()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"text", []string{"-url", srv.URL, "-c", "2", "-r", "3", "-n", "4"}, []string{
			"/v1/completions: 3 requests, 2 concurrent, max_tokens 4", "completed     3 in", "0 errors",
			"tokens        12 content chunks (server usage: 12 tokens)", "TTFT", "(3 streams)", "ITL", "(9 gaps)"}},
		{"json", []string{"-url", srv.URL, "-chat", "-r", "2", "-n", "3", "-json"}, []string{
			`"completed": 2`, `"tokens": 6`, `"p99_ms"`, `"url": "` + srv.URL + `/v1/chat/completions"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(tc.args, &out); err != nil {
				t.Fatalf("loadtest %q: %v\n%s", tc.args, err, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("loadtest %q printed\n%s\nwant it to contain %q", tc.args, out.String(), w)
				}
			}
		})
	}
	t.Run("inject", func(t *testing.T) {
		srv := httptest.NewServer(&fakeServer{longWords: 30, long: make(chan struct{})})
		defer srv.Close()
		var out bytes.Buffer
		if err := run([]string{"-url", srv.URL, "-c", "2", "-r", "2", "-n", "3", "-inject-prompt-words", "30", "-inject-after", "0s"}, &out); err != nil {
			t.Fatalf("loadtest: %v\n%s", err, out.String())
		}
		for _, w := range []string{"injected      30-word prompt sent at", "3 content chunks", "ITL meanwhile"} {
			if !strings.Contains(out.String(), w) {
				t.Errorf("loadtest -inject-prompt-words 30 printed\n%s\nwant it to contain %q", out.String(), w)
			}
		}
	})
	t.Run("failures", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		var out bytes.Buffer
		err := run([]string{"-url", down.URL, "-r", "2", "-timeout", "5s"}, &out)
		if err != errFailed || !strings.Contains(out.String(), "2 errors") {
			t.Errorf("loadtest on a closed port = %v, printed\n%s\nwant errFailed and 2 errors", err, out.String())
		}
	})
}
