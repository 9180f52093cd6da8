package vision

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/tools/modelgen"
)

func idefics3Params(side, longest int) *Model {
	return &Model{P: Params{ProjectorType: "idefics3", ImageSize: side, PatchSize: 4, Merge: 2, LongestEdge: longest,
		Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}}}
}

// TestSplitGrid checks the tile grid against sizes worked out by hand from
// the reference's rule (scale = min(L/w, L/h), each side rounded up to a
// multiple of the tile side).
func TestSplitGrid(t *testing.T) {
	for _, tc := range []struct {
		name                string
		w, h, side, longest int
		cols, rows          int
	}{
		{"wide, down to 48", 32, 16, 16, 48, 3, 2}, // 1.5: 48 x 24 -> 48 x 32
		{"letterboxed", 100, 60, 32, 64, 2, 2},     // 0.64: 64 x 38.4 -> 64 x 64
		{"small, scaled up", 10, 10, 16, 64, 4, 4}, // 6.4: 64 x 64
		{"tall", 50, 200, 16, 40, 1, 3},            // 0.2: 10 x 40 -> 16 x 48
		{"one tile", 16, 16, 16, 16, 1, 1},
		// 96/90 in float32 is 1.0666667, times 90 is 96.0000076 (float32):
		// over 3 tiles, so 4, as the reference's float arithmetic gives.
		{"float32 rounding", 90, 50, 32, 96, 4, 2},      // 1: 16 x 16
		{"no preproc_image_size", 100, 60, 32, 0, 0, 0}, // global image only
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := &Image{Width: tc.w, Height: tc.h, Pix: make([]uint8, 3*tc.w*tc.h)}
			sp, err := idefics3Params(tc.side, tc.longest).SplitIdefics3(img)
			if err != nil {
				t.Fatal(err)
			}
			if sp.Cols != tc.cols || sp.Rows != tc.rows || len(sp.Tiles) != tc.cols*tc.rows {
				t.Fatalf("SplitIdefics3(%dx%d) = %d x %d grid, %d tiles, want %d x %d", tc.w, tc.h, sp.Cols, sp.Rows, len(sp.Tiles), tc.cols, tc.rows)
			}
			for i, tile := range append(sp.Tiles, sp.Global) {
				if tile.Width != tc.side || tile.Height != tc.side || len(tile.Pix) != 3*tc.side*tc.side {
					t.Errorf("chunk %d is %d x %d (%d bytes), want %d x %d", i, tile.Width, tile.Height, len(tile.Pix), tc.side, tc.side)
				}
			}
		})
	}
}

// TestSplitLetterbox: a uniform image keeps its colour through both resize
// filters (the cubic and the lerp of equal samples are that sample), so
// the refined image is that colour where the image lands and black
// elsewhere. 100 x 60 into 64 x 64: scale 0.64, the image 64 x 39
// (ceil 38.4) at row (64-39)/2 = 12.
func TestSplitLetterbox(t *testing.T) {
	col := [3]uint8{200, 150, 50}
	img := &Image{Width: 100, Height: 60, Pix: make([]uint8, 3*100*60)}
	for i := 0; i < len(img.Pix); i += 3 {
		copy(img.Pix[i:], col[:])
	}
	sp, err := idefics3Params(32, 64).SplitIdefics3(img)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		for c := range 2 {
			tile := sp.Tiles[r*2+c]
			for y := range 32 {
				for x := range 32 {
					want := [3]uint8{}
					if ry := r*32 + y; ry >= 12 && ry < 12+39 {
						want = col
					}
					if got := [3]uint8(tile.Pix[3*(y*32+x):]); got != want {
						t.Fatalf("tile (%d,%d) pixel (%d,%d) = %v, want %v", r, c, x, y, got, want)
					}
				}
			}
		}
	}
	for i := 0; i < len(sp.Global.Pix); i += 3 {
		if got := [3]uint8(sp.Global.Pix[i:]); got != col {
			t.Fatalf("global image pixel %d = %v, want %v (stretched, not padded)", i/3, got, col)
		}
	}
}

