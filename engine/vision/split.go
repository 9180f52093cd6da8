package vision

import (
	"fmt"
	"math"
)

// maxTilesPerSide bounds Idefics3's grid: clip.vision.preproc_image_size
// may be at most this many tiles of clip.vision.image_size (real files use
// 4), so a file cannot make one image thousands of tiles.
const maxTilesPerSide = 16

// Split is an image cut as Idefics3 / SmolVLM's preprocessing cuts it
// (the reference's mtmd_image_preprocessor_idefics3): the whole image
// shrunk to one tile (the global image) and a grid of tiles of a larger
// copy, each ImageSize x ImageSize.
type Split struct {
	Global     *Image
	Cols, Rows int
	Tiles      []*Image // row-major: Tiles[r*Cols+c]
}

// refinedSize is the size the reference resizes an image to before cutting
// it into tiles (img_tool::calc_size_preserved_ratio with the tile side as
// the alignment): the image scaled, up or down, so that its longer side is
// longest (scale = min(L/w, L/h) in float32), each side then rounded up to
// a multiple of side. 0 x 0 when longest is 0 (no tiles).
func refinedSize(w, h, side, longest int) (int, int) {
	if w <= 0 || h <= 0 || longest <= 0 {
		return 0, 0
	}
	scale := min(float32(longest)/float32(w), float32(longest)/float32(h))
	up := func(v float32) int {
		return int(math.Ceil(float64(float32(v/float32(side))))) * side
	}
	return up(float32(w) * scale), up(float32(h) * scale)
}

// SplitIdefics3 cuts a decoded image as the reference does for an
// idefics3 projector:
//
//   - the global image is the image stretched to ImageSize x ImageSize
//     with the bilinear filter (the overview: no padding);
//   - the tiles come from a copy of refinedSize (multiples of ImageSize
//     from LongestEdge, clip.vision.preproc_image_size), made by resizing
//     the image into it keeping its aspect ratio with the reference's
//     bicubic filter and centring it on black (the reference pads the
//     refined image; Hugging Face stretches it), cut row by row into
//     ImageSize squares;
//   - without preproc_image_size there are no tiles, only the global
//     image.
func (m *Model) SplitIdefics3(img *Image) (*Split, error) {
	p := &m.P
	if img.Width <= 0 || img.Height <= 0 || len(img.Pix) != 3*img.Width*img.Height {
		return nil, fmt.Errorf("vision: SplitIdefics3: a %d x %d image with %d bytes", img.Width, img.Height, len(img.Pix))
	}
	S := p.ImageSize
	sp := &Split{Global: img}
	if img.Width != S || img.Height != S {
		sp.Global = resizeBilinear(img, S, S)
	}
	rw, rh := refinedSize(img.Width, img.Height, S, p.LongestEdge)
	if rw == 0 || rh == 0 {
		return sp, nil
	}
	refined := resizePadded(img, rw, rh, bicubic, [3]uint8{})
	sp.Cols, sp.Rows = rw/S, rh/S
	for y := 0; y < rh; y += S {
		for x := 0; x < rw; x += S {
			sp.Tiles = append(sp.Tiles, crop(refined, x, y, S, S))
		}
	}
	return sp, nil
}

// resizePadded resizes img to fit tw x th keeping its aspect ratio (scale =
// min(tw/w, th/h) in float32, new side = min(ceil(side*scale), target))
// and pastes it centred on a canvas of colour pad; an image already of
// that size is returned as is (the reference's img_tool::resize with
// padding).
func resizePadded(img *Image, tw, th int, filter resizeFilter, pad [3]uint8) *Image {
	if img.Width == tw && img.Height == th {
		return img
	}
	scale := min(float32(tw)/float32(img.Width), float32(th)/float32(img.Height))
	nw := min(int(math.Ceil(float64(float32(img.Width)*scale))), tw)
	nh := min(int(math.Ceil(float64(float32(img.Height)*scale))), th)
	nw, nh = max(nw, 1), max(nh, 1)
	var resized *Image
	if filter == bicubic {
		resized = resizeBicubic(img, nw, nh)
	} else {
		resized = resizeBilinear(img, nw, nh)
	}
	canvas := &Image{Width: tw, Height: th, Pix: make([]uint8, 3*tw*th)}
	for i := 0; i < len(canvas.Pix); i += 3 {
		copy(canvas.Pix[i:i+3], pad[:])
	}
	ox, oy := (tw-nw)/2, (th-nh)/2
	for y := range nh {
		copy(canvas.Pix[3*((oy+y)*tw+ox):], resized.Pix[3*y*nw:3*(y+1)*nw])
	}
	return canvas
}

// crop returns the w x h rectangle of img at (x, y), which must lie inside.
func crop(img *Image, x, y, w, h int) *Image {
	if x < 0 || y < 0 || x+w > img.Width || y+h > img.Height {
		panic(fmt.Sprintf("BUG: vision: crop %dx%d at (%d, %d) of a %dx%d image", w, h, x, y, img.Width, img.Height))
	}
	out := &Image{Width: w, Height: h, Pix: make([]uint8, 3*w*h)}
	for r := range h {
		copy(out.Pix[3*r*w:3*(r+1)*w], img.Pix[3*((y+r)*img.Width+x):])
	}
	return out
}

// normalize turns an ImageSize x ImageSize image into the encoder input:
// (v/255 - mean) / std per channel in float32, planar [3][S][S].
func (p *Params) normalize(img *Image) []float32 {
	n := img.Width * img.Height
	out := make([]float32, 3*n)
	for i := range n {
		for c := range 3 {
			out[c*n+i] = (float32(img.Pix[3*i+c])/255 - p.Mean[c]) / p.Std[c]
		}
	}
	return out
}
