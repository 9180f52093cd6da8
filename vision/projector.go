package vision

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Tokens returns the number of image embeddings (prompt positions) one
// image gives.
func (u *GPU) Tokens() int { return u.m.Tokens() }

// NonCausal reports that the text model reads an image's embeddings with
// attention in both directions within the image (Gemma 3; the reference's
// mtmd_decode_use_non_causal).
func (u *GPU) NonCausal() bool { return u.m.P.ProjectorType == "gemma3" }

// ImageBegin returns the text the model reads before an image ("" for
// none): Gemma 3's <start_of_image>.
func (u *GPU) ImageBegin() string {
	if u.m.P.ProjectorType == "gemma3" {
		return "<start_of_image>"
	}
	return ""
}

// ImageEnd returns the text the model reads after an image ("" for none).
func (u *GPU) ImageEnd() string {
	if u.m.P.ProjectorType == "gemma3" {
		return "<end_of_image>"
	}
	return ""
}

// Prepare decodes an image file (see Decode; at most maxPixels pixels) and
// preprocesses it (Model.Preprocess). hash identifies the decoded image
// (its size and pixels), so the same picture in two encodings is one
// image to the prompt cache.
func (u *GPU) Prepare(data []byte, maxPixels int) ([]float32, [32]byte, error) {
	img, err := Decode(data, maxPixels)
	if err != nil {
		return nil, [32]byte{}, err
	}
	in, err := u.m.Preprocess(img)
	if err != nil {
		return nil, [32]byte{}, err
	}
	h := sha256.New()
	var dims [8]byte
	binary.LittleEndian.PutUint32(dims[:], uint32(img.Width))
	binary.LittleEndian.PutUint32(dims[4:], uint32(img.Height))
	h.Write(dims[:])
	h.Write(img.Pix)
	var sum [32]byte
	h.Sum(sum[:0])
	return in, sum, nil
}

// CheckText checks that the projector fits a text model of embedding width
// embd whose vocabulary has the image begin and end texts (has reports
// whether a text is one special token): its output width and its family's
// markers.
func (u *GPU) CheckText(embd int, has func(text string) bool) error {
	if u.m.P.OutEmbd != embd {
		return fmt.Errorf("vision: the projector gives %d-wide image embeddings but the text model's embeddings are %d wide (a projector for another model?)", u.m.P.OutEmbd, embd)
	}
	if u.m.P.ProjectorType == "idefics3" {
		return fmt.Errorf("vision: the idefics3 projector's image splitting is not supported yet (its encoder is; see the README)")
	}
	for _, t := range []string{u.ImageBegin(), u.ImageEnd()} {
		if t != "" && !has(t) {
			return fmt.Errorf("vision: the text model has no %s token, which a %s projector's images need", t, u.m.P.ProjectorType)
		}
	}
	return nil
}
