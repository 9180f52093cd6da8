package vk_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/vkllm/vkllm/shaders"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// matvecOnce runs one 7 x 24 f32 matvec (the uniform-activation variant)
// on d and returns y's bytes and the CPU's product.
func matvecOnce(t *testing.T, d *vk.Device) (got []byte, want []float32) {
	t.Helper()
	code, err := shaders.SPIRV("matvec_f32_f32_xu")
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.NewPipeline(vk.PipelineDesc{Name: "matvec_f32_f32_xu", SPIRV: code, Bindings: 3, Uniform: 1 << 1, PushSize: 36, Spec: []uint32{8, 1, 1, 1, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const rows, cols = 7, 24
	rng := rand.New(rand.NewPCG(31, 1))
	w, x := make([]float32, rows*cols), make([]float32, cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	want = make([]float32, rows)
	for r := range rows {
		for k := range cols {
			want[r] += w[r*cols+k] * x[k]
		}
	}
	f32 := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
		return b
	}
	wb, xb, yb := newBuf(t, d, 4*len(w)), newBuf(t, d, 4*len(x)), newBuf(t, d, 4*rows)
	defer wb.Close()
	defer xb.Close()
	defer yb.Close()
	if err := wb.Write(0, f32(w)); err != nil {
		t.Fatal(err)
	}
	if err := xb.Write(0, f32(x)); err != nil {
		t.Fatal(err)
	}
	push := [9]uint32{cols, rows, 1, 0, 4 * cols, 0, cols, 0, rows}
	c, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), wb.All(), xb.All(), yb.All())
	if err := c.Submit(); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, 4*rows)
	if err := yb.Read(0, got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); math.Abs(float64(g-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Errorf("y[%d] = %v, want %v", i, g, want[i])
		}
	}
	return got, want
}

// filledCache opens a device on a fresh cache folder, compiles and runs the
// matvec, saves, and returns the folder, the file's bytes and the result.
func filledCache(t *testing.T) (dir string, file, result []byte) {
	t.Helper()
	dir = t.TempDir()
	d := vktest.Open(t, vk.Options{PipelineCacheDir: dir})
	if pc := d.PipelineCache(); pc.LoadedBytes != 0 || pc.Ignored != "" || pc.Path != vk.PipelineCacheFile(dir, d.Info()) {
		t.Fatalf("PipelineCache() on an empty folder = %+v, want nothing loaded or ignored, path %s", pc, vk.PipelineCacheFile(dir, d.Info()))
	}
	result, _ = matvecOnce(t, d)
	if err := d.SavePipelineCache(); err != nil {
		t.Fatalf("SavePipelineCache: %v", err)
	}
	pc := d.PipelineCache()
	file, err := os.ReadFile(pc.Path)
	if err != nil {
		t.Fatal(err)
	}
	if pc.SavedBytes < 32 || len(file) != 56+pc.SavedBytes {
		t.Fatalf("saved %d bytes of driver data in a file of %d bytes, want at least Vulkan's 32-byte header and a file 56 bytes longer", pc.SavedBytes, len(file))
	}
	return dir, file, result
}

func TestPipelineCacheRoundTrip(t *testing.T) {
	dir, file, first := filledCache(t)
	d := vktest.Open(t, vk.Options{PipelineCacheDir: dir})
	pc := d.PipelineCache()
	if pc.LoadedBytes != len(file)-56 || pc.Ignored != "" {
		t.Errorf("PipelineCache() on the second open = %+v, want %d bytes loaded and nothing ignored", pc, len(file)-56)
	}
	again, _ := matvecOnce(t, d)
	if !bytes.Equal(first, again) {
		t.Errorf("the matvec through the loaded cache = %x, want %x as on the first device", again, first)
	}
	// Nothing new was compiled, or what was is saved: either way the file
	// still loads.
	if err := d.SavePipelineCache(); err != nil {
		t.Fatalf("SavePipelineCache: %v", err)
	}
	d3 := vktest.Open(t, vk.Options{PipelineCacheDir: dir})
	if pc := d3.PipelineCache(); pc.LoadedBytes == 0 || pc.Ignored != "" {
		t.Errorf("PipelineCache() on the third open = %+v, want data loaded", pc)
	}
}

