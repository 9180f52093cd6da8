package api

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// TestMaxTokensZero: max_tokens 0 is a 400 naming max_tokens (API-NOTES),
// in bodies and as a stream's only event, except echo on completions,
// which returns the prompt alone and generates nothing (issue 17 item 16).
func TestMaxTokensZero(t *testing.T) {
	f := newFake()
	ts := newReadyServer(t, f, Config{})
	for _, tc := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"abc","max_tokens":0}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":0}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":0,"echo":true}`},
	} {
		r := ts.post(tc.path, tc.body)
		if e := errorOf(t, r.body); r.status != 400 || e["param"] != "max_tokens" || !strings.Contains(e["message"].(string), "must be ≥ 1") {
			t.Errorf("POST %s %s = %d %s, want 400 naming max_tokens, must be ≥ 1", tc.path, tc.body, r.status, r.body)
		}
		r = ts.post(tc.path, strings.TrimSuffix(tc.body, "}")+`,"stream":true}`)
		evs := parseSSE(t, r.body)
		if len(evs) != 1 || evs[0].event != "error" || errorOf(t, []byte(evs[0].data))["param"] != "max_tokens" {
			t.Errorf("streamed %s %s = %q, want one error event naming max_tokens", tc.path, tc.body, r.body)
		}
	}
	f.ended = make(chan error, 1)
	r := ts.post("/v1/completions", `{"prompt":"abc","max_tokens":0,"echo":true}`)
	m := decodeBody(t, r.body)
	if r.status != 200 || jsonPath(m, "choices", 0, "text") != "abc" || jsonPath(m, "choices", 0, "finish_reason") != "length" ||
		jsonPath(m, "usage", "completion_tokens") != 0.0 {
		t.Errorf("echo with max_tokens 0 = %d %s, want the prompt alone, finish length, no completion tokens", r.status, r.body)
	}
	r = ts.post("/v1/completions", `{"prompt":"abc","max_tokens":0,"echo":true,"stream":true}`)
	var text strings.Builder
	for _, ev := range parseSSE(t, r.body) {
		if ev.data != "[DONE]" {
			text.WriteString(fmt.Sprint(jsonPath(decodeBody(t, []byte(ev.data)), "choices", 0, "text")))
		}
	}
	if text.String() != "abc" {
		t.Errorf("streamed echo with max_tokens 0 = %q, want abc", text.String())
	}
	select {
	case <-f.ended:
		t.Error("echo with max_tokens 0 ran the model")
	default:
	}
}

// TestForcedToolCallLength: a forced call cut short by max_tokens is a
// (partial) call with finish_reason "length", never content (issue 17
// item 22).
func TestForcedToolCallLength(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.reply = func(string) string {
		return "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris, the capital of France\"}}\n</tool_call>"
	}
	ts := newReadyServer(t, f, Config{})
	for _, choice := range []string{`"required"`, `{"type":"function","function":{"name":"get_weather"}}`} {
		body := `{"messages":[{"role":"user","content":"weather?"}],"template":"chatml","temperature":0,"max_tokens":65,` + weatherTools + `,"tool_choice":` + choice
		m := decodeBody(t, ts.post("/v1/chat/completions", body+`}`).body)
		tc := jsonPath(m, "choices", 0, "message", "tool_calls", 0)
		args, _ := jsonPath(tc, "function", "arguments").(string)
		if jsonPath(m, "choices", 0, "finish_reason") != "length" || jsonPath(m, "choices", 0, "message", "content") != nil ||
			jsonPath(tc, "function", "name") != "get_weather" || !strings.HasPrefix(args, `{"city":"Paris`) {
			t.Errorf("tool_choice %s cut short = %v, want finish length, no content, a partial get_weather call", choice, m)
		}
		evs := parseSSE(t, ts.post("/v1/chat/completions", body+`,"stream":true}`).body)
		var name, streamed strings.Builder
		for _, ev := range evs[:len(evs)-1] {
			c := decodeBody(t, []byte(ev.data))
			if jsonPath(c, "choices", 0, "delta", "content") != nil {
				t.Errorf("tool_choice %s stream sent content %s", choice, ev.data)
			}
			if d := jsonPath(c, "choices", 0, "delta", "tool_calls", 0, "function"); d != nil {
				name.WriteString(fmt.Sprint(jsonPath(d, "name")))
				streamed.WriteString(jsonPath(d, "arguments").(string))
			}
		}
		last := decodeBody(t, []byte(evs[len(evs)-2].data))
		if jsonPath(last, "choices", 0, "finish_reason") != "length" || !strings.HasPrefix(name.String(), "get_weather") || streamed.String() != args {
			t.Errorf("tool_choice %s stream: finish %v, name %q, arguments %q, want length, get_weather, %q", choice,
				jsonPath(last, "choices", 0, "finish_reason"), name.String(), streamed.String(), args)
		}
	}
}

