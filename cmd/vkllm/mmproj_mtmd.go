//go:build mtmd

package main

import (
	"fmt"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/vision"
)

// mtmdBuilt reports a build with the mtmd feature (image input).
const mtmdBuilt = true

// loadProjector loads the vision projector at path onto the text model's
// device (progress as its weights upload) and checks that it fits the
// model. The returned projector is closed with close.
func loadProjector(path string, m *engine.Model, progress func(done, total int64)) (*vision.GPU, func(), error) {
	pm, err := vision.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer pm.Close() // the GPU keeps its own copies
	u, err := vision.NewGPU(m.Device(), pm, 0, progress)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := u.CheckText(m.Opts.Embd, m.Tok); err != nil {
		u.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, u.Close, nil
}
