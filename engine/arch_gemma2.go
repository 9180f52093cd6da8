package engine

import (
	"math"

	"github.com/vkllm/vkllm/gguf"
)

// loadGemma2 loads Gemma 2: the Gemma block of arch_gemma3.go without q/k
// norms, every other layer (0, 2, ...) attending within a sliding window
// (attention.sliding_window, 4096 when absent) with the same RoPE base,
// attention scores soft-capped to attn_logit_softcapping (default 50) and
// the logits to final_logit_softcapping (default 30), as the reference.
func loadGemma2(f *gguf.File, o Options) (archModel, error) {
	m, err := bindGemma(f, o)
	if err != nil {
		return nil, err
	}
	p := o.Arch + "."
	window, err := optInt(f, p+"attention.sliding_window", 4096)
	if err != nil {
		return nil, err
	}
	attnCap, finalCap := float32(50), float32(30)
	if v, err := f.Float(p + "attn_logit_softcapping"); err == nil {
		attnCap = float32(v)
	}
	if v, err := f.Float(p + "final_logit_softcapping"); err == nil {
		finalCap = float32(v)
	}
	m.softcap = finalCap
	// Gemma 2 27B (46 layers) scales queries by 1/sqrt(embd/heads), the
	// others by 1/sqrt(head_dim), as the reference.
	scale := float32(1 / math.Sqrt(float64(o.HeadDim)))
	if o.Layers == 46 {
		scale = float32(1 / math.Sqrt(float64(o.Embd/o.Heads)))
	}
	for l := range o.Layers {
		a := Attn{Layer: l, Heads: o.Heads, KVHeads: o.KVHeads, HeadDim: o.HeadDim, Scale: scale, SoftCap: attnCap}
		if l%2 == 0 {
			a.Window = window
		}
		m.attns, m.ropes = append(m.attns, a), append(m.ropes, o.rope(true, o.RopeBase, o.RopeScale))
	}
	return m, nil
}
