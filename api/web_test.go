package api

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/vkllm/vkllm/engine"
)

// chromium returns the path of a Chromium or Chrome binary, "" when none
// is installed (make test installs Debian's chromium).
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestChatPageInBrowser loads the chat page in headless Chromium against a
// server with a generated model and an API key, enters the key, sends a
// message and checks that the answer streams into the page (several
// updates of the answer's text) and equals the same request's answer over
// the API, with its speed shown. It keeps a screenshot in testdata/tmp.
func TestChatPageInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium binary (make test installs Debian's chromium)")
	}
	m := loadTinyModel(t)
	be := newTestBackend(t, m, engine.SchedulerConfig{})
	ts := newReadyServer(t, be, Config{APIKey: "secret"})

	// The expectation: the same conversation and settings over the API.
	const prompt = "Tell me a story."
	r := ts.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"`+prompt+`"}],"temperature":0,"max_tokens":12}`,
		"Authorization", "Bearer secret")
	want, _ := jsonPath(decodeBody(t, r.body), "choices", 0, "message", "content").(string)
	if r.status != 200 || len(want) < 2 {
		t.Fatalf("the API's answer = %d %s; the test needs one of several tokens", r.status, r.body)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1000, 700))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.base+"/")); err != nil {
		t.Fatalf("opening the page: %v", err)
	}
	// The browser started: bound the rest (not the first call, which would
	// bound the browser's life).
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return v
	}
	poll := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	// Without the key the page asks for it.
	poll("the page to ask for the API key", `document.getElementById("status").textContent.includes("API key")`)
	step("entering the key", chromedp.Steps(chromedp.SetValue(chromedp.CSS("#api-key"), "secret"),
		func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Evaluate[any](`document.getElementById("api-key").dispatchEvent(new Event("change"))`)(ctx, t)
			return chromedp.Void{}, err
		}))
	poll("the model's name", `document.getElementById("model-name").textContent === "tiny"`)
	status, model, ctxSize := text("#status"), text("#model-name"), text("#ctx-size")
	step("setting up the message", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#temperature"), "0"),
		chromedp.SetValue(chromedp.CSS("#max-tokens"), "12"),
		chromedp.SendKeys(chromedp.CSS("#input"), prompt),
	))
	// Count the answer's text updates as they stream in.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.updates = 0; new MutationObserver((ms) => {
		for (const m of ms) {
			const el = m.target.nodeType === 1 ? m.target : m.target.parentElement;
			if (el && el.closest(".msg.assistant .text")) window.updates++;
		}
	}).observe(document.getElementById("messages"), {childList: true, subtree: true, characterData: true}); 0`)); err != nil {
		t.Fatalf("observing the answer: %v", err)
	}
	step("sending", chromedp.Click(chromedp.CSS("#send")))
	poll("the answer to finish", `document.querySelector(".msg.assistant .speed") !== null`)
	answer, speed := text(".msg.assistant .text"), text(".msg.assistant .speed")
	updates, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.updates`))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if model != "tiny" || ctxSize != "512" || !strings.HasPrefix(status, "ready") {
		t.Errorf("the page shows model %q, context %q, status %q; want tiny, 512, ready", model, ctxSize, status)
	}
	if answer != want {
		t.Errorf("the page's answer = %q, want the API's %q", answer, want)
	}
	if updates < 2 {
		t.Errorf("the answer's text changed %d times, want it streamed in several updates", updates)
	}
	if !strings.Contains(speed, "tokens/s") || !strings.Contains(speed, "prompt") {
		t.Errorf("the speed line = %q, want tokens/s of the answer and the prompt", speed)
	}
	dir := filepath.Join("..", "testdata", "tmp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "chat-page.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestChatPageServed: the page and its assets are served without the API
// key, with their content types and a restrictive content security policy.
func TestChatPageServed(t *testing.T) {
	ts := startServer(t, Config{APIKey: "k"}) // loading: the page is there already
	for path, ctype := range map[string]string{"/": "text/html", "/ui/app.js": "text/javascript", "/ui/style.css": "text/css"} {
		r := ts.do("GET", path, "")
		want, err := webFiles.ReadFile("web/" + map[string]string{"/": "index.html", "/ui/app.js": "app.js", "/ui/style.css": "style.css"}[path])
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ctype) || string(r.body) != string(want) {
			t.Errorf("GET %s = %d %q (%d bytes), want 200 %s with the embedded file", path, r.status, r.header.Get("Content-Type"), len(r.body), ctype)
		}
		if !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, r.header.Get("Content-Security-Policy"))
		}
	}
	if r := ts.do("GET", "/ui/missing.js", ""); r.status != 404 {
		t.Errorf("GET /ui/missing.js = %d, want 404", r.status)
	}
}
