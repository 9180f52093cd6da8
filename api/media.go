package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// contentPart is one part of a message's content, kept in order when the
// message has images.
type contentPart struct {
	text  string
	image bool
	url   string // image_url.url
	field string // the part's JSON path, for errors: messages[i].content[j].image_url
}

// Projector is a loaded vision projector as the API uses it (vision.GPU
// in builds with the mtmd feature).
type Projector interface {
	// NonCausal reports that an image's rows attend to each other both
	// ways (Gemma 3).
	NonCausal() bool
	// DecodeCost reads an image file's header only and returns the most
	// bytes of memory Prepare holds at once to decode it, refusing more
	// than maxPixels pixels. Its errors are the client's (a bad image).
	DecodeCost(data []byte, maxPixels int) (int64, error)
	// Prepare decodes an image file's bytes (refusing more than maxPixels
	// pixels from the header, before decoding), preprocesses it and
	// returns its place in the prompt: text and tokens around or between
	// its chunks of embedding rows, in order (engine.MediaPart). It stops
	// when ctx is done, with an error wrapping ctx.Err(); its other
	// errors are the client's (a bad image). The chunks' Encode runs on
	// the goroutine that owns the device (the engine's scheduler).
	Prepare(ctx context.Context, data []byte, maxPixels int) ([]engine.MediaPart, error)
}

// ProjectorBackend is implemented by backends that can take images: it
// returns the loaded projector (nil without one).
type ProjectorBackend interface {
	Projector() Projector
}

// mediaMarkerText is how /apply-template shows an image (the reference's
// default marker).
const mediaMarkerText = "<__media__>"

// Image limits' defaults (Config: zero means these, never unlimited).
const (
	defaultMaxImageBytes  = 10 << 20
	defaultMaxImagePixels = 40_000_000
	defaultMaxImages      = 8
)

func (s *Server) imageLimits() (maxBytes int64, maxPixels, maxImages int) {
	maxBytes, maxPixels, maxImages = s.cfg.MaxImageBytes, s.cfg.MaxImagePixels, s.cfg.MaxImages
	if maxBytes <= 0 {
		maxBytes = defaultMaxImageBytes
	}
	if maxPixels <= 0 {
		maxPixels = defaultMaxImagePixels
	}
	if maxImages <= 0 {
		maxImages = defaultMaxImages
	}
	return
}

// joinMedia gives the messages with images their content (joinParts with
// a per-request marker in place of each image), so the rendered prompt
// can be split at the images.
func (req *chatRequest) joinMedia() {
	for i := range req.messages {
		m := &req.messages[i]
		if m.images == 0 {
			continue
		}
		if req.marker == "" {
			var b [12]byte
			rand.Read(b[:])
			req.marker = "<__media_" + hex.EncodeToString(b[:]) + "__>"
		}
		m.content = joinParts(m.parts, req.marker)
	}
}

// joinParts joins a message's content parts into one string as the
// reference's chat parsing does for templates that take string content
// (common_chat_msg::to_json_oaicompat with concat_typed_text): a "\n"
// before a text part when something precedes it and the part before is
// not an image, and marker in place of each image with nothing around it.
// So [A, B] is "A\nB", ["", B] is "B", [A, image, B] is "A<marker>B" and
// [image, A, B] is "<marker>A\nB".
func joinParts(parts []contentPart, marker string) string {
	var sb strings.Builder
	afterImage := false
	for _, p := range parts {
		if p.image {
			sb.WriteString(marker)
			afterImage = true
			continue
		}
		if !afterImage && sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		afterImage = false
		sb.WriteString(p.text)
	}
	return sb.String()
}

// checkImageInput answers requests with images on servers that cannot
// take them.
func (s *Server) checkImageInput(req *chatRequest) *Error {
	for i, m := range req.messages {
		if m.images == 0 {
			continue
		}
		p := indexPath("messages", i) + ".content"
		const noMTMD = "this vkllm was built without multimodal support (the mtmd feature: build with -tags mtmd, as make build does)"
		switch {
		case !s.cfg.HasProjector && !mtmdBuilt:
			return badRequest(p, "%s: image input needs a server started with --mmproj, and %s", p, noMTMD)
		case !mtmdBuilt:
			return badRequest(p, "%s: image input: %s", p, noMTMD)
		case s.projector() == nil:
			return badRequest(p, "%s: image input needs a server started with --mmproj (multimodal support); this server has no projector", p)
		}
	}
	return nil
}

func (s *Server) projector() Projector {
	if !s.cfg.HasProjector {
		return nil
	}
	if pb, ok := s.backend.(ProjectorBackend); ok {
		return pb.Projector()
	}
	return nil
}

