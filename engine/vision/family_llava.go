package vision

import (
	"fmt"

	"github.com/vkllm/vkllm/engine"
)

// llava is the LLaVA-1.5 family (clip.projector_type "mlp"): a CLIP ViT
// with a class token, pre-LN, pre-norm blocks and a two-layer MLP
// projector (mm.0, GELU, mm.2), as the reference's models/llava.cpp runs
// it, including its two defects that the reference's answers depend on
// (llama.cpp issues #25814 and #25817): the class embedding is appended
// after the patches (position rows in that order) and the output keeps rows
// 1..n_patches, so patch 0 is dropped and the class token is the last
// image token; and only block_count-1 blocks run (the deepest feature
// layer by default).
type llava struct {
	m    *Model
	V    tower
	MM0  *engine.Tensor `gguf:"0.weight"`
	MM0B *engine.Tensor `gguf:"0.bias"`
	MM2  *engine.Tensor `gguf:"2.weight,optional"`
	MM2B *engine.Tensor `gguf:"2.bias,optional"`
}

func newLLaVA(m *Model) (*llava, error) {
	p := &m.P
	// The reference runs up to the second-to-last block, or to the
	// deepest feature layer when the file names one.
	run := p.Blocks - 1
	if p.FeatureLayer >= 0 {
		run = p.FeatureLayer
	}
	if run < 1 {
		return nil, fmt.Errorf("clip.vision.block_count %d: the mlp family runs block_count-1 blocks, so it needs at least 2", p.Blocks)
	}
	f := &llava{m: m}
	if err := bindTower(m, &f.V, run, true, false); err != nil {
		return nil, err
	}
	if err := engine.BindTensors(m.f, "mm.", f); err != nil {
		return nil, err
	}
	if err := matrix(f.MM0, p.Embd); err != nil {
		return nil, err
	}
	if err := vector(f.MM0B, f.MM0.Rows()); err != nil {
		return nil, err
	}
	p.OutEmbd = f.MM0.Rows()
	if f.MM2 != nil {
		if err := matrix(f.MM2, f.MM0.Rows()); err != nil {
			return nil, err
		}
		if f.MM2B == nil {
			return nil, fmt.Errorf("tensor mm.2.bias is missing")
		}
		if err := vector(f.MM2B, f.MM2.Rows()); err != nil {
			return nil, err
		}
		p.OutEmbd = f.MM2.Rows()
	}
	return f, nil
}

func (f *llava) Shape() engine.NetShape {
	np := f.m.P.PatchesPerSide() * f.m.P.PatchesPerSide()
	rows := np
	if f.V.Class != nil {
		rows++
	}
	return engine.NetShape{Rows: rows, OutRows: np, OutCols: f.m.P.OutEmbd}
}

func (f *llava) Forward(g engine.Graph) engine.Act {
	p := &f.m.P
	x := f.V.forward(g, p)
	first := 0
	if f.V.Class != nil {
		first = 1 // the reference keeps rows 1..n_patches
	}
	x = g.SliceRows(x, first, f.Shape().OutRows)
	x = linear(g, f.MM0, f.MM0B, x)
	g.GELU(x) // the projector's GELU, whatever the tower's
	if f.MM2 != nil {
		x = linear(g, f.MM2, f.MM2B, x)
	}
	return x
}
