package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// docExample is one curl command of a Markdown code block and what the
// document shows it answering.
type docExample struct {
	file  string // the document, relative to the repository
	line  int    // the command's first line (1-based)
	lines int    // how many lines the command takes
	cmd   string // the command as the shell reads it
	out   string // the lines shown after it, up to the next "$ " line ("" when none)
	// serve is the "vkllm serve" line of the command's code block, if any:
	// the server configuration the example needs.
	serve string
}

// extractDocExamples returns the curl commands of the code blocks of a
// Markdown document. A command starts at a line beginning with "curl" or
// "$ curl" and goes on while its line ends with a backslash or its quotes
// are open (bash -n says whether the text so far is complete). Every code
// line mentioning curl must belong to a command: an error names any
// other, so that no example goes untested unnoticed.
func extractDocExamples(file string, src []byte) ([]docExample, error) {
	var out []docExample
	lines := strings.Split(string(src), "\n")
	var block []int // line indexes of the current code block
	inBlock := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if inBlock {
				ex, err := blockExamples(file, lines, block)
				if err != nil {
					return nil, err
				}
				out = append(out, ex...)
				block = block[:0]
			}
			inBlock = !inBlock
			continue
		}
		if inBlock {
			block = append(block, i)
		}
	}
	return out, nil
}

func blockExamples(file string, lines []string, block []int) ([]docExample, error) {
	var out []docExample
	serve := ""
	for _, i := range block {
		if l := strings.TrimPrefix(lines[i], "$ "); strings.HasPrefix(l, "vkllm serve") || strings.HasPrefix(l, "bin/vkllm serve") {
			serve = l
		}
	}
	for k := 0; k < len(block); k++ {
		i := block[k]
		l := lines[i]
		prompt := strings.HasPrefix(l, "$ ")
		l = strings.TrimPrefix(l, "$ ")
		if !strings.HasPrefix(l, "curl ") {
			if strings.Contains(l, "curl ") {
				return nil, fmt.Errorf("%s:%d: a curl command the example runner does not understand: %q", file, i+1, lines[i])
			}
			continue
		}
		cmd := l
		n := 1
		for strings.HasSuffix(cmd, "\\") || !shellComplete(cmd) {
			if k+n >= len(block) {
				return nil, fmt.Errorf("%s:%d: the curl command does not end within its code block", file, i+1)
			}
			if strings.HasSuffix(cmd, "\\") {
				cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(lines[block[k+n]])
			} else {
				cmd += "\n" + lines[block[k+n]]
			}
			n++
		}
		ex := docExample{file: file, line: i + 1, lines: n, cmd: cmd, serve: serve}
		k += n - 1
		if prompt {
			var shown []string
			for k+1 < len(block) && !strings.HasPrefix(lines[block[k+1]], "$ ") {
				k++
				shown = append(shown, lines[block[k]])
			}
			ex.out = strings.TrimRight(strings.Join(shown, "\n"), "\n")
		}
		out = append(out, ex)
	}
	return out, nil
}

// shellComplete reports whether bash reads cmd as a complete command
// (no quote or substitution left open).
func shellComplete(cmd string) bool {
	return exec.Command("bash", "-n", "-c", cmd).Run() == nil
}

// topLevelKeys returns the keys of the outermost JSON object of s, which
// may be cut short ("..." in a document), and the string values among
// them.
func topLevelKeys(s string) (keys []string, strs map[string]string) {
	strs = map[string]string{}
	depth := 0
	var str strings.Builder
	inStr, esc := false, false
	last, key := "", ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
				str.WriteByte(c)
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				last = str.String()
			default:
				str.WriteByte(c)
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			str.Reset()
		case '{', '[':
			depth++
			last = ""
		case '}', ']':
			depth--
			last = ""
		case ':':
			if depth == 1 && last != "" {
				key = last
				keys = append(keys, key)
				// A string value follows at once?
				rest := strings.TrimLeft(s[i+1:], " ")
				if strings.HasPrefix(rest, `"`) {
					if v, err := strconv.Unquote(rest[:strings.IndexByte(rest[1:], '"')+2]); err == nil {
						strs[key] = v
					}
				}
			}
			last = ""
		case ',':
			last = ""
		}
	}
	return keys, strs
}

// docSSE splits an event stream (as shown or as answered) into its events.
func docSSE(s string) []sseEvent {
	var out []sseEvent
	for _, frame := range strings.Split(strings.TrimSpace(s), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(frame, "\n") {
			switch {
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[len("event: "):]
			}
		}
		out = append(out, ev)
	}
	return out
}

