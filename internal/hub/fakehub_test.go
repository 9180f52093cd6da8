package hub

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeHub serves repositories the way the Hugging Face hub does: the tree
// listing at /api/models/{repo}/tree/{rev} and each file at
// /{repo}/resolve/{rev}/{path}, redirected to a second server (the CDN, on
// another port) that honours Range requests.
type fakeHub struct {
	hub, cdn *httptest.Server

	mu    sync.Mutex
	files map[string][]byte // "owner/repo/path"
	// badHash lists files whose published SHA-256 is not that of their bytes.
	badHash map[string]bool
	token   string // required by the hub when set
	// cutAfter cuts the next download of a file after that many bytes.
	cutAfter    map[string]int64
	ignoreRange bool

	served     int64    // bytes the CDN sent (or was sending)
	ranges     []string // the Range headers the CDN saw
	cdnAuth    []string // the Authorization headers the CDN saw
	listings   int
	downloads  int
	pageLength int // entries per listing page (0 = all in one)
	// gate, when set, holds each download until it is closed.
	gate chan struct{}
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{files: map[string][]byte{}, badHash: map[string]bool{}, cutAfter: map[string]int64{}}
	h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	h.hub = httptest.NewServer(http.HandlerFunc(h.serveHub))
	t.Cleanup(func() { h.hub.Close(); h.cdn.Close() })
	return h
}

// add puts a file of n seeded random bytes in repo and returns them.
func (h *fakeHub) add(repo, path string, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(len(repo)*1000 + len(path) + n))).Read(b)
	h.put(repo, path, b)
	return b
}

func (h *fakeHub) put(repo, path string, b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[repo+"/"+path] = b
}

func (h *fakeHub) client(t *testing.T) *Client {
	return &Client{Endpoint: h.hub.URL, Dir: t.TempDir(), RetryDelay: 1}
}

func (h *fakeHub) authorized(r *http.Request) bool {
	return h.token == "" || r.Header.Get("Authorization") == "Bearer "+h.token
}

func (h *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := strings.TrimPrefix(r.URL.Path, "/")
	if !h.authorized(r) {
		http.Error(w, `{"error":"Invalid credentials"}`, http.StatusUnauthorized)
		return
	}
	if rest, ok := strings.CutPrefix(p, "api/models/"); ok {
		h.listings++
		parts := strings.Split(rest, "/")
		if len(parts) != 4 || parts[2] != "tree" || parts[3] != "main" || r.URL.Query().Get("recursive") != "true" {
			http.NotFound(w, r)
			return
		}
		h.list(w, r, parts[0]+"/"+parts[1])
		return
	}
	parts := strings.SplitN(p, "/", 5)
	if len(parts) == 5 && parts[2] == "resolve" && parts[3] == "main" {
		if _, ok := h.files[parts[0]+"/"+parts[1]+"/"+parts[4]]; ok {
			http.Redirect(w, r, h.cdn.URL+"/blobs/"+parts[0]+"/"+parts[1]+"/"+parts[4], http.StatusFound)
			return
		}
	}
	http.NotFound(w, r)
}

func (h *fakeHub) list(w http.ResponseWriter, r *http.Request, repo string) {
	var out []map[string]any
	for k, b := range h.files {
		path, ok := strings.CutPrefix(k, repo+"/")
		if !ok {
			continue
		}
		sum := sha256.Sum256(b)
		oid := hex.EncodeToString(sum[:])
		if h.badHash[k] {
			sum = sha256.Sum256(append([]byte("x"), b...))
			oid = hex.EncodeToString(sum[:])
		}
		e := map[string]any{"type": "file", "oid": "0123abcd", "size": len(b), "path": path}
		if strings.HasSuffix(path, ".gguf") {
			e["lfs"] = map[string]any{"oid": oid, "size": len(b), "pointerSize": 134}
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		http.Error(w, `{"error":"Repository not found"}`, http.StatusNotFound)
		return
	}
	out = append(out, map[string]any{"type": "directory", "oid": "ff", "size": 0, "path": "sub"})
	sort.Slice(out, func(i, j int) bool { return out[i]["path"].(string) < out[j]["path"].(string) })
	if h.pageLength > 0 {
		start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		end := min(start+h.pageLength, len(out))
		if end < len(out) {
			w.Header().Set("Link", fmt.Sprintf(`<%s?recursive=true&cursor=%d>; rel="next"`, r.URL.Path, end))
		}
		out = out[start:end]
	}
	json.NewEncoder(w).Encode(out)
}

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	key := strings.TrimPrefix(r.URL.Path, "/blobs/")
	b, ok := h.files[key]
	h.cdnAuth = append(h.cdnAuth, r.Header.Get("Authorization"))
	rng := r.Header.Get("Range")
	h.ranges = append(h.ranges, rng)
	cut, hasCut := h.cutAfter[key]
	delete(h.cutAfter, key)
	ignore := h.ignoreRange
	h.downloads++
	gate := h.gate
	h.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	start := 0
	status := http.StatusOK
	if s, ok := strings.CutPrefix(rng, "bytes="); ok && !ignore {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "-"))
		if err != nil || n >= len(b) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start, status = n, http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(b)-1, len(b)))
	}
	body := b[start:]
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if hasCut {
		body = body[:cut]
	}
	// Counted before it is written: the client may be done reading, and
	// the test looking, before Write returns.
	h.mu.Lock()
	h.served += int64(len(body))
	h.mu.Unlock()
	w.Write(body)
	if hasCut {
		// The connection drops midway: the client sees fewer bytes than
		// Content-Length promised.
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.(*net.TCPConn).Close()
		}
	}
}

func (h *fakeHub) stats() (served int64, ranges []string, downloads int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.served, append([]string(nil), h.ranges...), h.downloads
}