func TestPipelineCacheIgnored(t *testing.T) {
	_, file, first := filledCache(t)
	// reseal recomputes the checksum of edited driver data, so that only
	// the edit is wrong.
	reseal := func(b []byte) []byte {
		sum := sha256.Sum256(b[56:])
		copy(b[24:56], sum[:])
		return b
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(file)) }
	for _, tc := range []struct {
		name, why string
		data      []byte
		max       int64
	}{
		{"truncated", "truncated", file[:len(file)-5], 0},
		{"header only", "not a vkllm pipeline cache", file[:40], 0},
		{"garbage", "not a vkllm pipeline cache", []byte("GGUF and more bytes than a header would hold, surely more than fifty-six"), 0},
		{"corrupt", "checksum", edit(func(b []byte) []byte { b[len(b)-1] ^= 0x5a; return b }), 0},
		{"other vendor", "another driver", edit(func(b []byte) []byte { b[56+8] ^= 1; return reseal(b) }), 0},
		{"other device", "another driver", edit(func(b []byte) []byte { b[56+12] ^= 1; return reseal(b) }), 0},
		{"other cache UUID", "another driver", edit(func(b []byte) []byte { b[56+20] ^= 0xff; return reseal(b) }), 0},
		{"other driver version", "another driver", edit(func(b []byte) []byte { b[8]++; return b }), 0},
		{"not a Vulkan cache", "no Vulkan pipeline-cache header", edit(func(b []byte) []byte { b[56+4] = 7; return reseal(b) }), 0},
		{"over the bound", "over the bound", file, int64(len(file) - 56 - 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var info vk.DeviceInfo
			{
				d := vktest.Open(t, vk.Options{})
				info = d.Info()
			}
			path := vk.PipelineCacheFile(dir, info)
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			d := vktest.Open(t, vk.Options{PipelineCacheDir: dir, PipelineCacheMaxBytes: tc.max})
			pc := d.PipelineCache()
			if pc.LoadedBytes != 0 || !strings.Contains(pc.Ignored, tc.why) {
				t.Errorf("PipelineCache() = %+v, want nothing loaded and the reason to contain %q", pc, tc.why)
			}
			got, _ := matvecOnce(t, d)
			if !bytes.Equal(got, first) {
				t.Errorf("the matvec = %x, want %x", got, first)
			}
			err := d.SavePipelineCache()
			if tc.max > 0 {
				if err == nil || !strings.Contains(err.Error(), "over the bound") {
					t.Errorf("SavePipelineCache() over the bound = %v, want an error saying so", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SavePipelineCache: %v", err)
			}
			if d2 := vktest.Open(t, vk.Options{PipelineCacheDir: dir}); d2.PipelineCache().LoadedBytes == 0 {
				t.Errorf("after a save over the ignored file, PipelineCache() = %+v, want it loaded", d2.PipelineCache())
			}
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	// Writers racing over one file while a reader reads it: the reader
	// sees one writer's whole contents each time, never a mix or a part.
	dir := t.TempDir() + "/sub"
	path := dir + "/f"
	const writers, rounds, size = 4, 20, 1 << 16
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds+rounds)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := bytes.Repeat([]byte{byte('a' + w)}, size)
			for range rounds {
				if err := vk.WriteFileAtomic(path, body[:size/2], body[size/2:]); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds {
			b, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				errs <- err
			} else if len(b) != size || bytes.Count(b, b[:1]) != size {
				errs <- fmt.Errorf("read %d bytes, %d of them %q; want %d of one writer's byte", len(b), bytes.Count(b, b[:1]), b[:1], size)
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "f" {
		t.Errorf("the folder holds %v after the writes, want only f (no temporary files left)", entries)
	}
}
