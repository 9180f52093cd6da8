package vision

import (
	"fmt"

	"github.com/vkllm/vkllm/engine"
)

// gemma3 is Gemma 3's SigLIP tower (clip.projector_type "gemma3"), as the
// reference's models/siglip.cpp runs it: patch embedding with bias,
// position embeddings, every block, post-LN, K x K average pooling of the
// patch grid (K = clip.vision.projector.scale_factor, default 4), RMSNorm
// times mm.soft_emb_norm and the input projection mm.input_projection
// (stored [vision width][text width], so transposed at load).
type gemma3 struct {
	m        *Model
	V        tower
	SoftNorm *engine.Tensor `gguf:"soft_emb_norm.weight"`
	InProjT  *engine.Tensor // mm.input_projection.weight, transposed
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
	if err := bindTower(m, &f.V, p.Blocks, false, true); err != nil {
		return nil, err
	}
	var proj struct {
		W *engine.Tensor `gguf:"input_projection.weight"`
	}
	if err := engine.BindTensors(m.f, "mm.", f); err != nil {
		return nil, err
	}
	if err := engine.BindTensors(m.f, "mm.", &proj); err != nil {
		return nil, err
	}
	if err := vector(f.SoftNorm, p.Embd); err != nil {
		return nil, err
	}
	if err := matrix(proj.W, -1); err != nil {
		return nil, err
	}
	if proj.W.Rows() != p.Embd {
		return nil, fmt.Errorf("tensor mm.input_projection.weight has %d rows, want the vision width %d", proj.W.Rows(), p.Embd)
	}
	if f.InProjT, err = transposed(proj.W); err != nil {
		return nil, err
	}
	p.OutEmbd = f.InProjT.Rows()
	return f, nil
}

func (f *gemma3) Shape() engine.NetShape { return mergedShape(&f.m.P) }

func (f *gemma3) Forward(g engine.Graph) engine.Act {
	p := &f.m.P
	x := f.V.forward(g, p)
	x = g.AvgPool(x, poolParams(p.PatchesPerSide(), p.Embd, p.Merge))
	x = g.RMSNorm(x, f.SoftNorm, p.Eps)
	return g.MatMul(f.InProjT, x)
}
