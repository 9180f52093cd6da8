package vision

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
)

// noise fills img with seeded random colours (incompressible pixels).
func noise(img interface {
	Set(x, y int, c color.Color)
	Bounds() image.Rectangle
}, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			img.Set(x, y, color.NRGBA64{uint16(r.Uint32()), uint16(r.Uint32()), uint16(r.Uint32()), uint16(r.Uint32())})
		}
	}
}

// TestDecodeCost: DecodeCost, from the header alone, is at least the
// pixels decoding holds at once (the decoder's image and the RGB copy,
// measured on the decoded values) and all that Decode allocates less a
// few buffers (measured by the runtime) for each layout the decoders
// produce, and not wildly more.
func TestDecodeCost(t *testing.T) {
	const w, h = 257, 131
	enc := func(f func(*bytes.Buffer) error) []byte {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	pngOf := func(img image.Image) []byte { return enc(func(b *bytes.Buffer) error { return png.Encode(b, img) }) }
	rgba16 := image.NewNRGBA64(image.Rect(0, 0, w, h))
	noise(rgba16, 1)
	rgba8 := image.NewNRGBA(image.Rect(0, 0, w, h))
	noise(rgba8, 2)
	gray := image.NewGray(image.Rect(0, 0, w, h))
	noise(gray, 3)
	gray16 := image.NewGray16(image.Rect(0, 0, w, h))
	noise(gray16, 4)
	pal := image.NewPaletted(image.Rect(0, 0, w, h), []color.Color{color.Black, color.White, color.NRGBA{200, 10, 10, 255}})
	noise(pal, 5)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"png rgba16", pngOf(rgba16)},
		{"png rgba8", pngOf(rgba8)},
		{"png gray", pngOf(gray)},
		{"png gray16", pngOf(gray16)},
		{"png paletted", pngOf(pal)},
		{"jpeg", enc(func(b *bytes.Buffer) error { return jpeg.Encode(b, rgba8, &jpeg.Options{Quality: 90}) })},
		{"jpeg gray", enc(func(b *bytes.Buffer) error { return jpeg.Encode(b, gray, nil) })},
		{"gif", enc(func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cost, err := DecodeCost(tc.data, 0)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			img, err := Decode(tc.data, 0)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			// Everything Decode allocated, garbage included: the pixels
			// and the decoders' buffers (zlib's window, a few rows).
			if alloc := after.TotalAlloc - before.TotalAlloc; int64(alloc) > cost+192<<10 {
				t.Errorf("Decode allocated %d bytes, DecodeCost = %d (+ 192 KiB of buffers)", alloc, cost)
			}
			// The decoder's image and the RGB copy, live at once: the
			// bytes of their pixels, measured on the values.
			var pix int
			dec, _, err := image.Decode(bytes.NewReader(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			switch m := dec.(type) {
			case *image.NRGBA64:
				pix = len(m.Pix)
			case *image.RGBA64:
				pix = len(m.Pix)
			case *image.NRGBA:
				pix = len(m.Pix)
			case *image.RGBA:
				pix = len(m.Pix)
			case *image.Gray:
				pix = len(m.Pix)
			case *image.Gray16:
				pix = len(m.Pix)
			case *image.Paletted:
				pix = len(m.Pix)
			case *image.YCbCr:
				pix = len(m.Y) + len(m.Cb) + len(m.Cr)
			default:
				t.Fatalf("decoded a %T, not in this test's list", dec)
			}
			live := int64(pix + len(img.Pix))
			if cost < live {
				t.Errorf("DecodeCost = %d, want at least the %d bytes of the decoded and RGB pixels", cost, live)
			}
			if cost > 8*live {
				t.Errorf("DecodeCost = %d, more than 8 x the %d bytes decoding holds", cost, live)
			}
		})
	}
}

// cancelAfter is a context whose Err is context.Canceled from its n+1th
// call on; it counts the calls.
type cancelAfter struct {
	context.Context
	n, calls atomic.Int32
}

func (c *cancelAfter) Err() error {
	c.calls.Add(1)
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestDecodeContextCancelled: a decode whose context ends stops within a
// read of its input and returns an error wrapping the context's.
func TestDecodeContextCancelled(t *testing.T) {
	img := image.NewNRGBA64(image.Rect(0, 0, 300, 200))
	noise(img, 7)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	// The whole decode checks its context once per 4 KiB read at least.
	full := &cancelAfter{Context: context.Background()}
	full.n.Store(1 << 30)
	if _, err := DecodeContext(full, b.Bytes(), 0); err != nil {
		t.Fatal(err)
	}
	if reads := int(full.calls.Load()); reads < 100 || reads < b.Len()/(8<<10) {
		t.Fatalf("a whole decode of %d bytes checked its context %d times, want one per read", b.Len(), reads)
	}
	for _, n := range []int32{0, 1, 5} {
		ctx := &cancelAfter{Context: context.Background()}
		ctx.n.Store(n)
		_, err := DecodeContext(ctx, b.Bytes(), 0)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("DecodeContext cancelled after %d checks = %v, want an error wrapping context.Canceled", n, err)
		}
		// image.Decode peeks once per registered format before giving
		// up: a handful of checks, against the whole decode's 100+.
		if calls := ctx.calls.Load(); calls > n+8 {
			t.Errorf("DecodeContext cancelled after %d checks went on for %d checks, want at most %d", n, calls, n+8)
		}
	}
}

// TestToRGBMatchesNRGBAModel: toRGB gives each pixel of every image type
// the decoders produce the colour color.NRGBAModel converts it to (the
// conversion the reference's channel handling was matched with), alpha
// dropped.
func TestToRGBMatchesNRGBAModel(t *testing.T) {
	r := image.Rect(3, 2, 3+37, 2+19) // an offset origin, odd sizes
	ycc := image.NewYCbCr(r, image.YCbCrSubsampleRatio420)
	nycca := image.NewNYCbCrA(r, image.YCbCrSubsampleRatio444)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, p := range [][]uint8{ycc.Y, ycc.Cb, ycc.Cr, nycca.Y, nycca.Cb, nycca.Cr, nycca.A} {
		for i := range p {
			p[i] = uint8(rng.Uint32())
		}
	}
	cmyk := image.NewCMYK(r)
	for i := range cmyk.Pix {
		cmyk.Pix[i] = uint8(rng.Uint32())
	}
	for _, tc := range []struct {
		name string
		img  image.Image
	}{
		{"nrgba64", image.NewNRGBA64(r)},
		{"rgba64", image.NewRGBA64(r)},
		{"rgba", image.NewRGBA(r)},
		{"gray16", image.NewGray16(r)},
		{"paletted", image.NewPaletted(r, []color.Color{color.NRGBA{10, 20, 30, 128}, color.White, color.RGBA{5, 6, 7, 9}})},
		{"alpha16", image.NewAlpha16(r)},
		{"ycbcr", ycc},
		{"nycbcra", nycca},
		{"cmyk", cmyk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, ok := tc.img.(interface {
				Set(x, y int, c color.Color)
				Bounds() image.Rectangle
			}); ok && tc.name != "cmyk" {
				noise(s, 13)
			}
			got, ok := toRGB(context.Background(), tc.img)
			if !ok {
				t.Fatal("toRGB stopped")
			}
			i := 0
			for y := r.Min.Y; y < r.Max.Y; y++ {
				for x := r.Min.X; x < r.Max.X; x++ {
					c := color.NRGBAModel.Convert(tc.img.At(x, y)).(color.NRGBA)
					if g := got.Pix[i : i+3]; g[0] != c.R || g[1] != c.G || g[2] != c.B {
						t.Fatalf("toRGB pixel (%d, %d) = %v, want %v (color.NRGBAModel)", x, y, g, c)
					}
					i += 3
				}
			}
		})
	}
}
