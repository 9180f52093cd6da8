//go:build mtmd

package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/vision"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/testseed"
	"github.com/vkllm/vkllm/sampling/grammar"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// TestIdefics3Chat serves a generated llama text model (a BPE vocabulary
// with "\n\n", <fake_token_around_image> and <global-img>) with a
// generated idefics3 projector (32-pixel tiles of 16 tokens, longest edge
// 96) and sends a 96 x 50 image: 3 x 2 tiles and the global image. It
// checks the prompt against the reference's layout built here from its
// rules, usage.prompt_tokens against that layout's length, the greedy
// answer and its log-probabilities against a CPU-reference run (the
// projector's plain-Go encoder, the text model's f64 forward), the same
// answer from the prompt cache, and the server after a bad image.
func TestIdefics3Chat(t *testing.T) {
	dir := t.TempDir()
	textPath, projPath := filepath.Join(dir, "text.gguf"), filepath.Join(dir, "proj.gguf")
	const fake, global = "<fake_token_around_image>", "<global-img>"
	if err := modelgen.WriteFile(textPath, modelgen.Options{Words: []string{"\n\n"}, Specials: []string{fake, global}, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	if err := modelgen.WriteProjector(projPath, modelgen.ProjectorOptions{Type: "idefics3", LongestEdge: 96, Seed: 12}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(textPath, engine.Config{CtxSize: 256, BatchSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := vision.Open(projPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pm.Close() })
	u, err := vision.NewGPU(m.Device(), pm, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.CheckText(m.Opts.Embd, m.Tok); err != nil {
		t.Fatal(err)
	}
	be := newTestBackend(t, m, engine.SchedulerConfig{})
	be.SetProjector(u)
	t.Cleanup(func() { u.Close(); m.Close() })
	ts := newReadyServer(t, be, Config{HasProjector: true})

	// A seeded random 96 x 50 picture.
	rng := testseed.Rand(t, 0)
	img := image.NewRGBA(image.Rect(0, 0, 96, 50))
	for y := range 50 {
		for x := range 96 {
			img.Set(x, y, color.RGBA{uint8(rng.IntN(256)), uint8(2 * x), uint8(4 * y), 255})
		}
	}
	var pngBytes bytes.Buffer
	if err := png.Encode(&pngBytes, img); err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes.Bytes())
	body := func(url string) string {
		return fmt.Sprintf(`{"messages": [{"role": "user", "content": [
			{"type": "text", "text": "Look:"},
			{"type": "image_url", "image_url": {"url": %q}},
			{"type": "text", "text": "What is it?"}]}],
			"max_tokens": 8, "temperature": 0, "logprobs": true}`, url)
	}

	// The prompt the reference builds (mtmd.cpp): the text before the
	// image, each tile after its marker text (tokenized with special
	// tokens) in rows separated by the "\n" token, then the tokens "\n\n",
	// <fake_token_around_image>, <global-img>, the global image,
	// <fake_token_around_image>, then the text after. -1 stands for an
	// image row. 96 x 50 with 32-pixel tiles and longest edge 96: scale
	// 1, 96 x 64, so 3 columns and 2 rows.
	r := ts.post("/apply-template", body(url))
	var rendered struct{ Prompt string }
	if err := json.Unmarshal(r.body, &rendered); err != nil || r.status != 200 {
		t.Fatalf("/apply-template: status %d, %s: %v", r.status, r.body, err)
	}
	before, after, ok := strings.Cut(rendered.Prompt, "<__media__>")
	if !ok || strings.Contains(after, "<__media__>") {
		t.Fatalf("rendered prompt %q: want one image marker", rendered.Prompt)
	}
	enc := func(s string, bos bool) []int32 {
		ids, err := m.Tok.Encode(s, bos, true)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	tok := func(s string) int32 {
		id, ok := m.Tok.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return id
	}
	nl, nlnl := tok("Ċ"), tok("ĊĊ") // GPT-2's byte-level spelling of "\n" and "\n\n"
	const rows = 16                 // (32/4/2)^2 per chunk
	imageRows := func() []int32 {
		out := make([]int32, rows)
		for i := range out {
			out[i] = -1
		}
		return out
	}
	want := enc(before, true)
	for r := range 2 {
		for c := range 3 {
			want = append(want, enc(fmt.Sprintf("%s<row_%d_col_%d>", fake, r+1, c+1), false)...)
			want = append(want, imageRows()...)
		}
		if r == 0 {
			want = append(want, nl)
		}
	}
	want = append(want, nlnl, tok(fake), tok(global))
	want = append(want, imageRows()...)
	want = append(want, tok(fake))
	want = append(want, enc(after, false)...)

	req, e := decodeChat(grammar.Budget{}, []byte(body(url)))
	if e != nil {
		t.Fatal(e)
	}
	pc, e := ts.s.prepareChat(req)
	if e != nil {
		t.Fatal(e)
	}
	if len(pc.prompt) != len(want) {
		t.Fatalf("prompt of %d tokens, want %d:\n%v\n%v", len(pc.prompt), len(want), pc.prompt, want)
	}
	seen := map[int32]bool{}
	for i, id := range pc.prompt {
		if want[i] == -1 && id >= 0 || want[i] != -1 && id != want[i] {
			t.Fatalf("prompt token %d = %d, want %d (-1: an image row)\n%v\n%v", i, id, want[i], pc.prompt, want)
		}
		if id < 0 {
			if seen[id] {
				t.Errorf("pseudo-id %d at %d used twice: chunks must differ", id, i)
			}
			seen[id] = true
		}
	}
	if len(pc.media) != 7 {
		t.Fatalf("%d chunks, want 7 (6 tiles and the global image)", len(pc.media))
	}
	for _, md := range pc.media {
		if md.N != rows || md.NonCausal || pc.prompt[md.Start] >= 0 || pc.prompt[md.Start-1] < 0 || pc.prompt[md.Start+md.N] < 0 {
			t.Errorf("chunk %+v: want %d causal rows between tokens", md, rows)
		}
	}

	// The CPU reference: the projector's plain-Go encoder for every chunk,
	// the text model's f64 forward, greedy.
	cpuProj, err := vision.NewCPU(pm, m.Opts.Embd, m.Tok)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := cpuProj.Prepare(context.Background(), pngBytes.Bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var embeds [][]float32
	for _, p := range parts {
		if p.Rows == 0 {
			continue
		}
		e, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Rows {
			embeds = append(embeds, e[i*m.Opts.Embd:(i+1)*m.Opts.Embd])
		}
	}
	f, err := gguf.Open(textPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, err := engine.ReadOptions(f)
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.LoadWeights(f, o)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := engine.NewCPUModel(o, w, 256, 1)
	if err != nil {
		t.Fatal(err)
	}
	var b engine.Batch
	for i, id := range pc.prompt {
		var e []float32
		if id < 0 {
			e, embeds = embeds[0], embeds[1:]
		}
		b.Tokens, b.Slots, b.Pos = append(b.Tokens, id), append(b.Slots, 0), append(b.Pos, int32(i))
		out := engine.RowOut{}
		if i == len(pc.prompt)-1 {
			out.Kind = engine.OutLogits
		}
		b.Out, b.Embeds = append(b.Out, out), append(b.Embeds, e)
	}
	if len(embeds) != 0 {
		t.Fatalf("%d CPU image rows left over", len(embeds))
	}
	logits, err := cpu.Forward(b)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		id      int32
		logprob float64
		margin  float64
	}
	var ref []step
	for pos := int32(len(pc.prompt)); len(ref) < 8; pos++ {
		lp := logSoftmaxF64(logits)
		best := 0
		for i := range lp {
			if lp[i] > lp[best] {
				best = i
			}
		}
		second := math.Inf(-1)
		for i := range lp {
			if i != best {
				second = math.Max(second, lp[i])
			}
		}
		ref = append(ref, step{int32(best), lp[best], lp[best] - second})
		if m.Tok.IsEOG(int32(best)) {
			break
		}
		if logits, err = cpu.Forward(engine.Batch{Tokens: []int32{int32(best)}, Slots: []int32{0}, Pos: []int32{pos}, Out: []engine.RowOut{{Kind: engine.OutLogits}}}); err != nil {
			t.Fatal(err)
		}
	}

	type answer struct {
		Choices []struct {
			Message  struct{ Content string }
			Logprobs struct {
				Content []struct {
					Bytes   []byte // the token's bytes (a JSON array of numbers)
					Logprob float64
				}
			}
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	ask := func(name string) answer {
		r := ts.post("/v1/chat/completions", body(url))
		if r.status != 200 {
			t.Fatalf("%s: status %d: %s", name, r.status, r.body)
		}
		var a answer
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	// GPU and CPU agree to about 1e-3 here; a step whose margin is below
	// logprobTol may flip, after which the two runs part.
	const logprobTol = 0.01
	check := func(name string, a answer) {
		if a.Usage.PromptTokens != len(want) {
			t.Errorf("%s: usage.prompt_tokens = %d, want %d", name, a.Usage.PromptTokens, len(want))
		}
		got := a.Choices[0].Logprobs.Content
		compared := 0
		for i, s := range ref {
			if i >= len(got) {
				if !m.Tok.IsEOG(s.id) {
					t.Errorf("%s: %d tokens, the reference has %d", name, len(got), len(ref))
				}
				break
			}
			if piece := m.Tok.Piece(s.id); !bytes.Equal(got[i].Bytes, piece) || math.Abs(got[i].Logprob-s.logprob) > logprobTol {
				t.Errorf("%s: step %d: token %q logprob %.5f, CPU reference %q %.5f", name, i, got[i].Bytes, got[i].Logprob, piece, s.logprob)
			}
			compared++
			if s.margin < logprobTol {
				break
			}
		}
		if compared < 3 {
			t.Errorf("%s: only %d steps compared", name, compared)
		}
		t.Logf("%s: %q, %d steps compared", name, a.Choices[0].Message.Content, compared)
	}
	first := ask("first")
	check("first", first)
	// The same image again: its chunks' rows come from the prompt cache.
	again := ask("again")
	check("again", again)
	if again.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("again: %q, first %q", again.Choices[0].Message.Content, first.Choices[0].Message.Content)
	}

	// A bad image is a 400 naming its part; the server answers the next
	// request as before.
	bad := ts.post("/v1/chat/completions", body("data:image/png;base64,"+base64.StdEncoding.EncodeToString(pngBytes.Bytes()[:pngBytes.Len()/2])))
	if e := errorOf(t, bad.body); bad.status != 400 || e["param"] != "messages[0].content[1].image_url" {
		t.Errorf("truncated PNG: status %d, error %v: want 400 naming messages[0].content[1].image_url", bad.status, e)
	}
	after2 := ask("after a bad image")
	if after2.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("after a bad image: %q, first %q", after2.Choices[0].Message.Content, first.Choices[0].Message.Content)
	}
}

// logSoftmaxF64 is log(softmax(x)) in float64.
func logSoftmaxF64(x []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - mx - math.Log(s)
	}
	return out
}
