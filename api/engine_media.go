package api

import "github.com/vkllm/vkllm/engine"

// SetProjector gives the backend a vision projector on the model's device
// (before the server is Ready); requests with images then run through it.
func (b *EngineBackend) SetProjector(p Projector) { b.proj = p }

// Projector returns the backend's vision projector, nil without one.
func (b *EngineBackend) Projector() Projector { return b.proj }

// textTokens returns prompt without the rows of its images (their
// pseudo-ids are not vocabulary tokens), for the sampler's penalties.
func textTokens(prompt []int32, media []*engine.Media) []int32 {
	if len(media) == 0 {
		return prompt
	}
	out := make([]int32, 0, len(prompt))
	for _, t := range prompt {
		if t >= 0 {
			out = append(out, t)
		}
	}
	return out
}
