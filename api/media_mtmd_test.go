//go:build mtmd

package api

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/vision"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// imageRef is what the tests need of ../shared/fixtures/mmproj/<pair>.ref.json.
type imageRef struct {
	TextModel string `json:"text_model"`
	MMProj    string `json:"mmproj"`
	Cases     []struct {
		Image        string  `json:"image"`
		PromptTokens int     `json:"prompt_tokens"`
		Content      string  `json:"content"`
		Prompt       string  `json:"prompt"` // rendered, the image as <__media__>
		Before       []int32 `json:"prompt_before_image"`
		NImage       int     `json:"n_image_tokens"`
		After        []int32 `json:"prompt_after_image"`
		// Request is the body the reference got, its image url "<IMAGE>".
		Request json.RawMessage `json:"request"`
		Steps   []struct {
			Top [][2]float64 `json:"top"`
		} `json:"steps"`
	} `json:"cases"`
}

// imageServer serves the fixture pair with its projector; mediaDir (may be
// "") is --media-dir.
func imageServer(t *testing.T, pair, mediaDir string, cfg Config) (*testServer, string, *imageRef) {
	t.Helper()
	dir := fixtures.Dir(t, "mmproj")
	raw, err := os.ReadFile(filepath.Join(dir, pair+".ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref imageRef
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(filepath.Join(dir, ref.TextModel), engine.Config{CtxSize: 256, BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := vision.Open(filepath.Join(dir, ref.MMProj))
	if err != nil {
		t.Fatal(err)
	}
	u, err := vision.NewGPU(m.Device(), pm, 0, nil)
	pm.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := u.CheckText(m.Opts.Embd, m.Tok); err != nil {
		t.Fatal(err)
	}
	be := newTestBackend(t, m, engine.SchedulerConfig{})
	be.SetProjector(u)
	t.Cleanup(func() { u.Close(); m.Close() }) // after the backend's cleanup
	cfg.HasProjector, cfg.MediaDir = true, mediaDir
	return newReadyServer(t, be, cfg), dir, &ref
}

// docImageFixtureServer is the server of the documents' image examples
// (TestDocExamples): the gemma3 pair, and the folder of its images, where
// the examples run.
func docImageFixtureServer(t *testing.T) (*testServer, string) {
	ts, dir, _ := imageServer(t, "gemma3", "", Config{})
	return ts, dir
}

func imageRequest(url string, stream bool) string {
	return fmt.Sprintf(`{"messages": [{"role": "user", "content": [
		{"type": "image_url", "image_url": {"url": %q}},
		{"type": "text", "text": "What is in this picture?"}]}],
		"max_tokens": 16, "temperature": 0, "seed": 1, "stream": %v}`, url, stream)
}

func dataURL(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mime := "image/png"
	if strings.HasSuffix(path, ".jpg") {
		mime = "image/jpeg"
	}
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// TestImageChat sends the fixture cases as the reference's recorder did
// and wants its answers: the same 16 greedy tokens' text (except after a
// step whose top-1 margin is within backend noise) and prompt token count,
// from a data URL, a file under --media-dir and a file:// URL, streamed or
// not.
func TestImageChat(t *testing.T) {
	for _, pair := range []string{"llava", "gemma3"} {
		t.Run(pair, func(t *testing.T) { testImageChat(t, pair) })
	}
}

func testImageChat(t *testing.T, pair string) {
	media := t.TempDir()
	ts, dir, ref := imageServer(t, pair, media, Config{})
	for _, c := range ref.Cases {
		img, err := os.ReadFile(filepath.Join(dir, c.Image))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(media, c.Image), img, 0o644); err != nil {
			t.Fatal(err)
		}
		// The reference's request with the image's url and stream set.
		request := func(url string, stream bool) string {
			u, _ := json.Marshal(url)
			body := strings.Replace(string(c.Request), `"<IMAGE>"`, string(u), 1)
			return strings.TrimSuffix(strings.TrimSpace(body), "}") + fmt.Sprintf(`, "stream": %v}`, stream)
		}
		// A step whose top-1 margin is below 0.05 may flip on another
		// backend (README); compare the text only when none is.
		exact := true
		for _, st := range c.Steps {
			exact = exact && st.Top[0][1]-st.Top[1][1] > 0.05
		}
		t.Run(c.Image+"/prompt-tokens", func(t *testing.T) {
			req, e := decodeChat(grammar.Budget{}, []byte(request(c.Image, false)))
			if e != nil {
				t.Fatal(e)
			}
			pc, e := ts.s.prepareChat(req)
			if e != nil {
				t.Fatal(e)
			}
			if len(pc.media) != 1 || pc.media[0].Start != len(c.Before) || pc.media[0].N != c.NImage || pc.media[0].NonCausal != (pair == "gemma3") {
				t.Fatalf("media %+v, want one image of %d rows at %d (non-causal for gemma3)", pc.media, c.NImage, len(c.Before))
			}
			got := pc.prompt
			if fmt.Sprint(got[:len(c.Before)]) != fmt.Sprint(c.Before) || fmt.Sprint(got[len(c.Before)+c.NImage:]) != fmt.Sprint(c.After) {
				t.Errorf("prompt %v, want %v + %d image rows + %v", got, c.Before, c.NImage, c.After)
			}
			for _, id := range got[len(c.Before) : len(c.Before)+c.NImage] {
				if id >= 0 {
					t.Errorf("image row token %d, want a negative pseudo-id", id)
				}
			}
		})
		t.Run(c.Image+"/apply-template", func(t *testing.T) {
			r := ts.post("/apply-template", request(c.Image, false))
			var got struct{ Prompt string }
			if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
				t.Fatalf("status %d, %s: %v", r.status, r.body, err)
			}
			if got.Prompt != c.Prompt {
				t.Errorf("prompt = %q, want %q", got.Prompt, c.Prompt)
			}
		})
		for _, src := range []struct{ name, url string }{
			{"data", dataURL(t, filepath.Join(dir, c.Image))},
			{"path", c.Image},
			{"file", "file://" + filepath.Join(media, c.Image)},
		} {
			t.Run(c.Image+"/"+src.name, func(t *testing.T) {
				r := ts.post("/v1/chat/completions", request(src.url, false))
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				var resp struct {
					Choices []struct{ Message struct{ Content string } }
					Usage   struct {
						PromptTokens int `json:"prompt_tokens"`
					}
				}
				if err := json.Unmarshal(r.body, &resp); err != nil {
					t.Fatal(err)
				}
				if resp.Usage.PromptTokens != c.PromptTokens {
					t.Errorf("usage.prompt_tokens = %d, want %d", resp.Usage.PromptTokens, c.PromptTokens)
				}
				got := resp.Choices[0].Message.Content
				if exact && got != c.Content {
					t.Errorf("content = %q, want %q", got, c.Content)
				}
				s := ts.post("/v1/chat/completions", request(src.url, true))
				var streamed strings.Builder
				for _, ev := range parseSSE(t, s.body) {
					if ev.data == "[DONE]" {
						continue
					}
					var ch struct {
						Choices []struct{ Delta struct{ Content string } }
					}
					if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
						t.Fatal(err)
					}
					if len(ch.Choices) > 0 {
						streamed.WriteString(ch.Choices[0].Delta.Content)
					}
				}
				if streamed.String() != got {
					t.Errorf("streamed %q, not streamed %q", streamed.String(), got)
				}
			})
		}
	}
}

// pngHeaderOnly is a PNG signature and IHDR of w x h RGB pixels, no data.
func pngHeaderOnly(w, h uint32) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2
	chunk := append([]byte("IHDR"), ihdr...)
	out := append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13)
	out = append(out, chunk...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(chunk))
}

