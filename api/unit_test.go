package api

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/sampling/grammar"
)

func TestTextStream(t *testing.T) {
	cases := []struct {
		name   string
		stops  []string
		pieces []string
		want   []string // released per piece, then the flush
		stop   bool
	}{
		{"no stops", nil, []string{"ab", "c"}, []string{"ab", "c", ""}, false},
		{"stop inside one piece", []string{"X"}, []string{"abXcd"}, []string{"ab", ""}, true},
		{"stop across pieces", []string{"STOP"}, []string{"aS", "T", "O", "Pzz"}, []string{"a", "", "", "", ""}, true},
		{"false start released", []string{"STOP"}, []string{"aST", "x"}, []string{"a", "STx", ""}, false},
		{"held at end flushed", []string{"STOP"}, []string{"aSTO"}, []string{"a", "STO"}, false},
		{"earliest of two stops", []string{"cd", "b"}, []string{"abcd"}, []string{"a", ""}, true},
		{"utf8 split held", nil, []string{"h\xc3", "\xa9!"}, []string{"h", "é!", ""}, false},
		{"utf8 4-byte split", nil, []string{"\xf0\x9f", "\x98", "\x80"}, []string{"", "", "😀", ""}, false},
		{"invalid byte passed on", nil, []string{"a\xff"}, []string{"a\xff", ""}, false},
		{"stop with utf8", []string{"ö"}, []string{"w\xc3", "\xb6rld"}, []string{"w", "", ""}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &textStream{stops: c.stops}
			var got []string
			stopped := false
			for _, p := range c.pieces {
				out, st := s.add([]byte(p))
				got = append(got, string(out))
				if st {
					stopped = true
					break
				}
			}
			got = append(got, string(s.flush()))
			if strings.Join(got, "|") != strings.Join(c.want, "|") || stopped != c.stop {
				t.Errorf("textStream%v over %q = %q stop %v, want %q stop %v", c.stops, c.pieces, got, stopped, c.want, c.stop)
			}
		})
	}
}

