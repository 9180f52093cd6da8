package hub

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Ref
		bad  bool
	}{
		{in: "ggml-org/gemma-3-1b-it-GGUF", want: Ref{Repo: "ggml-org/gemma-3-1b-it-GGUF"}},
		{in: "unsloth/Qwen3-8B-GGUF:q4_k_m", want: Ref{Repo: "unsloth/Qwen3-8B-GGUF", Quant: "Q4_K_M"}},
		{in: "unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL", want: Ref{Repo: "unsloth/Qwen3-8B-GGUF", Quant: "UD-Q4_K_XL"}},
		{in: "o/r:latest", want: Ref{Repo: "o/r"}},
		{in: "model.gguf", bad: true},
		{in: "a/b/c", bad: true},
		{in: "../etc", bad: true},
		{in: "o/..", bad: true},
		{in: "o/r:", want: Ref{Repo: "o/r"}},
		{in: "o/r:q4 k", bad: true},
		{in: "/abs/path", bad: true},
	} {
		got, err := ParseRef(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseRef(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRef(%q) = %+v, %v, want %+v", tc.in, got, err, tc.want)
		}
	}
	for s, want := range map[string]bool{"o/r:Q8_0": true, "models/x.gguf": false, "./o/r": false, "o/r": true, "x": false} {
		if got := LooksLikeRef(s); got != want {
			t.Errorf("LooksLikeRef(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestPick checks the file choice against file names as hub repositories
// spell them (bartowski's, unsloth's, ggml-org's, TheBloke's).
func TestPick(t *testing.T) {
	files := func(names ...string) []entry {
		var es []entry
		for _, n := range names {
			es = append(es, entry{Type: "file", Path: n, Size: 1})
		}
		return es
	}
	unsloth := files("Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-UD-Q4_K_XL.gguf", "Qwen3-8B-Q4_K_S.gguf", "Qwen3-8B-Q8_0.gguf",
		"BF16/Qwen3-8B-BF16-00001-of-00002.gguf", "BF16/Qwen3-8B-BF16-00002-of-00002.gguf", "mmproj-F16.gguf", "mmproj-BF16.gguf", "README.md")
	for _, tc := range []struct {
		name    string
		entries []entry
		ref     Ref
		files   []string
		mmproj  string
		quant   string
		err     string
	}{
		{"default Q4_K_M", unsloth, Ref{Repo: "u/q"}, []string{"Qwen3-8B-Q4_K_M.gguf"}, "mmproj-F16.gguf", "Q4_K_M", ""},
		{"tag", unsloth, Ref{Repo: "u/q", Quant: "Q8_0"}, []string{"Qwen3-8B-Q8_0.gguf"}, "mmproj-F16.gguf", "Q8_0", ""},
		{"prefix is not a match", unsloth, Ref{Repo: "u/q", Quant: "Q4_K"}, nil, "", "", "no Q4_K file; its quantizations: BF16, Q4_K_M, Q4_K_S, Q8_0, UD-Q4_K_XL"},
		{"dashed tag", unsloth, Ref{Repo: "u/q", Quant: "UD-Q4_K_XL"}, []string{"Qwen3-8B-UD-Q4_K_XL.gguf"}, "mmproj-F16.gguf", "UD-Q4_K_XL", ""},
		{"split in a folder", unsloth, Ref{Repo: "u/q", Quant: "BF16"},
			[]string{"BF16/Qwen3-8B-BF16-00001-of-00002.gguf", "BF16/Qwen3-8B-BF16-00002-of-00002.gguf"}, "mmproj-BF16.gguf", "BF16", ""},
		{"hf-file", unsloth, Ref{Repo: "u/q", File: "Qwen3-8B-Q4_K_S.gguf"}, []string{"Qwen3-8B-Q4_K_S.gguf"}, "mmproj-F16.gguf", "Q4_K_S", ""},
		{"hf-file missing", unsloth, Ref{Repo: "u/q", File: "nope.gguf"}, nil, "", "", `no model file "nope.gguf"`},
		{"no Q4_K_M: the first", files("tinyllama.Q2_K.gguf", "tinyllama.Q5_0.gguf"), Ref{Repo: "t/t"}, []string{"tinyllama.Q2_K.gguf"}, "", "Q2_K", ""},
		{"dotted names", files("tinyllama.Q2_K.gguf", "tinyllama.Q5_0.gguf"), Ref{Repo: "t/t", Quant: "Q5_0"}, []string{"tinyllama.Q5_0.gguf"}, "", "Q5_0", ""},
		{"missing part", files("m-Q4_K_M-00001-of-00003.gguf", "m-Q4_K_M-00003-of-00003.gguf"), Ref{Repo: "s/s"}, nil, "", "", "lacks part m-Q4_K_M-00002-of-00003.gguf"},
		{"no gguf", files("README.md"), Ref{Repo: "e/e"}, nil, "", "", "no GGUF model files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, proj, quant, err := pick(tc.entries, tc.ref)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("pick = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(paths(got), " "); g != strings.Join(tc.files, " ") || quant != tc.quant {
				t.Errorf("pick = %s %s, want %s %s", g, quant, strings.Join(tc.files, " "), tc.quant)
			}
			if p := ""; proj != nil {
				p = proj.Path
				if p != tc.mmproj {
					t.Errorf("pick projector = %q, want %q", p, tc.mmproj)
				}
			} else if tc.mmproj != "" {
				t.Errorf("pick projector = none, want %q", tc.mmproj)
			}
		})
	}
}

// TestPullCacheHit pulls the default quantization with its projector,
// checks the bytes, then pulls again: nothing is downloaded the second
// time, the listing is paged and the token never reaches the CDN.
func TestPullCacheHit(t *testing.T) {
	h := newFakeHub(t)
	h.pageLength = 2
	h.token = "hf_secret"
	model := h.add("org/m-GGUF", "m-Q4_K_M.gguf", 300_000)
	h.add("org/m-GGUF", "m-Q8_0.gguf", 500_000)
	proj := h.add("org/m-GGUF", "mmproj-m-f16.gguf", 70_000)
	h.put("org/m-GGUF", "README.md", []byte("# m"))
	c := h.client(t)
	ref, _ := ParseRef("org/m-GGUF")

	if _, err := c.Pull(context.Background(), ref, true); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("Pull without the token = %v, want a 401 that names HF_TOKEN", err)
	}
	c.Token = h.token
	var last int64
	c.Progress = func(file string, done, total int64) { last = done }
	m, err := c.Pull(context.Background(), ref, true)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "org/m-GGUF:Q4_K_M" {
		t.Errorf("Pull name = %q", m.Name())
	}
	for p, want := range map[string][]byte{m.Path(): model, m.MMProjPath(): proj} {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s holds %d bytes (%v), want the hub's %d", p, len(got), err, len(want))
		}
	}
	if last != int64(len(proj)) {
		t.Errorf("progress ended at %d, want %d", last, len(proj))
	}
	served, _, downloads := h.stats()
	if served != int64(len(model)+len(proj)) || downloads != 2 {
		t.Errorf("first pull: %d bytes in %d downloads, want %d in 2", served, downloads, len(model)+len(proj))
	}
	for _, a := range h.cdnAuth {
		if a != "" {
			t.Errorf("the CDN (another host) got Authorization %q", a)
		}
	}
	m2, err := c.Pull(context.Background(), Ref{Repo: "org/m-GGUF", Quant: "q4_k_m"}, true)
	if err != nil || m2.Path() != m.Path() {
		t.Fatalf("second Pull = %v, %v", m2, err)
	}
	if s, _, d := h.stats(); s != served || d != downloads {
		t.Errorf("second pull downloaded %d bytes in %d requests, want none", s-served, d-downloads)
	}
	if h.listings != 2*3 { // two pulls of three pages (5 entries, 2 a page)
		t.Errorf("the hub answered %d listing pages, want 6", h.listings)
	}
}

// TestPullResume cuts the first download midway: the next attempt asks
// for the rest with Range and the file is whole.
func TestPullResume(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		name := "range"
		if ignore {
			name = "server ignores range"
		}
		t.Run(name, func(t *testing.T) {
			h := newFakeHub(t)
			h.ignoreRange = ignore
			data := h.add("o/r", "r-Q4_K_M.gguf", 1<<20)
			const cut = 400_000
			h.cutAfter["o/r/r-Q4_K_M.gguf"] = cut
			c := h.client(t)
			var notes []string
			c.Notice = func(s string) { notes = append(notes, s) }
			m, err := c.Pull(context.Background(), Ref{Repo: "o/r"}, true)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(m.Path()); !bytes.Equal(got, data) {
				t.Fatal("the resumed file differs from the hub's")
			}
			served, ranges, _ := h.stats()
			wantServed := int64(cut + len(data) - cut)
			if ignore {
				wantServed = int64(cut + len(data))
			}
			if served != wantServed || len(ranges) != 2 || ranges[0] != "" || ranges[1] != "bytes=400000-" {
				t.Errorf("served %d bytes with ranges %q, want %d with [\"\" \"bytes=400000-\"]", served, ranges, wantServed)
			}
			if len(notes) != 1 || !strings.Contains(notes[0], "resuming") {
				t.Errorf("notices %q, want one about resuming", notes)
			}
		})
	}
}

