package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vkllm/vkllm/api"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestServeSignal runs `vkllm serve` on a generated model, waits for it to
// be ready, starts a streamed completion, sends the process SIGTERM and
// checks that the stream still finishes and serve returns cleanly. Nothing
// in it waits for a time: the grace period outlasts any machine's stream
// and a hang is go test's -timeout to catch.
//
// It also checks the settings taken from VKLLM_* variables (the port, the
// context size, a chat template file, --props-full-path) through /props,
// and the console.
func TestServeSignal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	const tmpl = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}<assistant>"
	tmplFile := filepath.Join(dir, "chat.jinja")
	if err := os.WriteFile(tmplFile, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	t.Setenv("VKLLM_PORT", strconv.Itoa(port))
	t.Setenv("VKLLM_CTX_SIZE", "256")
	t.Setenv("VKLLM_CHAT_TEMPLATE_FILE", tmplFile)
	t.Setenv("VKLLM_PARALLEL", "8")           // the command line wins
	t.Setenv("VKLLM_PROPS_FULL_PATH", "true") // /props shows the file name alone without it
	cacheDir := filepath.Join(dir, "cache")
	t.Setenv("VKLLM_CACHE_DIR", cacheDir)
	console, err := os.Create(filepath.Join(dir, "console.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer console.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	done := make(chan error, 1)
	go func() {
		done <- serve(console, []string{"-m", path, "--parallel", "2", "--shutdown-timeout", "1h"})
	}()
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended before it was ready: %v", err)
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	var props map[string]any
	if r, err := http.Get(base + "/props"); err != nil {
		t.Fatal(err)
	} else {
		json.NewDecoder(r.Body).Decode(&props)
		r.Body.Close()
	}
	for k, v := range map[string]any{"n_ctx": 256.0, "total_slots": 2.0, "chat_template": tmpl, "chat_template_name": "jinja",
		"model_path": path, "build_info": "vkllm " + version} {
		if props[k] != v {
			t.Errorf("/props %s = %v, want %v", k, props[k], v)
		}
	}
	out, _ := os.ReadFile(console.Name())
	for _, want := range []string{"vkllm " + version + "\n", "\nmodel   ", "llama, ", "\ndevice  ", "loading: 100% of",
		"\ncompiling the matrix kernels of every weight shape", "\ncompiled the kernels of ",
		"\nready   " + base + " ", "2 sequences of up to 256 tokens sharing 32 KV pages of 16 (512 positions)\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the console says\n%s\nwant it to contain %q", out, want)
		}
	}
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"hello","max_tokens":200,"temperature":0,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "data: " {
		t.Fatalf("stream starts %q, %v", first, err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("stream after SIGTERM ends %q (%v), want it to finish with [DONE]", rest[max(0, len(rest)-100):], err)
	}
	if err := <-done; err != nil {
		t.Errorf("serve after SIGTERM = %v, want nil", err)
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("the server still accepts connections after shutdown")
	}
	// The pipeline cache was saved in --cache-dir (VKLLM_CACHE_DIR).
	if files, _ := filepath.Glob(filepath.Join(cacheDir, "pipelines-*.vkcache")); len(files) != 1 {
		t.Errorf("the cache folder holds %v, want one pipeline-cache file", files)
	}
}

// TestServeErrors checks the start-up errors: a missing model file makes
// serve return an error naming it (after listening, as the load runs in the
// background), and --mmproj is refused in a build without the mtmd
// feature (mmproj_mtmd_test.go checks the projector errors of one with it).
func TestServeErrors(t *testing.T) {
	err := cmdServe([]string{"-m", "/nonexistent/model.gguf", "--port", strconv.Itoa(freePort(t))})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/model.gguf") {
		t.Errorf("serve with a missing model = %v, want an error naming the file", err)
	}
	if !mtmdBuilt {
		err = cmdServe([]string{"-m", "x.gguf", "--mmproj", "p.gguf"})
		if err == nil || !strings.Contains(err.Error(), "without multimodal support") {
			t.Errorf("serve --mmproj = %v, want it refused: the build lacks the mtmd feature", err)
		}
	}
}

