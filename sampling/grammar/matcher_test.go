package grammar

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// lastStart returns the index where the last UTF-8 sequence of b starts.
func lastStart(b []byte) int {
	i := len(b) - 1
	for i > 0 && len(b)-i < 4 && b[i]&0xC0 == 0x80 {
		i--
	}
	return max(i, 0)
}

// testVocab is a small vocabulary with every single byte, multi-byte words,
// JSON fragments, and tokens that split UTF-8 characters. Id 256 is an
// empty control token and id 257 the end-of-generation token.
func testVocab(t testing.TB) (*Vocab, [][]byte) {
	t.Helper()
	var toks [][]byte
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	toks = append(toks, nil, nil) // 256 control, 257 EOG
	for _, s := range []string{
		"true", "false", "null", " true", "  ", "\n  ", "\n", `{"`, `":`, `",`, `"}`, `"`, `":"`,
		`[{`, `}]`, `{}`, `[]`, `, `, `": `, `0`, `12`, `0.5`, `-1`, `e+`, `\n`, `\u00`, `\"`,
		"name", `"name"`, " age", "age", "a", "ab", "abc", " a", "x", "- ", "- milk\n",
		"e4", " e5", "Nf", "3 ", "O-O", "-O", "1. ", "\n2", "int", " main", "()", " {", "return", ";",
		"é", "日本", "\xe6\x97", "\xa5\xe6", "\x9c\xac", "a\xc3", "\xa9b", "😀", "\xf0\x9f", "\x98\x80!",
		"\xf0\x9f\x98", "\x80", "ü", "✓", "\xe2\x9c", "\x93\n", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	} {
		toks = append(toks, []byte(s))
	}
	v, err := NewVocab(toks, []int32{257})
	if err != nil {
		t.Fatal(err)
	}
	return v, toks
}

// checkMask compares Mask against the reference for every token, given the
// bytes accepted so far.
func checkMask(t *testing.T, g *Grammar, v *Vocab, toks [][]byte, m *Matcher, prefix []byte) []int32 {
	t.Helper()
	logits := make([]float32, len(toks)+3) // three padding entries
	if err := m.Mask(logits); err != nil && !errors.Is(err, ErrRejected) {
		t.Fatalf("Mask after %q: %v", prefix, err)
	}
	// The reference parses the complete characters of the prefix once;
	// any partial character is fed again with each token.
	cut := len(prefix)
	for cut > 0 && !utf8.FullRune(prefix[:cut][lastStart(prefix[:cut]):]) {
		cut = lastStart(prefix[:cut])
	}
	base, _, baseOK := refFeed(g, prefix[:cut])
	var allowed []int32
	for id, tok := range toks {
		got := !math.IsInf(float64(logits[id]), -1)
		var want bool
		switch {
		case v.IsEOG(int32(id)):
			want = refMatch(g, prefix)
		case len(tok) == 0:
			want = false
		default:
			want = baseOK && refViableFrom(g, base, append(append([]byte(nil), prefix[cut:]...), tok...))
		}
		if got != want {
			t.Fatalf("after %q: token %d %q allowed = %v, want %v", prefix, id, tok, got, want)
		}
		if a, err := m.Allows(int32(id)); a != want || err != nil {
			t.Fatalf("after %q: Allows(%d %q) = %v, %v, want %v, nil", prefix, id, tok, a, err, want)
		}
		if got {
			allowed = append(allowed, int32(id))
		}
	}
	for i := len(toks); i < len(logits); i++ {
		if !math.IsInf(float64(logits[i]), -1) {
			t.Fatalf("after %q: padding logit %d = %v, want -Inf", prefix, i, logits[i])
		}
	}
	return allowed
}

func TestMaskMatchesReference(t *testing.T) {
	v, toks := testVocab(t)
	grammars := map[string]string{
		"json":       "",
		"arithmetic": "",
		"list":       "",
		"chess":      "",
		"clike":      "",
		"utf8":       `root ::= ([a-c] | [é-ü] | "日本" | [😀-😂] | "✓")* "!"`,
		"ascii only": `root ::= [a-z]{1,6} ("\n" | " ")`,
		"negated":    `root ::= "\"" [^"\x00-\x1F日]* "\""`,
	}
	for name, src := range grammars {
		t.Run(name, func(t *testing.T) {
			var g *Grammar
			if src == "" {
				g = mustParseFile(t, name+".gbnf")
			} else {
				var err error
				if g, err = Parse(src, ""); err != nil {
					t.Fatal(err)
				}
			}
			for seed := uint64(1); seed <= 16; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				m := NewMatcher(g, v)
				var prefix []byte
				for step := 0; step < 60 && !m.Ended(); step++ {
					allowed := checkMask(t, g, v, toks, m, prefix)
					if len(allowed) == 0 {
						break
					}
					id := allowed[rng.IntN(len(allowed))]
					if err := m.Accept(id); err != nil {
						t.Fatalf("Accept(%d %q) after %q = %v, want nil", id, toks[id], prefix, err)
					}
					prefix = append(prefix, toks[id]...)
				}
			}
		})
	}
}

