//go:build mtmd

package api

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/vision"
)

// countingProjector decodes with engine/vision and counts what the server
// asks of it. With started set, Prepare reports on it and then waits for
// its context to end (a decode the test can cancel).
type countingProjector struct {
	costs, prepares, cancelled atomic.Int32
	started                    chan struct{}
}

func (p *countingProjector) NonCausal() bool { return false }

func (p *countingProjector) DecodeCost(data []byte, maxPixels int) (int64, error) {
	p.costs.Add(1)
	return vision.DecodeCost(data, maxPixels)
}

func (p *countingProjector) Prepare(ctx context.Context, data []byte, maxPixels int) ([]engine.MediaPart, error) {
	p.prepares.Add(1)
	if p.started != nil {
		p.started <- struct{}{}
		<-ctx.Done()
		p.cancelled.Add(1)
		return nil, ctx.Err()
	}
	img, err := vision.DecodeContext(ctx, data, maxPixels)
	if err != nil {
		return nil, err
	}
	return []engine.MediaPart{{Rows: 1, Hash: sha256.Sum256(img.Pix),
		Encode: func() ([]float32, error) { return nil, fmt.Errorf("not encoded in this test") }}}, nil
}

// projFake is the fake backend with a projector.
type projFake struct {
	*fakeBackend
	proj Projector
}

func (b projFake) Projector() Projector { return b.proj }

// bombPNG is a real w x h PNG of 16-bit RGBA, all zero: a few hundred KB
// of file that decodes to 8 bytes a pixel. Rows are compressed as they
// are made, so the test never holds the pixels.
func bombPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&out, binary.BigEndian, uint32(len(data)))
		c := append([]byte(typ), data...)
		out.Write(c)
		binary.Write(&out, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 16, 6 // 16 bits, RGBA
	chunk("IHDR", ihdr)
	var idat bytes.Buffer
	z, _ := zlib.NewWriterLevel(&idat, zlib.BestCompression)
	row := make([]byte, 1+8*w) // filter byte 0, then zero samples
	for range h {
		if _, err := z.Write(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	chunk("IDAT", idat.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

func smallPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 7, 5))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 37)
	}
	img.Set(0, 0, color.NRGBA{1, 2, 3, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func pngDataURL(b []byte) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b)
}

