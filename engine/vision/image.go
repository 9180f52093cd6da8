package vision

import (
	"bytes"
	"context"
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

// header reads an image's header: its format and size, refusing more
// than maxPixels pixels (maxPixels > 0) with an error wrapping ErrTooLarge.
func header(data []byte, maxPixels int) (image.Config, string, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		if errors.Is(err, image.ErrFormat) {
			return cfg, "", fmt.Errorf("unsupported image format (supported: PNG, JPEG, GIF, WebP)")
		}
		return cfg, "", fmt.Errorf("bad image header: %v", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return cfg, "", fmt.Errorf("bad %s image: %d x %d pixels", format, cfg.Width, cfg.Height)
	}
	if maxPixels > 0 && int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return cfg, "", fmt.Errorf("%s image of %d x %d pixels: %w (at most %d)", format, cfg.Width, cfg.Height, ErrTooLarge, maxPixels)
	}
	return cfg, format, nil
}

// DecodeCost reads an image's header (as Decode does, with its errors) and
// returns the most bytes of memory Decode holds at once for it: the
// decoder's own image, in the layout its header's colour model and bit
// depth ask for, and the 8-bit RGB copy. It reads no pixel data, so a
// server can reserve the memory before it decodes. The figure is an upper
// bound: a progressive JPEG's coefficients and a lossless WebP's
// working copy are counted whether or not the file has them.
func DecodeCost(data []byte, maxPixels int) (int64, error) {
	cfg, format, err := header(data, maxPixels)
	if err != nil {
		return 0, err
	}
	return int64(cfg.Width) * int64(cfg.Height) * (decoderBytesPerPixel(format, cfg.ColorModel) + 3), nil
}

// decoderBytesPerPixel is what the standard decoders (and x/image/webp)
// allocate per pixel for an image of format and colour model m.
func decoderBytesPerPixel(format string, m color.Model) int64 {
	channels := int64(4)
	switch m {
	case color.GrayModel:
		channels = 1
	case color.Gray16Model:
		channels = 2
	case color.YCbCrModel:
		channels = 3
	case color.RGBA64Model, color.NRGBA64Model:
		channels = 8
	}
	if _, ok := m.(color.Palette); ok {
		channels = 1
	}
	switch format {
	case "jpeg":
		// The pixels, and for a progressive file every component's
		// coefficients as int32.
		return channels + 4*channels
	case "webp":
		// Lossless: the NRGBA image and its ARGB working copy; lossy:
		// Y, Cb, Cr and alpha planes, less than that.
		return 8
	case "gif":
		// The frame and the image it is drawn onto, both paletted.
		return 2
	}
	return channels
}

// Decode decodes a PNG, JPEG, GIF (first frame) or WebP image to RGB as the
// reference (stb_image with 3 channels) does: alpha is dropped, not
// composited onto a background; gray is replicated to R = G = B; 16-bit
// samples keep their high byte; EXIF orientation is ignored. The header is
// read first: an image of more than maxPixels pixels (maxPixels > 0) is an
// error wrapping ErrTooLarge, whatever its file size, so a decompression
// bomb is refused before it is decoded.
func Decode(data []byte, maxPixels int) (*Image, error) {
	return DecodeContext(context.Background(), data, maxPixels)
}

// DecodeContext is Decode that stops when ctx is done: the decoder reads
// its input through a reader that fails once ctx is done, and the
// conversion to RGB checks ctx between rows, so a cancelled decode returns
// (an error wrapping ctx.Err()) after a few KiB of input or a row more.
func DecodeContext(ctx context.Context, data []byte, maxPixels int) (*Image, error) {
	_, format, err := header(data, maxPixels)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("decoding the %s image: %w", format, err)
	}
	img, _, err := image.Decode(&ctxReader{ctx: ctx, r: bytes.NewReader(data)})
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, fmt.Errorf("decoding the %s image: %w", format, ctxErr)
	}
	if err != nil {
		return nil, fmt.Errorf("bad %s image: %v", format, err)
	}
	out, ok := toRGB(ctx, img)
	if !ok {
		return nil, fmt.Errorf("decoding the %s image: %w", format, ctx.Err())
	}
	return out, nil
}

// ctxReader is a reader that fails once ctx is done. It has only Read, so
// the decoders buffer it (bufio, 4 KiB): ctx is checked every few KiB of
// compressed input.
type ctxReader struct {
	ctx context.Context
	r   *bytes.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// toRGB converts img to 8-bit RGB, dropping alpha (straight, not
// premultiplied, colour values). It checks ctx between rows and reports
// false when ctx is done.
func toRGB(ctx context.Context, img image.Image) (*Image, bool) {
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
		// Each pixel as color.NRGBAModel converts it, read through the
		// concrete type's accessor where there is one (img.At boxes a
		// colour per pixel: hundreds of MiB of garbage for a large image).
		at := func(x, y int) (r, g, b, a uint32) { return img.At(x, y).RGBA() }
		switch m := img.(type) {
		case *image.NRGBA64:
			at = func(x, y int) (r, g, b, a uint32) { return m.NRGBA64At(x, y).RGBA() }
		case *image.RGBA64:
			at = func(x, y int) (r, g, b, a uint32) { return m.RGBA64At(x, y).RGBA() }
		case *image.RGBA:
			at = func(x, y int) (r, g, b, a uint32) { return m.RGBAAt(x, y).RGBA() }
		case *image.Gray16:
			at = func(x, y int) (r, g, b, a uint32) { return m.Gray16At(x, y).RGBA() }
		case *image.YCbCr:
			at = func(x, y int) (r, g, b, a uint32) { return m.YCbCrAt(x, y).RGBA() }
		case *image.NYCbCrA:
			at = func(x, y int) (r, g, b, a uint32) { return m.NYCbCrAAt(x, y).RGBA() }
		case *image.CMYK:
			at = func(x, y int) (r, g, b, a uint32) { return m.CMYKAt(x, y).RGBA() }
		}
		for y := b.Min.Y; y < b.Max.Y; y++ {
			if ctx.Err() != nil {
				return nil, false
			}
			for x := b.Min.X; x < b.Max.X; x++ {
				put(toNRGBA8(at(x, y)))
			}
		}
	}
	return out, true
}

// toNRGBA8 is color.NRGBAModel's conversion of an alpha-premultiplied
// 16-bit colour, less the alpha: the straight 8-bit colour values.
func toNRGBA8(r, g, b, a uint32) (uint8, uint8, uint8) {
	switch a {
	case 0xffff:
		return uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)
	case 0:
		return 0, 0, 0
	}
	return uint8((r * 0xffff / a) >> 8), uint8((g * 0xffff / a) >> 8), uint8((b * 0xffff / a) >> 8)
}