// docExpect is what a shown output says of the answer.
type docExpect struct {
	status   int    // the HTTP status
	trailer  string // a last line curl -w prints (the status code), "" for none
	sse      bool
	body     string // the shown body (JSON, or the event stream)
	errType  string // error.type and error.param of an error body
	errParam any
}

func expectOf(out string) docExpect {
	e := docExpect{status: 200, body: out}
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		if n, err := strconv.Atoi(out[i+1:]); err == nil && n >= 100 && n < 600 {
			e.trailer, e.body = out[i+1:], strings.TrimRight(out[:i], "\n")
		}
	}
	e.sse = strings.HasPrefix(e.body, "data: ") || strings.HasPrefix(e.body, "event: ")
	errJSON := e.body
	if e.sse {
		errJSON = ""
		for _, ev := range docSSE(e.body) {
			if ev.event == "error" {
				errJSON = ev.data
			}
		}
	}
	var eb struct {
		Error *struct {
			Type  string `json:"type"`
			Param any    `json:"param"`
			Code  int    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(errJSON), &eb) == nil && eb.Error != nil {
		e.errType, e.errParam = eb.Error.Type, eb.Error.Param
		if !e.sse {
			e.status = eb.Error.Code
		}
	}
	if e.trailer != "" {
		e.status, _ = strconv.Atoi(e.trailer)
	}
	return e
}

// docExampleServer names the server configuration an example needs.
type docExampleServer int

const (
	// docTextServer serves a generated llama (every route, embeddings and
	// rerank included, works with a decoder) on the Vulkan device. The
	// documents run their examples on `make run`'s default model or a
	// real one; the shapes of the answers are the model's choice of
	// neither.
	docTextServer docExampleServer = iota
	// docImageServer serves the gemma3 pair of fixtures/mmproj, as the
	// examples' "vkllm serve ... --mmproj" line does; the examples run in
	// that folder, where their image is.
	docImageServer
)

// TestDocExamples runs every curl example of README.md and docs/*.md with
// curl against a server and checks that it answers as the document shows:
// the status (2xx, or the error's code), and where an answer is shown its
// form (JSON with the shown top-level keys and "object", the error's type
// and param; an event stream with JSON chunks, an error event or [DONE]
// where shown, and the last chunk's finish_reason), so that the documents
// cannot rot. An example is left out only for a reason the test states.
func TestDocExamples(t *testing.T) {
	for _, tool := range []string{"curl", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the examples need %s: %v", tool, err)
		}
	}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var examples []docExample
	for _, f := range append([]string{"../README.md"}, docs...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := extractDocExamples(strings.TrimPrefix(f, "../"), src)
		if err != nil {
			t.Fatal(err)
		}
		examples = append(examples, ex...)
	}
	// The README and docs/api.md had 5 and 23 when this test was written;
	// far fewer means the extraction broke.
	if len(examples) < 20 {
		t.Fatalf("found %d curl examples in README.md and docs/*.md, want at least 20", len(examples))
	}

	// The servers the examples need, started before the subtests so that
	// they serve them all.
	kindOf := func(ex docExample) docExampleServer {
		if strings.Contains(ex.serve, "--mmproj") {
			return docImageServer
		}
		return docTextServer
	}
	type served struct {
		ts  *testServer
		dir string // where the examples run
	}
	servers := map[docExampleServer]served{}
	for _, ex := range examples {
		kind := kindOf(ex)
		if _, ok := servers[kind]; ok {
			continue
		}
		switch kind {
		case docTextServer:
			servers[kind] = served{newReadyServer(t, newTestBackend(t, loadTinyModel(t), engine.SchedulerConfig{}), Config{}), t.TempDir()}
		case docImageServer:
			ts, dir := docImageFixtureServer(t) // nil without mtmd
			servers[kind] = served{ts, dir}
		}
	}

	hostPort := regexp.MustCompile(`\b(localhost|127\.0\.0\.1):8080\b`)
	for _, ex := range examples {
		t.Run(fmt.Sprintf("%s:%d", ex.file, ex.line), func(t *testing.T) {
			s := servers[kindOf(ex)]
			if s.ts == nil {
				t.Skipf("%s:%d needs a server with --mmproj: a build with -tags mtmd", ex.file, ex.line)
			}
			if strings.Contains(ex.cmd, "python3") {
				if _, err := exec.LookPath("python3"); err != nil {
					t.Skipf("%s:%d builds its body with python3: %v", ex.file, ex.line, err)
				}
			}
			runDocExample(t, s.ts, s.dir, ex, hostPort)
		})
	}
}

