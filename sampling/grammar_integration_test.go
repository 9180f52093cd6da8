package sampling_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// The grammar package's Matcher is the Constraint the engine plugs in; it
// also implements ConstraintChecker, so chains use llama.cpp's order with it.
var (
	_ sampling.Constraint        = (*grammar.Matcher)(nil)
	_ sampling.ConstraintChecker = (*grammar.Matcher)(nil)
)

// maskOnly hides a Matcher's Allows, to run the chain's masking order.
type maskOnly struct{ m *grammar.Matcher }

func (o maskOnly) Mask(logits []float32) error { return o.m.Mask(logits) }
func (o maskOnly) Accept(id int32) error       { return o.m.Accept(id) }

// TestGrammarMatcherDrivesChain generates with a real GBNF grammar whose
// tokens the logits disfavour, in every mode and both grammar orders, and
// requires a grammatical text ended by the end-of-generation token.
func TestGrammarMatcherDrivesChain(t *testing.T) {
	pieces := []string{"y", "e", "s", "n", "o", "yes", "no", "maybe", " ", ""}
	const eos = 9
	tokens := make([][]byte, len(pieces))
	for i, s := range pieces {
		tokens[i] = []byte(s)
	}
	v, err := grammar.NewVocab(tokens, []int32{eos})
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(`root ::= ("yes" | "no") " "?`, "root")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []int{0, 1, 2} {
		for _, temp := range []float64{0, 1.5} {
			for _, checked := range []bool{false, true} {
				for seed := int64(0); seed < 8; seed++ {
					p := sampling.DefaultParams()
					p.MirostatMode, p.Temperature, p.Seed, p.TopK = mode, temp, seed, 0
					m := grammar.NewMatcher(g, v)
					var con sampling.Constraint = maskOnly{m}
					if checked {
						con = m
					}
					c, err := sampling.NewChain(p, sampling.Vocab{Size: len(pieces), EOG: []int32{eos}}, con)
					if err != nil {
						t.Fatal(err)
					}
					rng := rand.New(rand.NewPCG(uint64(seed), 1))
					var text []byte
					ended := false
					for step := 0; step < 10 && !ended; step++ {
						logits := make([]float32, len(pieces))
						for i := range logits {
							logits[i] = float32(rng.NormFloat64())
						}
						logits[7] = 8 // "maybe" is what the model wants
						id, err := c.Sample(logits)
						if err != nil {
							t.Fatalf("mirostat %d temp %v checked %v seed %d: Sample() = %v", mode, temp, checked, seed, err)
						}
						if err := c.Accept(id); err != nil {
							t.Fatalf("Accept(%d) = %v", id, err)
						}
						if id == eos {
							ended = true
						}
						text = append(text, pieces[id]...)
					}
					ok := []string{"yes", "no", "yes ", "no "}
					if !ended || !slices.Contains(ok, string(text)) {
						t.Errorf("mirostat %d temp %v checked %v seed %d: generated %q (ended %v), want yes or no then end", mode, temp, checked, seed, text, ended)
					}
				}
			}
		}
	}
}

// TestGrammarDeadEnd checks that a grammar the vocabulary cannot finish
// makes Sample fail with an error marked grammar.ErrDeadEnd, which the API
// reports as the request's fault rather than a server error.
func TestGrammarDeadEnd(t *testing.T) {
	pieces := []string{"a", "b", ""}
	const eos = 2
	tokens := make([][]byte, len(pieces))
	for i, s := range pieces {
		tokens[i] = []byte(s)
	}
	v, err := grammar.NewVocab(tokens, []int32{eos})
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(`root ::= "a" "q"`, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, checked := range []bool{false, true} {
		m := grammar.NewMatcher(g, v)
		var con sampling.Constraint = maskOnly{m}
		if checked {
			con = m
		}
		p := sampling.DefaultParams()
		p.Temperature = 0
		c, err := sampling.NewChain(p, sampling.Vocab{Size: len(pieces), EOG: []int32{eos}}, con)
		if err != nil {
			t.Fatal(err)
		}
		id, err := c.Sample([]float32{0, 1, 0})
		if err != nil || id != 0 {
			t.Fatalf("first Sample = %d, %v, want token 0 (a)", id, err)
		}
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
		_, err = c.Sample([]float32{1, 1, 1})
		if !errors.Is(err, grammar.ErrDeadEnd) {
			t.Errorf("Sample where no token can continue (checked %v) = %v, want an error marked grammar.ErrDeadEnd", checked, err)
		}
	}
}
