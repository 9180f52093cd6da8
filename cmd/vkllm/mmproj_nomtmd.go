//go:build !mtmd

package main

import (
	"errors"

	"github.com/vkllm/vkllm/api"
	"github.com/vkllm/vkllm/engine"
)

// mtmdBuilt reports a build with the mtmd feature (image input): this one
// has none, so --mmproj is refused.
const mtmdBuilt = false

func loadProjector(string, *engine.Model, func(done, total int64)) (api.Projector, func(), error) {
	return nil, nil, errors.New("--mmproj: this vkllm was built without multimodal support (the mtmd feature)")
}
