package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/vkllm/vkllm/vk"
)

// Media is one image (or other non-text input) of a prompt: N consecutive
// prompt rows from Start whose inputs are embeddings rather than tokens.
// Its prompt tokens there are pseudo-ids (MediaTokens of its hash), so
// every cache keyed by token ids (the scheduler's prompt cache) tells
// images apart by their content and reuses an image's keys and values only
// after the same image at the same place.
type Media struct {
	Start, N int
	// NonCausal makes the image's rows attend to every row of the image
	// (and what precedes it), not only the earlier ones (Gemma 3).
	NonCausal bool
	// Encode computes the N x Embd input embeddings. The scheduler calls it
	// on its own goroutine, which owns the device, when the image's rows
	// are first fed (not at all when they come from the prompt cache), at
	// most once per request, and keeps the result for the request's
	// candidates.
	Encode func() ([]float32, error)

	embd []float32
}

// MediaPart is one piece of an image's place in a prompt as a vision
// projector lays it out: text the model reads around or between the
// image's chunks, or one chunk of embedding rows (a Media of its own).
// Most projector families give one chunk, maybe with text around it;
// Idefics3 splits an image into tiles and a global image, each a chunk,
// with marker text between them.
type MediaPart struct {
	// Text is tokenized on its own, special tokens parsed and no BOS added
	// ("" for none); Tokens follow it as they are (markers the reference
	// looks up by their text instead of tokenizing it).
	Text   string
	Tokens []int32
	// Rows > 0 makes the part a chunk of Rows embedding rows: Hash
	// identifies its content (its pseudo-ids are MediaTokens(Hash, Rows))
	// and Encode computes them (Media.Encode).
	Rows   int
	Hash   [32]byte
	Encode func() ([]float32, error)
}

// MediaTokens returns the n pseudo token ids of an image whose content
// hash is hash: negative (outside every vocabulary), distinct within the
// image and derived from the hash, so that equal ids mean the same image
// at the same offset.
func MediaTokens(hash [32]byte, n int) []int32 {
	base := binary.LittleEndian.Uint32(hash[:4]) & (1<<30 - 1)
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = -1 - int32((base+uint32(i))&(1<<30-1))
	}
	return ids
}

// mediaRun is a run of consecutive rows fed by embeddings.
type mediaRun struct{ start, n int }

// writeMedia uploads the batch's input embeddings and attention positions
// (made on first use) and lists the embedding rows' runs for EmbedInputs.
func (m *GPUModel) writeMedia(b Batch) error {
	m.mediaRuns, m.useAttnPos = m.mediaRuns[:0], b.AttnPos != nil
	if b.Embeds == nil && b.AttnPos == nil {
		return nil
	}
	E, B := m.o.Embd, m.cfg.BatchSize
	if m.embIn == nil {
		var err error
		if m.embIn, err = m.newBuffer(4*uint64(B*E), vk.HostBuffer); err != nil {
			return fmt.Errorf("engine: input embeddings: %w", err)
		}
		if m.attnPos, err = m.newBuffer(4*uint64(B), vk.HostBuffer); err != nil {
			return fmt.Errorf("engine: attention positions: %w", err)
		}
	}
	if b.AttnPos != nil {
		if err := m.attnPos.Write(0, int32Bytes(b.AttnPos)); err != nil {
			return err
		}
	}
	for i := 0; i < len(b.Embeds); i++ {
		if b.Embeds[i] == nil {
			continue
		}
		j := i
		for ; j < len(b.Embeds) && b.Embeds[j] != nil; j++ {
			if len(b.Embeds[j]) != E {
				return fmt.Errorf("engine: batch row %d: an input embedding of %d values, want %d", j, len(b.Embeds[j]), E)
			}
			if err := m.embIn.Write(4*uint64(j*E), float32Bytes(b.Embeds[j])); err != nil {
				return err
			}
		}
		m.mediaRuns = append(m.mediaRuns, mediaRun{i, j - i})
		i = j
	}
	return nil
}

// attnPos returns the attention's positions: Batch.AttnPos when the batch
// has them, else pos.
func (g *gpuGraph) attnPos(pos vk.Range) vk.Range {
	if !g.m.useAttnPos {
		return pos
	}
	return g.m.attnPos.Range(0, pos.Size)
}

func (g *gpuGraph) EmbedInputs(x Act) {
	if x.Cols != g.m.o.Embd {
		g.shapeErr("EmbedInputs", g.m.o.Embd, x.Cols)
	}
	if !g.live() {
		return
	}
	row := 4 * uint64(x.Cols)
	for _, r := range g.m.mediaRuns {
		dst := g.r(x).Sub(uint64(r.start)*row, uint64(r.n)*row)
		src := g.m.embIn.Range(uint64(r.start)*row, uint64(r.n)*row)
		g.dep(dst, src)
		g.c.Copy(dst, src)
	}
}

