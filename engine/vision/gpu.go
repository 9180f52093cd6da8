package vision

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/vk"
)

// GPU is a projector whose weights live on a Vulkan device: Encode records
// the whole encoder into one command buffer (one submit, one fence wait,
// one read-back). Like its device, it is used from one goroutine at a time
// (the one that runs the text model on the same device).
type GPU struct {
	m      *Model
	dev    *vk.Device
	k      *ops.Kernels
	bufs   []*vk.Buffer // everything to close
	mats   []ops.Weight // matrix weights by Tensor.idx (zero for vectors)
	vecs   []vk.Range   // f32 copies of the other tensors by Tensor.idx
	zeros  vk.Range     // a zero vector, the missing biases of LayerNorm
	pos    vk.Range     // int32 0..n-1, the attention's row positions
	end    vk.Range     // int32 n, the attention's sequence end
	acts   []*vk.Buffer // one per activation of the pass
	g      gpuGraph
	out    act
	outBuf []byte
	// markers are idefics3's marker tokens, found by CheckText.
	markers *idefics3Markers
}

// deviceMemory returns the bytes the device's buffers can take
// (vk.Device.Capacity): its device-local heaps and, on integrated GPUs,
// the system memory they fall back to.
func deviceMemory(dev *vk.Device) int64 { return int64(dev.Capacity()) }

// NewGPU uploads m's weights to dev and reserves the activations of one
// image, after checking that they fit the device memory left (free: the
// bytes the text model left, or 0 for the whole device). progress, when
// set, is called as weights are uploaded. m's file may be closed
// afterwards; the GPU keeps what it needs.
func NewGPU(dev *vk.Device, m *Model, free int64, progress func(done, total int64)) (*GPU, error) {
	u := &GPU{m: m, dev: dev, k: ops.New(dev)}
	u.g = gpuGraph{u: u}
	// A dry run sizes every activation.
	u.g.start(nil)
	u.out = m.fam.forward(&u.g)
	if u.g.err != nil {
		u.k.Close()
		return nil, u.g.err
	}
	need := u.weightBytes() + u.g.actBytes()
	if free <= 0 {
		free = deviceMemory(dev)
	}
	if need > free {
		u.k.Close()
		return nil, fmt.Errorf("vision: the projector needs %s of device memory (weights and the activations of one image) but %s has %s left",
			formatBytes(need), dev.Info().Name, formatBytes(free))
	}
	if err := u.upload(progress); err != nil {
		u.Close()
		return nil, err
	}
	return u, nil
}

// Model returns the projector the GPU runs.
func (u *GPU) Model() *Model { return u.m }

