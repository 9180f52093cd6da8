package vision

import (
	"fmt"
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
	m                 *Model
	patch, class, pos *Tensor
	preLN, preLNB     *Tensor
	postLN, postLNB   *Tensor
	blk               []block
	mm0, mm0B         *Tensor
	mm2, mm2B         *Tensor
	run               int // blocks that run
}

func newLLaVA(m *Model) (*llava, error) {
	p := &m.P
	f := &llava{m: m}
	var err error
	if f.patch, err = m.patchEmbd(); err != nil {
		return nil, err
	}
	if b, _ := m.f.Tensor("v.patch_embd.bias"); b != nil {
		return nil, fmt.Errorf("tensor v.patch_embd.bias: a patch bias is not part of the mlp family")
	}
	if f.class, err = m.tensor("v.class_embd", p.Embd, 0, true); err != nil {
		return nil, err
	}
	np := p.PatchesPerSide() * p.PatchesPerSide()
	nPos := np
	if f.class != nil {
		nPos++
	}
	if f.pos, err = m.tensor("v.position_embd.weight", p.Embd, nPos, false); err != nil {
		return nil, err
	}
	for _, s := range []struct {
		dst  **Tensor
		name string
	}{{&f.preLN, "v.pre_ln.weight"}, {&f.preLNB, "v.pre_ln.bias"}, {&f.postLN, "v.post_ln.weight"}, {&f.postLNB, "v.post_ln.bias"}} {
		if *s.dst, err = m.tensor(s.name, p.Embd, 0, true); err != nil {
			return nil, err
		}
	}
	// The reference runs up to the second-to-last block, or to the
	// deepest feature layer when the file names one.
	f.run = p.Blocks - 1
	if p.FeatureLayer >= 0 {
		f.run = p.FeatureLayer
	}
	if f.run < 1 {
		return nil, fmt.Errorf("clip.vision.block_count %d: the mlp family runs block_count-1 blocks, so it needs at least 2", p.Blocks)
	}
	if f.blk, err = m.blocks(f.run); err != nil {
		return nil, err
	}
	if f.mm0, err = m.matrix("mm.0.weight", p.Embd); err != nil {
		return nil, err
	}
	if f.mm0B, err = m.tensor("mm.0.bias", f.mm0.Rows, 0, false); err != nil {
		return nil, err
	}
	p.OutEmbd = f.mm0.Rows
	if _, ok := m.f.Tensor("mm.2.weight"); ok {
		if f.mm2, err = m.matrix("mm.2.weight", f.mm0.Rows); err != nil {
			return nil, err
		}
		if f.mm2B, err = m.tensor("mm.2.bias", f.mm2.Rows, 0, false); err != nil {
			return nil, err
		}
		p.OutEmbd = f.mm2.Rows
	}
	return f, nil
}

func (f *llava) tokens() int { return f.m.P.PatchesPerSide() * f.m.P.PatchesPerSide() }

func (f *llava) forward(g graph) act {
	p := &f.m.P
	np := f.tokens()
	x := g.im2col(g.image(), im2colParams(p, f.patch))
	x = g.linear(f.patch, nil, x)
	first := 0
	if f.class != nil {
		x = g.appendRow(x, f.class) // after the patches, as the reference
		first = 1                   // and it keeps rows 1..n_patches
	}
	g.addTensor(x, f.pos)
	if f.preLN != nil {
		x = g.layerNorm(x, f.preLN, f.preLNB, p.Eps)
	}
	for i := range f.blk {
		x = vitBlock(g, &f.blk[i], x, p)
	}
	if f.postLN != nil {
		x = g.layerNorm(x, f.postLN, f.postLNB, p.Eps)
	}
	x = g.rows(x, first, np)
	x = g.linear(f.mm0, f.mm0B, x)
	g.activate(x, GELU) // the projector's GELU, whatever the tower's
	if f.mm2 != nil {
		x = g.linear(f.mm2, f.mm2B, x)
	}
	return x
}
