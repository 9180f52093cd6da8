package vision

import "github.com/vkllm/vkllm/engine"

// EncodeCPU runs the encoder and projector on the preprocessed image in
// (Preprocess's output, [3][ImageSize][ImageSize]) in plain Go, the
// engine's CPU reference (engine.CPUNet: weights dequantized to f32, sums
// in f64), and returns the image embeddings, [Tokens][OutEmbd] row-major.
// It is the reference the GPU path is tested against (slow, and it
// dequantizes the weights on every call: for tests).
func (m *Model) EncodeCPU(in []float32) ([]float32, error) {
	if err := checkInput("EncodeCPU", &m.P, in); err != nil {
		return nil, err
	}
	n, err := engine.NewCPUNet(m.w)
	if err != nil {
		return nil, err
	}
	return n.Run(in)
}
