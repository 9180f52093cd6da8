// Package hub gets GGUF models from a Hugging Face hub into a local store:
// it lists a repository's files through the hub's HTTP API, picks the
// quantization asked for (as llama-server's -hf user/repo:quant does),
// downloads with resumption and checks each file's SHA-256 against the
// one the hub publishes, and keeps a manifest per pulled model so that it
// can be served by name, listed and removed without the network.
package hub

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

// DefaultQuant is the quantization picked when a reference names none, as
// llama-server picks it; a repository without it gives its first model file.
const DefaultQuant = "Q4_K_M"

// Ref names a model of a hub repository: "owner/repo[:quant]".
type Ref struct {
	Repo string // owner/name
	// Quant is the quantization tag, upper case ("" for the default).
	Quant string
	// File is a file of the repository to take instead of a quantization
	// (llama-server's --hf-file).
	File string
}

// String is the reference as ParseRef reads it.
func (r Ref) String() string {
	if r.Quant == "" {
		return r.Repo
	}
	return r.Repo + ":" + r.Quant
}

var (
	namePart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$`)
	tagRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// ParseRef reads "owner/repo[:quant]". The quant is matched without regard
// to case, so it is kept upper case; "latest" is the default.
func ParseRef(s string) (Ref, error) {
	repo, quant, _ := strings.Cut(s, ":")
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || !namePart.MatchString(owner) || !namePart.MatchString(name) || strings.Contains(repo, "..") {
		return Ref{}, fmt.Errorf("model %q: want a hub repository owner/name[:quant], such as ggml-org/gemma-3-1b-it-GGUF:Q4_K_M", s)
	}
	if quant != "" && !tagRe.MatchString(quant) {
		return Ref{}, fmt.Errorf("model %q: quantization %q is not a tag (letters, digits, _ . -)", s, quant)
	}
	quant = strings.ToUpper(quant)
	if quant == "LATEST" {
		quant = ""
	}
	return Ref{Repo: repo, Quant: quant}, nil
}

// LooksLikeRef reports whether s reads as a hub reference rather than a
// file path: owner/name[:quant] with no other slash and no .gguf suffix.
func LooksLikeRef(s string) bool {
	if strings.HasSuffix(strings.ToLower(s), ".gguf") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") {
		return false
	}
	_, err := ParseRef(s)
	return err == nil
}

// quantToken matches a quantization name as GGUF file names spell it.
var quantToken = regexp.MustCompile(`(?i)^(i?q[1-8](_[a-z0-9]+)*|bf16|f16|f32|fp16|mxfp4(_moe)?)$`)

// tokens splits a file path at the separators quantization names sit
// between (/ . - and space), in lower case.
func tokens(p string) []string {
	return strings.FieldsFunc(strings.ToLower(p), func(r rune) bool { return r == '/' || r == '.' || r == '-' || r == ' ' })
}

// hasQuant reports whether file path p is of quantization q: q's tokens
// appear in a row among p's ("Q4_K" is not "Q4_K_M"; "UD-Q4_K_XL" matches
// "model-UD-Q4_K_XL.gguf").
func hasQuant(p, q string) bool {
	pt, qt := tokens(p), tokens(q)
	for i := 0; i+len(qt) <= len(pt); i++ {
		match := len(qt) > 0
		for j := range qt {
			if pt[i+j] != qt[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// quantOf returns the last quantization name in p, upper case ("" if none).
func quantOf(p string) string {
	t := tokens(strings.TrimSuffix(strings.ToLower(p), ".gguf"))
	for i := len(t) - 1; i >= 0; i-- {
		if quantToken.MatchString(t[i]) {
			if i > 0 && t[i-1] == "ud" { // unsloth's dynamic quants
				return "UD-" + strings.ToUpper(t[i])
			}
			return strings.ToUpper(t[i])
		}
	}
	return ""
}

// splitPart matches a split GGUF's part: name-00001-of-00003.gguf.
var splitPart = regexp.MustCompile(`(?i)^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// isMMProj reports whether p is a vision projector file.
func isMMProj(p string) bool { return strings.Contains(strings.ToLower(path.Base(p)), "mmproj") }

// entry is a file of a repository as the hub lists it.
type entry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

func (e entry) file() File {
	f := File{Path: e.Path, Size: e.Size}
	if e.LFS != nil {
		f.SHA256 = strings.ToLower(e.LFS.OID)
		if e.LFS.Size > 0 {
			f.Size = e.LFS.Size
		}
	}
	return f
}

// pick chooses ref's model files (the parts of a split model, in order)
// and its vision projector among a repository's files.
func pick(entries []entry, ref Ref) (files []File, mmproj *File, quant string, err error) {
	var models, projs []File
	for _, e := range entries {
		if e.Type != "" && e.Type != "file" || !strings.HasSuffix(strings.ToLower(e.Path), ".gguf") {
			continue
		}
		if isMMProj(e.Path) {
			projs = append(projs, e.file())
		} else {
			models = append(models, e.file())
		}
	}
	sort.Slice(models, func(i, j int) bool { return models[i].Path < models[j].Path })
	sort.Slice(projs, func(i, j int) bool { return projs[i].Path < projs[j].Path })
	if len(models) == 0 {
		return nil, nil, "", fmt.Errorf("%s has no GGUF model files", ref.Repo)
	}
	var first *File
	switch {
	case ref.File != "":
		for i := range models {
			if models[i].Path == ref.File {
				first = &models[i]
				break
			}
		}
		if first == nil {
			return nil, nil, "", fmt.Errorf("%s has no model file %q; its GGUF files: %s", ref.Repo, ref.File, strings.Join(paths(models), ", "))
		}
		quant = quantOf(first.Path)
	default:
		quant = ref.Quant
		if quant == "" {
			quant = DefaultQuant
		}
		// The shortest matching name: "model-Q4_K_M" before "model-UD-Q4_K_M".
		for i := range models {
			if hasQuant(models[i].Path, quant) && (first == nil || len(models[i].Path) < len(first.Path)) {
				first = &models[i]
			}
		}
		if first == nil && ref.Quant == "" {
			first = &models[0]
			quant = quantOf(first.Path)
		}
		if first == nil {
			return nil, nil, "", fmt.Errorf("%s has no %s file; its quantizations: %s", ref.Repo, ref.Quant, strings.Join(quants(models), ", "))
		}
	}
	if quant == "" {
		quant = strings.ToUpper(strings.TrimSuffix(path.Base(first.Path), path.Ext(first.Path)))
	}
	files = []File{*first}
	if m := splitPart.FindStringSubmatch(first.Path); m != nil {
		files, err = splitFiles(models, m[1], m[3])
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s: %w", ref.Repo, err)
		}
	}
	if len(projs) > 0 {
		mmproj = pickProjector(projs, quant)
	}
	return files, mmproj, quant, nil
}