// TestMaskWithCompaction repeats the reference comparison with automaton
// limits so low that the matcher rebuilds itself at almost every step.
func TestMaskWithCompaction(t *testing.T) {
	v, toks := testVocab(t)
	for _, name := range []string{"json", "clike", "chess"} {
		t.Run(name, func(t *testing.T) {
			g := mustParseFile(t, name+".gbnf")
			for seed := uint64(1); seed <= 4; seed++ {
				rng := rand.New(rand.NewPCG(seed, 11))
				m := NewMatcher(g, v)
				m.limitNodes, m.limitStates = 8, 4
				compacted := false
				var prefix []byte
				for step := 0; step < 40 && !m.Ended(); step++ {
					allowed := checkMask(t, g, v, toks, m, prefix)
					if len(allowed) == 0 {
						break
					}
					id := allowed[rng.IntN(len(allowed))]
					if err := m.Accept(id); err != nil {
						t.Fatalf("Accept(%d %q) after %q = %v, want nil", id, toks[id], prefix, err)
					}
					prefix = append(prefix, toks[id]...)
					if c := m.Clone(); c.IsComplete() != m.IsComplete() {
						t.Fatalf("Clone().IsComplete() = %v, want %v", c.IsComplete(), m.IsComplete())
					}
					compacted = m.maybeCompact() || compacted
				}
				if !compacted {
					t.Errorf("seed %d: the automaton was never rebuilt, want rebuilds", seed)
				}
			}
		})
	}
}

func TestPartialUTF8(t *testing.T) {
	v, toks := testVocab(t)
	id := func(s string) int32 {
		for i, tok := range toks {
			if string(tok) == s {
				return int32(i)
			}
		}
		t.Fatalf("no token %q", s)
		return -1
	}
	g, err := Parse(`root ::= "a" [é] "b" "日本" [😀]`, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		tokens []string
		ok     bool
	}{
		{"split across tokens", []string{"a\xc3", "\xa9b", "\xe6\x97", "\xa5\xe6", "\x9c\xac", "\xf0\x9f", "\x98", "\x80"}, true},
		{"split then too much", []string{"a\xc3", "\xa9b", "日本", "\xf0\x9f", "\x98\x80!"}, false},
		{"split then whole", []string{"a\xc3", "\xa9b", "日本", "\xf0\x9f\x98", "\x80"}, true},
		{"wrong continuation", []string{"a\xc3", "\x80"}, false},
		{"lead without continuation", []string{"a", "\xc3", "b"}, false},
		{"overlong", []string{"a", "\xc0\x80"}, false},
		{"surrogate", []string{"a", "\xed\xa0\x80"}, false},
		{"beyond unicode", []string{"a", "\xf4\x90\x80\x80"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMatcher(g, v)
			var err error
			for _, s := range tt.tokens {
				if err = m.Accept(id(s)); err != nil {
					break
				}
			}
			if err == nil {
				err = m.Accept(257)
			}
			if (err == nil) != tt.ok {
				t.Errorf("Accept(%q...) = %v, want ok %v", tt.tokens, err, tt.ok)
			}
		})
	}
	// A token that stops inside a character is allowed only when the
	// character can still become one the grammar wants.
	m := NewMatcher(g, v)
	if err := m.Accept(id("a")); err != nil {
		t.Fatal(err)
	}
	allowed, err := m.Allowed(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"\xc3": true, "é": true, "\xa9b": false, "a\xc3": false, "ü": false}
	for s, w := range want {
		got := false
		for _, a := range allowed {
			if string(toks[a]) == s {
				got = true
			}
		}
		if got != w {
			t.Errorf("Allowed() after \"a\" has %q = %v, want %v", s, got, w)
		}
	}
}

