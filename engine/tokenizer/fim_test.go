package tokenizer

import "testing"

// TestFIM checks the fill-in-the-middle tokens /infill uses: found in a
// coder vocabulary by their texts (as the reference finds them when the
// GGUF names none), and absent from a vocabulary without them.
func TestFIM(t *testing.T) {
	for _, tt := range []struct {
		vocab         string
		pre, suf, mid string // "" for absent
	}{
		{"deepseek-coder", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"},
		{"gpt-2", "", "", ""},
		{"llama-spm", "", "", ""},
	} {
		t.Run(tt.vocab, func(t *testing.T) {
			tok := loadVocab(t, tt.vocab)
			f := tok.FIM()
			for _, c := range []struct {
				name, text string
				got        int32
			}{{"Pre", tt.pre, f.Pre}, {"Suf", tt.suf, f.Suf}, {"Mid", tt.mid, f.Mid}} {
				want := int32(-1)
				if c.text != "" {
					id, ok := tok.TokenID(c.text)
					if !ok {
						t.Fatalf("vocabulary %s lacks %q", tt.vocab, c.text)
					}
					want = id
				}
				if c.got != want {
					t.Errorf("FIM().%s = %d, want %d (%q)", c.name, c.got, want, c.text)
				}
				if want >= 0 && !tok.IsControl(want) {
					t.Errorf("%s token %d is not control", c.name, want)
				}
			}
		})
	}
}