// mediaPrompt tokenizes the rendered prompt text of a request with images
// (tokenizeChat: message contents as plain text, BOS in front when
// addSpecial): each image's marker becomes its layout (the projector's
// text and tokens around its chunks, each chunk's pseudo-ids,
// engine.MediaTokens), and the chunks are returned for the engine, each an
// engine.Media (one image may be several: Idefics3's tiles).
func (s *Server) mediaPrompt(req *chatRequest, t *chatTemplate, text string, addSpecial bool) ([]int32, []*engine.Media, *Error) {
	proj := s.projector()
	var parts []contentPart
	for _, m := range req.messages {
		for _, p := range m.parts {
			if p.image {
				parts = append(parts, p)
			}
		}
	}
	ctx := req.compile.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	maxBytes, maxPixels, maxImages := s.imageLimits()
	if len(parts) > maxImages {
		return nil, nil, badRequest(parts[maxImages].field, "%s: more than %d images in one request (the server's --max-images)", parts[maxImages].field, maxImages)
	}
	if n := strings.Count(text, req.marker); n != len(parts) {
		return nil, nil, badRequest("messages", "messages: the chat template rendered %d of the request's %d images (it drops or repeats message content)", n, len(parts))
	}
	var media []*engine.Media
	next := 0
	image := func(prompt []int32) ([]int32, *Error) {
		if next == len(parts) {
			return nil, badRequest("messages", "messages: the chat template rendered more than the request's %d images", len(parts))
		}
		p := parts[next]
		next++
		data, e := s.imageBytes(ctx, p.url, p.field, maxBytes)
		if e != nil {
			return nil, e
		}
		layout, e := s.prepareImage(ctx, proj, data, p.field, maxPixels)
		if e != nil {
			return nil, e
		}
		for _, mp := range layout {
			if mp.Rows > 0 {
				media = append(media, &engine.Media{Start: len(prompt), N: mp.Rows, NonCausal: proj.NonCausal(), Encode: mp.Encode})
				prompt = append(prompt, engine.MediaTokens(mp.Hash, mp.Rows)...)
				continue
			}
			if mp.Text != "" { // the projector's own markup: special tokens parsed
				toks, err := s.backend.Tokenize(mp.Text, false, true)
				if err != nil {
					return nil, badRequest("messages", "messages: %v", err)
				}
				prompt = append(prompt, toks...)
			}
			prompt = append(prompt, mp.Tokens...)
		}
		return prompt, nil
	}
	prompt, e := s.tokenizeChat(req, t, text, addSpecial, image)
	if e != nil {
		return nil, nil, e
	}
	if next != len(parts) { // the content markers moved an image marker out of place
		return nil, nil, badRequest("messages", "messages: the chat template rendered %d of the request's %d images", next, len(parts))
	}
	return prompt, media, nil
}

// errImageCancelled answers a request whose client left (or whose server
// shut down) while its images waited to be decoded or were decoded.
var errImageCancelled = errorf(503, "", "the request was cancelled while its images were decoded (the client left or the server is shutting down)")

// prepareImage decodes and lays out one image (Projector.Prepare) within
// the server's decode slots and memory (decodeGate): the memory its
// header says the decode needs is reserved first, waiting while ctx (the
// request's validation) lasts.
func (s *Server) prepareImage(ctx context.Context, proj Projector, data []byte, field string, maxPixels int) ([]engine.MediaPart, *Error) {
	cost, err := proj.DecodeCost(data, maxPixels)
	if err != nil {
		return nil, badRequest(field, "%s: %v", field, err)
	}
	if cost > s.decodes.maxBytes {
		return nil, badRequest(field, "%s: decoding this image takes %d MiB, more than the server's %d MiB for decoding images (--max-image-decode-bytes); send it smaller",
			field, (cost+(1<<20)-1)>>20, s.decodes.maxBytes>>20)
	}
	release, err := s.decodes.acquire(ctx, cost)
	if err != nil {
		return nil, errImageCancelled
	}
	defer release()
	layout, err := proj.Prepare(ctx, data, maxPixels)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errImageCancelled
		}
		return nil, badRequest(field, "%s: %v", field, err)
	}
	return layout, nil
}

