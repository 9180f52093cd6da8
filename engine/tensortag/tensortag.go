// Package tensortag reads the struct tags with which an architecture
// declares its weights: one *Tensor field per GGUF tensor, tagged with the
// tensor's name, its shape over the model's hyper-parameters, the
// architectures that need it when it is optional, and how a generator of
// test models fills it. The engine binds and checks a file's tensors by
// these tags; tools/modelgen writes models from the same tags.
//
// The tags of a field:
//
//	gguf:"attn_q.bias,optional"  the tensor's name; ",optional": it may be absent.
//	                             gguf:"blk" marks the slice of block structs,
//	                             whose tensors are named "blk.N." + name.
//	shape:"E,q"                  its dimensions, fastest-varying first (see Shape).
//	need:"qwen2"                 the architectures (of those sharing the struct)
//	                             that require an optional tensor.
//	gen:"untied,std=1"           generator choices (see Gen).
package tensortag

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// names are the hyper-parameters a shape expression may use (see Env).
var names = []string{"E", "V", "F", "D", "q", "kv", "qv", "kvv", "R", "C", "X", "FX", "FS", "H", "SC", "SK", "SH", "SD", "SV"}

// Env gives the names a shape expression may use their values for one
// model:
//
//	E embedding width, V vocabulary, F feed-forward width, D head width,
//	q query width (heads*D), kv key width (KV heads*D), qv and kvv the
//	value widths (heads and KV heads times the value head width),
//	R rotated dimensions, C training context, X experts, FX an expert's
//	feed-forward width, FS a shared expert's, H attention heads; a
//	hybrid model's recurrent layers: SC convolved channels (q|k|v), SK
//	convolution taps, SH value heads, SD a head's width, SV the value
//	width (SH*SD).
//
// A shape whose name has no value in the Env fails to evaluate.
type Env map[string]int

// Decl is one tensor a struct declares: the tags of one *Tensor field.
type Decl struct {
	Name     string // GGUF name; in a block without the "blk.N." prefix
	Block    bool   // the field is in the block struct
	Optional bool
	Shape    string // the shape tag
	Need     string // the need tag: comma-separated architectures
	Gen      string // the gen tag
}

// Needed reports whether arch requires the tensor: it is not optional, or
// its need tag names arch.
func (d Decl) Needed(arch string) bool {
	return !d.Optional || slices.Contains(strings.Split(d.Need, ","), arch)
}

// List returns the tensors the struct type t declares, in field order
// (the block struct's where its slice field stands), and checks that
// every tag parses.
func List(t reflect.Type) ([]Decl, error) {
	return list(t, false)
}

