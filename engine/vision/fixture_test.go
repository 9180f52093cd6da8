package vision

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// refCase is one case of ../shared/fixtures/mmproj/<pair>.ref.json.
type refCase struct {
	Image   string `json:"image"`
	Decoded struct {
		Width, Height int
		File          string
	} `json:"decoded"`
	Preprocessed struct {
		File  string
		Shape []int
	} `json:"preprocessed"`
	ImageEmbd struct {
		File     string
		Shape    []int
		RMS      float64 `json:"rms"`
		CPUDiff  float64 `json:"cpu_max_abs_diff"`
		NumpyDif float64 `json:"numpy_f64_max_abs_diff"`
	} `json:"image_embd"`
}

type refFile struct {
	TextModel     string    `json:"text_model"`
	MMProj        string    `json:"mmproj"`
	ProjectorType string    `json:"projector_type"`
	Cases         []refCase `json:"cases"`
}

func loadRef(t *testing.T, pair string) (string, *refFile) {
	t.Helper()
	dir := fixtures.Dir(t, "mmproj")
	b, err := os.ReadFile(filepath.Join(dir, pair+".ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r refFile
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Cases) == 0 {
		t.Fatalf("%s.ref.json has no cases", pair)
	}
	return dir, &r
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func decodeFile(t *testing.T, path string) *Image {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Decode(b, 0)
	if err != nil {
		t.Fatalf("Decode(%s): %v", path, err)
	}
	return img
}

var pairs = []string{"llava", "gemma3"}

// TestFixtureDecode checks our decoding against stb_image's pixels: exact
// for the PNGs, within ±1 for the JPEG (Go's IDCT rounds differently; the
// README measured 27 of 1350 pixels off by one).
func TestFixtureDecode(t *testing.T) {
	dir, ref := loadRef(t, "llava")
	for _, c := range ref.Cases {
		t.Run(c.Image, func(t *testing.T) {
			img := decodeFile(t, filepath.Join(dir, c.Image))
			want, err := os.ReadFile(filepath.Join(dir, c.Decoded.File))
			if err != nil {
				t.Fatal(err)
			}
			if img.Width != c.Decoded.Width || img.Height != c.Decoded.Height {
				t.Fatalf("Decode = %d x %d, want %d x %d", img.Width, img.Height, c.Decoded.Width, c.Decoded.Height)
			}
			tol, off := 0, 0
			if filepath.Ext(c.Image) == ".jpg" {
				tol = 1
			}
			for i := range want {
				d := int(img.Pix[i]) - int(want[i])
				if d != 0 {
					off++
				}
				if d > tol || d < -tol {
					t.Fatalf("pixel byte %d = %d, want %d (tolerance %d)", i, img.Pix[i], want[i], tol)
				}
			}
			if tol > 0 && off > len(want)/20 {
				t.Errorf("%d of %d bytes off by one; more than 5%%", off, len(want))
			}
		})
	}
}

// TestFixturePreprocess feeds stb_image's exact pixels (the .rgb files) to
// Preprocess and wants the reference's encoder input bit for bit.
func TestFixturePreprocess(t *testing.T) {
	for _, pair := range pairs {
		dir, ref := loadRef(t, pair)
		m, err := Open(filepath.Join(dir, ref.MMProj))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for _, c := range ref.Cases {
			t.Run(pair+"/"+c.Image, func(t *testing.T) {
				pix, err := os.ReadFile(filepath.Join(dir, c.Decoded.File))
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.Preprocess(&Image{Width: c.Decoded.Width, Height: c.Decoded.Height, Pix: pix})
				if err != nil {
					t.Fatal(err)
				}
				want := readF32(t, filepath.Join(dir, c.Preprocessed.File))
				if len(got) != len(want) {
					t.Fatalf("Preprocess gave %d values, want %d", len(got), len(want))
				}
				bad := 0
				for i := range want {
					if got[i] != want[i] {
						if bad < 5 {
							S := m.P.ImageSize
							t.Errorf("value %d (plane %d, y %d, x %d) = %g, want %g", i, i/(S*S), i%(S*S)/S, i%S, got[i], want[i])
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%d of %d values differ", bad, len(want))
				}
			})
		}
	}
}

// maxAbsDiff returns the largest |a[i] - b[i]|.
func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// TestFixtureEncodeCPU runs the CPU reference encoder on the reference's
// preprocessed input and compares the image embeddings with the
// reference's (Vulkan) ones.
func TestFixtureEncodeCPU(t *testing.T) {
	for _, pair := range pairs {
		dir, ref := loadRef(t, pair)
		m, err := Open(filepath.Join(dir, ref.MMProj))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for _, c := range ref.Cases {
			t.Run(pair+"/"+c.Image, func(t *testing.T) {
				in := readF32(t, filepath.Join(dir, c.Preprocessed.File))
				got, err := m.EncodeCPU(in)
				if err != nil {
					t.Fatal(err)
				}
				want := readF32(t, filepath.Join(dir, c.ImageEmbd.File))
				if len(got) != len(want) {
					t.Fatalf("EncodeCPU gave %d values, want %d", len(got), len(want))
				}
				d := maxAbsDiff(got, want)
				t.Logf("max |CPU reference - reference| = %.4f (reference's own CPU backend: %.4f, its f64 forward: %.4f)", d, c.ImageEmbd.CPUDiff, c.ImageEmbd.NumpyDif)
				if d > cpuEmbdTol {
					t.Errorf("embeddings differ by %.4f, more than %.3f", d, cpuEmbdTol)
				}
			})
		}
	}
}

// cpuEmbdTol bounds |our embeddings - the reference's|: the README measures
// its f64 forward pass within 0.045 of them (F16 rounding in the reference),
// its CPU backend within 0.044.
const cpuEmbdTol = 0.06

// TestFixtureEncodeGPU runs the encoder on the GPU on the reference's
// preprocessed input: it must agree with our CPU reference (f32 kernels vs
// float64; the same f16 weights) and, like it, with the reference's
// embeddings.
func TestFixtureEncodeGPU(t *testing.T) {
	dev := vktest.Open(t, vk.Options{})
	for _, pair := range pairs {
		dir, ref := loadRef(t, pair)
		m, err := Open(filepath.Join(dir, ref.MMProj))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		u, err := NewGPU(dev, m, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		for _, c := range ref.Cases {
			t.Run(pair+"/"+c.Image, func(t *testing.T) {
				in := readF32(t, filepath.Join(dir, c.Preprocessed.File))
				got, err := u.Encode(in)
				if err != nil {
					t.Fatal(err)
				}
				vktest.Check(t, dev)
				cpu, err := m.EncodeCPU(in)
				if err != nil {
					t.Fatal(err)
				}
				want := readF32(t, filepath.Join(dir, c.ImageEmbd.File))
				dc, dr := maxAbsDiff(got, cpu), maxAbsDiff(got, want)
				t.Logf("max |GPU - CPU reference| = %.5f, |GPU - reference| = %.4f", dc, dr)
				if dc > gpuCPUTol {
					t.Errorf("GPU and CPU reference differ by %.5f, more than %g", dc, gpuCPUTol)
				}
				if dr > cpuEmbdTol {
					t.Errorf("GPU and reference differ by %.4f, more than %g", dr, cpuEmbdTol)
				}
			})
		}
	}
}

// gpuCPUTol bounds |GPU - CPU reference| on embeddings of rms 1-3: f32
// accumulation over a few thousand terms per value.
const gpuCPUTol = 2e-3
