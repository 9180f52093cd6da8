package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// genVocab is shared by the generation tests: a 4000-token synthetic
// vocabulary (every byte, words, JSON fragments, split UTF-8), id 2 EOG.
var genVocab = sync.OnceValues(func() (*Vocab, error) {
	return NewVocab(synthVocab(4000), []int32{2})
})

// generate samples a sentence of g: uniformly random allowed tokens for a
// random number of steps, then the tokens that bring the end closest.
func generate(t *testing.T, g *Grammar, v *Vocab, rng *rand.Rand) string {
	t.Helper()
	return generateN(t, g, v, rng, 80)
}

// generateN is generate with up to maxRandom random steps.
func generateN(t *testing.T, g *Grammar, v *Vocab, rng *rand.Rand, maxRandom int) string {
	t.Helper()
	out, err := Sample(g, v, rng, maxRandom)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compile %s: %v", schema, err)
	}
	return sch
}

func validate(sch *jsonschema.Schema, doc string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

var generationSchemas = []struct {
	name   string
	schema string
	accept []string
	reject []string
}{
	{"person", `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":12},
		"age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string"},
		"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3}},
		"required":["name","age"],"additionalProperties":false}`,
		[]string{`{"name":"Al","age":30}`, `{"name": "Al", "age": 150, "email": "a@b", "tags": ["x"]}`, `{"name":"Al","age":0,"tags":["a","b","c"]}`},
		[]string{`{"age":30,"name":"Al"}`, `{"name":"Al"}`, `{"name":"","age":1}`, `{"name":"Al","age":151}`, `{"name":"Al","age":-1}`,
			`{"name":"Al","age":1,"tags":[]}`, `{"name":"Al","age":1,"x":1}`, `{"name":"Al","age":01}`}},
	{"only optional", `{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"const":"k"}}}`,
		[]string{`{}`, `{"b":null}`, `{"a":true,"c":"k"}`, `{"a":false,"b":null,"c":"k"}`},
		[]string{`{"c":"k","a":true}`, `{,"b":null}`, `{"a":true,}`, `{"c":"x"}`}},
	{"enum const", `{"type":"object","properties":{"color":{"enum":["red","green",42,null,{"a":[1]}]},"v":{"const":"<x>"}},"required":["color","v"]}`,
		[]string{`{"color":"red","v":"<x>"}`, `{"color":42,"v":"<x>"}`, `{"color":{"a":[1]},"v":"<x>"}`},
		[]string{`{"color":"blue","v":"<x>"}`, `{"color":"red","v":"\u003cx>"}`}},
	{"anyOf oneOf", `{"type":"array","items":{"anyOf":[{"type":"string","maxLength":3},{"type":"integer"},
		{"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"n":{"type":"number"}},"required":["k","n"]},
		{"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]}]}}`,
		[]string{`[]`, `["abc", 1, {"k":"a","n":-1.5e3}, {"k":"b"}]`},
		[]string{`["abcd"]`, `[{"k":"c"}]`, `[1.5]`}},
	{"recursive defs", `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
		"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}}}`,
		[]string{`{"v":1}`, `{"v":1,"kids":[{"v":2,"kids":[]},{"v":3}]}`},
		[]string{`{"v":1,"kids":[{}]}`, `{"v":1,"kids":[{"v":1},{"v":1},{"v":1}]}`}},
	{"definitions and allOf", `{"definitions":{"base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},
		"allOf":[{"$ref":"#/definitions/base"},{"properties":{"label":{"type":"string"}},"required":["label"]}]}`,
		[]string{`{"id":1,"label":"x"}`},
		[]string{`{"id":1}`, `{"label":"x"}`}},
	{"additional schema", `{"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"boolean"}},"additionalProperties":{"type":"string"}}`,
		[]string{`{"a":1,"x":"y"}`, `{"abc":"s","b":"t"}`, `{"":"e"}`, `{"a":1,"ab":true,"aa":"z"}`},
		[]string{`{"a":"x"}`, `{"x":1}`, `{"a":1,"a":"s"}`, `{"ab":true,"ab":"s"}`}},
	{"additional true", `{"type":"object","properties":{"id":{"type":"string","format":"uuid"}},"required":["id"],"additionalProperties":true}`,
		[]string{`{"id":"123e4567-e89b-12d3-a456-426614174000","x":[1,{}]}`},
		[]string{`{"id":"123e4567-e89b-12d3-a456-42661417400"}`, `{"x":1}`}},
	{"patterns", `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{3,5}$"},
		"dec":{"type":"string","pattern":"^\\d+(\\.\\d+)?$"},"has":{"type":"string","pattern":"ab+c"},
		"q":{"type":"string","pattern":"^(\"|\\\\)[a-c]*x?$"},"ci":{"type":"string","pattern":"(?i)^yes|no$"}},
		"required":["code","dec","has","q","ci"]}`,
		[]string{`{"code":"AB-123","dec":"1.5","has":"xxabbbcyy","q":"\"abc","ci":"YeS"}`, `{"code":"ZZ-12345","dec":"7","has":"abc","q":"\\x","ci":"no"}`},
		[]string{`{"code":"AB-12","dec":"1.5","has":"abc","q":"\"","ci":"no"}`, `{"code":"AB-123","dec":"1.","has":"abc","q":"\"","ci":"no"}`,
			`{"code":"AB-123","dec":"1","has":"ac","q":"\"","ci":"no"}`}},
	{"integer ranges", `{"type":"array","prefixItems":[{"type":"integer","minimum":-15,"maximum":1234},
		{"type":"integer","exclusiveMinimum":5},{"type":"integer","maximum":-3},{"type":"integer","minimum":100},
		{"type":"integer","minimum":-100,"exclusiveMaximum":0},{"type":"integer","minimum":7,"maximum":7},
		{"type":"number","minimum":0}],"items":false}`,
		[]string{`[-15, 6, -3, 100, -100, 7, 0.5]`, `[1234, 99999, -1000, 12345, -1, 7, 300.25]`, `[0, 10, -99, 999, -50, 7, 0]`},
		[]string{`[-16, 6, -3, 100, -1, 7, 1]`, `[1235, 6, -3, 100, -1, 7, 1]`, `[0, 5, -3, 100, -1, 7, 1]`, `[0, 6, -2, 100, -1, 7, 1]`,
			`[0, 6, -3, 99, -1, 7, 1]`, `[0, 6, -3, 100, 0, 7, 1]`, `[0, 6, -3, 100, -1, 8, 1]`, `[0, 6, -3, 100, -1, 7, -1]`, `[0, 6, -3, 100, -0, 7, 1]`}},
	{"strings and arrays", `{"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":4},
		"l":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4},"e":{"type":"array","maxItems":0},
		"d":{"type":"string","format":"date"},"t":{"type":"string","format":"date-time"}},"required":["s","l","e","d","t"]}`,
		[]string{`{"s":"ab","l":[1,2],"e":[],"d":"2024-01-31","t":"2024-12-01T23:59:59.123Z"}`, `{"s":"a\"c","l":[1,2,3,4],"e":[],"d":"1999-10-01","t":"2024-01-01T00:00:00+05:30"}`},
		[]string{`{"s":"a","l":[1,2],"e":[],"d":"2024-01-31","t":"2024-12-01T23:59:59Z"}`, `{"s":"ab","l":[1],"e":[],"d":"2024-01-31","t":"2024-12-01T23:59:59Z"}`,
			`{"s":"ab","l":[1,2],"e":[1],"d":"2024-01-31","t":"2024-12-01T23:59:59Z"}`, `{"s":"ab","l":[1,2],"e":[],"d":"2024-13-01","t":"2024-12-01T23:59:59Z"}`,
			`{"s":"ab","l":[1,2],"e":[],"d":"2024-01-31","t":"2024-12-01 23:59:59Z"}`}},
	{"type lists and nullable", `{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"type":["integer","null"]},"c":{}},"required":["a","b","c"]}`,
		[]string{`{"a":null,"b":null,"c":[{"x":1}]}`, `{"a":"s","b":3,"c":"z"}`},
		[]string{`{"a":1,"b":null,"c":1}`, `{"a":null,"b":"s","c":1}`}},
	{"required without schema", `{"type":"object","properties":{"a":{"type":"integer"}},"required":["b","a"]}`,
		[]string{`{"a":1,"b":[true]}`, `{"a":1,"b":"x"}`},
		[]string{`{"a":1}`, `{"b":1}`, `{"b":1,"a":1}`}},
	{"any object", `{"type":"object"}`,
		[]string{`{}`, `{"a":{"b":[1,"2",null,true]}}`},
		[]string{`[]`, `"x"`}},
	{"empty schema", `{}`,
		[]string{`1`, `"x"`, `[{}]`, `null`},
		[]string{`x`, `[1,]`}},
}

func TestSchemaGeneration(t *testing.T) {
	v, err := genVocab()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range generationSchemas {
		t.Run(tt.name, func(t *testing.T) {
			src, err := SchemaToGrammar([]byte(tt.schema))
			if err != nil {
				t.Fatalf("SchemaToGrammar = %v", err)
			}
			g, err := Parse(src, "")
			if err != nil {
				t.Fatalf("Parse(generated) = %v\n%s", err, src)
			}
			sch := compileSchema(t, tt.schema)
			for _, s := range tt.accept {
				if err := validate(sch, s); err != nil {
					t.Fatalf("test data %s is not valid: %v", s, err)
				}
				if !g.Match(s) {
					t.Errorf("Match(%s) = false, want true\n%s", s, src)
				}
			}
			for _, s := range tt.reject {
				if g.Match(s) {
					t.Errorf("Match(%s) = true, want false\n%s", s, src)
				}
			}
			for seed := uint64(0); seed < 25; seed++ {
				rng := rand.New(rand.NewPCG(seed, 99))
				doc := generate(t, g, v, rng)
				if err := validate(sch, doc); err != nil {
					t.Errorf("seed %d: generated %s does not validate: %v\n%s", seed, doc, err, src)
				}
			}
		})
	}
}

func TestNullable(t *testing.T) {
	src, err := SchemaToGrammar([]byte(`{"type":"object","properties":{"n":{"type":"integer","nullable":true}},"required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(src, "")
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{`{"n":null}`: true, `{"n":-3}`: true, `{"n":"x"}`: false, `{}`: false} {
		if got := g.Match(s); got != want {
			t.Errorf("Match(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestJSONObjectGrammar(t *testing.T) {
	g, err := Parse(JSONObjectGrammar(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"a": [1, 2.5e-3, "x\n", {"b": null}]}`, "{\n  \"k\": true\n}"} {
		if !g.Match(s) {
			t.Errorf("Match(%q) = false, want true", s)
		}
	}
	for _, s := range []string{`[]`, `1`, `{"a"}`, `{"a":1,}`, `{'a':1}`} {
		if g.Match(s) {
			t.Errorf("Match(%q) = true, want false", s)
		}
	}
	v, err := genVocab()
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 20; seed++ {
		doc := generate(t, g, v, rand.New(rand.NewPCG(seed, 5)))
		var obj map[string]any
		if err := json.Unmarshal([]byte(doc), &obj); err != nil {
			t.Errorf("seed %d: json.Unmarshal(%q) = %v, want an object", seed, doc, err)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	tests := []struct {
		name, schema, path, msg string
	}{
		{"invalid json", `{"type":`, "#", "invalid JSON"},
		{"not", `{"type":"object","properties":{"a":{"not":{"type":"string"}}}}`, "#/properties/a/not", "not supported"},
		{"unknown type", `{"type":"strin"}`, "#/type", `unknown type "strin"`},
		{"missing ref", `{"$ref":"#/$defs/missing"}`, "#/$ref", "does not resolve"},
		{"remote ref", `{"$ref":"https://example.com/s.json"}`, "#/$ref", "only local references"},
		{"word boundary", `{"type":"string","pattern":"\\bfoo"}`, "#/pattern", "word boundaries"},
		{"bad regex", `{"type":"string","pattern":"(a"}`, "#/pattern", "invalid pattern"},
		{"empty number range", `{"type":"number","minimum":0.8,"maximum":0.2}`, "#", "number range is empty"},
		{"empty exclusive number range", `{"type":"number","exclusiveMinimum":0.25,"maximum":0.25}`, "#", "number range is empty"},
		{"integer minimum beyond int64", `{"type":"integer","minimum":1e19}`, "#/minimum", "out of the supported range"},
		{"number maximum beyond int64", `{"type":"number","maximum":-1e300}`, "#/maximum", "out of the supported range"},
		{"integer between integers", `{"type":"integer","minimum":0.2,"maximum":0.8}`, "#", "empty"},
		{"number bound type", `{"type":"number","maximum":"1"}`, "#/maximum", "must be a number"},
		{"empty anyOf", `{"anyOf":[]}`, "#/anyOf", "non-empty"},
		{"unique items", `{"type":"array","uniqueItems":true}`, "#/uniqueItems", "not supported"},
		{"huge maxItems", `{"type":"array","maxItems":5000}`, "#/maxItems", "over 1000"},
		{"min over max", `{"type":"string","minLength":3,"maxLength":2}`, "#/maxLength", "below"},
		{"required without schema", `{"properties":{},"required":["x"],"additionalProperties":false}`, "#/required/0", `"x"`},
		{"false schema", `{"properties":{"a":false}}`, "#/properties/a", "matches nothing"},
		{"empty integer range", `{"type":"integer","minimum":5,"maximum":4}`, "#", "empty"},
		{"pointer escapes", `{"properties":{"a/b":{"type":"integer","minimum":"x"}}}`, "#/properties/a~1b/minimum", "must be a number"},
		{"ref sibling", `{"$ref":"#","type":"string"}`, "#/type", "beside $ref"},
		{"inner anchor", `{"type":"string","pattern":"a^b"}`, "#/pattern", "anchors"},
		{"allOf non-object", `{"allOf":[{"type":"string"}]}`, "#/allOf/0/type", "only over object"},
		{"ref cycle", `{"$ref":"#"}`, "#", "unusable grammar"},
		{"pattern property", `{"type":"object","patternProperties":{"^x":{}}}`, "#/patternProperties", "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := SchemaToGrammar([]byte(tt.schema))
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("SchemaToGrammar(%s) = %v, want a *SchemaError", tt.schema, err)
			}
			if se.Path != tt.path || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("SchemaToGrammar(%s) = %v, want path %s and %q", tt.schema, err, tt.path, tt.msg)
			}
		})
	}
}

func TestNumberRange(t *testing.T) {
	tests := []struct {
		schema string
		accept []string
		reject []string
	}{
		{`{"type":"number","minimum":0,"maximum":2}`,
			[]string{"0", "0.5", "1", "1.999", "2", "2.0", "2.000"},
			[]string{"-0.1", "2.01", "3", "-0", "10", "1e0"}},
		{`{"type":"number","exclusiveMinimum":0}`,
			[]string{"0.001", "1", "12345.5", "0.10"},
			[]string{"0", "0.0", "-1", "-0.5"}},
		{`{"type":"number","minimum":-1.5,"exclusiveMaximum":3}`,
			[]string{"-1", "-0.5", "0", "2.999", "-1.0", "-1.5", "-1.2", "-1.50"},
			[]string{"-1.51", "-1.6", "3", "3.0", "-2"}},
		{`{"type":"number","minimum":0.2,"maximum":0.8}`,
			[]string{"0.2", "0.25", "0.5", "0.8", "0.80", "0.79999"},
			[]string{"0", "0.1", "0.19", "0.81", "1", "-0.5"}},
		{`{"type":"number","maximum":-2}`,
			[]string{"-2", "-2.0", "-2.5", "-100"},
			[]string{"-1.99", "0", "2", "-1"}},
		{`{"type":"number","minimum":-3,"maximum":-3}`,
			[]string{"-3", "-3.00"},
			[]string{"-3.1", "-2.9", "3"}},
		{`{"type":"number","minimum":10}`,
			[]string{"10", "10.5", "11", "99999"},
			[]string{"9.99", "9", "-10", "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			src, err := SchemaToGrammar([]byte(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			g, err := Parse(src, "")
			if err != nil {
				t.Fatal(err)
			}
			sch := compileSchema(t, tt.schema)
			for _, s := range tt.accept {
				if err := validate(sch, s); err != nil {
					t.Fatalf("test data %s is not valid: %v", s, err)
				}
				if !g.Match(s) {
					t.Errorf("Match(%s) = false, want true\n%s", s, src)
				}
			}
			for _, s := range tt.reject {
				if g.Match(s) {
					t.Errorf("Match(%s) = true, want false\n%s", s, src)
				}
			}
			v, err := genVocab()
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(0); seed < 30; seed++ {
				doc := generate(t, g, v, rand.New(rand.NewPCG(seed, 17)))
				if err := validate(sch, doc); err != nil {
					t.Errorf("seed %d: generated %s does not validate: %v", seed, doc, err)
				}
			}
		})
	}
}

func TestIntRangeExhaustive(t *testing.T) {
	// Every integer in a window must match exactly when it lies in the range.
	bounds := []int64{-1000, -101, -100, -99, -10, -9, -1, 0, 1, 9, 10, 19, 99, 100, 101, 999, 1000}
	for _, lo := range bounds {
		for _, hi := range bounds {
			if lo > hi || (lo+hi)%3 != 0 {
				continue
			}
			lo, hi := lo, hi
			for _, mode := range []string{"both", "lo", "hi"} {
				var lp, hp *int64
				if mode != "hi" {
					lp = &lo
				}
				if mode != "lo" {
					hp = &hi
				}
				g, err := Parse("root ::= "+intRange(lp, hp), "")
				if err != nil {
					t.Fatalf("intRange(%v,%v) does not parse: %v", lo, hi, err)
				}
				var probe []int64
				for _, b := range bounds {
					probe = append(probe, b-1, b, b+1)
				}
				for n := int64(-1100); n <= 1100; n += 37 {
					probe = append(probe, n)
				}
				for _, n := range probe {
					want := (lp == nil || n >= lo) && (hp == nil || n <= hi)
					if got := g.Match(fmt.Sprint(n)); got != want {
						t.Fatalf("intRange(%s [%d,%d]) Match(%d) = %v, want %v", mode, lo, hi, n, got, want)
					}
				}
				for _, s := range []string{"-0", "01", "00", "+1"} {
					if g.Match(s) {
						t.Errorf("intRange(%s [%d,%d]) Match(%q) = true, want false", mode, lo, hi, s)
					}
				}
			}
		}
	}
}
