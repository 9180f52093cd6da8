package vision

import (
	"errors"
	"fmt"

	"github.com/vkllm/vkllm/engine"
)

// idefics3 is the Idefics3 / SmolVLM family (clip.projector_type
// "idefics3"): the SigLIP tower, a pixel shuffle that merges each K x K
// square of patches into one token (K = clip.vision.projector.scale_factor)
// and one linear projection mm.model.fc (the reference's models/siglip.cpp).
type idefics3 struct {
	m  *Model
	V  tower
	FC *engine.Tensor `gguf:"model.fc.weight"`
}

func newIdefics3(m *Model) (*idefics3, error) {
	p := &m.P
	if !m.f.Has("clip.vision.projector.scale_factor") {
		return nil, errors.New("metadata key clip.vision.projector.scale_factor is missing (the idefics3 pixel-shuffle factor)")
	}
	if s := p.PatchesPerSide(); p.Merge < 2 || s%p.Merge != 0 {
		return nil, fmt.Errorf("clip.vision.projector.scale_factor %d does not divide the %d patches per side", p.Merge, s)
	}
	if m.f.Has("clip.vision.preproc_image_size") {
		if err := m.u32("clip.vision.preproc_image_size", &p.LongestEdge, false); err != nil {
			return nil, err
		}
		if p.LongestEdge > maxTilesPerSide*p.ImageSize {
			return nil, fmt.Errorf("clip.vision.preproc_image_size %d is more than %d tiles of clip.vision.image_size %d per side", p.LongestEdge, maxTilesPerSide, p.ImageSize)
		}
	}
	f := &idefics3{m: m}
	if err := bindTower(m, &f.V, p.Blocks, false, true); err != nil {
		return nil, err
	}
	if err := engine.BindTensors(m.f, "mm.", f); err != nil {
		return nil, err
	}
	if err := matrix(f.FC, p.Embd*p.Merge*p.Merge); err != nil {
		return nil, err
	}
	p.OutEmbd = f.FC.Rows()
	return f, nil
}

func (f *idefics3) Shape() engine.NetShape { return mergedShape(&f.m.P) }

func (f *idefics3) Forward(g engine.Graph) engine.Act {
	p := &f.m.P
	x := f.V.forward(g, p)
	x = g.PixelShuffle(x, poolParams(p.PatchesPerSide(), p.Embd, p.Merge))
	return g.MatMul(f.FC, x)
}

// mergedShape is the pass of a tower whose patch grid is merged in squares
// of Merge x Merge (Gemma 3's average pool, Idefics3's pixel shuffle):
// one input row per patch, one output row per square.
func mergedShape(p *Params) engine.NetShape {
	s := p.PatchesPerSide()
	return engine.NetShape{Rows: s * s, OutRows: (s / p.Merge) * (s / p.Merge), OutCols: p.OutEmbd}
}
