package api

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAIClientConformance drives a real server (fake backend) with the
// official openai npm client: conformance/conformance.mjs. make test
// installs the client (npm ci in api/conformance) and sets
// VKLLM_CONFORMANCE=1, which turns a missing client into a failure;
// otherwise the test skips when node or the client is absent.
func TestOpenAIClientConformance(t *testing.T) {
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
	if _, err := os.Stat(filepath.Join("conformance", "node_modules", "openai", "package.json")); err != nil {
		missing("the openai client is not installed: %v", err)
	}
	f := newFake()
	f.reply = func(prompt string) string {
		switch {
		case strings.Contains(prompt, "sunny"):
			return "It is sunny."
		case strings.Contains(prompt, "weather in Paris"):
			return `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`
		}
		return "Hello, world! This is the fake model."
	}
	f.ctxSize = 4096
	ts := newReadyServer(t, f, Config{APIKey: "test-key"})
	cmd := exec.Command(node, "conformance.mjs", ts.base, "test-key")
	cmd.Dir = "conformance"
	out, err := cmd.CombinedOutput()
	t.Logf("node conformance.mjs:\n%s", out)
	if err != nil {
		t.Errorf("node conformance.mjs %s = %v, want every check ok", ts.base, err)
	}
}
