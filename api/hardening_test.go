package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/engine"
)

// jsonString returns s as a JSON string literal.
func jsonQuoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestUnsatisfiableGrammarRequests checks that grammars and schemas no
// output can satisfy are 400s naming their field at validation, and that
// a grammar that reaches a dead end during generation is a 4xx (422)
// error, in a body or as the stream's error event, never a 500.
func TestUnsatisfiableGrammarRequests(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	var props []string
	for i := range 8000 {
		props = append(props, fmt.Sprintf(`"k%d":{"type":"integer"}`, i))
	}
	for _, tc := range []struct {
		name, body, param string
	}{
		{"surrogate", `{"prompt":"x","grammar":` + jsonQuoted(`root ::= "\uD800"`) + `}`, "grammar"},
		{"empty class", `{"prompt":"x","grammar":` + jsonQuoted(`root ::= [^\x00-\U0010FFFF]`) + `}`, "grammar"},
		{"8,000 optional properties", `{"prompt":"x","json_schema":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}`, "json_schema"},
	} {
		r := ts.post("/v1/completions", tc.body)
		if r.status != 400 || errorOf(t, r.body)["param"] != tc.param {
			t.Errorf("%s: POST /v1/completions = %d %.300s, want 400 naming %s", tc.name, r.status, r.body, tc.param)
		}
	}

	// Fine at the start, too ambiguous after the first character.
	var g strings.Builder
	g.WriteString("root ::= \"H\" (a | b)\n")
	for _, r := range []string{"a", "b"} {
		g.WriteString(r + " ::= ")
		for i := range 3000 {
			if i > 0 {
				g.WriteString(" | ")
			}
			fmt.Fprintf(&g, `"%s%d"`, r, i)
		}
		g.WriteString("\n")
	}
	body := `{"prompt":"x","max_tokens":4,"grammar":` + jsonQuoted(g.String())
	r := ts.post("/v1/completions", body+`}`)
	if r.status != 422 || errorOf(t, r.body)["type"] != "unprocessable_entity_error" || errorOf(t, r.body)["param"] != "grammar" {
		t.Errorf("POST /v1/completions with a grammar that dead-ends = %d %.300s, want 422", r.status, r.body)
	}
	r = ts.post("/v1/completions", body+`,"stream":true}`)
	evs := parseSSE(t, r.body)
	if last := evs[len(evs)-1]; last.event != "error" || errorOf(t, []byte(last.data))["code"] != 422.0 || errorOf(t, []byte(last.data))["param"] != "grammar" {
		t.Errorf("streamed completion with a grammar that dead-ends ends %+v, want an error event with code 422", last)
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rawRequest sends req on a new connection and returns everything the
// server writes until it closes the connection (after logging).
func rawRequest(t *testing.T, ts *testServer, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(c)
	return string(out)
}

// TestRequestBytesNeverEchoed checks that a request fasthttp cannot parse
// is answered and logged without its raw bytes: an API key in it appears
// in neither the response nor the log.
func TestRequestBytesNeverEchoed(t *testing.T) {
	var logs syncBuffer
	ts := newReadyServer(t, newFake(), Config{APIKey: "SECRET-KEY-123", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, req := range []string{
		"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer SECRET-KEY-123\r\nContent-Length: zz\r\n\r\n",
		"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer SECRET-KEY-123\r\nno colon here\r\n\r\n",
		"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer SECRET-KEY-123\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	} {
		out := rawRequest(t, ts, req)
		if !strings.HasPrefix(out, "HTTP/1.1 4") {
			t.Errorf("malformed request %q answered %.80q, want a 4xx", req, out)
		}
		if strings.Contains(out, "SECRET") {
			t.Errorf("malformed request %q answered with its bytes: %q", req, out)
		}
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("the log holds request bytes:\n%s", logs.String())
	}
}

// doHost sends a request with the given Host header and extra headers
// (pairs); contentType "" sends none.
func (ts *testServer) doHost(method, path, body, host, contentType string, hdr ...string) response {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.base+path, strings.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}

// TestBrowserGuard drives the server as a web page of another origin
// would: a rebound Host name, cross-origin POSTs (the text/plain and form
// bodies a page sends without a preflight included) and foreign
// preflights are refused; clients that are no browser page get through
// whatever their content type; listed origins and hosts get through, with
// CORS headers.
func TestBrowserGuard(t *testing.T) {
	const body = `{"prompt":"x","max_tokens":2}`
	ts := newReadyServer(t, newFake(), Config{})
	self := strings.TrimPrefix(ts.base, "http://")
	for _, tc := range []struct {
		name, method, path, host, ctype string
		hdr                             []string
		status                          int
	}{
		// curl -d sends a form content type, other clients none or
		// text/plain: without Origin or Sec-Fetch-Site the body is JSON.
		{"text/plain body", "POST", "/v1/completions", "", "text/plain", nil, 200},
		{"form body", "POST", "/v1/completions", "", "application/x-www-form-urlencoded", nil, 200},
		{"no content type", "POST", "/v1/completions", "", "", nil, 200},
		{"json with charset", "POST", "/v1/completions", "", "application/json; charset=utf-8", nil, 200},
		// What a page of another site sends without a preflight.
		{"cross-site text/plain body", "POST", "/v1/completions", "", "text/plain", []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403},
		{"old browser's form body", "POST", "/v1/completions", "", "application/x-www-form-urlencoded", []string{"Origin", "http://evil.example"}, 403},
		{"rebound host", "POST", "/v1/completions", "evil.example:8080", "application/json", nil, 403},
		{"rebound host, health", "GET", "/health", "evil.example", "", nil, 403},
		{"localhost", "POST", "/v1/completions", "localhost:1234", "application/json", nil, 200},
		{"loopback ip", "GET", "/v1/models", "127.0.0.1", "", nil, 200},
		{"foreign origin", "POST", "/v1/completions", "", "application/json", []string{"Origin", "http://evil.example"}, 403},
		// A safe method passes (the page cannot read the answer: no
		// CORS headers).
		{"foreign origin get", "GET", "/v1/models", "", "", []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 200},
		{"foreign preflight", "OPTIONS", "/v1/completions", "", "", []string{"Origin", "http://evil.example", "Access-Control-Request-Method", "POST"}, 403},
		{"same origin", "POST", "/v1/completions", "", "application/json", []string{"Origin", "http://" + self}, 200},
		{"same origin text/plain", "POST", "/v1/completions", "", "text/plain", []string{"Origin", "http://" + self, "Sec-Fetch-Site", "same-origin"}, 200},
	} {
		r := ts.doHost(tc.method, tc.path, body, tc.host, tc.ctype, tc.hdr...)
		if r.status != tc.status {
			t.Errorf("%s: %s %s = %d %s, want %d", tc.name, tc.method, tc.path, r.status, r.body, tc.status)
		}
		if got := r.header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("%s: Access-Control-Allow-Origin %q, want none (no --cors-origins)", tc.name, got)
		}
		if tc.status >= 400 && errorOf(t, r.body)["message"] == "" {
			t.Errorf("%s: %d without an error message", tc.name, r.status)
		}
	}

	ts = newReadyServer(t, newFake(), Config{CORSOrigins: []string{"http://app.example"}, AllowedHosts: []string{"box.lan"}})
	r := ts.doHost("OPTIONS", "/v1/chat/completions", "", "", "", "Origin", "http://app.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization,content-type")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "http://app.example" ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("preflight from a listed origin = %d %v, want 204 with CORS headers", r.status, r.header)
	}
	r = ts.doHost("POST", "/v1/completions", body, "box.lan:8080", "application/json", "Origin", "http://app.example")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "http://app.example" {
		t.Errorf("POST from a listed origin to an allowed host = %d %v %s, want 200 with Access-Control-Allow-Origin", r.status, r.header, r.body)
	}
	if r := ts.doHost("POST", "/v1/completions", body, "", "application/json", "Origin", "http://evil.example"); r.status != 403 {
		t.Errorf("POST from an unlisted origin = %d, want 403", r.status)
	}
}

// The WWW-Authenticate challenges of a 401 (RFC 6750 3).
const (
	bareChallenge         = `Bearer realm="vkllm"`
	invalidTokenChallenge = `Bearer realm="vkllm", error="invalid_token", error_description="the API key is wrong"`
)

// TestAuthScheme checks the Bearer scheme in any letter case (RFC 7235),
// wrong keys of every length, and /health open without a key.
func TestAuthScheme(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{APIKey: "sekret"})
	for _, tc := range []struct {
		auth   string
		status int
	}{
		{"Bearer sekret", 200}, {"bearer sekret", 200}, {"BEARER sekret", 200},
		{"Bearer sekre", 401}, {"Bearer sekrets", 401}, {"Bearer ", 401}, {"Basic sekret", 401}, {"sekret", 401}, {"", 401},
	} {
		r := ts.do("GET", "/v1/models", "", "Authorization", tc.auth)
		if r.status != tc.status {
			t.Errorf("GET /v1/models with Authorization %q = %d, want %d", tc.auth, r.status, tc.status)
		}
		// A 401 carries the Bearer challenge (RFC 6750 3): a wrong
		// Bearer token is an invalid_token, no Bearer token none.
		want := ""
		if tc.status == 401 {
			want = bareChallenge
			if strings.HasPrefix(strings.ToLower(tc.auth), "bearer ") && strings.TrimSpace(tc.auth[len("bearer "):]) != "" {
				want = invalidTokenChallenge
			}
		}
		if r.header.Get("WWW-Authenticate") != want {
			t.Errorf("GET /v1/models with Authorization %q: WWW-Authenticate %q, want %q", tc.auth, r.header.Get("WWW-Authenticate"), want)
		}
	}
	for _, path := range []string{"/metrics", "/props", "/slots"} {
		if r := ts.do("GET", path, ""); r.status != 401 || r.header.Get("WWW-Authenticate") != bareChallenge {
			t.Errorf("GET %s without a key = %d, WWW-Authenticate %q; want 401, %s", path, r.status, r.header.Get("WWW-Authenticate"), bareChallenge)
		}
		if r := ts.do("GET", path, "", "Authorization", "Bearer nope"); r.status != 401 || r.header.Get("WWW-Authenticate") != invalidTokenChallenge {
			t.Errorf("GET %s with a wrong key = %d, WWW-Authenticate %q; want 401, %s", path, r.status, r.header.Get("WWW-Authenticate"), invalidTokenChallenge)
		}
	}
	r := ts.do("POST", "/v1/completions", `{"prompt":"x"}`, "Authorization", "Bearer nope")
	if r.status != 401 || r.header.Get("WWW-Authenticate") != invalidTokenChallenge {
		t.Errorf("POST /v1/completions with a wrong key = %d, WWW-Authenticate %q; want 401, %s", r.status, r.header.Get("WWW-Authenticate"), invalidTokenChallenge)
	}
	if r := ts.do("GET", "/health", ""); r.status != 200 {
		t.Errorf("GET /health without a key = %d, want 200 (open)", r.status)
	}
}

// TestLargeHeaders checks that headers of some KiB are read, and larger
// ones answered 431 with a plain message.
func TestLargeHeaders(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	if r := ts.do("GET", "/v1/models", "", "X-Big", strings.Repeat("a", 8<<10)); r.status != 200 {
		t.Errorf("GET with an 8 KiB header = %d %s, want 200", r.status, r.body)
	}
	// The server answers before it has read the whole request and closes,
	// so a client that is still writing may see a reset (net/http then
	// reports only that): write from a goroutine and read the answer at once.
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go fmt.Fprintf(c, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET with a 64 KiB header: reading the answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 431 {
		t.Fatalf("GET with a 64 KiB header = %d %s, want 431", resp.StatusCode, body)
	}
	if msg := errorOf(t, body)["message"].(string); !strings.Contains(msg, "headers too large") || strings.Contains(msg, "aaaa") {
		t.Errorf("431 message %q, want a plain message without request bytes", msg)
	}
}

// TestRouteVariants checks that trailing-slash and letter-case variants of
// routes are 404s with the error body, not redirects.
func TestRouteVariants(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/completions/"}, {"GET", "/v1/models/"}, {"GET", "/V1/Models"}, {"POST", "/v1/Chat/Completions"}, {"GET", "/health/"},
	} {
		r := ts.do(c.method, c.path, `{"prompt":"x"}`)
		if r.status != 404 || errorOf(t, r.body)["type"] != "not_found_error" {
			t.Errorf("%s %s = %d %s, want 404 not_found_error", c.method, c.path, r.status, r.body)
		}
	}
}

// nanLogprobs is a backend whose log-probabilities are NaN, which JSON
// cannot carry.
type nanLogprobs struct{ *fakeBackend }

func (n nanLogprobs) Generate(ctx context.Context, reqs []*GenerateRequest, emit func(int, *engine.Event) error) error {
	return n.fakeBackend.Generate(ctx, reqs, func(i int, ev *engine.Event) error {
		ev.Logprob = float32(math.NaN())
		return emit(i, ev)
	})
}

// TestStreamChunkEncodeError checks that a chunk json.Marshal refuses (a
// NaN logprob) ends the stream with an error event, never a "data: "
// frame without data.
func TestStreamChunkEncodeError(t *testing.T) {
	ts := newReadyServer(t, nanLogprobs{newFake()}, Config{})
	for _, body := range []string{
		`{"prompt":"x","max_tokens":3,"stream":true,"logprobs":1}`,
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true,"logprobs":true}`,
	} {
		path := "/v1/completions"
		if strings.Contains(body, "messages") {
			path = "/v1/chat/completions"
		}
		r := ts.post(path, body)
		evs := parseSSE(t, r.body)
		for _, ev := range evs {
			if ev.event == "" && ev.data == "" {
				t.Errorf("POST %s %s: stream %q has a frame without data", path, body, r.body)
			}
		}
		if last := evs[len(evs)-1]; last.event != "error" || errorOf(t, []byte(last.data))["code"] != 500.0 {
			t.Errorf("POST %s %s: stream ends %+v, want an error event with code 500", path, body, last)
		}
	}
}

// TestSSEWriterJSON checks sseWriter.json, the call the stream paths use
// for encoded chunks: a value JSON cannot carry ends the stream with an
// error event naming the cause, and nothing is written after it.
func TestSSEWriterJSON(t *testing.T) {
	var buf bytes.Buffer
	s := newSSEWriter(bufio.NewWriter(&buf))
	if err := s.json(map[string]float64{"a": 1}); err != nil || buf.String() != "data: {\"a\":1}\n\n" {
		t.Fatalf("json({a:1}) = %v, wire %q", err, buf.String())
	}
	buf.Reset()
	if err := s.json(map[string]float64{"a": math.NaN()}); !errors.Is(err, errEncode) {
		t.Errorf("json(NaN) = %v, want errEncode", err)
	}
	if got := buf.String(); !strings.HasPrefix(got, "event: error\ndata: ") || !strings.Contains(got, "NaN") || !strings.Contains(got, `"code":500`) {
		t.Errorf("json(NaN) wrote %q, want an error event with code 500 naming NaN", got)
	}
	buf.Reset()
	if err := s.done(); err == nil || buf.Len() != 0 {
		t.Errorf("done after an encoding error = %v and %q, want the error and nothing written", err, buf.String())
	}
}

// referenceDetok is the fake backend with the reference's detokenizer, as
// the engine's: control tokens produce nothing, and the first token of a
// call loses one leading space (SentencePiece's add_space_prefix).
type referenceDetok struct{ *fakeBackend }

func (r referenceDetok) Detokenize(tokens []int32) (string, error) {
	var b strings.Builder
	for i, id := range tokens {
		p := r.Piece(id)
		if id < 0 || id >= fakeVocab {
			return "", fmt.Errorf("token %d is outside the vocabulary", id)
		}
		if i == 0 && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		b.Write(p)
	}
	return b.String(), nil
}

// TestDetokenizeSpecial checks that /extras/detokenize returns the text of
// special tokens, as /extras/tokenize parses it, and keeps the spaces the
// backend's decoder keeps.
func TestDetokenizeSpecial(t *testing.T) {
	ts := newReadyServer(t, referenceDetok{newFake()}, Config{})
	for _, tc := range []struct {
		tokens, want string
	}{
		{"[1,35,107,108,259,2]", "<s> hi[TOOL_CALLS]</s>"}, // <s> " hi" [TOOL_CALLS] </s>
		{"[35,107,108]", "hi"},                             // a first token loses its space
		{"[107,259,259,35,108]", "h[TOOL_CALLS][TOOL_CALLS] i"},
		{"[]", ""},
	} {
		r := ts.post("/extras/detokenize", `{"tokens":`+tc.tokens+`}`)
		if got := decodeBody(t, r.body)["text"]; got != tc.want {
			t.Errorf("detokenize %s = %q (%s), want %q", tc.tokens, got, r.body, tc.want)
		}
	}
	r := ts.post("/extras/tokenize", `{"input":"<s>hi</s>"}`)
	toks, _ := json.Marshal(decodeBody(t, r.body)["tokens"])
	r = ts.post("/extras/detokenize", `{"tokens":`+string(toks)+`}`)
	if got := decodeBody(t, r.body)["text"]; got != "<s><s>hi</s>" {
		t.Errorf("detokenize(tokenize(<s>hi</s>)) = %q, want <s><s>hi</s> (BOS added, then the text)", got)
	}
}

// TestBothFramingHeaders: a request with both Transfer-Encoding and
// Content-Length (the shape of request smuggling: a proxy and the server
// may split the bytes differently) is a 400 and its connection is closed,
// whichever header comes first and whatever the route (issue 34 item 12).
func TestBothFramingHeaders(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	const body = `{"prompt":"x","max_tokens":1}`
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	for _, tc := range []struct{ name, req string }{
		{"content-length first", "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
			fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(body)) + chunked},
		{"transfer-encoding first", "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
			fmt.Sprintf("Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n", len(body)) + chunked},
		{"identity", "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
			fmt.Sprintf("Transfer-Encoding: identity\r\nContent-Length: %d\r\n\r\n", len(body)) + body},
		{"lower case", "POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n" +
			fmt.Sprintf("transfer-encoding: chunked\r\ncontent-length: %d\r\n\r\n", len(body)) + chunked},
		{"get health", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// A second request follows on the same connection: the
			// server must not answer it.
			go io.WriteString(c, tc.req+"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			rd := bufio.NewReader(c)
			resp, err := http.ReadResponse(rd, nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 400 || !resp.Close {
				t.Fatalf("request with both framing headers = %d (Connection: %q) %s, want 400 and Connection: close",
					resp.StatusCode, resp.Header.Get("Connection"), b)
			}
			if msg := errorOf(t, b)["message"].(string); !strings.Contains(msg, "Transfer-Encoding") || !strings.Contains(msg, "Content-Length") {
				t.Errorf("400 message %q, want it to name both headers", msg)
			}
			// The server closes: the next read ends with EOF, no answer
			// to the request that followed.
			if rest, err := io.ReadAll(rd); err != nil || len(rest) != 0 {
				t.Errorf("after the 400 the connection gave %q, %v; want it closed", rest, err)
			}
		})
	}
	// One header alone is fine.
	if r := ts.post("/v1/completions", body); r.status != 200 {
		t.Errorf("POST with Content-Length only = %d %s, want 200", r.status, r.body)
	}
}

// TestOpsRoutesKeepAlive: /health, /metrics, the chat page and an unknown
// route keep their connection like the API routes, so a probe or a
// scraper can reuse it (issue 34 item 13).
func TestOpsRoutesKeepAlive(t *testing.T) {
	ts := newReadyServer(t, newFake(), Config{})
	for _, path := range []string{"/health", "/metrics", "/", "/ui/app.js", "/nope", "/v1/models"} {
		t.Run(path, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rd := bufio.NewReader(c)
			for i := range 2 {
				if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path); err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
				resp, err := http.ReadResponse(rd, nil)
				if err != nil {
					t.Fatalf("request %d on one connection: %v", i+1, err)
				}
				io.Copy(io.Discard, resp.Body)
				if resp.Close {
					t.Fatalf("GET %s (request %d) = %d with Connection: close, want the connection kept", path, i+1, resp.StatusCode)
				}
			}
		})
	}
}

// TestHeadHealth: HEAD /health answers as GET does, without the body, so
// a probe that sends HEAD sees 503 while loading and 200 once ready
// (issue 34 item 16).
func TestHeadHealth(t *testing.T) {
	ts := startServer(t, Config{})
	for _, want := range []int{503, 200} {
		if want == 200 {
			if err := ts.s.Ready(newFake()); err != nil {
				t.Fatal(err)
			}
		}
		get := ts.do("GET", "/health", "")
		head := ts.do("HEAD", "/health", "")
		if head.status != want || get.status != want || len(head.body) != 0 {
			t.Errorf("HEAD /health = %d with %d body bytes, GET = %d; want %d and no body", head.status, len(head.body), get.status, want)
		}
		if head.header.Get("Content-Type") != get.header.Get("Content-Type") {
			t.Errorf("HEAD /health Content-Type %q, GET's %q", head.header.Get("Content-Type"), get.header.Get("Content-Type"))
		}
	}
}

// TestPropsModelPath: /props names the model file without its folders,
// which tell a client about the server's disk, unless
// Config.PropsFullPath asks for the whole path (issue 34 item 16).
func TestPropsModelPath(t *testing.T) {
	const path = "/srv/private/models/tiny.gguf"
	for _, tc := range []struct {
		name string
		full bool
		want string
	}{
		{"file name", false, "tiny.gguf"},
		{"full path", true, path},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newReadyServer(t, newFake(), Config{ModelPath: path, PropsFullPath: tc.full})
			r := ts.do("GET", "/props", "")
			if got := decodeBody(t, r.body)["model_path"]; r.status != 200 || got != tc.want {
				t.Errorf("/props model_path = %v (status %d), want %q", got, r.status, tc.want)
			}
		})
	}
}

// TestMultipartRefusedUnread: a multipart body is refused with a 415
// naming its type before a byte of it is read, whether or not the request
// carries the API key: the server answers while the client has sent only
// the headers, and no body bytes are taken from the in-flight budget
// (issue 34 item 4; fasthttp used to parse such bodies before any handler
// ran).
func TestMultipartRefusedUnread(t *testing.T) {
	const limit = 1 << 20
	ts := newReadyServer(t, newFake(), Config{APIKey: "k", MaxRequestBytes: limit})
	part := "--xyz\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\n"
	part += strings.Repeat("a", 8<<10-len(part))
	for _, tc := range []struct{ name, ctype, framing, auth string }{
		{"form-data without a key", "multipart/form-data; boundary=xyz", fmt.Sprintf("Content-Length: %d", limit), ""},
		{"form-data with the key", "multipart/form-data; boundary=xyz", fmt.Sprintf("Content-Length: %d", limit), "Authorization: Bearer k\r\n"},
		{"form-data chunked", "Multipart/Form-Data; boundary=xyz", "Transfer-Encoding: chunked", ""},
		{"mixed", "multipart/mixed; boundary=xyz", fmt.Sprintf("Content-Length: %d", limit), "Authorization: Bearer k\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The headers and the 8 KiB fasthttp reads ahead of any
			// handler: the rest of the body never comes, so an answer
			// shows that nothing waited for it.
			if _, err := fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: %s\r\n%s\r\n\r\n%s", tc.auth, tc.ctype, tc.framing, part); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer before the body was sent: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			mediaType, _, _ := strings.Cut(tc.ctype, ";")
			if msg, _ := errorOf(t, b)["message"].(string); resp.StatusCode != 415 || !strings.Contains(msg, mediaType) {
				t.Errorf("POST with Content-Type %q = %d %s, want 415 naming %q", tc.ctype, resp.StatusCode, b, mediaType)
			}
			if !resp.Close {
				t.Errorf("POST with Content-Type %q kept its connection with the body unread", tc.ctype)
			}
			if n := ts.s.bodyBytes.Load(); n != 0 {
				t.Errorf("body bytes in flight after the refusal = %d, want 0", n)
			}
		})
	}
	// A JSON body still passes, whatever type curl -d declares.
	if r := ts.do("POST", "/v1/completions", `{"prompt":"x","max_tokens":2}`, "Authorization", "Bearer k", "Content-Type", "application/x-www-form-urlencoded"); r.status != 200 {
		t.Errorf("form-typed JSON body = %d %s, want 200", r.status, r.body)
	}
}

// TestRetryAfter: every 503 says when to try again (Retry-After): while
// the model loads (/health, HEAD included, and every other route), and
// for a full queue, a shutdown, a cancelled compile or generation and the
// body budget (issue 34 item 16).
func TestRetryAfter(t *testing.T) {
	ts := startServer(t, Config{})
	for _, c := range []struct{ method, path string }{
		{"GET", "/health"}, {"HEAD", "/health"}, {"GET", "/v1/models"}, {"GET", "/props"}, {"GET", "/slots"},
		{"POST", "/v1/completions"}, {"POST", "/v1/chat/completions"}, {"POST", "/v1/embeddings"},
	} {
		r := ts.do(c.method, c.path, `{}`)
		if r.status != 503 || r.header.Get("Retry-After") != "1" {
			t.Errorf("%s %s while loading = %d, Retry-After %q; want 503, 1", c.method, c.path, r.status, r.header.Get("Retry-After"))
		}
	}
	s := NewServer(Config{MaxRequestBytes: 1 << 10})
	for _, e := range []*Error{errShuttingDown, errQueueFull, errCompileCancelled, s.errBodyBudget(1), errorf(503, "", "generation cancelled: x")} {
		var ctx fasthttp.RequestCtx
		s.writeError(&ctx, e)
		if got := string(ctx.Response.Header.Peek("Retry-After")); ctx.Response.StatusCode() != 503 || got != "1" {
			t.Errorf("writeError(%q) = %d, Retry-After %q; want 503, 1", e.Message, ctx.Response.StatusCode(), got)
		}
	}
}

// TestHeadGetRoutes: every GET route answers HEAD as GET, with the same
// status and Content-Type and no body, the API key checked alike (issue
// 34 item 16).
func TestHeadGetRoutes(t *testing.T) {
	b := newFake()
	ts := newReadyServer(t, b, Config{APIKey: "k"})
	for _, path := range []string{"/health", "/v1/models", "/v1/models/" + b.Info().Name, "/v1/models/other", "/metrics", "/props", "/slots", "/", "/ui/app.js", "/ui/style.css"} {
		get := ts.do("GET", path, "", "Authorization", "Bearer k")
		head := ts.do("HEAD", path, "", "Authorization", "Bearer k")
		if get.status == 404 && path != "/v1/models/other" {
			t.Errorf("GET %s = 404, want a route", path)
		}
		if head.status != get.status || len(head.body) != 0 || head.header.Get("Content-Type") != get.header.Get("Content-Type") {
			t.Errorf("HEAD %s = %d %q with %d body bytes; GET = %d %q; want the same status and type, no body",
				path, head.status, head.header.Get("Content-Type"), len(head.body), get.status, get.header.Get("Content-Type"))
		}
		if path == "/health" || path == "/" || strings.HasPrefix(path, "/ui/") {
			continue // open without a key
		}
		if r := ts.do("HEAD", path, ""); r.status != 401 || r.header.Get("WWW-Authenticate") != bareChallenge {
			t.Errorf("HEAD %s without a key = %d, WWW-Authenticate %q; want 401, %s", path, r.status, r.header.Get("WWW-Authenticate"), bareChallenge)
		}
	}
}
