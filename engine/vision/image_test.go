package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "regenerate the images in testdata/")

// The images in testdata/ are made by genImages (go test ./vision -run
// TestTestdataImages -update) from the formulas below; the tests compute
// what decoding and preprocessing must give from the same formulas, never
// from our resize code:
//
//   - ramp-32x16.png: RGB, R = 8x, G = 16y, B = 100. A linear ramp stays
//     linear under the reference's bicubic (its cubic through four
//     collinear samples is the line) and its bilinear (align-corners
//     sampling of a line), so the resized values are closed-form.
//   - gray-64x64.png: 8-bit gray, v = (3x + 5y) mod 256, already the input
//     size: copied untouched, R = G = B.
//   - alpha-20x12.png: RGBA with alpha = 13x (x = 0 fully transparent), R =
//     10x, G = 20y, B = 200: alpha must be dropped, not composited.
//   - exif-gray-16x8.jpg: a uniform gray (128) baseline JPEG with an EXIF
//     APP1 segment saying Orientation 6 (rotate 90°): the reference
//     ignores it, so the image stays 16 wide and 8 high.
func rampPixel(x, y int) [3]uint8 { return [3]uint8{uint8(8 * x), uint8(16 * y), 100} }

func genImages(t *testing.T, dir string) {
	ramp := image.NewRGBA(image.Rect(0, 0, 32, 16))
	for y := range 16 {
		for x := range 32 {
			p := rampPixel(x, y)
			ramp.Set(x, y, color.RGBA{p[0], p[1], p[2], 255})
		}
	}
	gray := image.NewGray(image.Rect(0, 0, 64, 64))
	for y := range 64 {
		for x := range 64 {
			gray.SetGray(x, y, color.Gray{uint8((3*x + 5*y) % 256)})
		}
	}
	alpha := image.NewNRGBA(image.Rect(0, 0, 20, 12))
	for y := range 12 {
		for x := range 20 {
			alpha.SetNRGBA(x, y, color.NRGBA{uint8(10 * x), uint8(20 * y), 200, uint8(13 * x)})
		}
	}
	for name, img := range map[string]image.Image{"ramp-32x16.png": ramp, "gray-64x64.png": gray, "alpha-20x12.png": alpha} {
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flat := image.NewGray(image.Rect(0, 0, 16, 8))
	for i := range flat.Pix {
		flat.Pix[i] = 128
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, flat, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "exif-gray-16x8.jpg"), withExifOrientation(b.Bytes(), 6), 0o644); err != nil {
		t.Fatal(err)
	}
}

// withExifOrientation inserts an APP1 Exif segment (little-endian TIFF, one
// IFD entry: Orientation = o) after the JPEG's SOI marker.
func withExifOrientation(jpg []byte, o uint16) []byte {
	var tiff bytes.Buffer
	tiff.WriteString("II")
	binary.Write(&tiff, binary.LittleEndian, uint16(42))
	binary.Write(&tiff, binary.LittleEndian, uint32(8))
	binary.Write(&tiff, binary.LittleEndian, uint16(1))      // one entry
	binary.Write(&tiff, binary.LittleEndian, uint16(0x0112)) // Orientation
	binary.Write(&tiff, binary.LittleEndian, uint16(3))      // SHORT
	binary.Write(&tiff, binary.LittleEndian, uint32(1))
	binary.Write(&tiff, binary.LittleEndian, o)
	binary.Write(&tiff, binary.LittleEndian, uint16(0))
	binary.Write(&tiff, binary.LittleEndian, uint32(0)) // no next IFD
	payload := append([]byte("Exif\x00\x00"), tiff.Bytes()...)
	seg := []byte{0xFF, 0xE1, byte((len(payload) + 2) >> 8), byte(len(payload) + 2)}
	out := append([]byte{}, jpg[:2]...)
	out = append(out, seg...)
	out = append(out, payload...)
	return append(out, jpg[2:]...)
}

func readImage(t *testing.T, name string) *Image {
	t.Helper()
	return decodeFile(t, filepath.Join("testdata", name))
}

func TestTestdataImages(t *testing.T) {
	if *update {
		genImages(t, "testdata")
	}
	t.Run("ramp", func(t *testing.T) {
		img := readImage(t, "ramp-32x16.png")
		for y := range 16 {
			for x := range 32 {
				if got, want := [3]uint8(img.Pix[3*(y*32+x):]), rampPixel(x, y); got != want {
					t.Fatalf("pixel (%d,%d) = %v, want %v", x, y, got, want)
				}
			}
		}
	})
	t.Run("gray", func(t *testing.T) {
		img := readImage(t, "gray-64x64.png")
		for i := range 64 * 64 {
			v := uint8((3*(i%64) + 5*(i/64)) % 256)
			if got := [3]uint8(img.Pix[3*i:]); got != [3]uint8{v, v, v} {
				t.Fatalf("pixel %d = %v, want gray %d replicated", i, got, v)
			}
		}
	})
	t.Run("alpha", func(t *testing.T) {
		img := readImage(t, "alpha-20x12.png")
		for y := range 12 {
			for x := range 20 {
				want := [3]uint8{uint8(10 * x), uint8(20 * y), 200}
				if got := [3]uint8(img.Pix[3*(y*20+x):]); got != want {
					t.Fatalf("pixel (%d,%d) = %v, want %v (alpha %d dropped, not composited)", x, y, got, want, 13*x)
				}
			}
		}
	})
	t.Run("exif", func(t *testing.T) {
		img := readImage(t, "exif-gray-16x8.jpg")
		if img.Width != 16 || img.Height != 8 {
			t.Fatalf("Decode = %d x %d, want 16 x 8 (EXIF orientation ignored)", img.Width, img.Height)
		}
		for i, v := range img.Pix {
			if v < 127 || v > 129 {
				t.Fatalf("byte %d = %d, want 128±1 (a uniform JPEG)", i, v)
			}
		}
	})
}

