package engine

import (
	"encoding/binary"
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