// TestPullInterruptedThenResumed gives up after one cut attempt, leaving
// the partial file, which the next pull resumes.
func TestPullInterruptedThenResumed(t *testing.T) {
	h := newFakeHub(t)
	data := h.add("o/r", "r-Q4_K_M.gguf", 200_000)
	h.cutAfter["o/r/r-Q4_K_M.gguf"] = 150_000
	c := h.client(t)
	c.Attempts = 1
	_, err := c.Pull(context.Background(), Ref{Repo: "o/r"}, true)
	if err == nil || !strings.Contains(err.Error(), "r-Q4_K_M.gguf") {
		t.Fatalf("Pull = %v, want an error naming the file", err)
	}
	if _, err := c.Cached(Ref{Repo: "o/r"}); err == nil {
		t.Error("an interrupted pull is in the store")
	}
	m, err := c.Pull(context.Background(), Ref{Repo: "o/r"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(m.Path()); !bytes.Equal(got, data) {
		t.Fatal("the resumed file differs")
	}
	if served, ranges, _ := h.stats(); served != 200_000 || ranges[1] != "bytes=150000-" {
		t.Errorf("served %d bytes, ranges %q; want 200000 and a resume at 150000", served, ranges)
	}
}

// TestPullCorrupt serves bytes whose hash is not the published one: the
// error names the file and both hashes, and nothing is left in the store.
func TestPullCorrupt(t *testing.T) {
	h := newFakeHub(t)
	h.add("o/r", "r-Q4_K_M.gguf", 10_000)
	h.badHash["o/r/r-Q4_K_M.gguf"] = true
	c := h.client(t)
	_, err := c.Pull(context.Background(), Ref{Repo: "o/r"}, true)
	var he *HashError
	if !errors.As(err, &he) || he.File != "r-Q4_K_M.gguf" || len(he.Got) != 64 || len(he.Want) != 64 || he.Got == he.Want ||
		!strings.Contains(err.Error(), he.Got) || !strings.Contains(err.Error(), he.Want) {
		t.Fatalf("Pull = %v, want a HashError naming the file and both hashes", err)
	}
	var left []string
	for _, sub := range []string{"models", "manifests"} {
		filepath.Walk(filepath.Join(c.Dir, sub), func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				left = append(left, p)
			}
			return nil
		})
	}
	if len(left) > 0 {
		t.Errorf("the store holds %q after a corrupt download", left)
	}
}