// TestServeFlagErrors checks that settings a default would silently
// replace are refused, naming the flag or variable.
func TestServeFlagErrors(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.jinja")
	if err := os.WriteFile(good, []byte("{% for m in messages %}{{ m.content }}{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  [2]string
		want string
	}{
		{[]string{"--queue-size", "0"}, [2]string{}, "--queue-size"},
		{[]string{"--queue-size", "-3"}, [2]string{}, "--queue-size"},
		{[]string{"--max-request-bytes", "0"}, [2]string{}, "--max-request-bytes"},
		{[]string{"--parallel", "0"}, [2]string{}, "--parallel"},
		{[]string{"--timeout", "0s"}, [2]string{}, "--timeout"},
		{[]string{"--read-timeout", "-1s"}, [2]string{}, "--read-timeout"},
		{[]string{"--shutdown-timeout", "-1s"}, [2]string{}, "--shutdown-timeout"},
		{[]string{"--prefill-chunk", "-1"}, [2]string{}, "--prefill-chunk"},
		{[]string{"--prefill-slowdown", "1"}, [2]string{}, "--prefill-slowdown"},
		{[]string{"--prefill-slowdown", "NaN"}, [2]string{}, "--prefill-slowdown"},
		{nil, [2]string{"VKLLM_PREFILL_SLOWDOWN", "0.5"}, "--prefill-slowdown"},
		{[]string{"--port", "188o8"}, [2]string{}, "port"},
		{[]string{"--bogus"}, [2]string{}, "bogus"},
		{[]string{"unexpected"}, [2]string{}, "unexpected arguments"},
		// Go's single-dash long flags still work.
		{[]string{"-queue-size", "0"}, [2]string{}, "--queue-size"},
		{[]string{"--chat-template", "chatml2"}, [2]string{}, `--chat-template: unknown template "chatml2"`},
		{[]string{"--chat-template-file", "/nonexistent/t.jinja"}, [2]string{}, "--chat-template-file"},
		{[]string{"--chat-template", "chatml", "--chat-template-file", good}, [2]string{}, "--chat-template-file: the file is a Jinja template"},
		{nil, [2]string{"VKLLM_QUEUE_SIZE", "many"}, "VKLLM_QUEUE_SIZE"},
		{nil, [2]string{"VKLLM_PORT", "188o8"}, "VKLLM_PORT"},
		{nil, [2]string{"VKLLM_PARALLEL", "0"}, "--parallel"},
		{nil, [2]string{"VKLLM_PARALLEL", "-2"}, "--parallel"},
		{nil, [2]string{"VKLLM_TIMEOUT", "10"}, "VKLLM_TIMEOUT"},
		{nil, [2]string{"VKLLM_LOG_JSON", "yes please"}, "VKLLM_LOG_JSON"},
		{nil, [2]string{"VKLLM_CHAT_TEMPLATE", "nope"}, "--chat-template"},
		{[]string{"--memory-limit", "lots"}, [2]string{}, "--memory-limit"},
		{[]string{"--memory-limit", "0"}, [2]string{}, "--memory-limit"},
		{nil, [2]string{"VKLLM_MEMORY_LIMIT", "4GB"}, "--memory-limit"},
		{[]string{"--max-inflight-bytes", "-1"}, [2]string{}, "--max-inflight-bytes"},
		{[]string{"--max-inflight-bytes", "1000"}, [2]string{}, "--max-inflight-bytes: 1000 is less than --max-request-bytes"},
		{[]string{"--max-request-tokens", "-1"}, [2]string{}, "--max-request-tokens"},
		{[]string{"--max-request-seqs", "-1"}, [2]string{}, "--max-request-seqs"},
		{nil, [2]string{"VKLLM_MAX_REQUEST_SEQS", "-4"}, "--max-request-seqs"},
		{[]string{"--max-image-decodes", "0"}, [2]string{}, "--max-image-decodes"},
		{nil, [2]string{"VKLLM_MAX_IMAGE_DECODE_BYTES", "-5"}, "--max-image-decode-bytes"},
		{[]string{"--n-predict", "-2"}, [2]string{}, "--n-predict"},
		{[]string{"--cors-origins", "https://app.example/"}, [2]string{}, `--cors-origins: invalid origin "https://app.example/"`},
		{nil, [2]string{"VKLLM_CORS_ORIGINS", "https://ok.example,app.example"}, `--cors-origins: invalid origin "app.example"`},
		{[]string{"--log-level", "verbose"}, [2]string{}, `--log-level: "verbose"`},
		{[]string{"--metrics-addr", "9090"}, [2]string{}, `--metrics-addr: "9090" is not host:port`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			// Every case fails before listening: no --port needed.
			args := append([]string{"-m", "/nonexistent/model.gguf"}, tc.args...)
			err := cmdServe(args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serve %v (env %v) = %v, want an error naming %s", tc.args, tc.env, err, tc.want)
			}
			// Refused before anything is loaded: not an error about the file.
			if err != nil && strings.Contains(err.Error(), "/nonexistent/model.gguf") {
				t.Errorf("serve %v (env %v) = %v: the model was opened before the settings were checked", tc.args, tc.env, err)
			}
		})
	}
}