func list(t reflect.Type, block bool) ([]Decl, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("tensortag: %v is not a struct", t)
	}
	var out []Decl
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("gguf")
		if !ok {
			continue
		}
		if tag == "blk" {
			if block || f.Type.Kind() != reflect.Slice {
				return nil, fmt.Errorf("tensortag: field %s: gguf:\"blk\" is for one slice of block structs", f.Name)
			}
			ds, err := list(f.Type.Elem(), true)
			if err != nil {
				return nil, err
			}
			out = append(out, ds...)
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		d := Decl{Name: name, Block: block, Optional: opt == "optional", Shape: f.Tag.Get("shape"), Need: f.Tag.Get("need"), Gen: f.Tag.Get("gen")}
		if opt != "" && opt != "optional" {
			return nil, fmt.Errorf("tensortag: field %s: gguf option %q (want optional)", f.Name, opt)
		}
		if d.Need != "" && !d.Optional {
			return nil, fmt.Errorf("tensortag: field %s: a need tag on a required tensor", f.Name)
		}
		if _, err := ParseShape(d.Shape); err != nil {
			return nil, fmt.Errorf("tensortag: field %s: %w", f.Name, err)
		}
		if _, err := ParseGen(d.Gen); err != nil {
			return nil, fmt.Errorf("tensortag: field %s: %w", f.Name, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Dim is one dimension of a Shape: exactly Expr, at least Expr, or any
// size.
type Dim struct {
	Expr    string // a sum of products and quotients of integers and names
	AtLeast bool   // ">=Expr"
	Any     bool   // "*" or "*N"
	// Gen is an Any dimension's size in generated models ("*N"); 0 ("*",
	// last dimensions only) leaves the dimension out.
	Gen int
}

// Shape is a parsed shape tag: the dimensions, fastest-varying first, of
// comma-separated Dims, for example "E,q+2*kv" (a matrix of rows of E
// values), "D" (a vector), "E,>=C" (at least C rows), "E,*2" (any number
// of rows, 2 when generated), "E,F,X" (one E x F matrix per expert). A
// tensor of one dimension is a vector: norms and biases, kept in F32.
type Shape []Dim

// ParseShape parses a shape tag.
func ParseShape(s string) (Shape, error) {
	if s == "" {
		return nil, fmt.Errorf("no shape tag")
	}
	var out Shape
	for _, f := range strings.Split(s, ",") {
		var d Dim
		switch {
		case strings.HasPrefix(f, "*"):
			d.Any = true
			if n := f[1:]; n != "" {
				v, err := strconv.Atoi(n)
				if err != nil || v <= 0 {
					return nil, fmt.Errorf("shape %q: dimension %q (want *, or * and a positive size)", s, f)
				}
				d.Gen = v
			}
		case strings.HasPrefix(f, ">="):
			d.AtLeast, d.Expr = true, f[2:]
		default:
			d.Expr = f
		}
		if !d.Any {
			if _, err := eval(d.Expr, nil); err != nil {
				return nil, fmt.Errorf("shape %q: %w", s, err)
			}
		}
		if len(out) > 0 && out[len(out)-1].Any && out[len(out)-1].Gen == 0 && !(d.Any && d.Gen == 0) {
			return nil, fmt.Errorf("shape %q: a dimension \"*\" left out of generated models must be last", s)
		}
		out = append(out, d)
	}
	if len(out) > 3 {
		return nil, fmt.Errorf("shape %q: more than 3 dimensions", s)
	}
	return out, nil
}

// Check reports whether dims (fastest-varying first) fit s, missing
// trailing dimensions counting as 1, and returns the wanted dimensions as
// text ("[64 1]", "[64 >=2048]") for an error.
func (s Shape) Check(dims []uint64, env Env) (ok bool, want string, err error) {
	n := max(len(s), 2)
	parts := make([]string, n)
	ok = len(dims) <= n
	for i := range n {
		got := uint64(1)
		if i < len(dims) {
			got = dims[i]
		}
		switch {
		case i >= len(s):
			parts[i] = "1"
			ok = ok && got == 1
		case s[i].Any:
			parts[i] = "*"
		default:
			v, err := eval(s[i].Expr, env)
			if err != nil {
				return false, "", err
			}
			parts[i] = strconv.Itoa(v)
			if s[i].AtLeast {
				parts[i] = ">=" + parts[i]
				ok = ok && got >= uint64(v)
			} else {
				ok = ok && got == uint64(v)
			}
		}
	}
	return ok, "[" + strings.Join(parts, " ") + "]", nil
}

// Generate returns the dimensions of a generated tensor of shape s: each
// Expr's value (at least: exactly), an Any dimension's Gen size, or none.
func (s Shape) Generate(env Env) ([]int, error) {
	var out []int
	for _, d := range s {
		switch {
		case d.Any && d.Gen == 0:
		case d.Any:
			out = append(out, d.Gen)
		default:
			v, err := eval(d.Expr, env)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// eval evaluates a sum of terms, each integers and names multiplied and
// divided left to right. With env nil it only checks the syntax and that
// every name is one of names.
func eval(expr string, env Env) (int, error) {
	if expr == "" {
		return 0, fmt.Errorf("empty dimension")
	}
	sum := 0
	for _, term := range strings.Split(expr, "+") {
		if term == "" {
			return 0, fmt.Errorf("dimension %q has an empty term", expr)
		}
		v, op := 1, byte('*')
		for term != "" {
			i := strings.IndexAny(term, "*/")
			if i < 0 {
				i = len(term)
			}
			f := term[:i]
			n, err := strconv.Atoi(f)
			if err != nil {
				if !slices.Contains(names, f) {
					return 0, fmt.Errorf("dimension %q: %q is not a number or a name (%s)", expr, f, strings.Join(names, " "))
				}
				if env != nil {
					var ok bool
					if n, ok = env[f]; !ok {
						return 0, fmt.Errorf("dimension %q: no value for %s", expr, f)
					}
				}
			}
			if op == '*' {
				v *= n
			} else if env != nil {
				if n == 0 {
					return 0, fmt.Errorf("dimension %q: division by zero", expr)
				}
				v /= n
			}
			if i == len(term) {
				break
			}
			op, term = term[i], term[i+1:]
			if term == "" {
				return 0, fmt.Errorf("dimension %q ends in an operator", expr)
			}
		}
		sum += v
	}
	return sum, nil
}

// Gen is a parsed gen tag: comma-separated choices for generated models.
//
//	always, untied, rope_freqs, rerank  when to write an optional tensor
//	    that no need tag asks for: always, unless the output is tied to
//	    the embedding, or when the generator's RopeFreqs or Rerank option
//	    is set. Without one an optional tensor is written only where it is
//	    needed.
//	recurrent, attention  in a hybrid model's block: only in its
//	    recurrent (Gated DeltaNet) layers, or only in its full-attention
//	    layers.
//	std=S       normal values of standard deviation S (mean 0) instead of
//	    the default rule.
//	divisors=T  RoPE frequency divisors rising from 1 to T instead of
//	    random values.
type Gen struct {
	When     string
	Std      float64 // 0: the default rule
	Divisors float64 // 0: random values
}

// whens are the conditions a gen tag may name.
var whens = []string{"always", "untied", "rope_freqs", "rerank", "recurrent", "attention"}

// ParseGen parses a gen tag.
func ParseGen(s string) (Gen, error) {
	var g Gen
	if s == "" {
		return g, nil
	}
	for _, f := range strings.Split(s, ",") {
		key, val, isKV := strings.Cut(f, "=")
		switch {
		case !isKV && slices.Contains(whens, f) && g.When == "":
			g.When = f
		case isKV && (key == "std" || key == "divisors"):
			v, err := strconv.ParseFloat(val, 64)
			if err != nil || v <= 0 {
				return g, fmt.Errorf("gen %q: %s wants a positive number", s, key)
			}
			if key == "std" {
				g.Std = v
			} else {
				g.Divisors = v
			}
		default:
			return g, fmt.Errorf("gen %q: unknown choice %q (want one of %s, std=S or divisors=T)", s, f, strings.Join(whens, ", "))
		}
	}
	return g, nil
}