// TestSplitRamp cuts testdata/ramp-32x16.png (R = 8x, G = 16y, B = 100)
// with 16-pixel tiles and a longest edge of 48: the refined image is 48 x
// 32, the 48 x 24 resize pasted at row 4 on black, cut into 3 x 2 tiles.
// The expected values come from the ramp's formula: the reference's cubic
// through four collinear samples is the line, so the bicubic resize at
// source position x*32/48 = 2x/3 gives R = round(8 * 2x/3) where the
// 4-sample neighbourhood is inside the image (x in 2..44; R is constant
// down a column, so every row), G = round(16 * 2y/3) for y in 2..20 (every
// column), B = 100. The global image is the align-corners bilinear
// stretch to 16 x 16: source x*31/15, R = floor(248x/15) (the last column,
// a whole number up to float32 rounding, left out), source row y, G = 16y.
func TestSplitRamp(t *testing.T) {
	img := readImage(t, "ramp-32x16.png")
	m := idefics3Params(16, 48)
	sp, err := m.SplitIdefics3(img)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Cols != 3 || sp.Rows != 2 {
		t.Fatalf("grid %d x %d, want 3 x 2", sp.Cols, sp.Rows)
	}
	refined := func(x, y, c int) (float64, bool) {
		if y < 4 || y >= 28 {
			return 0, true // padding
		}
		y -= 4
		switch c {
		case 0:
			return math.Round(16 * float64(x) / 3), x >= 2 && x <= 44
		case 1:
			return math.Round(32 * float64(y) / 3), y >= 2 && y <= 20
		}
		return 100, true
	}
	checked := 0
	for r := range 2 {
		for c := range 3 {
			tile := sp.Tiles[r*3+c]
			for y := range 16 {
				for x := range 16 {
					for ch := range 3 {
						want, ok := refined(c*16+x, r*16+y, ch)
						if !ok {
							continue
						}
						if got := tile.Pix[3*(y*16+x)+ch]; float64(got) != want {
							t.Fatalf("tile (%d,%d) pixel (%d,%d) channel %d = %d, want %g", r, c, x, y, ch, got, want)
						}
						checked++
					}
				}
			}
		}
	}
	if checked < 3*48*32*8/10 {
		t.Errorf("only %d tile values checked", checked)
	}
	for y := range 16 {
		for x := range 16 {
			p := sp.Global.Pix[3*(y*16+x):]
			if x < 15 && float64(p[0]) != math.Floor(248*float64(x)/15) || p[1] != uint8(16*y) || p[2] != 100 {
				t.Fatalf("global pixel (%d,%d) = %v, want R %g, G %d, B 100", x, y, p[:3], math.Floor(248*float64(x)/15), 16*y)
			}
		}
	}
	// The encoder input of a tile: planar, (v/255 - mean)/std.
	in := m.P.normalize(sp.Tiles[4])
	for ch := range 3 {
		for i := range 16 * 16 {
			v := float64(sp.Tiles[4].Pix[3*i+ch])
			if g, w := float64(in[ch*256+i]), norm(v, m.P.Mean[ch], m.P.Std[ch]); math.Abs(g-w) > 1e-5 {
				t.Fatalf("normalize plane %d value %d = %g, want %g", ch, i, g, w)
			}
		}
	}
}

