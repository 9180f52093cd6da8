package vision

import (
	"fmt"
	"math"
)

// Resize filters of the reference's fixed-size preprocessing.
type resizeFilter int

const (
	bicubic  resizeFilter = iota // llama.cpp's own (img_tool::resize_bicubic)
	bilinear                     // align-corners, truncating (img_tool::resize_bilinear)
)

// letterbox returns the preprocessing of a family: filter and pad colour.
func (p *Params) letterbox() (resizeFilter, [3]uint8, error) {
	switch p.ProjectorType {
	case "mlp":
		return bicubic, [3]uint8{122, 116, 104}, nil
	case "gemma3":
		return bilinear, [3]uint8{}, nil
	}
	return 0, [3]uint8{}, fmt.Errorf("vision: fixed-size preprocessing is not that of clip.projector_type %q (idefics3 splits images: SplitIdefics3)", p.ProjectorType)
}

// Preprocess turns a decoded image into the encoder input as the
// reference's fixed-size preprocessor does: it resizes the image to fit the
// square ImageSize keeping its aspect ratio (scale = min(S/w, S/h) in
// float32, new side = min(ceil(side*scale), S)), pastes it centred on a
// canvas of the family's pad colour (an S x S image is used as is), and
// normalises each channel to (v/255 - mean) / std in float32. The result
// is planar [3][S][S] (R plane, G plane, B plane).
func (m *Model) Preprocess(img *Image) ([]float32, error) {
	p := &m.P
	filter, pad, err := p.letterbox()
	if err != nil {
		return nil, err
	}
	if img.Width <= 0 || img.Height <= 0 || len(img.Pix) != 3*img.Width*img.Height {
		return nil, fmt.Errorf("vision: Preprocess: a %d x %d image with %d bytes", img.Width, img.Height, len(img.Pix))
	}
	return p.normalize(resizePadded(img, p.ImageSize, p.ImageSize, filter, pad)), nil
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

// cubic is the reference's cubic through four samples at unit spacing
// (value at 0 is c1) evaluated at d in [0, 1): its coefficients are
// computed in double and rounded to float32, the polynomial in float32
// (explicit conversions keep Go from fusing multiply-adds).
func cubic(c0, c1, c2, c3, d float32) float32 {
	d0, d2, d3 := float64(c0-c1), float64(c2-c1), float64(c3-c1)
	a1 := float32(float64(-1.0/3*d0) + d2 - float64(1.0/6*d3))
	a2 := float32(float64(1.0/2*d0) + float64(1.0/2*d2))
	a3 := float32(float64(float64(-1.0/6*d0)-float64(1.0/2*d2)) + float64(1.0/6*d3))
	t1 := float32(a1 * d)
	t2 := float32(float32(a2*d) * d)
	t3 := float32(float32(float32(a3*d)*d) * d)
	return float32(float32(c1+t1)+t2) + t3
}

// resizeBicubic is the reference's bicubic resize (clip.cpp
// img_tool::resize_bicubic, not PIL's): source position dst*(src/dst)
// without a half-pixel offset, a 4 x 4 neighbourhood with clamped edges,
// horizontal cubics then a vertical one, rounded half away from zero and
// clamped to 0..255.
func resizeBicubic(img *Image, tw, th int) *Image {
	nx, ny := img.Width, img.Height
	out := &Image{Width: tw, Height: th, Pix: make([]uint8, 3*tw*th)}
	tx, ty := float32(nx)/float32(tw), float32(ny)/float32(th)
	px := func(x, y, k int) float32 {
		return float32(img.Pix[(clampInt(y, 0, ny-1)*nx+clampInt(x, 0, nx-1))*3+k])
	}
	for i := range th {
		for j := range tw {
			fx, fy := float32(tx*float32(j)), float32(ty*float32(i))
			x, y := int(fx), int(fy)
			dx, dy := fx-float32(x), fy-float32(y)
			for k := range 3 {
				var C [4]float32
				for jj := range 4 {
					yy := y - 1 + jj
					C[jj] = cubic(px(x-1, yy, k), px(x, yy, k), px(x+1, yy, k), px(x+2, yy, k), dx)
				}
				v := math.Round(float64(cubic(C[0], C[1], C[2], C[3], dy)))
				out.Pix[(i*tw+j)*3+k] = uint8(min(max(v, 0), 255))
			}
		}
	}
	return out
}

func lerp(s, e, t float32) float32 { return s + float32((e-s)*t) }

// resizeBilinear is the reference's bilinear resize (clip.cpp
// img_tool::resize_bilinear): align-corners sampling src = dst*(src-1)/
// (dst-1), float32 lerps, truncated to uint8.
func resizeBilinear(img *Image, tw, th int) *Image {
	nx, ny := img.Width, img.Height
	out := &Image{Width: tw, Height: th, Pix: make([]uint8, 3*tw*th)}
	var xr, yr float32
	if tw > 1 {
		xr = float32(nx-1) / float32(tw-1)
	}
	if th > 1 {
		yr = float32(ny-1) / float32(th-1)
	}
	for y := range th {
		for x := range tw {
			px, py := float32(float32(x)*xr), float32(float32(y)*yr)
			x0, y0 := min(int(px), nx-1), min(int(py), ny-1)
			x1, y1 := min(x0+1, nx-1), min(y0+1, ny-1)
			xf, yf := px-float32(x0), py-float32(y0)
			for c := range 3 {
				at := func(xx, yy int) float32 { return float32(img.Pix[3*(yy*nx+xx)+c]) }
				top := lerp(at(x0, y0), at(x1, y0), xf)
				bottom := lerp(at(x0, y1), at(x1, y1), xf)
				out.Pix[3*(y*tw+x)+c] = uint8(lerp(top, bottom, yf))
			}
		}
	}
	return out
}
