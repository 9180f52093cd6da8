package vision

import (
	"errors"
	"fmt"
)

// idefics3 is the Idefics3 / SmolVLM family (clip.projector_type
// "idefics3"): the SigLIP tower, a pixel shuffle that merges each K x K
// square of patches into one token (K = clip.vision.projector.scale_factor)
// and one linear projection mm.model.fc (the reference's models/siglip.cpp).
type idefics3 struct {
	m   *Model
	vit vit
	fc  *Tensor
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
	var err error
	if f.vit, err = newVit(m); err != nil {
		return nil, err
	}
	if f.fc, err = m.matrix("mm.model.fc.weight", p.Embd*p.Merge*p.Merge); err != nil {
		return nil, err
	}
	p.OutEmbd = f.fc.Rows
	return f, nil
}

func (f *idefics3) tokens() int {
	s := f.m.P.PatchesPerSide() / f.m.P.Merge
	return s * s
}

func (f *idefics3) forward(g graph) act {
	p := &f.m.P
	x := f.vit.forward(g, p)
	x = g.pixelShuffle(x, poolParams(p.PatchesPerSide(), p.Embd, p.Merge))
	return g.linear(f.fc, nil, x)
}