// TestIdefics3LongestEdge: clip.vision.preproc_image_size is read, and one
// of more than 16 tiles per side is refused at load, naming the key.
func TestIdefics3LongestEdge(t *testing.T) {
	m := genProjector(t, modelgen.ProjectorOptions{Type: "idefics3", LongestEdge: 96, Seed: 1})
	if m.P.LongestEdge != 96 {
		t.Errorf("LongestEdge = %d, want 96", m.P.LongestEdge)
	}
	path := filepath.Join(t.TempDir(), "big.gguf")
	if err := modelgen.WriteProjector(path, modelgen.ProjectorOptions{Type: "idefics3", LongestEdge: 17 * 32, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "clip.vision.preproc_image_size 544") {
		t.Errorf("Open = %v, want an error naming clip.vision.preproc_image_size 544", err)
	}
}

// pieceVocab is a vocabulary given by its tokens' pieces.
type pieceVocab []string

func (v pieceVocab) TokenID(text string) (int32, bool) {
	for i, p := range v {
		if p == text {
			return int32(i), true
		}
	}
	return 0, false
}
func (v pieceVocab) VocabSize() int        { return len(v) }
func (v pieceVocab) Piece(id int32) []byte { return []byte(v[id]) }

// TestIdefics3Layout checks the prompt layout of a 96 x 50 image against
// the reference's (mtmd.cpp, idefics3): with 32-pixel tiles and a longest
// edge of 96 the refined image is 96 x 64 (scale 1, 50 rounded up to 64),
// 3 x 2 tiles; each tile after the text
// <fake_token_around_image><row_R_col_C>, a "\n" token after each row but
// the last, then "\n\n" <fake_token_around_image> <global-img>, the global
// image and <fake_token_around_image>. The marker tokens are the first
// with their text; a vocabulary without them is refused, naming them.
func TestIdefics3Layout(t *testing.T) {
	m := genProjector(t, modelgen.ProjectorOptions{Type: "idefics3", LongestEdge: 96, Seed: 2})
	if _, err := NewCPU(m, 64, pieceVocab{"a", "\n", "<fake_token_around_image>"}); err == nil ||
		!strings.Contains(err.Error(), `"\n\n", "<global-img>"`) {
		t.Errorf("NewCPU without the markers = %v, want an error naming \"\\n\\n\" and <global-img>", err)
	}
	if _, err := NewCPU(m, 48, pieceVocab{}); err == nil || !strings.Contains(err.Error(), "48 wide") {
		t.Errorf("NewCPU for 48-wide text embeddings = %v, want a width error", err)
	}
	vocab := pieceVocab{"a", "\n", "b", "\n", "\n\n", "<global-img>", "<fake_token_around_image>"}
	const nl, nlnl, global, fake = 1, 4, 5, 6
	c, err := NewCPU(m, 64, vocab)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 96, 50))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	parts, err := c.Prepare(context.Background(), b.Bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	hashes := map[[32]byte]bool{}
	for _, p := range parts {
		switch {
		case p.Rows > 0:
			got = append(got, fmt.Sprintf("[%d rows]", p.Rows))
			hashes[p.Hash] = true
		case p.Text != "":
			got = append(got, p.Text)
		default:
			got = append(got, fmt.Sprint(p.Tokens))
		}
	}
	tile := func(r, c int) string { return fmt.Sprintf("<fake_token_around_image><row_%d_col_%d>", r, c) }
	want := []string{
		tile(1, 1), "[16 rows]", tile(1, 2), "[16 rows]", tile(1, 3), "[16 rows]", fmt.Sprint([]int32{nl}),
		tile(2, 1), "[16 rows]", tile(2, 2), "[16 rows]", tile(2, 3), "[16 rows]",
		fmt.Sprint([]int32{nlnl, fake, global}), "[16 rows]", fmt.Sprint([]int32{fake}),
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("layout\n%s\nwant\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
	if len(hashes) != 7 {
		t.Errorf("%d distinct chunk hashes, want 7", len(hashes))
	}
	// The chunks in prompt order are the tiles row by row, then the
	// global image.
	dec, err := Decode(b.Bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := m.SplitIdefics3(dec)
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, p := range parts {
		if p.Rows == 0 {
			continue
		}
		src := sp.Global
		if k < len(sp.Tiles) {
			src = sp.Tiles[k]
		}
		got, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.EncodeCPU(m.P.normalize(src))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("chunk %d is not the encoding of %s", k, map[bool]string{true: "its tile", false: "the global image"}[k < len(sp.Tiles)])
		}
		k++
	}
}