// TestImageErrors sends bad images and image sources: each is a 400 that
// names the part's field, and the server answers the next request.
func TestImageErrors(t *testing.T) {
	media := t.TempDir()
	outside := t.TempDir()
	ts, dir, ref := imageServer(t, "gemma3", media, Config{MaxImageBytes: 64 << 10, MaxImages: 2})
	png := filepath.Join(dir, ref.Cases[0].Image)
	good, err := os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(outside, "secret.png"), filepath.Join(media, "ok.png")} {
		if err := os.WriteFile(f, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "secret.png"), filepath.Join(media, "escape.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(media, "outdir")); err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }
	big := make([]byte, 70<<10)
	const field = "messages[0].content[0].image_url"
	const notThere = field + ": no such file under --media-dir"
	for _, tc := range []struct {
		name, url, want string
	}{
		{"bad base64", "data:image/png;base64,iVBOR!!!w0KGgo", "bad base64"},
		{"truncated png", b64(good[:len(good)/2]), "bad png image"},
		{"bomb header", b64(pngHeaderOnly(30000, 30000)), "30000 x 30000"},
		{"unsupported format", b64([]byte("BM\x36\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00")), "unsupported image format"},
		{"not an image type", "data:text/plain;base64,aGVsbG8=", "want image/*"},
		{"not base64", "data:image/png,rawbytes", "base64"},
		{"too many bytes", b64(big), "limit of 65536"},
		{"http", "http://example.com/cat.png", "no network requests"},
		{"https", "https://example.com/cat.png", "no network requests"},
		{"other scheme", "ftp://example.com/cat.png", "not supported"},
		// A file outside --media-dir and one that does not exist get
		// the same answer: the error tells nothing of what is outside.
		{"symlink escape", "escape.png", notThere},
		{"dir symlink escape", "outdir/secret.png", notThere},
		{"dotdot", "../" + filepath.Base(outside) + "/secret.png", notThere},
		{"absolute outside", filepath.Join(outside, "secret.png"), notThere},
		{"file url outside", "file://" + filepath.Join(outside, "secret.png"), notThere},
		{"missing file", "nope.png", notThere},
		{"missing outside", filepath.Join(outside, "nope.png"), notThere},
		{"missing dotdot", "../" + filepath.Base(outside) + "/nope.png", notThere},
		{"empty url", "", "empty url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.post("/v1/chat/completions", imageRequest(tc.url, false))
			if r.status != 400 {
				t.Fatalf("status %d, want 400: %s", r.status, r.body)
			}
			e := errorOf(t, r.body)
			if e["param"] != field || !strings.Contains(fmt.Sprint(e["message"]), tc.want) {
				t.Errorf("error %v, want param %s and a message containing %q", e, field, tc.want)
			}
			if tc.want == notThere && e["message"] != notThere {
				t.Errorf("message %q, want exactly %q (the same for a missing file and one outside --media-dir)", e["message"], notThere)
			}
		})
	}
	t.Run("too many images", func(t *testing.T) {
		part := fmt.Sprintf(`{"type": "image_url", "image_url": {"url": "ok.png"}}`)
		body := fmt.Sprintf(`{"messages": [{"role": "user", "content": [%s, %s, %s]}], "max_tokens": 1}`, part, part, part)
		r := ts.post("/v1/chat/completions", body)
		if e := errorOf(t, r.body); r.status != 400 || e["param"] != "messages[0].content[2].image_url" {
			t.Errorf("status %d, error %v: want 400 naming the third image", r.status, e)
		}
	})
	t.Run("server unharmed", func(t *testing.T) {
		if r := ts.post("/v1/chat/completions", imageRequest("ok.png", false)); r.status != 200 {
			t.Errorf("status %d after the bad requests: %s", r.status, r.body)
		}
	})
}