// runDocExample runs ex's command in dir with the server's address for the
// documents' localhost:8080 and checks the answer against what the
// document shows.
func runDocExample(t *testing.T, ts *testServer, dir string, ex docExample, hostPort *regexp.Regexp) {
	t.Helper()
	headers := filepath.Join(t.TempDir(), "headers")
	cmd := hostPort.ReplaceAllString(ex.cmd, strings.TrimPrefix(ts.base, "http://"))
	if cmd == ex.cmd {
		t.Fatalf("%s:%d: the command names no localhost:8080 to point at the test server: %s", ex.file, ex.line, ex.cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// -D goes first: the command may end with a shell comment.
	cmd = strings.Replace(cmd, "curl ", "curl -D "+headers+" ", 1)
	run := exec.CommandContext(ctx, "bash", "-c", cmd)
	run.Dir = dir
	var stderr strings.Builder
	run.Stderr = &stderr
	stdout, err := run.Output()
	if err != nil {
		t.Fatalf("%s:%d: %s: %v %s", ex.file, ex.line, cmd, err, stderr.String())
	}
	status := 0
	if h, err := os.ReadFile(headers); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(h)))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/") {
				status, _ = strconv.Atoi(f[1])
			}
		}
	}
	got := string(stdout)
	want := expectOf(ex.out)
	if ex.out == "" {
		// Nothing shown: a success.
		if status < 200 || status > 299 {
			t.Errorf("%s:%d: %s = %d %.500s, want 2xx", ex.file, ex.line, cmd, status, got)
		}
		return
	}
	if status != want.status {
		t.Errorf("%s:%d: %s = %d %.500s, want %d as shown", ex.file, ex.line, cmd, status, got, want.status)
	}
	if want.trailer != "" {
		body, trailer, _ := cutLastLine(strings.TrimRight(got, "\n"))
		if trailer != want.trailer {
			t.Errorf("%s:%d: curl's -w line %q, want %q as shown", ex.file, ex.line, trailer, want.trailer)
		}
		got = body
	}
	if want.sse {
		checkDocSSE(t, ex, want, got)
		return
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(got), &body); err != nil {
		t.Fatalf("%s:%d: answer %.500q is no JSON object (%v); the document shows %.300s", ex.file, ex.line, got, err, want.body)
	}
	checkDocJSON(t, ex, want.body, body)
	if want.errType != "" {
		if e, _ := body["error"].(map[string]any); e["type"] != want.errType || e["param"] != want.errParam {
			t.Errorf("%s:%d: error %v, want type %q and param %v as shown", ex.file, ex.line, body["error"], want.errType, want.errParam)
		}
	}
}

// checkDocJSON checks that got has the top-level keys of the shown JSON
// (which may be cut short) and its "object" value.
func checkDocJSON(t *testing.T, ex docExample, shown string, got map[string]any) {
	t.Helper()
	keys, strs := topLevelKeys(shown)
	if len(keys) == 0 {
		t.Fatalf("%s:%d: the shown answer %.200q has no JSON keys to check", ex.file, ex.line, shown)
	}
	for _, k := range keys {
		if _, ok := got[k]; !ok {
			t.Errorf("%s:%d: answer lacks %q, which the document shows; answer %.500v", ex.file, ex.line, k, got)
		}
	}
	if o, ok := strs["object"]; ok && got["object"] != o {
		t.Errorf("%s:%d: answer's object %v, want %q as shown", ex.file, ex.line, got["object"], o)
	}
}