// countLogprobs returns the logprobs.content entries of a chat body or of
// every chunk of a chat stream, and whether each has a top_logprobs array.
func countLogprobs(t *testing.T, body []byte, stream bool) (n int, allTop bool) {
	t.Helper()
	allTop = true
	add := func(m map[string]any, key string) {
		content, _ := jsonPath(m, "choices", 0, key, "content").([]any)
		for _, e := range content {
			n++
			if _, ok := jsonPath(e, "top_logprobs").([]any); !ok {
				allTop = false
			}
		}
	}
	if !stream {
		add(decodeBody(t, body), "logprobs")
		return n, allTop
	}
	for _, ev := range parseSSE(t, body) {
		if ev.data != "[DONE]" {
			add(decodeBody(t, []byte(ev.data)), "logprobs")
		}
	}
	return n, allTop
}

// TestChatLogprobsShape: a streamed chat with tools keeps the logprobs of
// the text it held back as a possible call (issue 17 item 17), and
// top_logprobs is [] when none were asked, streamed or not (item 20).
func TestChatLogprobsShape(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.reply = func(p string) string {
		if strings.Contains(p, "PROSE") {
			return "<b>Sunny</b> in Paris."
		}
		return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	}
	ts := newReadyServer(t, f, Config{})
	for _, tc := range []struct{ name, extra string }{
		{"tool call", weatherTools},
		{"prose held back", weatherTools + `,"messages":[{"role":"user","content":"PROSE"}]`},
		{"no tools", `"template":"chatml"`},
	} {
		body := `{"messages":[{"role":"user","content":"weather?"}],"template":"chatml","temperature":0,"max_tokens":30,"logprobs":true,` + tc.extra
		whole := ts.post("/v1/chat/completions", body+`}`)
		want := int(jsonPath(decodeBody(t, whole.body), "usage", "completion_tokens").(float64))
		if n, top := countLogprobs(t, whole.body, false); n != want || !top {
			t.Errorf("%s: %d logprobs (top_logprobs arrays: %v), want %d with arrays", tc.name, n, top, want)
		}
		streamed := ts.post("/v1/chat/completions", body+`,"stream":true}`)
		if n, top := countLogprobs(t, streamed.body, true); n != want || !top {
			t.Errorf("%s streamed: %d logprobs (top_logprobs arrays: %v), want %d with arrays", tc.name, n, top, want)
		}
	}
}