func (g *cpuGraph) EmbedInputs(x Act) {
	if g.b.Embeds == nil {
		return
	}
	if x.Cols != g.m.o.Embd {
		g.fail(fmt.Errorf("engine: EmbedInputs: width %d, want %d", x.Cols, g.m.o.Embd))
		return
	}
	xv := g.v(x)
	for i, e := range g.b.Embeds {
		if e != nil {
			if len(e) != x.Cols {
				g.fail(fmt.Errorf("engine: batch row %d: an input embedding of %d values, want %d", i, len(e), x.Cols))
				return
			}
			copy(xv[i*x.Cols:(i+1)*x.Cols], e)
		}
	}
}

// checkMediaPrompt checks a prompt with images: pseudo-ids (negative) only
// on image rows, images inside the prompt, in order, each fitting one batch
// (an image is one prefill unit), and the prompt ending in text.
func (s *Scheduler) checkMediaPrompt(p []int32, media []*Media) error {
	if len(media) == 0 {
		return s.checkPrompt(p)
	}
	if len(p) == 0 || len(p) > s.m.CtxSize() {
		return fmt.Errorf("engine: a prompt of %d tokens for a context of %d", len(p), s.m.CtxSize())
	}
	next := 0
	for i, md := range media {
		switch {
		case md == nil || md.Encode == nil && md.embd == nil:
			return fmt.Errorf("engine: image %d has no encoder", i)
		case md.N <= 0 || md.Start < next || md.Start+md.N >= len(p):
			return fmt.Errorf("engine: image %d at prompt rows %d..%d of %d: out of order or not followed by text", i, md.Start, md.Start+md.N-1, len(p))
		case md.N > s.m.GPU.Config().BatchSize:
			return fmt.Errorf("engine: image %d has %d tokens, more than the batch size %d (an image is fed in one batch)", i, md.N, s.m.GPU.Config().BatchSize)
		}
		for j := next; j < md.Start; j++ {
			if p[j] < 0 || int(p[j]) >= s.m.Opts.Vocab {
				return fmt.Errorf("engine: prompt token %d (index %d) outside the vocabulary of %d", p[j], j, s.m.Opts.Vocab)
			}
		}
		next = md.Start + md.N
	}
	for j := next; j < len(p); j++ {
		if p[j] < 0 || int(p[j]) >= s.m.Opts.Vocab {
			return fmt.Errorf("engine: prompt token %d (index %d) outside the vocabulary of %d", p[j], j, s.m.Opts.Vocab)
		}
	}
	return nil
}

// mediaAt returns the image that covers prompt row p, or nil.
func (q *Sequence) mediaAt(p int) *Media {
	for _, md := range q.req.Media {
		if p >= md.Start && p < md.Start+md.N {
			return md
		}
	}
	return nil
}

// mediaChunk cuts n prompt rows from q.fed so that no image is split: the
// rows stop before an image that does not fit, and an image that starts at
// q.fed is fed whole when the batch has room for it, even past the prefill
// chunk (0: wait for a step with room). It encodes the images the rows
// cover; an encoder error ends q.
func (s *Scheduler) mediaChunk(q *Sequence, n int) int {
	room := s.m.GPU.Config().BatchSize - s.batch.Len()
	for _, md := range q.req.Media {
		end := md.Start + md.N
		switch {
		case end <= q.fed || md.Start >= q.fed+n && md.Start > q.fed:
			continue
		case md.Start > q.fed:
			if end > q.fed+n {
				n = md.Start - q.fed // stop before the image
			}
		case md.Start == q.fed:
			if md.N > room {
				return 0
			}
			n = max(n, md.N)
		default:
			// q.fed inside an image: only a cache reuse could do that, and
			// start() rounds reuse down to an image's start.
			q.done, q.doneErr = true, fmt.Errorf("BUG: engine: prompt row %d inside an image (rows %d..%d)", q.fed, md.Start, end-1)
			return 0
		}
	}
	for _, md := range q.req.Media {
		if md.Start >= q.fed && md.Start < q.fed+n && md.embd == nil {
			e, err := md.Encode()
			if err == nil && len(e) != md.N*s.m.Opts.Embd {
				err = fmt.Errorf("engine: an image encoder gave %d values for %d tokens of %d", len(e), md.N, s.m.Opts.Embd)
			}
			if err != nil {
				q.done, q.doneErr = true, fmt.Errorf("engine: encoding image at prompt row %d: %w", md.Start, err)
				return 0
			}
			md.embd = e
		}
	}
	return n
}

// mediaInput returns prompt row p's input embedding (nil for a token) and
// the last position it attends to.
func (q *Sequence) mediaInput(p, embd int) ([]float32, int) {
	md := q.mediaAt(p)
	if md == nil {
		return nil, p
	}
	i := p - md.Start
	attn := p
	if md.NonCausal {
		attn = md.Start + md.N - 1
	}
	return md.embd[i*embd : (i+1)*embd], attn
}

// mediaBoundary rounds a reusable cached prefix of n rows down to the start
// of an image it would end inside (an image's keys and values are reused
// whole or not at all).
func mediaBoundary(media []*Media, n int) int {
	for _, md := range media {
		if n > md.Start && n < md.Start+md.N {
			return md.Start
		}
	}
	return n
}