// checkDocSSE checks an answered event stream against the shown one.
func checkDocSSE(t *testing.T, ex docExample, want docExpect, got string) {
	t.Helper()
	if !strings.HasSuffix(got, "\n\n") {
		t.Errorf("%s:%d: the stream %.300q does not end with a blank line", ex.file, ex.line, got)
	}
	shown, evs := docSSE(want.body), docSSE(got)
	lastData := func(evs []sseEvent) string { return evs[len(evs)-1].data }
	if (lastData(shown) == "[DONE]") != (lastData(evs) == "[DONE]") {
		t.Errorf("%s:%d: the stream ends with %q, the document's with %q", ex.file, ex.line, lastData(evs), lastData(shown))
	}
	var chunks []map[string]any
	for _, ev := range evs {
		if ev.data == "[DONE]" {
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatalf("%s:%d: event %q: %v", ex.file, ex.line, ev.data, err)
		}
		if ev.event == "error" {
			if e, _ := c["error"].(map[string]any); want.errType == "" || e["type"] != want.errType || e["param"] != want.errParam {
				t.Errorf("%s:%d: error event %s, want the shown one's type %q and param %v", ex.file, ex.line, ev.data, want.errType, want.errParam)
			}
			continue
		}
		chunks = append(chunks, c)
	}
	if want.errType != "" && (len(evs) == 0 || evs[len(evs)-1].event != "error") {
		t.Errorf("%s:%d: the stream %.300q does not end with an error event, as shown", ex.file, ex.line, got)
	}
	if shown[0].event == "error" {
		return
	}
	if len(chunks) == 0 {
		t.Fatalf("%s:%d: the stream %.300q has no chunk", ex.file, ex.line, got)
	}
	checkDocJSON(t, ex, shown[0].data, chunks[0])
	// The terminal chunk finishes as the shown one does.
	finish := func(data string) any {
		var c struct {
			Choices []struct {
				FinishReason any `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &c) != nil || len(c.Choices) == 0 {
			return nil
		}
		return c.Choices[0].FinishReason
	}
	var wantFinish, gotFinish any
	for _, ev := range shown {
		if f := finish(ev.data); f != nil {
			wantFinish = f
		}
	}
	for _, ev := range evs {
		if f := finish(ev.data); f != nil {
			gotFinish = f
		}
	}
	if wantFinish != gotFinish {
		t.Errorf("%s:%d: the stream finishes with %v, the document's with %v", ex.file, ex.line, gotFinish, wantFinish)
	}
}

// cutLastLine splits s into its lines but the last (with their newlines)
// and its last line.
func cutLastLine(s string) (before, last string, ok bool) {
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return "", s, false
	}
	return s[:i+1], s[i+1:], true
}

// TestExtractDocExamples checks the extraction on a small document:
// prompts, continuation lines, quotes open across lines, shown answers,
// the block's serve line, and a curl line it cannot read.
func TestExtractDocExamples(t *testing.T) {
	doc := "Text with curl in prose.\n" +
		"```sh\n" +
		"bin/vkllm serve -m x.gguf\n" +
		"curl -s localhost:8080/health\n" +
		"```\n" +
		"```\n" +
		"$ vkllm serve -m a.gguf --mmproj p.gguf\n" +
		"$ curl -s localhost:8080/v1/models \\\n" +
		"    -H 'X: y'\n" +
		"{\"object\":\"list\",\n" +
		" \"data\":[...]}\n" +
		"$ curl -s localhost:8080/v1/chat/completions -d '{\n" +
		"    \"messages\": []}'\n" +
		"data: {\"a\":1}\n" +
		"\n" +
		"data: [DONE]\n" +
		"\n" +
		"```\n"
	got, err := extractDocExamples("doc.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []docExample{
		{file: "doc.md", line: 4, lines: 1, cmd: "curl -s localhost:8080/health", serve: "bin/vkllm serve -m x.gguf"},
		{file: "doc.md", line: 8, lines: 2, cmd: "curl -s localhost:8080/v1/models  -H 'X: y'", out: "{\"object\":\"list\",\n \"data\":[...]}",
			serve: "vkllm serve -m a.gguf --mmproj p.gguf"},
		{file: "doc.md", line: 12, lines: 2, cmd: "curl -s localhost:8080/v1/chat/completions -d '{\n    \"messages\": []}'",
			out: "data: {\"a\":1}\n\ndata: [DONE]", serve: "vkllm serve -m a.gguf --mmproj p.gguf"},
	}
	if len(got) != len(want) {
		t.Fatalf("extractDocExamples = %d examples %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("example %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if keys, strs := topLevelKeys(want[1].out); strings.Join(keys, ",") != "object,data" || strs["object"] != "list" {
		t.Errorf("topLevelKeys(%q) = %v %v, want object,data and object list", want[1].out, keys, strs)
	}
	if _, err := extractDocExamples("bad.md", []byte("```\n$ echo | curl -s x\n```\n")); err == nil || !strings.Contains(err.Error(), "bad.md:2") {
		t.Errorf("extractDocExamples(a piped curl) = %v, want an error naming bad.md:2", err)
	}
}