// TestValidationBeforeAdmission: what only the model can check (logit_bias
// keys and ids) is a 400 at once while another request holds the only
// slot, and a streamed chat answers it with one error event, no role frame
// (issue 17 item 4).
func TestValidationBeforeAdmission(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	ts := newReadyServer(t, f, Config{Parallel: 1})
	done := make(chan response, 1)
	go func() { done <- ts.post("/v1/completions", `{"prompt":"x","max_tokens":2}`) }()
	waitFor(t, "the first request to hold the slot", func() bool { return f.running.Load() == 1 })
	for _, tc := range []struct{ body, param string }{
		{`{"prompt":"x","logit_bias":{"abc":1}}`, "logit_bias.abc"},
		{`{"prompt":"x","logit_bias":{"260":1}}`, "logit_bias.260"},
		{`{"prompt":"x","logit_bias":{"-1":1}}`, "logit_bias.-1"},
		{`{"prompt":"x","logit_bias":{"":1},"logit_bias_type":"tokens"}`, "logit_bias."},
	} {
		r := ts.post("/v1/completions", tc.body)
		if r.status != 400 || errorOf(t, r.body)["param"] != tc.param {
			t.Errorf("POST %s behind a running request = %d %s, want 400 naming %s", tc.body, r.status, r.body, tc.param)
		}
	}
	r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"stream":true,"logit_bias":{"abc":1}}`)
	if evs := parseSSE(t, r.body); len(evs) != 1 || evs[0].event != "error" {
		t.Errorf("streamed chat with a bad logit_bias key = %q, want one error event and no role frame", r.body)
	}
	close(f.gate)
	<-done

	// Token texts bias their tokens: "H" is banned, so the reply does not
	// start with it.
	r = ts.post("/v1/completions", `{"prompt":"x","max_tokens":1,"temperature":0,"logit_bias":{"H":false},"logit_bias_type":"tokens"}`)
	if got := jsonPath(decodeBody(t, r.body), "choices", 0, "text"); r.status != 200 || got == "H" {
		t.Errorf("logit_bias {\"H\": false} by token text = %d %s, want 200 without H", r.status, r.body)
	}
}

// TestRequestTokenCap: prompts x candidates x (prompt + max_tokens) over
// Config.MaxRequestTokens is a 400 naming the field that multiplies the
// work (issue 17 item 1).
func TestRequestTokenCap(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{MaxRequestTokens: 100})
	for _, tc := range []struct{ body, param string }{
		{`{"prompt":"hello","max_tokens":95}`, "max_tokens"},
		{`{"prompt":"hello","max_tokens":20,"n":4}`, "n"},
		{`{"prompt":"hello","max_tokens":20,"n":2,"best_of":4}`, "best_of"},
		{`{"prompt":["hello","hello","hello","hello"],"max_tokens":20}`, "prompt"},
		{`{"prompt":"hello","max_tokens":null}`, "max_tokens"},
	} {
		r := ts.post("/v1/completions", tc.body)
		if e := errorOf(t, r.body); r.status != 400 || e["param"] != tc.param || !strings.Contains(e["message"].(string), "--max-request-tokens") {
			t.Errorf("POST %s = %d %s, want 400 naming %s and the flag", tc.body, r.status, r.body, tc.param)
		}
	}
	if r := ts.post("/v1/completions", `{"prompt":"hello","max_tokens":20,"n":3}`); r.status != 200 {
		t.Errorf("3 x (6 + 20) tokens under a cap of 100 = %d %s, want 200", r.status, r.body)
	}
	r := ts.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}],"max_tokens":90}`)
	if r.status != 400 || errorOf(t, r.body)["param"] != "max_tokens" {
		t.Errorf("chat over the cap = %d %s, want 400 naming max_tokens", r.status, r.body)
	}
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"input":"hello","max_output_tokens":90,"stream":%v}`, stream)
		r = ts.post("/v1/responses", body)
		if e := errorOf(t, r.body); r.status != 400 || e["param"] != "max_output_tokens" || !strings.Contains(e["message"].(string), "--max-request-tokens") {
			t.Errorf("POST /v1/responses %s = %d %s, want 400 naming max_output_tokens and the flag", body, r.status, r.body)
		}
	}
	if r := ts.post("/v1/responses", `{"input":"hello","max_output_tokens":20}`); r.status != 200 {
		t.Errorf("responses under the cap = %d %s, want 200", r.status, r.body)
	}
}

// TestBodyBudget: the bytes of bodies being read or served are bounded
// across requests; a body that does not fit is a 503 before it is read,
// one over the size limit a 413 (issue 17 item 3).
func TestBodyBudget(t *testing.T) {
	const limit, budget, slowSize = 100000, 150000, 90000
	f := newFake()
	f.ctxSize = 1 << 20
	ts := newReadyServer(t, f, Config{MaxRequestBytes: limit, MaxBodyBytesInFlight: budget})
	addr := strings.TrimPrefix(ts.base, "http://")
	// A slow client: 90 kB announced, the first 10 kB sent (fasthttp reads
	// up to 8 KiB ahead before the handler runs).
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	head := `{"prompt":"` + strings.Repeat("x", 10000)
	fmt.Fprintf(slow, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", slowSize, head)
	waitFor(t, "the slow body to be reserved", func() bool { return ts.s.bodyBytes.Load() == slowSize })

	body := `{"prompt":"` + strings.Repeat("x ", 30000) + `","max_tokens":1}`
	r := ts.post("/v1/completions", body)
	if e := errorOf(t, r.body); r.status != 503 || !strings.Contains(e["message"].(string), "--max-inflight-bytes") || r.header.Get("Retry-After") == "" {
		t.Errorf("a body that does not fit beside a slow one = %d %v %s, want 503 naming the limit, with Retry-After", r.status, r.header, r.body)
	}
	if r := ts.post("/v1/completions", `{"prompt":"small","max_tokens":1}`); r.status != 200 {
		t.Errorf("a small body beside the slow one = %d %s, want 200", r.status, r.body)
	}
	// The slow body completes; its bytes are given back.
	rest := `","max_tokens":1}`
	io.WriteString(slow, rest+strings.Repeat(" ", slowSize-len(head)-len(rest)))
	reply, _ := io.ReadAll(io.LimitReader(slow, 12))
	if string(reply) != "HTTP/1.1 200" {
		t.Errorf("the slow request = %q, want 200", reply)
	}
	waitFor(t, "the slow body's bytes to be released", func() bool { return ts.s.bodyBytes.Load() == 0 })
	if r := ts.post("/v1/completions", body); r.status != 200 {
		t.Errorf("the 60 kB body once the budget is free = %d %s, want 200", r.status, r.body)
	}
	// Over the size limit: answered once fasthttp's read-ahead (8 KiB) is
	// in, the rest never read.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", limit+1, head)
	if reply, _ := io.ReadAll(c); !strings.HasPrefix(string(reply), "HTTP/1.1 413") || !strings.Contains(string(reply), "--max-request-bytes") {
		t.Errorf("a body over --max-request-bytes = %q, want 413 naming the flag", reply)
	}
}

// TestDecodeCaps: the arrays and objects that could hold a body's worth of
// tiny entries are capped while they are decoded (issue 17 item 3).
func TestDecodeCaps(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{MaxRequestBytes: 64 << 20})
	var lb strings.Builder
	for i := range maxLogitBias + 1 {
		if i > 0 {
			lb.WriteByte(',')
		}
		fmt.Fprintf(&lb, `"%d":1`, i)
	}
	tokens := strings.TrimSuffix(strings.Repeat("7,", maxDetokenize+1), ",")
	msgs := strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"a"},`, maxMessages+1), ",")
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/completions", `{"prompt":"x","logit_bias":{` + lb.String() + `}}`, "logit_bias"},
		{"/v1/completions", `{"prompt":"x","logit_bias":{` + lb.String()[:strings.Index(lb.String(), `"300"`)-1] + `}}`, "logit_bias"},
		{"/extras/detokenize", `{"tokens":[` + tokens + `]}`, "tokens"},
		{"/v1/chat/completions", `{"messages":[` + msgs + `]}`, "messages"},
	} {
		r := ts.post(tc.path, tc.body)
		if r.status != 400 || errorOf(t, r.body)["param"] != tc.param {
			t.Errorf("POST %s with %d bytes = %d %.200s, want 400 naming %s", tc.path, len(tc.body), r.status, r.body, tc.param)
		}
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeAmplification: decoding a body costs about its size, not the
// 14-20x of a generic tree (issue 17 item 3). A token array decodes into
// 4 bytes per id; messages into their strings.
func TestDecodeAmplification(t *testing.T) {
	tokens := `{"tokens":[` + strings.TrimSuffix(strings.Repeat("65,", 400000), ",") + `]}`
	msgs := `{"messages":[` + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"Could you tell me what the weather will be like in Paris tomorrow morning?"},`, 5000), ",") + `]}`
	var lb strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&lb, `"%d":-1,`, i)
	}
	bias := `{"prompt":"x","logit_bias":{` + strings.TrimSuffix(lb.String(), ",") + `}}`
	for _, tc := range []struct {
		name   string
		body   string
		factor float64
		decode func(b []byte) *Error
	}{
		{"detokenize tokens", tokens, 3, func(b []byte) *Error { _, e := decodeDetokenize(b, 1000); return e }},
		// Each message keeps its fields and a small map of them while
		// it is read; there are at most maxMessages.
		{"chat messages", msgs, 8, func(b []byte) *Error { _, e := decodeChat(grammar.Budget{}, b); return e }},
		// The map of biases is the decoded result itself: about 4x the
		// JSON text of short keys.
		{"logit_bias", bias, 6, func(b []byte) *Error { _, e := decodeCompletion(grammar.Budget{}, b); return e }},
	} {
		body := []byte(tc.body)
		var e *Error
		n := allocated(func() { e = tc.decode(body) })
		if e != nil {
			t.Fatalf("%s: %v", tc.name, e)
		}
		if raceEnabled {
			tc.factor *= 1.5 // the race runtime's own allocations and dropped pool objects
		}
		if got := float64(n) / float64(len(body)); got > tc.factor {
			t.Errorf("%s: decoding %d bytes allocated %d (%.1fx), want at most %.0fx", tc.name, len(body), n, got, tc.factor)
		}
	}
}