// TestImageDecodeAdmission: an image is decoded last, after every cheap
// check of its request, within the server's decode memory (counted from
// the header) and decode slots, and its decode ends with its client.
func TestImageDecodeAdmission(t *testing.T) {
	const field = "messages[0].content[0].image_url"
	bomb := bombPNG(t, 6324, 6324) // the issue's: 6324² RGBA16, 320 MiB of pixels
	if len(bomb) > 1<<20 {
		t.Fatalf("the crafted PNG is %d bytes, want under 1 MiB", len(bomb))
	}
	t.Run("bad logit_bias first", func(t *testing.T) {
		p := &countingProjector{}
		ts := newReadyServer(t, projFake{newFake(), p}, Config{HasProjector: true})
		body := strings.TrimSuffix(imageRequest(pngDataURL(bomb), false), "}") + `, "logit_bias": {"nope": 1}}`
		r := ts.post("/v1/chat/completions", body)
		if e := errorOf(t, r.body); r.status != 400 || e["param"] != "logit_bias.nope" {
			t.Fatalf("status %d, error %v: want 400 naming logit_bias.nope", r.status, e)
		}
		if n, m := p.costs.Load(), p.prepares.Load(); n != 0 || m != 0 {
			t.Errorf("the image's header was read %d times and the image decoded %d times, want 0 and 0 (logit_bias is checked first)", n, m)
		}
	})
	t.Run("bad logit_bias first, responses", func(t *testing.T) {
		p := &countingProjector{}
		ts := newReadyServer(t, projFake{newFake(), p}, Config{HasProjector: true})
		body := fmt.Sprintf(`{"input": [{"role": "user", "content": [{"type": "input_image", "image_url": %q},
			{"type": "input_text", "text": "What is this?"}]}], "logit_bias": {"nope": 1}, "stream": true}`, pngDataURL(bomb))
		r := ts.post("/v1/responses", body)
		if e := errorOf(t, r.body); r.status != 400 || e["param"] != "logit_bias.nope" {
			t.Fatalf("status %d, error %v: want 400 naming logit_bias.nope", r.status, e)
		}
		if n, m := p.costs.Load(), p.prepares.Load(); n != 0 || m != 0 {
			t.Errorf("the image's header was read %d times and the image decoded %d times, want 0 and 0 (logit_bias is checked first)", n, m)
		}
	})
	t.Run("over the decode budget", func(t *testing.T) {
		p := &countingProjector{}
		ts := newReadyServer(t, projFake{newFake(), p}, Config{HasProjector: true, MaxImageDecodeBytes: 256 << 20})
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		r := ts.post("/v1/chat/completions", imageRequest(pngDataURL(bomb), false))
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		e := errorOf(t, r.body)
		if r.status != 400 || e["param"] != field || !strings.Contains(fmt.Sprint(e["message"]), "--max-image-decode-bytes") {
			t.Fatalf("status %d, error %v: want 400 naming %s and --max-image-decode-bytes", r.status, e, field)
		}
		if n := p.prepares.Load(); n != 0 {
			t.Errorf("the image was decoded %d times, want 0", n)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("refusing the image allocated %d MiB, want less than its 320 MiB of pixels", grew>>20)
		}
		if slots, held, _ := ts.s.decodes.usage(); slots != 0 || held != 0 {
			t.Errorf("decode gate holds %d slots and %d bytes after the request, want 0", slots, held)
		}
	})
	// cancel sends body on a connection of its own, waits until ready
	// reports true, closes the connection and waits until done does.
	cancel := func(t *testing.T, ts *testServer, body string, ready, done func() bool) {
		c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		for !ready() {
			runtime.Gosched()
		}
		c.Close()
		for !done() {
			runtime.Gosched()
		}
	}
	t.Run("cancelled while waiting", func(t *testing.T) {
		p := &countingProjector{}
		ts := newReadyServer(t, projFake{newFake(), p}, Config{HasProjector: true, MaxImageDecodes: 1})
		release, err := ts.s.decodes.acquire(context.Background(), 0) // the only slot
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		waiting := func() int { _, _, w := ts.s.decodes.usage(); return w }
		cancel(t, ts, imageRequest(pngDataURL(bomb), false), func() bool { return waiting() == 1 }, func() bool { return waiting() == 0 })
		if n := p.prepares.Load(); n != 0 {
			t.Errorf("the image was decoded %d times after its client left, want 0", n)
		}
		if slots, held, _ := ts.s.decodes.usage(); slots != 1 || held != 0 {
			t.Errorf("decode gate holds %d slots and %d bytes, want the test's 1 and 0 bytes", slots, held)
		}
	})
	t.Run("cancelled while decoding", func(t *testing.T) {
		p := &countingProjector{started: make(chan struct{}, 1)}
		ts := newReadyServer(t, projFake{newFake(), p}, Config{HasProjector: true})
		cancel(t, ts, imageRequest(pngDataURL(smallPNG(t)), false),
			func() bool { return len(p.started) == 1 },
			func() bool { slots, _, _ := ts.s.decodes.usage(); return p.cancelled.Load() == 1 && slots == 0 })
		if slots, held, _ := ts.s.decodes.usage(); slots != 0 || held != 0 {
			t.Errorf("decode gate holds %d slots and %d bytes after the client left, want 0", slots, held)
		}
	})
	t.Run("decoded when it fits", func(t *testing.T) {
		p := &countingProjector{}
		ts := newReadyServer(t, projFake{newFake(), p}, Config{HasProjector: true, MaxImageDecodes: 1})
		r := ts.post("/v1/chat/completions", imageRequest(pngDataURL(smallPNG(t)), false))
		if n := p.prepares.Load(); n != 1 {
			t.Errorf("the image was decoded %d times, want 1 (status %d: %s)", n, r.status, r.body)
		}
		if slots, held, _ := ts.s.decodes.usage(); slots != 0 || held != 0 {
			t.Errorf("decode gate holds %d slots and %d bytes after the request, want 0", slots, held)
		}
	})
}
