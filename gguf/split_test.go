package gguf

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// splitTensor is a tensor of the split tests: F32 data of n values.
type splitTensor struct {
	name string
	data []byte
}

// writeSplitModel writes tensors as one whole file (whole.gguf) and split
// into parts as the reference's gguf-split does (model-0000i-of-0000n.gguf:
// the metadata in the first part, split.no/count/tensors.count in every
// part, cuts[i] the first tensor of part i+1). edit may change a part's
// writer before it is written. It returns the first part's path.
func writeSplitModel(t *testing.T, dir string, tensors []splitTensor, cuts []int, edit func(part int, w *Writer)) string {
	t.Helper()
	add := func(w *Writer, ts []splitTensor) {
		for _, x := range ts {
			if err := w.AddTensor(x.name, TypeF32, []uint64{uint64(len(x.data) / 4)}, x.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	meta := func(w *Writer) {
		w.MustSet("general.architecture", "llama")
		w.MustSet("llama.block_count", uint32(2))
	}
	whole := NewWriter()
	meta(whole)
	add(whole, tensors)
	if err := whole.WriteFile(filepath.Join(dir, "whole.gguf")); err != nil {
		t.Fatal(err)
	}
	bounds := append(append([]int{0}, cuts...), len(tensors))
	n := len(bounds) - 1
	for i := range n {
		w := NewWriter()
		if i == 0 {
			meta(w)
		}
		w.MustSet(KeySplitNo, uint16(i))
		w.MustSet(KeySplitCount, uint16(n))
		w.MustSet(KeySplitTensors, int32(len(tensors)))
		add(w, tensors[bounds[i]:bounds[i+1]])
		if edit != nil {
			edit(i, w)
		}
		if err := w.WriteFile(SplitPath(filepath.Join(dir, "model"), i, n)); err != nil {
			t.Fatal(err)
		}
	}
	return SplitPath(filepath.Join(dir, "model"), 0, n)
}

func splitTensors(r *rand.Rand, n int) []splitTensor {
	var ts []splitTensor
	for i := range n {
		b := make([]byte, 4*(8+r.IntN(40)))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		ts = append(ts, splitTensor{fmt.Sprintf("blk.%d.w", i), b})
	}
	return ts
}

// TestOpenSplit opens a model split in three parts from its first part:
// the tensors, their bytes and the metadata equal the whole file's.
func TestOpenSplit(t *testing.T) {
	dir := t.TempDir()
	ts := splitTensors(rand.New(rand.NewPCG(1, 2)), 5)
	first := writeSplitModel(t, dir, ts, []int{2, 3}, nil)
	if filepath.Base(first) != "model-00001-of-00003.gguf" {
		t.Fatalf("first part %s", first)
	}
	f, err := Open(first)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	whole, err := Open(filepath.Join(dir, "whole.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	if f.Parts != 3 || whole.Parts != 1 {
		t.Errorf("parts %d and %d, want 3 and 1", f.Parts, whole.Parts)
	}
	var size int64
	for i := range 3 {
		st, err := os.Stat(SplitPath(filepath.Join(dir, "model"), i, 3))
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	if f.Size != size {
		t.Errorf("size %d, want the parts' %d", f.Size, size)
	}
	if a, err := f.Architecture(); err != nil || a != "llama" {
		t.Errorf("architecture %q (%v), want the first part's llama", a, err)
	}
	if len(f.Tensors) != len(ts) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(ts))
	}
	for i, want := range ts {
		ti, ok := f.Tensor(want.name)
		if !ok || f.Tensors[i].Name != want.name {
			t.Fatalf("tensor %d: %q (found by name %v), want %q", i, f.Tensors[i].Name, ok, want.name)
		}
		got, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		wt, _ := whole.Tensor(want.name)
		wd, _ := whole.TensorData(wt)
		if !bytes.Equal(got, want.data) || !bytes.Equal(got, wd) {
			t.Errorf("tensor %s: bytes differ from the whole file's", want.name)
		}
	}
}

// TestOpenSplitErrors: a missing or foreign part, a part opened alone, a
// wrong tensor count and a tensor in two parts are errors naming the file.
func TestOpenSplitErrors(t *testing.T) {
	ts := splitTensors(rand.New(rand.NewPCG(3, 4)), 4)
	for _, c := range []struct {
		name string
		edit func(part int, w *Writer)
		open func(dir, first string) string // the file to open
		want string
	}{
		{"missing part", nil, func(dir, first string) string {
			os.Remove(SplitPath(filepath.Join(dir, "model"), 2, 3))
			return first
		}, "part 3 of 3"},
		{"second part alone", nil, func(dir, first string) string { return SplitPath(filepath.Join(dir, "model"), 1, 3) }, "part 2 of a split model: open its first part"},
		{"wrong split.no", func(part int, w *Writer) {
			if part == 2 {
				w.MustSet(KeySplitNo, uint16(1))
			}
		}, nil, "want part 2 of 3"},
		{"tensor count", func(part int, w *Writer) {
			if part == 0 {
				w.MustSet(KeySplitTensors, int32(7))
			}
		}, nil, "split.tensors.count = 7, but its 3 parts hold 4 tensors"},
		{"tensor twice", func(part int, w *Writer) {
			if part == 2 {
				w.AddTensor(ts[0].name, TypeF32, []uint64{uint64(len(ts[0].data) / 4)}, ts[0].data)
			}
		}, nil, "is in an earlier part too"},
		{"renamed first part", nil, func(dir, first string) string {
			to := filepath.Join(dir, "renamed.gguf")
			os.Rename(first, to)
			return to
		}, "not named PREFIX-00001-of-00003.gguf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			first := writeSplitModel(t, dir, ts, []int{1, 3}, c.edit)
			path := first
			if c.open != nil {
				path = c.open(dir, first)
			}
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("opened %s, want an error with %q", path, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}