// norm is (v/255 - mean)/std in float64, the independent expectation.
func norm(v float64, mean, std float32) float64 { return (v/255 - float64(mean)) / float64(std) }

func testParams(typ string) *Model {
	return &Model{P: Params{ProjectorType: typ, ImageSize: 64, PatchSize: 16,
		Mean: [3]float32{0.48145467, 0.4578275, 0.40821072}, Std: [3]float32{0.26862955, 0.2613026, 0.2757771}}}
}

func TestPreprocessRamp(t *testing.T) {
	img := readImage(t, "ramp-32x16.png")
	for _, tc := range []struct {
		typ string
		pad [3]float64
		// want gives the resized image's channel value at (x, y) of the
		// 64 x 32 resize, or false where the test does not predict it
		// (the clamped borders).
		want func(x, y, c int) (float64, bool)
	}{
		{"mlp", [3]float64{122, 116, 104}, func(x, y, c int) (float64, bool) {
			// source position x/2: value 8 * x/2 = 4x (R), 16 * y/2 = 8y (G);
			// exact where the 4-sample neighbourhood is inside.
			switch c {
			case 0:
				return float64(4 * x), x >= 2 && x <= 59
			case 1:
				return float64(8 * y), y >= 2 && y <= 27
			}
			return 100, true
		}},
		{"gemma3", [3]float64{0, 0, 0}, func(x, y, c int) (float64, bool) {
			// align-corners: source x*31/63, so R = floor(248x/63), G =
			// floor(240y/31), truncated (the last column and row are whole
			// numbers up to float32 rounding, left out).
			switch c {
			case 0:
				return float64(248 * x / 63), x < 63
			case 1:
				return float64(240 * y / 31), y < 31
			}
			return 100, true
		}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			m := testParams(tc.typ)
			got, err := m.Preprocess(img)
			if err != nil {
				t.Fatal(err)
			}
			// 32 x 16 fits 64 x 64 at scale 2: 64 x 32 pasted at row 16.
			checked := 0
			for c := range 3 {
				for y := range 64 {
					for x := range 64 {
						var v float64
						if y < 16 || y >= 48 {
							v = tc.pad[c]
						} else {
							var ok bool
							if v, ok = tc.want(x, y-16, c); !ok {
								continue
							}
						}
						w := norm(v, m.P.Mean[c], m.P.Std[c])
						if g := float64(got[(c*64+y)*64+x]); math.Abs(g-w) > 1e-5 {
							t.Fatalf("Preprocess plane %d (%d,%d) = %g, want %g (value %g)", c, x, y, g, w, v)
						}
						checked++
					}
				}
			}
			if checked < 3*64*64*9/10 {
				t.Errorf("only %d values checked", checked)
			}
		})
	}
}

func TestPreprocessUntouched(t *testing.T) {
	img := readImage(t, "gray-64x64.png")
	for _, typ := range []string{"mlp", "gemma3"} {
		m := testParams(typ)
		got, err := m.Preprocess(img)
		if err != nil {
			t.Fatal(err)
		}
		for c := range 3 {
			for i := range 64 * 64 {
				v := float64((3*(i%64) + 5*(i/64)) % 256)
				if g, w := float64(got[c*64*64+i]), norm(v, m.P.Mean[c], m.P.Std[c]); math.Abs(g-w) > 1e-5 {
					t.Fatalf("%s: plane %d value %d = %g, want %g", typ, c, i, g, w)
				}
			}
		}
	}
}

// pngHeader returns the signature and IHDR chunk of a w x h RGB PNG.
func pngHeader(w, h uint32) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2
	chunk := append([]byte("IHDR"), ihdr...)
	out := []byte("\x89PNG\r\n\x1a\n")
	out = binary.BigEndian.AppendUint32(out, 13)
	out = append(out, chunk...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(chunk))
}

func TestDecodeErrors(t *testing.T) {
	good, err := os.ReadFile("testdata/ramp-32x16.png")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		data       []byte
		is         error
	}{
		{"bomb header", "30000 x 30000", pngHeader(30000, 30000), ErrTooLarge},
		{"over limit", "32 x 16", good, ErrTooLarge},
		{"truncated", "bad png image", good[:len(good)/2], nil},
		{"text", "unsupported image format", []byte("hello, not an image"), nil},
		{"empty", "unsupported image format", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := 1 << 24
			if tc.name == "over limit" {
				limit = 500
			}
			_, err := Decode(tc.data, limit)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %v, want an error containing %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Decode error %v does not wrap %v", err, tc.is)
			}
		})
	}
}
