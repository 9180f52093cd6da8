package vision

import (
	"fmt"
)

// gemma3 is Gemma 3's SigLIP tower (clip.projector_type "gemma3"), as the
// reference's models/siglip.cpp runs it: patch embedding with bias,
// position embeddings, every block, post-LN, K x K average pooling of the
// patch grid (K = clip.vision.projector.scale_factor, default 4), RMSNorm
// times mm.soft_emb_norm and the input projection mm.input_projection
// (stored [vision width][text width], so transposed at load).
type gemma3 struct {
	m                 *Model
	vit               vit
	softNorm, inProjT *Tensor
}

// vit is the SigLIP-style tower shared by gemma3 and idefics3: patch
// embedding (+ bias), position embeddings, optional pre-LN, every block,
// post-LN.
type vit struct {
	patch, patchB, pos *Tensor
	preLN, preLNB      *Tensor
	postLN, postLNB    *Tensor
	blk                []block
}

func newVit(m *Model) (vit, error) {
	p := &m.P
	var v vit
	var err error
	if v.patch, err = m.patchEmbd(); err != nil {
		return v, err
	}
	if v.patchB, err = m.tensor("v.patch_embd.bias", p.Embd, 0, true); err != nil {
		return v, err
	}
	np := p.PatchesPerSide() * p.PatchesPerSide()
	if v.pos, err = m.tensor("v.position_embd.weight", p.Embd, np, false); err != nil {
		return v, err
	}
	for _, s := range []struct {
		dst  **Tensor
		name string
	}{{&v.preLN, "v.pre_ln.weight"}, {&v.preLNB, "v.pre_ln.bias"}, {&v.postLN, "v.post_ln.weight"}, {&v.postLNB, "v.post_ln.bias"}} {
		if *s.dst, err = m.tensor(s.name, p.Embd, 0, true); err != nil {
			return v, err
		}
	}
	if _, ok := m.f.Tensor("v.class_embd"); ok {
		return v, fmt.Errorf("tensor v.class_embd: a class token is not part of the %s family", p.ProjectorType)
	}
	v.blk, err = m.blocks(p.Blocks)
	return v, err
}

func (v *vit) forward(g graph, p *Params) act {
	x := g.im2col(g.image(), im2colParams(p, v.patch))
	x = g.linear(v.patch, v.patchB, x)
	g.addTensor(x, v.pos)
	if v.preLN != nil {
		x = g.layerNorm(x, v.preLN, v.preLNB, p.Eps)
	}
	for i := range v.blk {
		x = vitBlock(g, &v.blk[i], x, p)
	}
	if v.postLN != nil {
		x = g.layerNorm(x, v.postLN, v.postLNB, p.Eps)
	}
	return x
}

func newGemma3(m *Model) (*gemma3, error) {
	p := &m.P
	if !m.f.Has("clip.vision.projector.scale_factor") {
		p.Merge = 4 // every Gemma 3 size
	}
	if s := p.PatchesPerSide(); s%p.Merge != 0 {
		return nil, fmt.Errorf("clip.vision.projector.scale_factor %d does not divide the %d patches per side", p.Merge, s)
	}
	f := &gemma3{m: m}
	var err error
	if f.vit, err = newVit(m); err != nil {
		return nil, err
	}
	if f.softNorm, err = m.tensor("mm.soft_emb_norm.weight", p.Embd, 0, false); err != nil {
		return nil, err
	}
	proj, err := m.matrix("mm.input_projection.weight", -1)
	if err != nil {
		return nil, err
	}
	if proj.Rows != p.Embd {
		return nil, fmt.Errorf("tensor mm.input_projection.weight has %d rows, want the vision width %d", proj.Rows, p.Embd)
	}
	if f.inProjT, err = m.transposed(proj); err != nil {
		return nil, err
	}
	p.OutEmbd = f.inProjT.Rows
	return f, nil
}

func (f *gemma3) tokens() int {
	s := f.m.P.PatchesPerSide() / f.m.P.Merge
	return s * s
}

func (f *gemma3) forward(g graph) act {
	p := &f.m.P
	x := f.vit.forward(g, p)
	s := p.PatchesPerSide()
	x = g.avgPool(x, poolParams(s, p.Embd, p.Merge))
	x = g.rmsNorm(x, f.softNorm, p.Eps)
	return g.linear(f.inProjT, nil, x)
}
