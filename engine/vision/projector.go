package vision

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/vkllm/vkllm/engine"
)

// Tokens returns the number of image embeddings (prompt positions) of one
// chunk: a whole image for mlp and gemma3, one tile or the global image
// for idefics3.
func (u *GPU) Tokens() int { return u.m.Tokens() }

// NonCausal reports that the text model reads an image's embeddings with
// attention in both directions within the image (Gemma 3; the reference's
// mtmd_decode_use_non_causal).
func (u *GPU) NonCausal() bool { return u.m.P.ProjectorType == "gemma3" }

// ImageBegin returns the text the model reads before an image ("" for
// none): Gemma 3's <start_of_image>.
func (u *GPU) ImageBegin() string { return imageBegin(u.m) }

func imageBegin(m *Model) string {
	if m.P.ProjectorType == "gemma3" {
		return "<start_of_image>"
	}
	return ""
}

// ImageEnd returns the text the model reads after an image ("" for none).
func (u *GPU) ImageEnd() string { return imageEnd(u.m) }

func imageEnd(m *Model) string {
	if m.P.ProjectorType == "gemma3" {
		return "<end_of_image>"
	}
	return ""
}

// Idefics3's markers (the reference's mtmd.cpp, after Hugging Face's
// Idefics3 processor): each tile is preceded by the text
// <fake_token_around_image><row_R_col_C> (tokenized, special tokens
// parsed), rows of tiles are separated by "\n", and the global image comes
// last between "\n\n" <fake_token_around_image> <global-img> and
// <fake_token_around_image>. Those four are single tokens that the
// reference finds by their text (lookup_token), not by tokenizing it.
const (
	fakeTokenAroundImage = "<fake_token_around_image>"
	globalImage          = "<global-img>"
)

func tileMarker(row, col int) string {
	return fmt.Sprintf("%s<row_%d_col_%d>", fakeTokenAroundImage, row+1, col+1)
}

// idefics3Markers are the ids of Idefics3's looked-up marker tokens.
type idefics3Markers struct {
	newline, twoNewlines, fake, global int32
}

// Vocab is what a projector needs of the text model's vocabulary
// (engine/tokenizer.Tokenizer has it).
type Vocab interface {
	// TokenID returns the id of a vocabulary entry.
	TokenID(text string) (int32, bool)
	// VocabSize is the number of tokens.
	VocabSize() int
	// Piece returns the bytes token id stands for, special tokens as
	// their text.
	Piece(id int32) []byte
}

// lookupPiece is the reference's lookup_token: the first token whose
// text (special tokens rendered) is text.
func lookupPiece(v Vocab, text string) (int32, bool) {
	for id := range int32(v.VocabSize()) {
		if bytes.Equal(v.Piece(id), []byte(text)) {
			return id, true
		}
	}
	return 0, false
}

// Prepare decodes an image file (see Decode; at most maxPixels pixels),
// preprocesses it and lays out its place in the prompt as the reference
// does: the family's begin text, the image's chunk, its end text; for
// idefics3 the tiles in rows with their markers, then the global image
// (SplitIdefics3 and the markers above). Each chunk's hash is that of the
// decoded image (its size and pixels, so the same picture in two
// encodings is one image to the prompt cache) and of the chunk's place in
// it. The chunks' Encode runs the encoder on u's device (on the goroutine
// that owns it). Its errors are the client's (a bad image), except the
// one for an idefics3 projector not bound to a vocabulary (CheckText).
// Decoding and preprocessing stop when ctx is done, with an error
// wrapping ctx.Err() (DecodeContext).
func (u *GPU) Prepare(ctx context.Context, data []byte, maxPixels int) ([]engine.MediaPart, error) {
	return layout(ctx, u.m, u.markers, data, maxPixels, u.Encode)
}

// DecodeCost is the package's DecodeCost: the memory Prepare's decoding
// holds at once for data, from its header.
func (u *GPU) DecodeCost(data []byte, maxPixels int) (int64, error) {
	return DecodeCost(data, maxPixels)
}

// CPU is the plain-Go reference of a projector's whole image path: the
// layout of GPU.Prepare with chunks encoded as Model.EncodeCPU does. Tests
// compare what a server answers with it.
type CPU struct {
	m       *Model
	net     *engine.CPUNet
	markers *idefics3Markers
}

// NewCPU checks m against a text model of embedding width embd and
// vocabulary v (as GPU.CheckText) and returns its CPU reference, the
// weights dequantized once. m's file may be closed afterwards.
func NewCPU(m *Model, embd int, v Vocab) (*CPU, error) {
	mk, err := checkText(m, embd, v)
	if err != nil {
		return nil, err
	}
	n, err := engine.NewCPUNet(m.w)
	if err != nil {
		return nil, err
	}
	return &CPU{m: m, net: n, markers: mk}, nil
}

// NonCausal is GPU.NonCausal.
func (c *CPU) NonCausal() bool { return c.m.P.ProjectorType == "gemma3" }

