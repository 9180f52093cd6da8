package main

import (
	"os"
	"testing"
)

// TestMain points the user's cache folder (--cache-dir's default) at a
// temporary one, so that no test writes a pipeline cache into the home
// folder of whoever runs it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vkllm-test-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
