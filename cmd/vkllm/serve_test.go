package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
func TestServeSignal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	done := make(chan error, 1)
	go func() {
		done <- cmdServe([]string{"-m", path, "--port", strconv.Itoa(port), "--ctx-size", "256", "--shutdown-timeout", "1h"})
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
}

// TestServeErrors checks the start-up errors: a missing model file makes
// serve return an error naming it (after listening, as the load runs in the
// background), and --mmproj is refused with a reason.
func TestServeErrors(t *testing.T) {
	err := cmdServe([]string{"-m", "/nonexistent/model.gguf", "--port", strconv.Itoa(freePort(t))})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/model.gguf") {
		t.Errorf("serve with a missing model = %v, want an error naming the file", err)
	}
	err = cmdServe([]string{"-m", "x.gguf", "--mmproj", "p.gguf"})
	if err == nil || !strings.Contains(err.Error(), "not supported yet") {
		t.Errorf("serve --mmproj = %v, want it refused with a reason", err)
	}
}

// TestServeFlagErrors checks that settings a default would silently
// replace are refused, naming the flag or variable.
func TestServeFlagErrors(t *testing.T) {
	port := strconv.Itoa(freePort(t))
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
		{nil, [2]string{"VKLLM_QUEUE_SIZE", "many"}, "$VKLLM_QUEUE_SIZE"},
		{nil, [2]string{"VKLLM_TIMEOUT", "10"}, "$VKLLM_TIMEOUT"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			args := append([]string{"-m", "/nonexistent/model.gguf", "--port", port}, tc.args...)
			err := cmdServe(args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serve %v (env %v) = %v, want an error naming %s", tc.args, tc.env, err, tc.want)
			}
		})
	}
}