// TestImageNoMediaDir: without --media-dir, paths are refused and data URLs
// work.
func TestImageNoMediaDir(t *testing.T) {
	ts, dir, ref := imageServer(t, "gemma3", "", Config{})
	r := ts.post("/v1/chat/completions", imageRequest(filepath.Join(dir, ref.Cases[0].Image), false))
	if e := errorOf(t, r.body); r.status != 400 || !strings.Contains(fmt.Sprint(e["message"]), "--media-dir") {
		t.Errorf("status %d, error %v: want 400 naming --media-dir", r.status, e)
	}
	if r := ts.post("/v1/chat/completions", imageRequest(dataURL(t, filepath.Join(dir, ref.Cases[0].Image)), false)); r.status != 200 {
		t.Errorf("data URL: status %d: %s", r.status, r.body)
	}
}

// TestImageClientConformance: the official openai client sends an image as
// a data URL and gets the reference's answer (conformance.mjs, mode image).
func TestImageClientConformance(t *testing.T) {
	node, err := exec.LookPath("node")
	_, statErr := os.Stat(filepath.Join("conformance", "node_modules", "openai", "package.json"))
	if err != nil || statErr != nil {
		if os.Getenv("VKLLM_CONFORMANCE") == "1" {
			t.Fatalf("node or the openai client is missing: %v, %v", err, statErr)
		}
		t.Skip("node or the openai client is absent (npm ci in api/conformance, or make test)")
	}
	ts, dir, ref := imageServer(t, "gemma3", "", Config{APIKey: "test-key"})
	c := ref.Cases[0]
	cmd := exec.Command(node, "conformance.mjs", ts.base, "test-key", "image", filepath.Join(dir, c.Image), "image/png", fmt.Sprint(c.PromptTokens), c.Content)
	cmd.Dir = "conformance"
	out, err := cmd.CombinedOutput()
	t.Logf("node conformance.mjs image:\n%s", out)
	if err != nil {
		t.Errorf("the openai client with an image: %v", err)
	}
}
