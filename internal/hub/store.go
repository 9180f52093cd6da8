package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The store in Dir holds models/{owner}/{repo}/{file}, per pulled model
// manifests/{owner}/{repo}/{QUANT}.json, and the (empty) lock files of
// the downloads in locks/.

// maxManifest bounds a manifest file read back.
const maxManifest = 1 << 20

func (c *Client) manifestDir(repo string) string {
	return filepath.Join(c.Dir, "manifests", filepath.FromSlash(repo))
}

func (c *Client) writeManifest(m *Model) error {
	dir := c.manifestDir(m.Repo)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, m.Quant+".json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, m.Quant+".json"))
}

func (c *Client) readManifest(name string) (*Model, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var m Model
	dec := json.NewDecoder(&limitedReader{f, maxManifest})
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest %s: %v", name, err)
	}
	if len(m.Files) == 0 || m.Repo == "" {
		return nil, fmt.Errorf("manifest %s: no files", name)
	}
	for _, f := range m.all() {
		if err := checkPath(f.Path); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", name, err)
		}
	}
	m.dir = c.Dir
	return &m, nil
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("over 1 MiB")
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.f.Read(b)
	l.n -= int64(n)
	return n, err
}

// manifests returns the stored models of repo.
func (c *Client) manifests(repo string) []*Model {
	names, _ := filepath.Glob(filepath.Join(c.manifestDir(repo), "*.json"))
	var out []*Model
	for _, n := range names {
		if m, err := c.readManifest(n); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// knownHashes maps the files of repo that manifests record to their
// SHA-256.
func (c *Client) knownHashes(repo string) map[string]string {
	known := map[string]string{}
	for _, m := range c.manifests(repo) {
		for _, f := range m.all() {
			known[f.Path] = f.SHA256
		}
	}
	return known
}

// Cached returns ref's model from the store, without the network: the
// manifest of ref's quant, or with none given that of the default quant,
// else the repository's only stored one. Each file must be present with
// its size.
func (c *Client) Cached(ref Ref) (*Model, error) {
	stored := c.manifests(ref.Repo)
	var m *Model
	want := ref.Quant
	for _, s := range stored {
		switch {
		case ref.File != "":
			if s.Files[0].Path == ref.File {
				m = s
			}
		case want != "" && s.Quant == want, want == "" && s.Quant == DefaultQuant:
			m = s
		}
	}
	if m == nil && ref.Quant == "" && ref.File == "" && len(stored) == 1 {
		m = stored[0]
	}
	if m == nil {
		what := ref.String()
		if ref.File != "" {
			what = ref.Repo + " " + ref.File
		}
		if len(stored) > 0 {
			var qs []string
			for _, s := range stored {
				qs = append(qs, s.Quant)
			}
			return nil, fmt.Errorf("%s is not in the store %s (it holds %s of that repository); vkllm pull %s gets it", what, c.Dir, strings.Join(qs, ", "), ref)
		}
		return nil, fmt.Errorf("%s is not in the store %s; vkllm pull %s gets it", what, c.Dir, ref)
	}
	for _, f := range m.all() {
		st, err := os.Stat(m.local(f))
		if err != nil || st.Size() != f.Size {
			return nil, fmt.Errorf("%s: stored file %s is missing or incomplete; vkllm pull %s gets it again", m.Name(), m.local(f), m.Name())
		}
	}
	return m, nil
}

// List returns the stored models, by name.
func (c *Client) List() ([]*Model, error) {
	root := filepath.Join(c.Dir, "manifests")
	var out []*Model
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		m, err := c.readManifest(p)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Remove deletes name's model from the store: its manifest and the files
// no other stored model of the repository uses (with any partial
// download of them). A name without a quant is the repository's only
// stored model. It returns the files deleted.
func (c *Client) Remove(name string) ([]string, error) {
	ref, err := ParseRef(name)
	if err != nil {
		return nil, err
	}
	stored := c.manifests(ref.Repo)
	var m *Model
	for _, s := range stored {
		if s.Quant == ref.Quant || ref.Quant == "" && len(stored) == 1 {
			m = s
		}
	}
	if m == nil {
		if len(stored) > 1 && ref.Quant == "" {
			var names []string
			for _, s := range stored {
				names = append(names, s.Name())
			}
			return nil, fmt.Errorf("%s: the store holds several of its models (%s); name one", name, strings.Join(names, ", "))
		}
		return nil, fmt.Errorf("%s is not in the store %s", name, c.Dir)
	}
	used := map[string]bool{}
	for _, s := range stored {
		if s.Quant != m.Quant {
			for _, f := range s.all() {
				used[f.Path] = true
			}
		}
	}
	if err := os.Remove(filepath.Join(c.manifestDir(m.Repo), m.Quant+".json")); err != nil {
		return nil, err
	}
	var removed []string
	for _, f := range m.all() {
		if used[f.Path] {
			continue
		}
		p := m.local(f)
		if err := os.Remove(p); err == nil {
			removed = append(removed, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		os.Remove(p + ".part")
	}
	// Empty folders go too, up to the store's.
	for _, top := range []string{filepath.Join(c.Dir, "models"), filepath.Join(c.Dir, "manifests")} {
		pruneEmpty(top, filepath.Join(top, filepath.FromSlash(m.Repo)))
	}
	for _, f := range m.all() {
		pruneEmpty(filepath.Join(c.Dir, "models"), filepath.Dir(m.local(f)))
	}
	return removed, nil
}

// pruneEmpty removes dir and its parents below top while they are empty.
func pruneEmpty(top, dir string) {
	for dir != top && strings.HasPrefix(dir, top+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}
