package grammar_test

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// A sampler masks the logits with the grammar before each draw and then
// tells the matcher which token it chose.
func Example() {
	g, err := grammar.Parse(`root ::= ("yes" | "no") "."`, "")
	if err != nil {
		panic(err)
	}
	// Token 0 ends generation; the others are text.
	text := []string{"", "yes", "no", ".", "maybe", "n", "o"}
	toks := make([][]byte, len(text))
	for i, s := range text {
		toks[i] = []byte(s)
	}
	vocab, err := grammar.NewVocab(toks, []int32{0})
	if err != nil {
		panic(err)
	}
	m := grammar.NewMatcher(g, vocab)
	for _, chosen := range []int32{5, 6, 3, 0} { // "n" "o" "." end
		logits := make([]float32, vocab.Size())
		if err := m.Mask(logits); err != nil {
			panic(err)
		}
		var allowed []string
		for id, l := range logits {
			if !math.IsInf(float64(l), -1) {
				allowed = append(allowed, fmt.Sprintf("%q", text[id]))
			}
		}
		fmt.Println("allowed:", allowed, "chosen:", fmt.Sprintf("%q", text[chosen]))
		if err := m.Accept(chosen); err != nil {
			panic(err)
		}
	}
	fmt.Println("ended:", m.Ended())
	fmt.Println(m.Accept(1))
	// Output:
	// allowed: ["yes" "no" "n"] chosen: "n"
	// allowed: ["o"] chosen: "o"
	// allowed: ["."] chosen: "."
	// allowed: [""] chosen: ""
	// ended: true
	// grammar: token 1 after end of generation: rejected by grammar
}

// SchemaToGrammar turns a response_format json_schema into GBNF.
func ExampleSchemaToGrammar() {
	src, err := grammar.SchemaToGrammar([]byte(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`))
	if err != nil {
		panic(err)
	}
	g, err := grammar.Parse(src, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Match(`{"ok": true}`), g.Match(`{"ok": 1}`))
	// Output: true false
}