// DeviceBytes returns the device memory the GPU holds.
func (u *GPU) DeviceBytes() int64 {
	var n int64
	for _, b := range u.bufs {
		n += int64(b.Size())
	}
	return n
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

// weightBytes is the device size of the weights: matrices as stored, the
// rest as f32.
func (u *GPU) weightBytes() int64 {
	var n int64
	for _, t := range u.m.tensors {
		if t.mat {
			n += int64(len(t.Data))
		} else {
			n += 4 * int64(t.Rows*t.Cols)
		}
	}
	return n
}

func (u *GPU) newBuffer(size uint64) (*vk.Buffer, error) {
	b, err := u.dev.NewBuffer((size+15)&^15, vk.DeviceBuffer)
	if err != nil {
		return nil, err
	}
	u.bufs = append(u.bufs, b)
	return b, nil
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func (u *GPU) upload(progress func(done, total int64)) error {
	total, done := u.weightBytes(), int64(0)
	u.mats = make([]ops.Weight, len(u.m.tensors))
	u.vecs = make([]vk.Range, len(u.m.tensors))
	for i, t := range u.m.tensors {
		data := t.Data
		if !t.mat {
			v, err := t.f32()
			if err != nil {
				return err
			}
			data = f32Bytes(v)
		}
		b, err := u.newBuffer(uint64(len(data)))
		if err != nil {
			return fmt.Errorf("vision: tensor %s (%s): %w", t.Name, formatBytes(int64(len(data))), err)
		}
		if err := b.Write(0, data); err != nil {
			return fmt.Errorf("vision: upload %s: %w", t.Name, err)
		}
		r := b.Range(0, uint64(len(data)))
		if t.mat {
			u.mats[i] = ops.Weight{Type: t.Type, Rows: t.Rows, Cols: t.Cols, Data: r}
			if err := u.k.PrepareWeight(t.Type, t.Rows, t.Cols, false); err != nil {
				return fmt.Errorf("vision: kernels for %s: %w", t.Name, err)
			}
		} else {
			u.vecs[i] = r
		}
		done += int64(len(data))
		if progress != nil {
			progress(done, total)
		}
	}
	// Scratch: a zero vector, the attention's positions, the activations.
	p := &u.m.P
	width := max(p.Embd, p.OutEmbd, p.FF, p.Embd*p.Merge*p.Merge)
	rows := p.PatchesPerSide()*p.PatchesPerSide() + 1
	pos := make([]int32, rows)
	for i := range pos {
		pos[i] = int32(i)
	}
	// Separate buffers: binding offsets must be aligned.
	for _, s := range []struct {
		dst  *vk.Range
		data []byte
	}{{&u.zeros, make([]byte, 4*width)}, {&u.pos, i32Bytes(pos)}, {&u.end, make([]byte, 4*rows)}} {
		b, err := u.newBuffer(uint64(len(s.data)))
		if err != nil {
			return fmt.Errorf("vision: scratch: %w", err)
		}
		if err := b.Write(0, s.data); err != nil {
			return err
		}
		*s.dst = b.Range(0, uint64(len(s.data)))
	}
	var err error
	u.acts = make([]*vk.Buffer, len(u.g.sizes))
	for i, s := range u.g.sizes {
		if u.acts[i], err = u.newBuffer(s); err != nil {
			return fmt.Errorf("vision: activations: %w", err)
		}
	}
	return nil
}

// Close frees the device memory and pipelines; u must not be used
// afterwards. It does not close the device.
func (u *GPU) Close() {
	u.k.Close()
	for _, b := range u.bufs {
		b.Close()
	}
	u.bufs = nil
}

// Encode runs the encoder and projector on the preprocessed image in
// (Preprocess's output) and returns the image embeddings, [Tokens][OutEmbd]
// row-major.
func (u *GPU) Encode(in []float32) ([]float32, error) {
	s := u.m.P.ImageSize
	if len(in) != 3*s*s {
		return nil, fmt.Errorf("vision: Encode: %d input values, want 3x%dx%d", len(in), s, s)
	}
	c, err := u.dev.Begin()
	if err != nil {
		return nil, err
	}
	// The set-up of the pass: the actual activation lengths (the tail of
	// a row) are fixed by the dry run, so ends are the row count.
	u.g.start(c)
	out := u.m.fam.forward(&u.g)
	if u.g.err != nil {
		c.Abort()
		return nil, u.g.err
	}
	// The input (the pass's first activation) and the attention's sequence
	// end are written before the submit.
	if err := u.acts[u.g.input].Write(0, f32Bytes(in)); err != nil {
		c.Abort()
		return nil, err
	}
	if err := u.writeEnds(); err != nil {
		c.Abort()
		return nil, err
	}
	if err := c.Submit(); err != nil {
		return nil, err
	}
	n := out.rows * out.cols
	if cap(u.outBuf) < 4*n {
		u.outBuf = make([]byte, 4*n)
	}
	b := u.outBuf[:4*n]
	if err := u.acts[out.ref].Read(0, b); err != nil {
		return nil, err
	}
	res := make([]float32, n)
	for i := range res {
		res[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return res, nil
}

// writeEnds sets every row's sequence end to the attention's row count.
func (u *GPU) writeEnds() error {
	n := int(u.end.Size / 4)
	end := make([]int32, n)
	for i := range end {
		end[i] = int32(u.g.attnRows)
	}
	return u.end.Buf.Write(u.end.Offset, i32Bytes(end))
}
