package api

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// TestClientConformance drives a real server with the clients people use
// (conformance/conformance.mjs: the official openai client, the Vercel AI
// SDK and LangChain JS, pinned in conformance/package.json) twice: against
// the deterministic fake backend, where replies are scripted and checked
// exactly, and against a small generated model with random weights on the
// Vulkan device, where the checks hold the protocol's shapes, the tool
// calls' structure and the validity of grammar-constrained output. make
// test installs the clients (npm ci in api/conformance) and sets
// VKLLM_CONFORMANCE=1, which turns a missing client into a failure;
// otherwise the test skips when node or the clients are absent.
func TestClientConformance(t *testing.T) {
	required := os.Getenv("VKLLM_CONFORMANCE") == "1"
	missing := func(format string, args ...any) {
		t.Helper()
		if required {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (run npm ci in api/conformance, or make test)", args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found: %v", err)
	}
	for _, pkg := range []string{"openai", "ai", "@ai-sdk/openai", "@langchain/openai", "zod"} {
		if _, err := os.Stat(filepath.Join("conformance", "node_modules", pkg, "package.json")); err != nil {
			missing("the %s client is not installed: %v", pkg, err)
		}
	}
	run := func(t *testing.T, ts *testServer, mode string) {
		cmd := exec.Command(node, "conformance.mjs", ts.base, "test-key", mode)
		cmd.Dir = "conformance"
		// No telemetry or tracing from the clients: loopback only.
		cmd.Env = append(os.Environ(), "LANGCHAIN_TRACING_V2=false", "LANGSMITH_TRACING=false", "AI_SDK_TELEMETRY_DISABLED=1")
		out, err := cmd.CombinedOutput()
		t.Logf("node conformance.mjs %s:\n%s", mode, out)
		if err != nil {
			t.Errorf("node conformance.mjs %s %s = %v, want every check ok", ts.base, mode, err)
		}
	}
	t.Run("fake", func(t *testing.T) {
		f := newFake()
		f.reply = func(prompt string) string {
			switch {
			case strings.Contains(prompt, "sunny"):
				return "It is sunny."
			case strings.Contains(prompt, "weather in Paris"):
				return `{"tool_call":{"name":"get_weather","arguments":{"city":"Paris"}}}` // compact: forced calls allow no free whitespace
			case strings.Contains(prompt, "Describe Paris") && strings.Contains(prompt, `"extract"`):
				// LangChain's withStructuredOutput with function calling.
				return `{"tool_call":{"name":"extract","arguments":{"city":"Paris","temp":21,"unit":"c"}}}`
			case strings.Contains(prompt, "Describe Paris"):
				return `{"city": "Paris", "temp": 21, "unit": "c"}`
			}
			return "Hello, world! This is the fake model."
		}
		f.ctxSize = 4096
		run(t, newReadyServer(t, f, Config{APIKey: "test-key"}), "fake")
	})
	t.Run("model", func(t *testing.T) {
		// Prompts with tools and schemas take a few hundred tokens, and
		// constrained answers a few hundred more.
		path := filepath.Join(t.TempDir(), "tiny.gguf")
		if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Seed: 7}); err != nil {
			t.Fatal(err)
		}
		m, err := engine.Load(path, engine.Config{CtxSize: 2048, BatchSize: 256})
		if err != nil {
			t.Fatalf("engine.Load(%s) = %v", path, err)
		}
		t.Cleanup(func() { m.Close() })
		be := newTestBackend(t, m, engine.SchedulerConfig{})
		run(t, newReadyServer(t, be, Config{APIKey: "test-key"}), "model")
	})
}
