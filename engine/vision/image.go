package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // registers GIF with image.Decode
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp" // registers WebP
)

// Image is a decoded image: 8-bit RGB, row-major, 3 bytes per pixel.
type Image struct {
	Width, Height int
	Pix           []uint8
}

// ErrTooLarge is returned (wrapped) by Decode for images over the pixel
// limit, found from the header before any pixel is decoded.
var ErrTooLarge = errors.New("too many pixels")

// Formats lists the image formats Decode reads.
var Formats = []string{"png", "jpeg", "gif", "webp"}

// Decode decodes a PNG, JPEG, GIF (first frame) or WebP image to RGB as the
// reference (stb_image with 3 channels) does: alpha is dropped, not
// composited onto a background; gray is replicated to R = G = B; 16-bit
// samples keep their high byte; EXIF orientation is ignored. The header is
// read first: an image of more than maxPixels pixels (maxPixels > 0) is an
// error wrapping ErrTooLarge, whatever its file size, so a decompression
// bomb is refused before it is decoded.
func Decode(data []byte, maxPixels int) (*Image, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		if errors.Is(err, image.ErrFormat) {
			return nil, fmt.Errorf("unsupported image format (supported: PNG, JPEG, GIF, WebP)")
		}
		return nil, fmt.Errorf("bad image header: %v", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("bad %s image: %d x %d pixels", format, cfg.Width, cfg.Height)
	}
	if maxPixels > 0 && int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return nil, fmt.Errorf("%s image of %d x %d pixels: %w (at most %d)", format, cfg.Width, cfg.Height, ErrTooLarge, maxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("bad %s image: %v", format, err)
	}
	return toRGB(img), nil
}

// toRGB converts img to 8-bit RGB, dropping alpha (straight, not
// premultiplied, colour values).
func toRGB(img image.Image) *Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &Image{Width: w, Height: h, Pix: make([]uint8, 3*w*h)}
	i := 0
	put := func(r, g, b uint8) {
		out.Pix[i], out.Pix[i+1], out.Pix[i+2] = r, g, b
		i += 3
	}
	switch m := img.(type) {
	case *image.NRGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[(y-b.Min.Y)*m.Stride:]
			for x := range w {
				put(row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	case *image.Gray:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[(y-b.Min.Y)*m.Stride:]
			for x := range w {
				put(row[x], row[x], row[x])
			}
		}
	default:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				put(c.R, c.G, c.B)
			}
		}
	}
	return out
}