// splitFiles returns the parts prefix-0000i-of-count.gguf in order, all of
// them or an error naming the first missing.
func splitFiles(models []File, prefix, count string) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range models {
		byPath[f.Path] = f
	}
	var n int
	fmt.Sscanf(count, "%d", &n)
	files := make([]File, 0, n)
	for i := 1; i <= n; i++ {
		p := fmt.Sprintf("%s-%05d-of-%s.gguf", prefix, i, count)
		f, ok := byPath[p]
		if !ok {
			return nil, fmt.Errorf("split model %s-*-of-%s.gguf lacks part %s", prefix, count, p)
		}
		files = append(files, f)
	}
	return files, nil
}

// pickProjector chooses the projector of quantization quant, else the
// F16 one, else BF16, else Q8_0, else the first.
func pickProjector(projs []File, quant string) *File {
	for _, q := range []string{quant, "F16", "BF16", "Q8_0"} {
		for i := range projs {
			if hasQuant(projs[i].Path, q) {
				return &projs[i]
			}
		}
	}
	return &projs[0]
}

func paths(fs []File) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Path
	}
	return out
}

// quants lists the quantizations among files, each once, in order.
func quants(files []File) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		q := quantOf(f.Path)
		if q == "" {
			q = path.Base(f.Path)
		}
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	return out
}
