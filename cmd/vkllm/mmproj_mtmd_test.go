//go:build mtmd

package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/tools/modelgen"
)

// TestServeProjectorErrors: a projector that does not fit the text model,
// or a file that is not a projector, stops the start with an error naming
// the problem.
func TestServeProjectorErrors(t *testing.T) {
	dir := fixtures.Dir(t, "mmproj")
	llamaText := filepath.Join(dir, "llava-text-llama-256x4-f16.gguf")
	gemmaProj := filepath.Join(dir, "gemma3-mmproj-gemma3-vit128x2-64p4-f16.gguf")
	for _, tc := range []struct {
		name, model, proj, want string
	}{
		{"missing markers", llamaText, gemmaProj, "no <start_of_image> token"},
		{"text model as projector", llamaText, llamaText, "not clip"},
		{"missing file", llamaText, filepath.Join(dir, "nope.gguf"), "nope.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cmdServe([]string{"-m", tc.model, "--mmproj", tc.proj, "--port", strconv.Itoa(freePort(t)), "--parallel", "1"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serve = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestServeIdefics3Markers: an idefics3 projector with a text model whose
// vocabulary lacks Idefics3's image markers stops the start, naming them.
func TestServeIdefics3Markers(t *testing.T) {
	dir := t.TempDir()
	text, proj := filepath.Join(dir, "text.gguf"), filepath.Join(dir, "proj.gguf")
	if err := modelgen.WriteFile(text, modelgen.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := modelgen.WriteProjector(proj, modelgen.ProjectorOptions{Type: "idefics3", LongestEdge: 64, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	err := cmdServe([]string{"-m", text, "--mmproj", proj, "--port", strconv.Itoa(freePort(t)), "--parallel", "1"})
	if want := `"\n\n", "<fake_token_around_image>", "<global-img>"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("serve = %v, want an error naming %s", err, want)
	}
}
