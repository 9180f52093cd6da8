package vision

import (
	"fmt"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/vk"
)

// GPU is a projector whose weights live on a Vulkan device: Encode runs
// the family's pass through the engine's GPU graph (engine.GPUNet), one
// command buffer, one submit, one fence wait and one read-back per image.
// Like its device, it is used from one goroutine at a time (the one that
// runs the text model on the same device).
type GPU struct {
	m   *Model
	net *engine.GPUNet
	// markers are idefics3's marker tokens, found by CheckText.
	markers *idefics3Markers
}

// NewGPU uploads m's weights to dev and reserves the activations of one
// image, after checking that they fit the device memory left (free: the
// bytes the text model left, or 0 for the whole device). progress, when
// set, is called as weights are uploaded. m's file may be closed
// afterwards; the GPU keeps what it needs.
func NewGPU(dev *vk.Device, m *Model, free int64, progress func(done, total int64)) (*GPU, error) {
	n, err := engine.NewGPUNet(dev, m.w, free, progress)
	if err != nil {
		return nil, err
	}
	return &GPU{m: m, net: n}, nil
}

// Model returns the projector the GPU runs.
func (u *GPU) Model() *Model { return u.m }

// DeviceBytes returns the device memory the GPU holds.
func (u *GPU) DeviceBytes() int64 { return u.net.DeviceBytes() }

// Close frees the device memory and pipelines; u must not be used
// afterwards. It does not close the device.
func (u *GPU) Close() { u.net.Close() }

// Encode runs the encoder and projector on the preprocessed image in
// (Preprocess's output) and returns the image embeddings, [Tokens][OutEmbd]
// row-major.
func (u *GPU) Encode(in []float32) ([]float32, error) {
	if err := checkInput("Encode", &u.m.P, in); err != nil {
		return nil, err
	}
	return u.net.Run(in)
}

// checkInput checks that in is one preprocessed image.
func checkInput(op string, p *Params, in []float32) error {
	if s := p.ImageSize; len(in) != 3*s*s {
		return fmt.Errorf("vision: %s: %d input values, want 3x%dx%d", op, len(in), s, s)
	}
	return nil
}
