package api

import (
	"encoding/json"
	"testing"
)

// FuzzFamilyParsers reads arbitrary text as the answer of every tool-call
// family, with reasoning split and without, whole and streamed in pieces
// of 1 to 7 bytes: never a panic, every call names a declared tool with a
// JSON object of arguments, and the stream's calls are the whole
// answer's. The reference's cases seed it.
func FuzzFamilyParsers(f *testing.F) {
	for _, c := range refCases {
		f.Add(c.in, uint8(c.family)|map[bool]uint8{true: 0x80}[c.think[1] != ""], uint8(len(c.in)%7))
	}
	f.Fuzz(func(t *testing.T, text string, fam, step uint8) {
		// fam picks the family; its top bits split <think> reasoning,
		// left open by the prompt or not.
		c := refCase{family: toolFamily(int(fam&0x3f) % len(familyNames)), in: text}
		if fam&0x80 != 0 {
			c.think, c.open = thinkTags, fam&0x40 != 0
		}
		req, pc := c.prepared()
		_, _, whole, _ := req.splitAnswer(pc, text)
		for _, call := range whole {
			var args map[string]any
			if json.Unmarshal([]byte(call.arguments), &args) != nil {
				t.Fatalf("%v: call %s has arguments %q, not a JSON object", c.family, call.name, call.arguments)
			}
			known := false
			for _, tl := range refTools {
				known = known || tl.name == call.name
			}
			if !known {
				t.Fatalf("%v: call of undeclared %q", c.family, call.name)
			}
		}
		n := int(step)%7 + 1
		var pieces []string
		for i := 0; i < len(text); i += n {
			pieces = append(pieces, text[i:min(i+n, len(text))])
		}
		_, _, streamed := streamCase(c, pieces)
		if len(streamed) != len(whole) {
			t.Fatalf("%v: streamed %d calls, whole answer %d", c.family, len(streamed), len(whole))
		}
	})
}