func TestParseToolCalls(t *testing.T) {
	known := []tool{{name: "f"}, {name: "g"}}
	cases := []struct {
		name, text, content string
		calls               []string // name + " " + arguments
	}{
		{"hermes", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", []string{`f {"a":1}`}},
		{"hermes two with prefix", "Sure.\n<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"g\",\"arguments\":{\"b\":\"x\"}}</tool_call>", "Sure.", []string{"f {}", `g {"b":"x"}`}},
		{"llama3 parameters", `{"name": "f", "parameters": {"a": [1, 2]}}`, "", []string{`f {"a":[1,2]}`}},
		{"llama3 python_tag and ;", `<|python_tag|>{"name": "f", "parameters": {}}; {"name": "g", "parameters": {}}`, "", []string{"f {}", "g {}"}},
		{"mistral", `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]`, "", []string{`f {"a":1}`, "g {}"}},
		{"generic", `{"tool_call": {"name": "g", "arguments": {"q": "z"}}}`, "", []string{`g {"q":"z"}`}},
		{"generic many", `{"tool_calls": [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]}`, "", []string{"f {}", "g {}"}},
		{"arguments as string", `{"name": "f", "arguments": "{\"a\": 1}"}`, "", []string{`f {"a":1}`}},
		{"unknown function is text", `{"name": "h", "arguments": {}}`, `{"name": "h", "arguments": {}}`, nil},
		{"prose", "Just text.", "Just text.", nil},
		{"broken json is text", "<tool_call>{\"name\": \"f\", </tool_call>", "<tool_call>{\"name\": \"f\", </tool_call>", nil},
		{"json that is not a call", `{"a": 1}`, `{"a": 1}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			content, calls := parseToolCalls(c.text, known)
			var got []string
			for _, tc := range calls {
				got = append(got, tc.name+" "+tc.arguments)
				if len(tc.id) != 9 {
					t.Errorf("call id %q, want 9 characters", tc.id)
				}
			}
			if content != c.content || strings.Join(got, ";") != strings.Join(c.calls, ";") {
				t.Errorf("parseToolCalls(%q) = %q, %q, want %q, %q", c.text, content, got, c.content, c.calls)
			}
		})
	}
}

// failWriter fails every write after n bytes.
type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errors.New("connection reset")
	}
	f.n -= len(p)
	return len(p), nil
}

func TestSSEWriter(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	s := newSSEWriter(w)
	s.data([]byte(`{"a":1}`))
	if buf.String() != "data: {\"a\":1}\n\n" {
		t.Errorf("after data: wire = %q, want one flushed frame", buf.String())
	}
	s.error(&Error{Status: 400, Param: "template", Message: "template: bad \"x\""})
	s.done()
	want := "data: {\"a\":1}\n\n" +
		"event: error\ndata: {\"error\":{\"message\":\"template: bad \\\"x\\\"\",\"type\":\"invalid_request_error\",\"param\":\"template\",\"code\":400}}\n\n" +
		"data: [DONE]\n\n"
	if buf.String() != want {
		t.Errorf("wire = %q, want %q", buf.String(), want)
	}

	fw := bufio.NewWriterSize(&failWriter{n: 20}, 16)
	s = newSSEWriter(fw)
	if err := s.data([]byte(`{"x":"0123456789"}`)); err == nil {
		t.Errorf("data on a failing connection = nil, want the write error")
	}
	if err := s.done(); err == nil || err.Error() != "connection reset" {
		t.Errorf("done after a failure = %v, want the first error again", err)
	}
}

func TestSSEWriterAllocs(t *testing.T) {
	s := newSSEWriter(bufio.NewWriter(&failWriter{n: 1 << 30}))
	payload := []byte(`{"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"hello"}}]}`)
	if n := testing.AllocsPerRun(100, func() { s.data(payload) }); n != 0 {
		t.Errorf("sseWriter.data allocates %v times per event, want 0", n)
	}
}

func TestAppendJSONString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", `"plain"`},
		{"q\"b\\n\n\t\x01", `"q\"b\\n\n\t\u0001"`},
		{"<&>", `"\u003c\u0026\u003e"`},
		{"é😀", `"é😀"`},
		{"bad\xffbyte", "\"bad\ufffdbyte\""},
		{"\u2028", `"\u2028"`},
	}
	for _, c := range cases {
		if got := string(appendJSONString(nil, c.in)); got != c.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func FuzzDecodeChat(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
		`{"messages":[],"temperature":-1,"logit_bias":{"5":false}}`,
		`{"prompt":["a"],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string"}}}}`,
		`[1,2]`, `{"a":`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, e := decodeChat(grammar.Budget{}, body); (req == nil) == (e == nil) {
			t.Fatalf("decodeChat(%q) = %v, %v: want exactly one of request and error", body, req, e)
		} else if e != nil && (e.Status < 400 || e.Message == "") {
			t.Fatalf("decodeChat(%q) error %+v, want a 4xx with a message", body, e)
		}
		if req, e := decodeCompletion(grammar.Budget{}, body); (req == nil) == (e == nil) {
			t.Fatalf("decodeCompletion(%q) = %v, %v: want exactly one", body, req, e)
		}
		decodeEmbedding(body)
		decodeRerank(body)
		decodeDetokenize(body, 100)
	})
}

func TestLazyConstraint(t *testing.T) {
	f := newFake()
	src, err := grammar.ToolCallGrammar([]grammar.ToolFunction{{Name: "f", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)}},
		grammar.ToolCallOptions{Format: grammar.ToolFormatHermes})
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(src, "root")
	if err != nil {
		t.Fatal(err)
	}
	v, err := grammar.NewVocab(fakePieces, f.EOG())
	if err != nil {
		t.Fatal(err)
	}
	c := &lazyConstraint{trigger: []byte("<tool_call>"), piece: f.Piece, newMatcher: func() *grammar.Matcher { return grammar.NewMatcher(g, v) }}
	masked := func() (x, nl bool) {
		logits := make([]float32, fakeVocab)
		if err := c.Mask(logits); err != nil {
			t.Fatal(err)
		}
		return logits['x'+3] < -1e30, logits['\n'+3] < -1e30
	}
	feed := func(s string) {
		ids, _ := f.Tokenize(s, false, false)
		for _, id := range ids {
			if err := c.Accept(id); err != nil {
				t.Fatalf("Accept(%q) = %v", s, err)
			}
		}
	}
	feed("Sure, x: <tool_ca")
	if x, nl := masked(); x || nl {
		t.Errorf("before the trigger: x masked %v, newline masked %v, want nothing masked", x, nl)
	}
	feed("ll>")
	if x, nl := masked(); !x || nl {
		t.Errorf("after the trigger: x masked %v, newline masked %v, want x masked and newline allowed", x, nl)
	}
	feed("\n{\"name\": \"f\", \"arguments\": {\"a\": 1")
	if err := c.Accept('x' + 3); err == nil {
		t.Errorf("Accept(x) inside the call = nil, want the grammar's rejection")
	}
}

func TestChunkBuf(t *testing.T) {
	c := newChunkBuf("chatcmpl-x", "chat.completion.chunk", 7, "m\"1")
	// Copied one at a time: the buffer is reused by the next call.
	chat := string(c.chatContent(2, []byte("hé\n")))
	completion := string(c.completionText(0, []byte("a\"b")))
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"chat", chat, `{"id":"chatcmpl-x","object":"chat.completion.chunk","created":7,"model":"m\"1","choices":[{"index":2,"delta":{"content":"hé\n"},"finish_reason":null}]}`},
		{"completion", completion, `{"id":"chatcmpl-x","object":"chat.completion.chunk","created":7,"model":"m\"1","choices":[{"text":"a\"b","index":0,"logprobs":null,"finish_reason":null}]}`},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s chunk = %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	s := newSSEWriter(bufio.NewWriter(&failWriter{n: 1 << 30}))
	text := []byte("hello")
	if n := testing.AllocsPerRun(100, func() { s.data(c.chatContent(0, text)) }); n != 0 {
		t.Errorf("a chat content event allocates %v times, want 0", n)
	}
}
