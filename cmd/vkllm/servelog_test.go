package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// get returns the status and body of GET url with the extra headers.
func get(t *testing.T, url string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestServeLogJSONAndMetricsAddr runs `vkllm serve --log-json` with an API
// key and --metrics-addr, the console and the log on one file, and checks:
// every line written is a JSON object (the console's lines became records,
// the load's phases among them: the upload, the matrix kernels compiled
// after it, the warm-up and ready); /health probes are not logged at the
// default level while other requests are; /metrics wants the key on the API
// port and answers without it on the metrics address, which serves nothing
// else.
func TestServeLogJSONAndMetricsAddr(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	port, mport := freePort(t), freePort(t)
	base, mbase := "http://127.0.0.1:"+strconv.Itoa(port), "http://127.0.0.1:"+strconv.Itoa(mport)
	done := make(chan error, 1)
	go func() {
		done <- serveLog(out, out, []string{"-m", path, "--port", strconv.Itoa(port), "--ctx-size", "128", "--parallel", "1",
			"--api-key", "k", "--metrics-addr", "127.0.0.1:" + strconv.Itoa(mport), "--log-json"})
	}()
	for {
		if resp, err := http.Get(base + "/health"); err == nil {
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
	if st, _ := get(t, base+"/metrics"); st != 401 {
		t.Errorf("GET /metrics on the API port without the key = %d, want 401", st)
	}
	st, body := get(t, mbase+"/metrics")
	if st != 200 {
		t.Fatalf("GET /metrics on --metrics-addr = %d %s, want 200 without a key", st, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	if f := fams["vkllm_model_ready"]; f == nil || f.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("vkllm_model_ready on --metrics-addr = %v, want 1", f)
	}
	for _, p := range []string{"/health", "/v1/models", "/props"} {
		if st, _ := get(t, mbase+p, "Authorization", "Bearer k"); st != 404 {
			t.Errorf("GET %s on --metrics-addr = %d, want 404: it serves /metrics alone", p, st)
		}
	}
	if st, _ := get(t, base+"/v1/models", "Authorization", "Bearer k"); st != 200 {
		t.Errorf("GET /v1/models with the key = %d", st)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("serve after SIGTERM = %v", err)
	}

	raw, _ := os.ReadFile(out.Name())
	msgs := map[string]bool{}
	routes := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("a line that is not JSON: %q (%v)", sc.Text(), err)
			continue
		}
		msg, _ := rec["msg"].(string)
		msgs[msg] = true
		if msg == "request" {
			r, _ := rec["route"].(string)
			st, _ := rec["status"].(float64)
			routes[r+" "+strconv.Itoa(int(st))]++
		}
	}
	for _, want := range []string{"vkllm", "loading", "weights uploaded; compiling the matrix kernels of every weight shape",
		"compiled the kernels of every step shape", "ready", "shutting down"} {
		if !msgs[want] {
			t.Errorf("no record %q; the output:\n%s", want, raw)
		}
	}
	// The probes and the served scrape are debug records; the refusals
	// and other routes are info.
	want := map[string]int{"models 200": 1, "metrics 401": 1, "metrics 404": 3}
	if len(routes) != len(want) {
		t.Errorf("request records by route and status %v, want %v", routes, want)
	}
	for k, n := range want {
		if routes[k] != n {
			t.Errorf("request records by route and status %v, want %v", routes, want)
			break
		}
	}
	if strings.Contains(string(raw), "\r") {
		t.Error("the output has a carriage return (a redrawn progress line)")
	}
}

// TestServeLogJSONError: under --log-json the error serve ends with is a
// JSON record (main then prints nothing), here a model file that does not
// exist.
func TestServeLogJSONError(t *testing.T) {
	out, err := os.Create(filepath.Join(t.TempDir(), "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	err = serveLog(out, out, []string{"-m", "/nonexistent/model.gguf", "--port", strconv.Itoa(freePort(t)), "--log-json"})
	var logged loggedError
	if !errors.As(err, &logged) || !strings.Contains(err.Error(), "/nonexistent/model.gguf") {
		t.Fatalf("serve --log-json with a missing model = %v, want a logged error naming the file", err)
	}
	raw, _ := os.ReadFile(out.Name())
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a line that is not JSON: %q", line)
			continue
		}
		if rec["msg"] == "serve failed" && rec["level"] == "ERROR" && strings.Contains(fmt.Sprint(rec["err"]), "/nonexistent/model.gguf") {
			found = true
		}
	}
	if !found {
		t.Errorf("no ERROR record \"serve failed\" naming the file:\n%s", raw)
	}
	// Without --log-json the error is returned as it is, for main to print.
	err = serveLog(out, out, []string{"-m", "/nonexistent/model.gguf", "--port", strconv.Itoa(freePort(t))})
	if err == nil || errors.As(err, &logged) {
		t.Errorf("serve with a missing model = %#v, want a plain error", err)
	}
}
