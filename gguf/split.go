package gguf

import (
	"fmt"
	"path/filepath"
	"regexp"
)

// The keys of a split model's parts (the reference's gguf-split): each
// part's index from 0, the number of parts, and (in every part) the
// tensors of all of them.
const (
	KeySplitNo      = "split.no"
	KeySplitCount   = "split.count"
	KeySplitTensors = "split.tensors.count"
)

// maxParts bounds split.count: the reference's names have five digits.
const maxParts = 99999

// splitName matches a part's file name: PREFIX-00001-of-00003.gguf.
var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// SplitPath returns the file name of part i (from 0) of a model split into
// n parts whose files start with prefix, as the reference names them.
func SplitPath(prefix string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, n)
}

// openParts opens the other parts of a split model whose first part f was
// opened from name, and takes their tensors; nothing for a whole model.
func (f *File) openParts(name string) error {
	if !f.Has(KeySplitCount) {
		return nil
	}
	n, err := f.Int(KeySplitCount)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if n < 1 || n > maxParts {
		return fmt.Errorf("%s: %s = %d, want 1..%d", name, KeySplitCount, n, maxParts)
	}
	if no, err := f.Int(KeySplitNo); err != nil || no != 0 {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return fmt.Errorf("%s: part %d of a split model: open its first part", name, no+1)
	}
	if n == 1 {
		return f.checkSplitTensors(name)
	}
	m := splitName.FindStringSubmatch(filepath.Base(name))
	if m == nil || m[3] != fmt.Sprintf("%05d", n) {
		return fmt.Errorf("%s: the first of %d parts of a split model, but not named PREFIX-00001-of-%05d.gguf, so its other parts cannot be found", name, n, n)
	}
	prefix := filepath.Join(filepath.Dir(name), m[1])
	for i := 1; i < int(n); i++ {
		path := SplitPath(prefix, i, int(n))
		p, err := openOne(path)
		if err != nil {
			return fmt.Errorf("gguf: part %d of %d of %s: %w", i+1, n, name, err)
		}
		f.parts = append(f.parts, p)
		no, err1 := p.Int(KeySplitNo)
		cnt, err2 := p.Int(KeySplitCount)
		switch {
		case err1 != nil || err2 != nil:
			return fmt.Errorf("%s: not a part of a split model: %w", path, firstErr(err1, err2))
		case no != int64(i) || cnt != n:
			return fmt.Errorf("%s: %s %d and %s %d, want part %d of %d", path, KeySplitNo, no, KeySplitCount, cnt, i, n)
		}
		f.Size += p.Size
		for _, t := range p.Tensors {
			if _, dup := f.tensorIndex[t.Name]; dup {
				return fmt.Errorf("%s: tensor %q is in an earlier part too", path, t.Name)
			}
			t.part = i
			f.tensorIndex[t.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, t)
		}
	}
	f.Parts = int(n)
	return f.checkSplitTensors(name)
}

// checkSplitTensors checks the tensors found against split.tensors.count.
func (f *File) checkSplitTensors(name string) error {
	want, err := f.Int(KeySplitTensors)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if want != int64(len(f.Tensors)) {
		return fmt.Errorf("%s: %s = %d, but its %d parts hold %d tensors", name, KeySplitTensors, want, f.Parts, len(f.Tensors))
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