func TestEndOfGeneration(t *testing.T) {
	v, _ := testVocab(t)
	g, err := Parse(`root ::= "a" "b"?`, "")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMatcher(g, v)
	if m.IsComplete() {
		t.Errorf("IsComplete() at start = true, want false")
	}
	if err := m.Accept(257); !errors.Is(err, ErrRejected) {
		t.Errorf("Accept(EOG) at start = %v, want ErrRejected", err)
	}
	if err := m.Accept(256); !errors.Is(err, ErrRejected) {
		t.Errorf("Accept(control) = %v, want ErrRejected", err)
	}
	if err := m.Accept('b'); !errors.Is(err, ErrRejected) {
		t.Errorf("Accept('b') at start = %v, want ErrRejected", err)
	}
	if err := m.Accept('a'); err != nil {
		t.Fatalf("Accept('a') = %v, want nil", err)
	}
	if !m.IsComplete() {
		t.Errorf("IsComplete() after a = false, want true")
	}
	c := m.Clone()
	if err := m.Accept(257); err != nil {
		t.Fatalf("Accept(EOG) after a = %v, want nil", err)
	}
	if err := m.Accept('b'); !errors.Is(err, ErrRejected) {
		t.Errorf("Accept('b') after EOG = %v, want ErrRejected", err)
	}
	logits := make([]float32, v.Size())
	if err := m.Mask(logits); err == nil {
		t.Errorf("Mask after EOG = nil, want an error")
	}
	// The clone is unaffected by the original's end.
	if err := c.Accept('b'); err != nil {
		t.Errorf("clone Accept('b') = %v, want nil", err)
	}
	if err := c.Accept('b'); !errors.Is(err, ErrRejected) {
		t.Errorf("clone Accept('b') twice = %v, want ErrRejected", err)
	}
	if err := c.Accept(-1); err == nil {
		t.Errorf("Accept(-1) = nil, want an error")
	}
	if err := c.Mask(make([]float32, 3)); err == nil {
		t.Errorf("Mask(short logits) = nil, want an error")
	}
}

