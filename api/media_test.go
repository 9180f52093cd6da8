package api

import (
	"strings"
	"testing"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// TestJoinMedia checks how content parts with images become one string
// (the reference's rule, fixtures/mmproj README step 1): "\n" between
// consecutive text parts, nothing around an image.
func TestJoinMedia(t *testing.T) {
	img := contentPart{image: true}
	txt := func(s string) contentPart { return contentPart{text: s} }
	for _, tc := range []struct {
		name  string
		parts []contentPart
		want  string
	}{
		{"text image text", []contentPart{txt("Look at this."), img, txt("Is it dark or light?")}, "Look at this.@Is it dark or light?"},
		{"image first", []contentPart{img, txt("A"), txt("B")}, "@A\nB"},
		{"image last", []contentPart{txt("Describe the colours:"), img}, "Describe the colours:@"},
		{"two images", []contentPart{img, img, txt("x")}, "@@x"},
		{"empty text first", []contentPart{txt(""), txt("A"), img}, "A@"},
		{"empty text between", []contentPart{txt("A"), txt(""), txt("B"), img}, "A\n\nB@"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &chatRequest{messages: []message{{role: "user", images: 1, parts: tc.parts}, {role: "assistant", content: "kept"}}}
			req.joinMedia()
			if req.marker == "" || !strings.HasPrefix(req.marker, "<__media_") {
				t.Fatalf("marker %q", req.marker)
			}
			if got := strings.ReplaceAll(req.messages[0].content, req.marker, "@"); got != tc.want {
				t.Errorf("content = %q, want %q", got, tc.want)
			}
			if req.messages[1].content != "kept" {
				t.Errorf("a message without images changed: %q", req.messages[1].content)
			}
		})
	}
	// Markers differ between requests: a client cannot forge one.
	a, b := &chatRequest{messages: []message{{images: 1, parts: []contentPart{{image: true}}}}}, &chatRequest{messages: []message{{images: 1, parts: []contentPart{{image: true}}}}}
	a.joinMedia()
	b.joinMedia()
	if a.marker == b.marker {
		t.Errorf("two requests got the same marker %q", a.marker)
	}
}

// TestJoinTextParts: a content array of text parts becomes the parts
// joined as the reference's chat parsing joins them (common/chat.cpp,
// to_json_oaicompat for templates that take a string): "\n" before a part
// when text precedes it, so an empty first part adds nothing and an empty
// middle one a blank line.
func TestJoinTextParts(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"two parts", `[{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]`, "A\nB"},
		{"one part", `[{"type": "text", "text": "A"}]`, "A"},
		{"empty first", `[{"type": "text", "text": ""}, {"type": "text", "text": "B"}]`, "B"},
		{"empty middle", `[{"type": "text", "text": "A"}, {"type": "text", "text": ""}, {"type": "text", "text": "B"}]`, "A\n\nB"},
		{"audio ignored", `[{"type": "text", "text": "A"}, {"type": "audio_url", "audio_url": {"url": "x.wav"}}, {"type": "text", "text": "B"}]`, "A\nB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, e := decodeChat(grammar.Budget{}, []byte(`{"messages": [{"role": "user", "content": `+tc.content+`}]}`))
			if e != nil {
				t.Fatal(e)
			}
			if got := req.messages[0].content; got != tc.want {
				t.Errorf("content = %q, want %q", got, tc.want)
			}
		})
	}
}
