package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vkllm/vkllm/internal/fixtures"
)

// tinyHub serves one repository, org/tiny-GGUF, as the Hugging Face hub
// does (its tree listing and /resolve/ downloads), with a real GGUF from
// the fixtures as its Q4_K_M file and another quant beside it; withProj
// adds a (bogus) vision projector.
func tinyHub(t *testing.T, withProj bool) (srv *httptest.Server, model []byte, downloads *atomic.Int64) {
	model, err := os.ReadFile(filepath.Join(fixtures.Dir(t, "models"), "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"tiny-Q4_K_M.gguf": model, "tiny-Q8_0.gguf": model[:1000]}
	if withProj {
		files["mmproj-tiny-F16.gguf"] = model[:500]
	}
	downloads = new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/models/org/tiny-GGUF/tree/main":
			var list []map[string]any
			for name, b := range files {
				s := sha256.Sum256(b)
				list = append(list, map[string]any{"type": "file", "path": name, "size": len(b),
					"lfs": map[string]any{"oid": hex.EncodeToString(s[:]), "size": len(b)}})
			}
			json.NewEncoder(w).Encode(list)
			return
		}
		if name, ok := strings.CutPrefix(r.URL.Path, "/org/tiny-GGUF/resolve/main/"); ok && files[name] != nil {
			downloads.Add(1)
			w.Write(files[name])
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, model, downloads
}

// TestServeHF starts serve as a llama-server user would, with
// -hf org/repo:quant against a fake hub: the model is downloaded into the
// store under $HF_HOME and loaded, and the server answers. The stored
// model is then found by name with the hub offline.
func TestServeHF(t *testing.T) {
	hub, model, downloads := tinyHub(t, false)
	home := t.TempDir()
	t.Setenv("HF_ENDPOINT", hub.URL)
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	console, err := os.Create(filepath.Join(t.TempDir(), "console.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer console.Close()
	done := make(chan error, 1)
	go func() {
		done <- serveLog(console, &bytes.Buffer{}, []string{"-hf", "org/tiny-GGUF:q4_k_m", "--port", strconv.Itoa(port), "-c", "64",
			"-np", "1", "--cache-dir", "none", "--self-check=false"})
	}()
	for ready := false; !ready; {
		select {
		case err := <-done:
			t.Fatalf("serve ended before it was ready: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == 200
		}
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	if r, err := http.Get(base + "/v1/models"); err == nil {
		json.NewDecoder(r.Body).Decode(&models)
		r.Body.Close()
	}
	if len(models.Data) != 1 || models.Data[0].ID != "org/tiny-GGUF:Q4_K_M" {
		t.Errorf("/v1/models = %+v, want the model org/tiny-GGUF:Q4_K_M", models.Data)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("serve after SIGTERM = %v", err)
	}
	stored := filepath.Join(home, "vkllm", "models", "org", "tiny-GGUF", "tiny-Q4_K_M.gguf")
	if b, err := os.ReadFile(stored); err != nil || !bytes.Equal(b, model) {
		t.Errorf("the store's %s is not the hub's file (%v)", stored, err)
	}
	if n := downloads.Load(); n != 1 {
		t.Errorf("the hub served %d downloads, want 1", n)
	}
	out, _ := os.ReadFile(console.Name())
	if !strings.Contains(string(out), "downloading tiny-Q4_K_M.gguf: 100% of 1.7 MiB downloaded") {
		t.Errorf("the console says\n%s\nwant the download's progress", out)
	}

	// Offline, the stored model is served by its name (-m or serve NAME).
	hub.Close()
	t.Setenv("HF_HUB_OFFLINE", "1")
	for _, name := range []string{"org/tiny-GGUF", "org/tiny-GGUF:Q4_K_M"} {
		m := modelFlags{model: name}
		if _, err := m.resolve(context.Background(), newDownloadProgress(console), nil, true); err != nil || m.model != stored {
			t.Errorf("resolve(-m %s) = %q, %v, want %s", name, m.model, err, stored)
		}
	}
	if err := cmdTokenize([]string{"-m", "org/tiny-GGUF", "-p", "hi"}); err != nil {
		t.Errorf("vkllm tokenize -m org/tiny-GGUF = %v", err)
	}
	m := modelFlags{model: "org/tiny-GGUF:Q8_0"}
	if _, err := m.resolve(context.Background(), newDownloadProgress(console), nil, true); err == nil ||
		!strings.Contains(err.Error(), "no such file, and org/tiny-GGUF:Q8_0 is not in the store") {
		t.Errorf("resolve of a quant not stored = %v", err)
	}
	m = modelFlags{hubFlags: hubFlags{hfRepo: "org/tiny-GGUF:Q8_0"}}
	if _, err := m.resolve(context.Background(), newDownloadProgress(console), nil, true); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Errorf("-hf of a quant not stored, offline = %v", err)
	}
}

// TestPullListRm runs the store's commands against the fake hub.
func TestPullListRm(t *testing.T) {
	hub, _, downloads := tinyHub(t, true)
	dir := t.TempDir()
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_ENDPOINT", hub.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	for i := 0; i < 2; i++ {
		if err := cmdPull([]string{"--models-dir", dir, "org/tiny-GGUF:Q8_0"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := downloads.Load(); n != 2 {
		t.Errorf("two pulls made %d downloads, want 2 (the model and its projector, once)", n)
	}
	var h hubFlags
	h.modelsDir = dir
	var out bytes.Buffer
	if err := listModels(&out, h.client()); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("org/tiny-GGUF:Q8_0  Q8_0   1.5 KiB  yes     %s\n", filepath.Join(dir, "models", "org", "tiny-GGUF", "tiny-Q8_0.gguf"))
	if lines := strings.SplitAfter(out.String(), "\n"); len(lines) != 3 || lines[1] != want {
		t.Errorf("vkllm list prints\n%s\nwant a header and\n%s", out.String(), want)
	}
	// By name, the stored model comes with its projector, unless not wanted.
	for _, withProj := range []bool{true, false} {
		m := modelFlags{model: "org/tiny-GGUF:q8_0", hubFlags: hubFlags{modelsDir: dir}}
		proj, err := m.resolve(context.Background(), newDownloadProgress(os.Stderr), nil, withProj)
		wantProj := filepath.Join(dir, "models", "org", "tiny-GGUF", "mmproj-tiny-F16.gguf")
		if !withProj {
			wantProj = ""
		}
		if err != nil || proj != wantProj || filepath.Base(m.model) != "tiny-Q8_0.gguf" {
			t.Errorf("resolve(-m org/tiny-GGUF:q8_0, mmproj %v) = %q, %q, %v", withProj, m.model, proj, err)
		}
	}
	if err := cmdRm([]string{"--models-dir", dir, "org/tiny-GGUF"}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	listModels(&out, h.client())
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("vkllm list after rm prints\n%s", out.String())
	}
	if err := cmdPull([]string{"--models-dir", dir, "org/tiny-GGUF:IQ1_S"}); err == nil || !strings.Contains(err.Error(), "its quantizations: Q4_K_M, Q8_0") {
		t.Errorf("pulling a missing quant = %v", err)
	}
}