// TestPullErrors: a repository the hub does not have, a quantization it
// lacks.
func TestPullErrors(t *testing.T) {
	h := newFakeHub(t)
	h.add("o/r", "r-Q4_K_M.gguf", 100)
	h.add("o/r", "r-Q6_K.gguf", 100)
	c := h.client(t)
	for _, tc := range []struct {
		ref  Ref
		want string
	}{
		{Ref{Repo: "o/none"}, "o/none: not found on the hub"},
		{Ref{Repo: "o/r", Quant: "IQ2_XS"}, "o/r has no IQ2_XS file; its quantizations: Q4_K_M, Q6_K"},
	} {
		if _, err := c.Pull(context.Background(), tc.ref, true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Pull(%v) = %v, want %q", tc.ref, err, tc.want)
		}
	}
}

// TestPullSplit downloads every part of a split model.
func TestPullSplit(t *testing.T) {
	h := newFakeHub(t)
	p1 := h.add("o/big", "Q8_0/big-Q8_0-00001-of-00002.gguf", 5000)
	p2 := h.add("o/big", "Q8_0/big-Q8_0-00002-of-00002.gguf", 3000)
	h.add("o/big", "big-Q4_K_M.gguf", 100)
	c := h.client(t)
	m, err := c.Pull(context.Background(), Ref{Repo: "o/big", Quant: "Q8_0"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 2 || !strings.HasSuffix(m.Path(), "big-Q8_0-00001-of-00002.gguf") || m.Size() != 8000 {
		t.Fatalf("Pull = %+v, want both parts", m.Files)
	}
	for i, want := range [][]byte{p1, p2} {
		if got, _ := os.ReadFile(m.local(m.Files[i])); !bytes.Equal(got, want) {
			t.Errorf("part %d differs", i+1)
		}
	}
}

// TestOffline serves a stored model with no request and refuses one that
// is not stored; an unreachable hub falls back to the store too.
func TestOffline(t *testing.T) {
	h := newFakeHub(t)
	h.add("o/r", "r-Q4_K_M.gguf", 1000)
	c := h.client(t)
	if _, err := c.Pull(context.Background(), Ref{Repo: "o/r", Quant: "Q4_K_M"}, true); err != nil {
		t.Fatal(err)
	}
	before := h.listings
	off := &Client{Dir: c.Dir, Endpoint: h.hub.URL, Offline: true}
	if m, err := off.Pull(context.Background(), Ref{Repo: "o/r"}, true); err != nil || m.Name() != "o/r:Q4_K_M" {
		t.Errorf("offline Pull of a stored model = %v, %v", m, err)
	}
	if _, err := off.Pull(context.Background(), Ref{Repo: "o/other"}, true); err == nil ||
		!strings.Contains(err.Error(), "offline") || !strings.Contains(err.Error(), "o/other is not in the store") {
		t.Errorf("offline Pull of a model not stored = %v", err)
	}
	if _, err := off.Pull(context.Background(), Ref{Repo: "o/r", Quant: "Q8_0"}, true); err == nil || !strings.Contains(err.Error(), "it holds Q4_K_M") {
		t.Errorf("offline Pull of another quant = %v, want the stored ones listed", err)
	}
	if h.listings != before {
		t.Error("an offline client asked the hub")
	}
	h.hub.Close()
	var notes []string
	c.Notice = func(s string) { notes = append(notes, s) }
	if m, err := c.Pull(context.Background(), Ref{Repo: "o/r"}, true); err != nil || m.Name() != "o/r:Q4_K_M" || len(notes) != 1 {
		t.Errorf("Pull with the hub down = %v, %v (notices %q), want the stored model with a notice", m, err, notes)
	}
	if _, err := c.Pull(context.Background(), Ref{Repo: "o/r", Quant: "Q8_0"}, true); err == nil || !strings.Contains(err.Error(), "could not be reached") ||
		!strings.Contains(err.Error(), "not in the store") {
		t.Errorf("Pull of a model not stored with the hub down = %v", err)
	}
}

// TestListRemove: two quantizations share a projector; removing one keeps
// it, removing the other empties the store.
func TestListRemove(t *testing.T) {
	h := newFakeHub(t)
	h.add("o/v", "v-Q4_K_M.gguf", 100)
	h.add("o/v", "v-Q8_0.gguf", 200)
	h.add("o/v", "mmproj-v-f16.gguf", 50)
	c := h.client(t)
	for _, q := range []string{"Q4_K_M", "Q8_0"} {
		if _, err := c.Pull(context.Background(), Ref{Repo: "o/v", Quant: q}, true); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := c.List()
	if err != nil || len(ms) != 2 || ms[0].Name() != "o/v:Q4_K_M" || ms[1].Name() != "o/v:Q8_0" || ms[1].Size() != 250 {
		t.Fatalf("List = %v, %v", ms, err)
	}
	if _, err := c.Remove("o/v"); err == nil || !strings.Contains(err.Error(), "o/v:Q4_K_M, o/v:Q8_0") {
		t.Errorf("Remove(o/v) = %v, want the choices listed", err)
	}
	removed, err := c.Remove("o/v:q4_k_m")
	if err != nil || len(removed) != 1 || filepath.Base(removed[0]) != "v-Q4_K_M.gguf" {
		t.Fatalf("Remove = %q, %v, want the Q4_K_M file alone", removed, err)
	}
	if m, err := c.Cached(Ref{Repo: "o/v", Quant: "Q8_0"}); err != nil || m.MMProjPath() == "" {
		t.Fatalf("Q8_0 after removing Q4_K_M: %v, %v", m, err)
	}
	if _, err := c.Remove("o/v"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Remove("o/v"); err == nil {
		t.Error("removing a model twice succeeded")
	}
	entries, _ := os.ReadDir(filepath.Join(c.Dir, "models"))
	if ms, _ := c.List(); len(ms) != 0 || len(entries) != 0 {
		t.Errorf("after removing both: List = %v, models folder holds %d entries", ms, len(entries))
	}
}

// TestNewFromEnv reads the settings huggingface_hub reads.
func TestNewFromEnv(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", "")
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("HF_HUB_OFFLINE", "1")
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("hf_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := NewFromEnv("")
	if c.Token != "hf_fromfile" || !c.Offline || c.Endpoint != "http://127.0.0.1:1" || c.Dir != filepath.Join(home, "vkllm") {
		t.Errorf("NewFromEnv = %+v", c)
	}
	t.Setenv("HF_TOKEN", " hf_env ")
	t.Setenv("HF_HUB_OFFLINE", "0")
	if c := NewFromEnv("/store"); c.Token != "hf_env" || c.Offline || c.Dir != "/store" {
		t.Errorf("NewFromEnv with HF_TOKEN = %+v", c)
	}
}

// TestPullStalePart: a partial file left from an earlier version of the
// file does not verify once resumed, so it is downloaded whole once more.
func TestPullStalePart(t *testing.T) {
	h := newFakeHub(t)
	data := h.add("o/r", "r-Q4_K_M.gguf", 50_000)
	c := h.client(t)
	part := filepath.Join(c.Dir, "models", "o", "r", "r-Q4_K_M.gguf.part")
	if err := os.MkdirAll(filepath.Dir(part), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(part, bytes.Repeat([]byte{7}, 20_000), 0o644); err != nil {
		t.Fatal(err)
	}
	var notes []string
	c.Notice = func(s string) { notes = append(notes, s) }
	m, err := c.Pull(context.Background(), Ref{Repo: "o/r"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(m.Path()); !bytes.Equal(got, data) {
		t.Fatal("the file differs from the hub's")
	}
	if served, ranges, _ := h.stats(); served != 30_000+50_000 || len(ranges) != 2 || ranges[0] != "bytes=20000-" || ranges[1] != "" {
		t.Errorf("served %d bytes, ranges %q; want a resume at 20000 then the whole file", served, ranges)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "does not verify") {
		t.Errorf("notices %q", notes)
	}
}

// TestPullConcurrent: two pulls of one model at once download it once; the
// second waits for the first and finds the file present.
func TestPullConcurrent(t *testing.T) {
	h := newFakeHub(t)
	data := h.add("o/r", "r-Q4_K_M.gguf", 30_000)
	h.gate = make(chan struct{})
	dir := t.TempDir()
	waiting := make(chan string, 1)
	errs := make(chan error, 2)
	pull := func(c *Client) {
		m, err := c.Pull(context.Background(), Ref{Repo: "o/r"}, true)
		if err == nil {
			if got, _ := os.ReadFile(m.Path()); !bytes.Equal(got, data) {
				err = errors.New("the file differs from the hub's")
			}
		}
		errs <- err
	}
	first := &Client{Endpoint: h.hub.URL, Dir: dir}
	go pull(first)
	for _, _, n := h.stats(); n == 0; _, _, n = h.stats() {
		time.Sleep(time.Millisecond) // until the first download has started
	}
	second := &Client{Endpoint: h.hub.URL, Dir: dir, Notice: func(s string) { waiting <- s }}
	go pull(second)
	if note := <-waiting; !strings.Contains(note, "waiting for another pull") {
		t.Errorf("the second pull says %q", note)
	}
	close(h.gate)
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if _, _, n := h.stats(); n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}
}
