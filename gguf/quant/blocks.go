package quant

import "github.com/vkllm/vkllm/gguf"

// codecForQuant returns the codec of a block-quantized type.
func codecForQuant(t gguf.GGMLType) codec {
	switch t {
	}
	return codec{}
}
