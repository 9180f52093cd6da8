package tensortag

import (
	"reflect"
	"strings"
	"testing"
)

func TestShapeCheck(t *testing.T) {
	env := Env{"E": 64, "F": 96, "D": 16, "q": 64, "kv": 32, "C": 128, "X": 4}
	cases := []struct {
		name, shape string
		dims        []uint64
		ok          bool
		want        string
	}{
		{"matrix", "E,q+2*kv", []uint64{64, 128}, true, "[64 128]"},
		{"matrix wrong rows", "E,q+2*kv", []uint64{64, 96}, false, "[64 128]"},
		{"vector", "D", []uint64{16}, true, "[16 1]"},
		{"vector of one row", "D", []uint64{16, 1}, true, "[16 1]"},
		{"vector of two rows", "D", []uint64{16, 2}, false, "[16 1]"},
		{"vector for a matrix", "E,F", []uint64{64}, false, "[64 96]"},
		{"three dims for two", "E,F", []uint64{64, 96, 1}, false, "[64 96]"},
		{"quotient", "E/2", []uint64{32}, true, "[32 1]"},
		{"product before sum", "2*F+E/4", []uint64{208}, true, "[208 1]"},
		{"at least, more", "E,>=C", []uint64{64, 512}, true, "[64 >=128]"},
		{"at least, fewer", "E,>=C", []uint64{64, 127}, false, "[64 >=128]"},
		{"any rows", "E,*2", []uint64{64, 7}, true, "[64 *]"},
		{"any rows, a vector", "E,*", []uint64{64}, true, "[64 *]"},
		{"any size", "*1", []uint64{3}, true, "[* 1]"},
		{"experts", "E,F,X", []uint64{64, 96, 4}, true, "[64 96 4]"},
		{"experts missing", "E,F,X", []uint64{64, 96}, false, "[64 96 4]"},
		{"experts too few", "E,F,X", []uint64{64, 96, 3}, false, "[64 96 4]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseShape(c.shape)
			if err != nil {
				t.Fatal(err)
			}
			ok, want, err := s.Check(c.dims, env)
			if err != nil || ok != c.ok || want != c.want {
				t.Errorf("ParseShape(%q).Check(%v) = %v, %q, %v; want %v, %q", c.shape, c.dims, ok, want, err, c.ok, c.want)
			}
		})
	}
}

func TestShapeGenerate(t *testing.T) {
	env := Env{"E": 64, "V": 300, "R": 12, "C": 128, "X": 4, "F": 96}
	for _, c := range []struct {
		shape string
		want  []int
	}{
		{"E,V", []int{64, 300}},
		{"R/2", []int{6}},
		{"E,>=C", []int{64, 128}},
		{"E,*2", []int{64, 2}},
		{"E,*", []int{64}},
		{"*1", []int{1}},
		{"E,F,X", []int{64, 96, 4}},
	} {
		s, err := ParseShape(c.shape)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Generate(env); err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseShape(%q).Generate() = %v, %v; want %v", c.shape, got, err, c.want)
		}
	}
	s, _ := ParseShape("E,X")
	if _, err := s.Generate(Env{"E": 64}); err == nil || !strings.Contains(err.Error(), "no value for X") {
		t.Errorf("Generate without X = %v, want an error naming X", err)
	}
	s, _ = ParseShape("E/D")
	if _, _, err := s.Check([]uint64{1}, Env{"E": 64, "D": 0}); err == nil {
		t.Error("E/D with D 0: no error")
	}
}

func TestParseErrors(t *testing.T) {
	for _, s := range []string{"", "E,", "e", "E,q+", "E*", "E,F,X,D", "*0", "*x", "E,*,F", ">=", "E,2**F"} {
		if _, err := ParseShape(s); err == nil {
			t.Errorf("ParseShape(%q) succeeded, want an error", s)
		}
	}
	for _, s := range []string{"sometimes", "std=0", "std=x", "divisors=-1", "always,untied", "mean=1"} {
		if _, err := ParseGen(s); err == nil {
			t.Errorf("ParseGen(%q) succeeded, want an error", s)
		}
	}
	g, err := ParseGen("untied,std=0.5,divisors=40")
	if err != nil || g != (Gen{When: "untied", Std: 0.5, Divisors: 40}) {
		t.Errorf("ParseGen = %+v, %v", g, err)
	}
}

type testBlock struct {
	Norm  *int `gguf:"attn_norm.weight" shape:"E"`
	Bias  *int `gguf:"attn_q.bias,optional" shape:"q" need:"qwen2,other"`
	Extra *int // no tag: not a tensor of the file
}

type testModel struct {
	Embd   *int        `gguf:"token_embd.weight" shape:"E,V" gen:"std=1"`
	Blocks []testBlock `gguf:"blk"`
	Out    *int        `gguf:"output.weight,optional" shape:"E,V" gen:"untied"`
}

func TestList(t *testing.T) {
	got, err := List(reflect.TypeFor[testModel]())
	if err != nil {
		t.Fatal(err)
	}
	want := []Decl{
		{Name: "token_embd.weight", Shape: "E,V", Gen: "std=1"},
		{Name: "attn_norm.weight", Block: true, Shape: "E"},
		{Name: "attn_q.bias", Block: true, Optional: true, Shape: "q", Need: "qwen2,other"},
		{Name: "output.weight", Optional: true, Shape: "E,V", Gen: "untied"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List = %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		arch string
		want bool
	}{{"qwen2", true}, {"other", true}, {"llama", false}, {"qwen", false}} {
		if got := want[2].Needed(c.arch); got != c.want {
			t.Errorf("Needed(%q) = %v, want %v", c.arch, got, c.want)
		}
	}
	if !want[1].Needed("llama") {
		t.Error("a required tensor is not Needed")
	}
	type noShape struct {
		A *int `gguf:"a.weight"`
	}
	type needRequired struct {
		A *int `gguf:"a.weight" shape:"E" need:"llama"`
	}
	type badOption struct {
		A *int `gguf:"a.weight,maybe" shape:"E"`
	}
	type badGen struct {
		A *int `gguf:"a.weight" shape:"E" gen:"often"`
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[noShape](), reflect.TypeFor[needRequired](), reflect.TypeFor[badOption](), reflect.TypeFor[badGen]()} {
		if _, err := List(typ); err == nil || !strings.Contains(err.Error(), "field A") {
			t.Errorf("List(%v) = %v, want an error naming field A", typ, err)
		}
	}
}