// DecodeCost is GPU.DecodeCost.
func (c *CPU) DecodeCost(data []byte, maxPixels int) (int64, error) {
	return DecodeCost(data, maxPixels)
}

// Prepare is GPU.Prepare with the chunks encoded on the CPU.
func (c *CPU) Prepare(ctx context.Context, data []byte, maxPixels int) ([]engine.MediaPart, error) {
	return layout(ctx, c.m, c.markers, data, maxPixels, func(in []float32) ([]float32, error) {
		if err := checkInput("EncodeCPU", &c.m.P, in); err != nil {
			return nil, err
		}
		return c.net.Run(in)
	})
}

// layout is Prepare with the encoder encode.
func layout(ctx context.Context, m *Model, mk *idefics3Markers, data []byte, maxPixels int, encode func([]float32) ([]float32, error)) ([]engine.MediaPart, error) {
	if m.P.ProjectorType == "idefics3" && mk == nil {
		return nil, errors.New("BUG: vision: an idefics3 projector used before CheckText found its marker tokens")
	}
	img, err := DecodeContext(ctx, data, maxPixels)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h := sha256.New()
	var dims [8]byte
	binary.LittleEndian.PutUint32(dims[:], uint32(img.Width))
	binary.LittleEndian.PutUint32(dims[4:], uint32(img.Height))
	h.Write(dims[:])
	h.Write(img.Pix)
	var sum [32]byte
	h.Sum(sum[:0])
	n := m.Tokens()
	chunk := func(i int, in []float32) engine.MediaPart {
		return engine.MediaPart{Rows: n, Hash: chunkHash(sum, i), Encode: func() ([]float32, error) { return encode(in) }}
	}
	if m.P.ProjectorType != "idefics3" {
		in, err := m.Preprocess(img)
		if err != nil {
			return nil, err
		}
		var parts []engine.MediaPart
		begin, end := imageBegin(m), imageEnd(m)
		if begin != "" {
			parts = append(parts, engine.MediaPart{Text: begin})
		}
		parts = append(parts, chunk(0, in))
		if end != "" {
			parts = append(parts, engine.MediaPart{Text: end})
		}
		return parts, nil
	}
	sp, err := m.SplitIdefics3(img)
	if err != nil {
		return nil, err
	}
	var parts []engine.MediaPart
	for r := range sp.Rows {
		for c := range sp.Cols {
			i := r*sp.Cols + c
			parts = append(parts, engine.MediaPart{Text: tileMarker(r, c)}, chunk(1+i, m.P.normalize(sp.Tiles[i])))
		}
		if r < sp.Rows-1 {
			parts = append(parts, engine.MediaPart{Tokens: []int32{mk.newline}})
		}
	}
	parts = append(parts, engine.MediaPart{Tokens: []int32{mk.twoNewlines, mk.fake, mk.global}},
		chunk(0, m.P.normalize(sp.Global)),
		engine.MediaPart{Tokens: []int32{mk.fake}})
	return parts, nil
}

// chunkHash identifies chunk i of the image whose hash is image (0 is the
// whole or global image, 1+k tile k).
func chunkHash(image [32]byte, i int) [32]byte {
	if i == 0 {
		return image
	}
	var b [36]byte
	copy(b[:], image[:])
	binary.LittleEndian.PutUint32(b[32:], uint32(i))
	return sha256.Sum256(b[:])
}

// CheckText checks that the projector fits a text model of embedding width
// embd and vocabulary v: its output width and its family's markers, which
// it keeps for Prepare (idefics3's looked-up marker tokens). It must be
// called before Prepare.
func (u *GPU) CheckText(embd int, v Vocab) error {
	mk, err := checkText(u.m, embd, v)
	if err != nil {
		return err
	}
	u.markers = mk
	return nil
}

func checkText(m *Model, embd int, v Vocab) (*idefics3Markers, error) {
	if m.P.OutEmbd != embd {
		return nil, fmt.Errorf("vision: the projector gives %d-wide image embeddings but the text model's embeddings are %d wide (a projector for another model?)", m.P.OutEmbd, embd)
	}
	for _, t := range []string{imageBegin(m), imageEnd(m)} {
		if _, ok := v.TokenID(t); t != "" && !ok {
			return nil, fmt.Errorf("vision: the text model has no %s token, which a %s projector's images need", t, m.P.ProjectorType)
		}
	}
	if m.P.ProjectorType != "idefics3" {
		return nil, nil
	}
	var mk idefics3Markers
	var missing []string
	for _, w := range []struct {
		text string
		id   *int32
	}{{"\n", &mk.newline}, {"\n\n", &mk.twoNewlines}, {fakeTokenAroundImage, &mk.fake}, {globalImage, &mk.global}} {
		id, ok := lookupPiece(v, w.text)
		if !ok {
			missing = append(missing, fmt.Sprintf("%q", w.text))
		}
		*w.id = id
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("vision: the text model has no token for %s, which an idefics3 projector's images need (is it an Idefics3 / SmolVLM text model?)", strings.Join(missing, ", "))
	}
	return &mk, nil
}