func TestCloneIndependent(t *testing.T) {
	v, toks := testVocab(t)
	g := mustParseFile(t, "json.gbnf")
	m := NewMatcher(g, v)
	for _, s := range []string{`{"`, "a", `":`} {
		if err := m.AcceptBytes([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	c := m.Clone()
	if err := m.AcceptBytes([]byte(`"x"}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.AcceptBytes([]byte(`[1]}`)); err != nil {
		t.Errorf("clone AcceptBytes([1]}) = %v, want nil", err)
	}
	if !m.IsComplete() || !c.IsComplete() {
		t.Errorf("IsComplete() = %v, %v, want true, true", m.IsComplete(), c.IsComplete())
	}
	checkMask(t, g, v, toks, c, []byte(`{"a":[1]}`))
}

func TestCompactKeepsState(t *testing.T) {
	g := mustParseFile(t, "json.gbnf")
	m := NewMatcher(g, nil)
	doc := `{"a": [1, {"b": "xyz`
	if err := m.AcceptBytes([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	// Force a rebuild of the automaton from the current state.
	before := len(m.nodes)
	m.compact()
	if len(m.nodes) >= before || len(m.states) != 1 {
		t.Errorf("after compact: %d nodes, %d states, want fewer than %d and 1", len(m.nodes), len(m.states), before)
	}
	if err := m.AcceptBytes([]byte(`"}]}`)); err != nil || !m.IsComplete() {
		t.Errorf("AcceptBytes(rest) after compaction = %v, complete %v; want nil, true", err, m.IsComplete())
	}
}

func TestMaskAllocs(t *testing.T) {
	v, _ := testVocab(t)
	g := mustParseFile(t, "json.gbnf")
	m := NewMatcher(g, v)
	if err := m.AcceptBytes([]byte(`{"abc": "x`)); err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, v.Size())
	if err := m.Mask(logits); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := m.Mask(logits); err != nil {
			t.Fatal(err)
		}
		if ok, err := m.Allows('y'); !ok || err != nil {
			t.Fatalf("Allows('y') = %v, %v, want true, nil", ok, err)
		}
		if err := m.Accept('y'); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Mask+Accept in a string allocates %v times, want 0", allocs)
	}
}

func TestNewVocabErrors(t *testing.T) {
	if _, err := NewVocab(nil, nil); err == nil {
		t.Errorf("NewVocab(nil) = nil error, want an error")
	}
	if _, err := NewVocab([][]byte{[]byte("a")}, []int32{1}); err == nil {
		t.Errorf("NewVocab(eog out of range) = nil error, want an error")
	}
}

// The matcher satisfies the sampler's Constraint and ConstraintChecker
// interfaces (declared here to keep this package free of imports of ours).
var _ interface {
	Mask(logits []float32) error
	Accept(id int32) error
	Allows(id int32) (bool, error)
} = (*Matcher)(nil)

// TestMaskLargeVocab checks the trie walk, including whole subtrees allowed
// at once, on a vocabulary large enough to have big subtrees: Mask must
// agree with Allows (which feeds each token's bytes) on every token and
// with the reference on a sample.
func TestMaskLargeVocab(t *testing.T) {
	toks := synthVocab(20000)
	v, err := NewVocab(toks, []int32{2})
	if err != nil {
		t.Fatal(err)
	}
	g := mustParseFile(t, "json.gbnf")
	for _, prefix := range []string{``, `{"`, `{"na`, `{"name": "ab`, `{"a": "\u00`, "{\"a\": \"x\xc3", `{"a": [1, 2.`, `{"a": {"b": "日`, `{"a": tr`} {
		t.Run(prefix, func(t *testing.T) {
			m := NewMatcher(g, v)
			if err := m.AcceptBytes([]byte(prefix)); err != nil {
				t.Fatal(err)
			}
			logits := make([]float32, len(toks))
			if err := m.Mask(logits); err != nil {
				t.Fatal(err)
			}
			cut := len(prefix)
			for cut > 0 && !utf8.FullRune([]byte(prefix)[lastStart([]byte(prefix[:cut])):cut]) {
				cut = lastStart([]byte(prefix[:cut]))
			}
			base, _, ok := refFeed(g, []byte(prefix[:cut]))
			if !ok {
				t.Fatalf("reference rejects prefix %q", prefix)
			}
			allowed := 0
			for id := range toks {
				got := !math.IsInf(float64(logits[id]), -1)
				want, err := m.Allows(int32(id))
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("token %d %q: Mask allows %v, Allows = %v", id, toks[id], got, want)
				}
				if id%7 == 0 && len(toks[id]) > 0 && !v.IsEOG(int32(id)) {
					ref := refViableFrom(g, base, append([]byte(prefix[cut:]), toks[id]...))
					if got != ref {
						t.Fatalf("token %d %q: Mask allows %v, reference %v", id, toks[id], got, ref)
					}
				}
				if got {
					allowed++
				}
			}
			if allowed == 0 {
				t.Errorf("no token allowed after %q", prefix)
			}
			if strings.HasSuffix(prefix, `"ab`) {
				// Make sure the whole-subtree path was taken here.
				bulk := 0
				for i := range v.trie {
					if b := v.trie[i].bytes; b >= 0 && m.bulkAllowed(&v.subBytes[b], m.cur) {
						bulk++
					}
				}
				if bulk == 0 {
					t.Errorf("inside a string no subtree is allowed whole, want some")
				}
			}
		})
	}
}

// TestConcurrentMatchers runs matchers that share one Grammar and Vocab on
// several goroutines (run with -race): each must produce the same masks as
// a matcher run alone.
func TestConcurrentMatchers(t *testing.T) {
	v, toks := testVocab(t)
	g := mustParseFile(t, "json.gbnf")
	doc := []string{`{"`, "name", `": `, `"`, "ab", `"`, `, `, `"`, "age", `": `, "12", "}"}
	ids := make([]int32, len(doc))
	for i, s := range doc {
		ids[i] = -1
		for id, tok := range toks {
			if string(tok) == s {
				ids[i] = int32(id)
				break
			}
		}
		if ids[i] < 0 {
			t.Fatalf("no token %q", s)
		}
	}
	run := func() ([]int, error) {
		m := NewMatcher(g, v)
		var counts []int
		logits := make([]float32, v.Size())
		for _, id := range ids {
			if err := m.Mask(logits); err != nil {
				return nil, err
			}
			n := 0
			for _, l := range logits {
				if !math.IsInf(float64(l), -1) {
					n++
				}
			}
			counts = append(counts, n)
			if err := m.Accept(id); err != nil {
				return nil, err
			}
		}
		return counts, nil
	}
	want, err := run()
	if err != nil {
		t.Fatal(err)
	}
	const workers = 4
	results := make(chan []int, workers)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			got, err := run()
			errs <- err
			results <- got
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if got := <-results; !slices.Equal(got, want) {
			t.Errorf("concurrent allowed counts = %v, want %v", got, want)
		}
	}
}