// TestServeTemplateFile: a template file that does not parse is refused at
// start, naming the flag and the parser's complaint.
func TestServeTemplateFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jinja")
	if err := os.WriteFile(bad, []byte("{% for m in messages %}{{ m.content }"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := cmdServe([]string{"-m", "/nonexistent/model.gguf", "--chat-template-file", bad})
	if err == nil || !strings.Contains(err.Error(), "--chat-template-file: the template does not parse") {
		t.Errorf("serve with a broken template file = %v, want it refused naming the flag", err)
	}
}

// TestVersion: "vkllm version" and "serve --version" print the version and
// every built-in feature.
func TestVersion(t *testing.T) {
	var b bytes.Buffer
	printVersion(&b)
	if !strings.HasPrefix(b.String(), "vkllm "+version+" (go") {
		t.Errorf("version output %q, want it to start with vkllm %s", b.String(), version)
	}
	for _, f := range api.Features() {
		if !strings.Contains(b.String(), " "+f) {
			t.Errorf("version output %q lacks the feature %q", b.String(), f)
		}
	}
	if err := cmdServe([]string{"--version"}); err != nil {
		t.Errorf("serve --version = %v, want nil (no model needed)", err)
	}
	if err := cmdVersion([]string{"x"}); err == nil {
		t.Error("vkllm version x = nil, want an error")
	}
}

// TestServeMemoryLimit: --memory-limit and VKLLM_MEMORY_LIMIT set the Go
// heap's soft limit (GOMEMLIMIT) before the model is opened.
func TestServeMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	for _, tc := range []struct {
		args []string
		env  string
		want int64
	}{
		{[]string{"--memory-limit", "3GiB"}, "", 3 << 30},
		{nil, "512MiB", 512 << 20},
		{[]string{"--memory-limit", "123456789"}, "1GiB", 123456789}, // the command line wins
	} {
		if tc.env != "" {
			t.Setenv("VKLLM_MEMORY_LIMIT", tc.env)
		}
		err := cmdServe(append([]string{"-m", "/nonexistent/model.gguf"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/model.gguf") {
			t.Fatalf("serve %v = %v, want the missing model's error", tc.args, err)
		}
		if got := debug.SetMemoryLimit(-1); got != tc.want {
			t.Errorf("serve %v (VKLLM_MEMORY_LIMIT=%q): memory limit %d, want %d", tc.args, tc.env, got, tc.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true}, {"1B", 1, true}, {"2KiB", 2048, true}, {"4 MiB", 4 << 20, true},
		{"4GiB", 4 << 30, true}, {"1TiB", 1 << 40, true},
		{"", 0, false}, {"0", 0, false}, {"-1GiB", 0, false}, {"1.5GiB", 0, false}, {"4GB", 0, false},
		{"99999999999TiB", 0, false},
	} {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