// imageBytes reads an image_url: a data URL (base64), or a local path or
// file:// URL inside --media-dir (symlinks and ".." resolved first).
// Remote URLs are refused: the server makes no network requests.
func (s *Server) imageBytes(ctx context.Context, raw, field string, maxBytes int64) ([]byte, *Error) {
	lower := strings.ToLower(raw)
	switch {
	case raw == "":
		return nil, badRequest(field, "%s: empty url", field)
	case strings.HasPrefix(lower, "data:"):
		meta, payload, ok := strings.Cut(raw[len("data:"):], ",")
		if !ok {
			return nil, badRequest(field, "%s: a data URL without a comma", field)
		}
		mt, params, _ := strings.Cut(meta, ";")
		if mt != "" && !strings.HasPrefix(strings.ToLower(mt), "image/") {
			return nil, badRequest(field, "%s: a data URL of type %q, want image/*", field, mt)
		}
		if !strings.Contains(strings.ToLower(params), "base64") {
			return nil, badRequest(field, "%s: a data URL must be base64-encoded (data:image/png;base64,...)", field)
		}
		if int64(base64.StdEncoding.DecodedLen(len(payload))) > maxBytes+2 {
			return nil, badRequest(field, "%s: an image of about %d bytes, more than the server's limit of %d (--max-image-bytes)", field, base64.StdEncoding.DecodedLen(len(payload)), maxBytes)
		}
		payload = strings.TrimRight(payload, "=")
		data, err := base64.RawStdEncoding.DecodeString(payload)
		if err != nil {
			return nil, badRequest(field, "%s: bad base64 in the data URL: %v", field, err)
		}
		if int64(len(data)) > maxBytes {
			return nil, badRequest(field, "%s: an image of %d bytes, more than the server's limit of %d (--max-image-bytes)", field, len(data), maxBytes)
		}
		return data, nil
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		return nil, badRequest(field, "%s: remote URLs are not fetched (the server makes no network requests): send the image as a data URL, or a file under --media-dir", field)
	}
	path := raw
	if strings.HasPrefix(lower, "file:") {
		u, err := url.Parse(raw)
		if err != nil || u.Host != "" && u.Host != "localhost" {
			return nil, badRequest(field, "%s: a file URL must be file:///absolute/path", field)
		}
		path = u.Path
	} else if i := strings.Index(raw, ":"); i > 1 && !strings.ContainsAny(raw[:i], "/\\") {
		return nil, badRequest(field, "%s: URL scheme %q is not supported (data:, file:// or a path under --media-dir)", field, raw[:i])
	}
	dir := s.cfg.MediaDir
	if dir == "" {
		return nil, badRequest(field, "%s: local files are refused: the server was started without --media-dir (send the image as a data URL)", field)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, errorf(500, field, "%s: --media-dir %s: %v", field, dir, err)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	// A missing file and one outside the folder get the same answer, so
	// that requests cannot probe which paths exist elsewhere on the disk.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, badRequest(field, "%s: no such file under --media-dir", field)
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil, badRequest(field, "%s: no such file under --media-dir", field)
	}
	data, e := readMediaFile(ctx, real, field, maxBytes, s.cfg.ReadTimeout)
	if e != nil {
		return nil, e
	}
	return data, nil
}

// mediaReadChunk is how much readMediaFile reads between its checks of the
// request and the clock.
const mediaReadChunk = 1 << 20

// readMediaFile reads the file at path (resolved, inside --media-dir) for
// the image part field. It opens the file without blocking and without
// following a symlink put in its place since it was resolved, and refuses
// anything but a regular file before reading: a FIFO or a device would
// otherwise hold the request, a thread and a descriptor for as long as it
// gives no bytes. The read goes in chunks, stopping when ctx is done or
// after timeout (a file on a stalled network mount).
func readMediaFile(ctx context.Context, path, field string, maxBytes int64, timeout time.Duration) ([]byte, *Error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, badRequest(field, "%s: cannot open the file: %v", field, errNoPath(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, badRequest(field, "%s: not a regular file", field)
	}
	if st.Size() > maxBytes {
		return nil, badRequest(field, "%s: an image of %d bytes, more than the server's limit of %d (--max-image-bytes)", field, st.Size(), maxBytes)
	}
	deadline := time.Now().Add(timeout)
	data := make([]byte, 0, min(st.Size(), maxBytes)+1)
	for {
		if ctx.Err() != nil {
			return nil, errImageCancelled
		}
		if timeout > 0 && time.Now().After(deadline) {
			return nil, badRequest(field, "%s: reading the file took more than %v (--read-timeout)", field, timeout)
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):min(cap(data), len(data)+mediaReadChunk)])
		data = data[:len(data)+n]
		if int64(len(data)) > maxBytes {
			return nil, badRequest(field, "%s: an image of more than %d bytes (--max-image-bytes)", field, maxBytes)
		}
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, badRequest(field, "%s: reading the file: %v", field, errNoPath(err))
		}
	}
}

// errNoPath drops the path from a file error (the client named the file;
// the server's layout stays private).
func errNoPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
