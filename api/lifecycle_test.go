package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// logServer starts a ready server over f whose log lines go to the
// returned buffer.
func logServer(t *testing.T, f Backend, cfg Config) (*testServer, *syncBuffer) {
	t.Helper()
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	return newReadyServer(t, f, cfg), &logs
}

// logLine returns the first log line holding every one of parts, waiting
// for it (a stream logs after its last write).
func logLine(t *testing.T, logs *syncBuffer, parts ...string) string {
	t.Helper()
	var found string
	waitFor(t, fmt.Sprintf("a log line with %q", parts), func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				found = line
				return true
			}
		}
		return false
	})
	return found
}

// logValue returns the value of key in a text log line.
func logValue(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// rawStream sends a streamed request on a raw connection and reads until
// its first data frame.
func rawStream(t *testing.T, ts *testServer, path, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before a data frame: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			return c, br
		}
	}
}

// TestRequestLogs: the request log says what happened (issue 17 item 14):
// a disconnected stream with the tokens it really generated, an abandoned
// non-streaming request as the client's doing (499), a stream refused at
// validation with its method and path, and a finished request with its
// token counts and speeds.
func TestRequestLogs(t *testing.T) {
	f := newFake()
	f.hold = make(chan struct{})
	f.ended = make(chan error, 4)
	f.reply = func(string) string { return strings.Repeat("z", 300) }
	ts, logs := logServer(t, f, Config{})

	c, _ := rawStream(t, ts, "/v1/completions", `{"prompt":"a","stream":true,"max_tokens":300}`)
	c.Close() // gone after the first token; the generation is held there
	<-f.ended
	line := logLine(t, logs, "path=/v1/completions", "stream=true", "outcome=client_gone")
	if !strings.Contains(line, "completion_tokens=1 ") {
		t.Errorf("disconnected stream logged %q, want completion_tokens=1 (the token it sent)", line)
	}

	// A non-streaming request whose client leaves while it is held.
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"b","max_tokens":300}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "the request to generate", func() bool { return f.running.Load() == 1 })
	c.Close()
	<-f.ended
	line = logLine(t, logs, "path=/v1/completions", "stream=false", "outcome=client_gone")
	if !strings.Contains(line, "status=499") {
		t.Errorf("abandoned request logged %q, want status=499", line)
	}

	ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"stream":true,"temperature":-1}`)
	line = logLine(t, logs, "outcome=invalid")
	if !strings.Contains(line, "method=POST") || !strings.Contains(line, "path=/v1/chat/completions") || !strings.Contains(line, "error_status=400") {
		t.Errorf("invalid stream logged %q, want method, path and the error's status", line)
	}

	close(f.hold)
	f.reply = func(string) string { return "Hello" }
	if r := ts.post("/v1/completions", `{"prompt":"abc","max_tokens":10}`); r.status != 200 {
		t.Fatalf("completion = %d %s", r.status, r.body)
	}
	<-f.ended
	line = logLine(t, logs, "outcome=ok", "stream=false")
	for _, want := range []string{"status=200", "prompt_tokens=4", "completion_tokens=5"} {
		if !strings.Contains(line, want) {
			t.Errorf("finished request logged %q, want %s", line, want)
		}
	}
	// Both speeds are measured (positive), whatever the machine's pace.
	for _, key := range []string{"prompt_tps", "gen_tps"} {
		v := logValue(line, key)
		if x, err := strconv.ParseFloat(v, 64); err != nil || x <= 0 {
			t.Errorf("finished request logged %s=%q, want a positive speed in tokens/s", key, v)
		}
	}
}

// TestStreamIdleTimeout: --timeout bounds each write of a stream, not the
// stream (issue 17 item 11): a stream that is read goes on past it, and a
// write nobody reads fails by it and is marked a timeout.
func TestStreamIdleTimeout(t *testing.T) {
	f := newFake()
	f.hold = make(chan struct{})
	f.reply = func(string) string { return "abcdef" }
	ts := newReadyServer(t, f, Config{WriteTimeout: 100 * time.Millisecond})
	c, br := rawStream(t, ts, "/v1/completions", `{"prompt":"a","stream":true,"max_tokens":10}`)
	defer c.Close()
	// The stream outlives the timeout with nothing to write; a deadline
	// for the whole response would fail its next write.
	time.Sleep(300 * time.Millisecond)
	close(f.hold)
	rest := readUntil(br, "data: [DONE]")
	if !strings.Contains(rest, "data: [DONE]") {
		t.Errorf("stream longer than --timeout ends %q, want [DONE]", tail(rest, 200))
	}

	// A client that stops reading: once the socket's buffers are full a
	// write waits, and at --timeout the server cuts the stream, stops its
	// generation and logs a timeout (not 499, which is the client's doing).
	f2 := newFake()
	f2.ctxSize = 1 << 20
	f2.ended = make(chan error, 1)
	f2.reply = func(string) string { return strings.Repeat("x", 200000) }
	ts2, logs := logServer(t, f2, Config{WriteTimeout: 200 * time.Millisecond})
	stalled, _ := rawStream(t, ts2, "/v1/completions", `{"prompt":"a","stream":true,"max_tokens":200000}`)
	defer stalled.Close()
	if err := <-f2.ended; err == nil {
		t.Errorf("the stalled stream's generation ended on its own, want it stopped by the cut")
	}
	line := logLine(t, logs, "path=/v1/completions", "stream=true")
	if !strings.Contains(line, "outcome=timeout") || !strings.Contains(line, "status=504") {
		t.Errorf("stalled stream logged %q, want outcome=timeout status=504", line)
	}

	// The write itself, on a pipe nobody reads.
	client, server := net.Pipe()
	defer client.Close()
	sse := newSSEWriter(bufio.NewWriterSize(server, 16))
	sse.conn, sse.idle = server, 50*time.Millisecond
	if err := sse.data([]byte(`{"x":1}`)); err == nil || !sse.timedOut {
		t.Errorf("write to a client that reads nothing = %v (timed out %v), want a timeout", err, sse.timedOut)
	}
}

// stubborn is a backend whose generation ignores cancellation until
// released: work the model still runs.
type stubborn struct {
	*fakeBackend
	release chan struct{}
}

func (s stubborn) Generate(ctx context.Context, reqs []*GenerateRequest, emit func(int, *engine.Event) error) error {
	s.running.Add(1)
	defer s.running.Add(-1)
	<-s.release
	return ctx.Err()
}

// TestShutdownBound: Shutdown's deadline bounds it (issue 17 item 10): it
// closes the connections still open, and when a generation still runs at
// the deadline it returns ErrWorkInFlight, so the caller keeps the model.
func TestShutdownBound(t *testing.T) {
	f := newFake()
	f.hold = make(chan struct{})
	ts := newReadyServer(t, f, Config{})
	// A stream held after its first token, and a request whose body never
	// completes.
	c, br := rawStream(t, ts, "/v1/completions", `{"prompt":"a","stream":true,"max_tokens":10}`)
	defer c.Close()
	slow, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n%s", strings.Repeat(" ", 9000))
	waitFor(t, "the slow body to be read", func() bool { return ts.s.bodyBytes.Load() == 100000 })

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := ts.s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v, want nil (the generation stops when cancelled)", err)
	}
	if rest := readUntil(br, "shutting down"); !strings.Contains(rest, "shutting down") {
		t.Errorf("held stream ends %q, want the shutdown error event", tail(rest, 200))
	}
	if _, err := io.ReadAll(slow); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Errorf("reading the slow connection after Shutdown: %v, want it closed by the server", err)
	}

	// A generation that does not stop when cancelled: Shutdown says so at
	// its deadline (the caller keeps the model) and the connection of its
	// request is closed by then.
	st := stubborn{fakeBackend: newFake(), release: make(chan struct{})}
	ts = newReadyServer(t, st, Config{})
	held, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	body := `{"prompt":"a","max_tokens":2}`
	fmt.Fprintf(held, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "the stubborn generation", func() bool { return st.running.Load() == 1 })
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := ts.s.Shutdown(ctx); !errors.Is(err, ErrWorkInFlight) {
		t.Errorf("Shutdown with a generation running past its deadline = %v, want ErrWorkInFlight", err)
	}
	if b, err := io.ReadAll(held); len(b) != 0 || err != nil && !strings.Contains(err.Error(), "reset") {
		t.Errorf("the stubborn request's connection after Shutdown: read %q, %v; want it closed without an answer", b, err)
	}
	close(st.release)
	waitFor(t, "the stubborn generation to return", func() bool { return st.running.Load() == 0 })
}

// readUntil reads lines from br until one holds marker or the connection
// ends, and returns what it read.
func readUntil(br *bufio.Reader, marker string) string {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if strings.Contains(line, marker) || err != nil {
			return b.String()
		}
	}
}

// TestEchoLogprobs: echo with logprobs starts the choice's logprobs with
// the prompt's tokens, the first null (nothing predicts it), each other one
// with the log-probability the model gave it, as OpenAI does (issue 17 item
// 19); streamed, the echoed text comes with them; with max_tokens 0 the
// prompt alone is scored.
func TestEchoLogprobs(t *testing.T) {
	f := newFake()
	f.reply = func(string) string { return "one" }
	ts := newReadyServer(t, f, Config{})
	// The fake scripts 20 for each generated token against fakeVocab-1
	// zeros; each prompt token gets fakePromptScore at the position before.
	gen := -math.Log1p((fakeVocab - 1) * math.Exp(-20))
	prompt := math.Log(math.Exp(fakePromptScore) / (math.Exp(fakePromptScore) + fakeVocab - 1))
	check := func(name string, lp map[string]any, generated int) {
		t.Helper()
		toks, lps, tops, offs := lp["tokens"].([]any), lp["token_logprobs"].([]any), lp["top_logprobs"].([]any), lp["text_offset"].([]any)
		wantToks := append([]any{"", "x", "y"}, []any{"o", "n", "e"}[:generated]...)
		if fmt.Sprint(toks) != fmt.Sprint(wantToks) || len(lps) != len(wantToks) || len(tops) != len(wantToks) {
			t.Fatalf("%s: tokens %q with %d logprobs, %d tops; want %q (BOS, the prompt, the choice) and as many", name, toks, len(lps), len(tops), wantToks)
		}
		if lps[0] != nil || tops[0] != nil {
			t.Errorf("%s: the first prompt token has logprob %v, top %v; want null, null", name, lps[0], tops[0])
		}
		for i := 1; i < len(lps); i++ {
			want := gen
			if i < 3 {
				want = prompt
			}
			if v, ok := lps[i].(float64); !ok || math.Abs(v-want) > 1e-5 {
				t.Errorf("%s: token_logprobs[%d] (%q) = %v, want %.6f", name, i, toks[i], lps[i], want)
			}
			if m, ok := tops[i].(map[string]any); !ok || len(m) != 2 {
				t.Errorf("%s: top_logprobs[%d] = %v, want 2 alternatives", name, i, tops[i])
			}
		}
		if fmt.Sprint(offs) != fmt.Sprint([]any{0.0, 0.0, 1.0, 2.0, 3.0, 4.0}[:len(wantToks)]) {
			t.Errorf("%s: text_offset %v, want offsets into the echoed text", name, offs)
		}
	}
	m := decodeBody(t, ts.post("/v1/completions", `{"prompt":"xy","max_tokens":3,"logprobs":2,"echo":true}`).body)
	if jsonPath(m, "choices", 0, "text") != "xyone" {
		t.Errorf("text = %v, want xyone", jsonPath(m, "choices", 0, "text"))
	}
	check("whole", jsonPath(m, "choices", 0, "logprobs").(map[string]any), 3)

	m = decodeBody(t, ts.post("/v1/completions", `{"prompt":"xy","max_tokens":0,"logprobs":2,"echo":true}`).body)
	if jsonPath(m, "choices", 0, "text") != "xy" || jsonPath(m, "usage", "completion_tokens") != 0.0 {
		t.Errorf("max_tokens 0: text %v, usage %v; want the prompt alone", jsonPath(m, "choices", 0, "text"), m["usage"])
	}
	check("max_tokens 0", jsonPath(m, "choices", 0, "logprobs").(map[string]any), 0)

	// Streamed: the chunks' logprobs joined read as the whole answer's.
	evs := parseSSE(t, ts.post("/v1/completions", `{"prompt":"xy","max_tokens":3,"logprobs":2,"echo":true,"stream":true}`).body)
	joined := map[string]any{"tokens": []any{}, "token_logprobs": []any{}, "top_logprobs": []any{}, "text_offset": []any{}}
	text := ""
	for _, ev := range evs {
		if ev.data == "[DONE]" {
			continue
		}
		c := decodeBody(t, []byte(ev.data))
		text += jsonPath(c, "choices", 0, "text").(string)
		if lp, ok := jsonPath(c, "choices", 0, "logprobs").(map[string]any); ok {
			for k := range joined {
				joined[k] = append(joined[k].([]any), lp[k].([]any)...)
			}
		}
	}
	if text != "xyone" {
		t.Errorf("streamed text %q, want xyone", text)
	}
	check("stream", joined, 3)
}

// TestGrammarBudget: a grammar, schema or tool set that needs more than
// the compile budget (Config.GrammarSteps) is a 400 naming its field,
// before admission (issue 17 item 2); within the budget the same request
// runs; a compile whose client has left stops (the budget's context).
func TestGrammarBudget(t *testing.T) {
	f := newFake()
	f.ctxSize = 1 << 14 // room for the tools' prompt
	f.reply = func(string) string { return "a" }
	ts := newReadyServer(t, f, Config{GrammarSteps: 300})
	var refs, rules, props []string
	for i := range 200 {
		refs = append(refs, fmt.Sprint("r", i))
		rules = append(rules, fmt.Sprintf(`r%d ::= \"a\" | \"b\"`, i))
		props = append(props, fmt.Sprintf(`"k%d":{"type":"string"}`, i))
	}
	gbnf := `root ::= ` + strings.Join(refs, " ") + `\n` + strings.Join(rules, `\n`)
	schema := `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
	for _, tc := range []struct{ name, path, body, param string }{
		{"gbnf", "/v1/completions", `{"prompt":"a","max_tokens":1,"grammar":"` + gbnf + `"}`, "grammar"},
		{"schema", "/v1/completions", `{"prompt":"a","max_tokens":1,"json_schema":` + schema + `}`, "json_schema"},
		{"response_format", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":1,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}}`, "response_format.json_schema.schema"},
		{"tools", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":1,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":` + schema + `}}]}`, "tools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.post(tc.path, tc.body)
			if r.status != 400 || errorOf(t, r.body)["param"] != tc.param || !strings.Contains(string(r.body), "too much work") {
				t.Errorf("over the budget: %d %s, want 400 naming %s and the work", r.status, r.body, tc.param)
			}
		})
	}
	if f.running.Load() != 0 || f.maxSeen.Load() != 0 {
		t.Errorf("a request over the budget reached the model")
	}
	// The same compile within the default budget.
	ts = newReadyServer(t, f, Config{})
	if r := ts.post("/v1/completions", `{"prompt":"a","max_tokens":1,"json_schema":`+schema+`}`); r.status != 200 {
		t.Errorf("within the default budget: %d %s, want 200", r.status, r.body)
	}

	// A compile under a context that is done stops with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, e := decodeCompletion(grammar.Budget{Ctx: ctx}, []byte(`{"prompt":"a","json_schema":`+schema+`}`)); e == nil || e.Status != 503 {
		t.Errorf("compile with its client gone = %v, want the 503 of a cancelled compile", e)
	}
}

// TestStreamUsageCandidates: a streamed chat with n candidates reports the
// prompt's tokens once, as the same request unstreamed does, and the
// candidates' generated tokens summed (issue 17 item 18).
func TestStreamUsageCandidates(t *testing.T) {
	f := newFake()
	f.reply = func(string) string { return "abc" }
	ts := newReadyServer(t, f, Config{})
	const req = `{"messages":[{"role":"user","content":"hello"}],"max_tokens":10,"n":3,"seed":1`
	whole := decodeBody(t, ts.post("/v1/chat/completions", req+`}`).body)
	evs := parseSSE(t, ts.post("/v1/chat/completions", req+`,"stream":true,"stream_options":{"include_usage":true}}`).body)
	var u any
	for _, ev := range evs {
		if ev.data != "[DONE]" {
			if x := jsonPath(decodeBody(t, []byte(ev.data)), "usage"); x != nil {
				u = x
			}
		}
	}
	wp, wc := jsonPath(whole, "usage", "prompt_tokens"), jsonPath(whole, "usage", "completion_tokens")
	if wp == nil || jsonPath(u, "prompt_tokens") != wp || jsonPath(u, "completion_tokens") != wc {
		t.Errorf("streamed usage %v, want the unstreamed prompt_tokens %v and completion_tokens %v", u, wp, wc)
	}
}
