package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultEndpoint is the hub's address when $HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// maxListing bounds a repository listing's JSON body (one page).
const maxListing = 16 << 20

// maxPages bounds the pages of a repository listing followed.
const maxPages = 64

// Client gets models from a hub into the store in Dir. The zero value is
// not usable: Dir must be set (NewFromEnv sets every field from the
// environment).
type Client struct {
	// Endpoint is the hub's base URL ("" = DefaultEndpoint).
	Endpoint string
	// Token is sent as "Authorization: Bearer Token" to the endpoint's
	// host only, never to a host a download redirects to.
	Token string
	// Offline serves from the store alone: no request is made.
	Offline bool
	// Dir is the store folder.
	Dir string
	// HTTP makes the requests (nil = a client with no overall timeout, as
	// downloads may take hours). Its redirect policy is replaced.
	HTTP *http.Client
	// Progress, if set, follows each file's download: bytes done of total,
	// counting the part a resumed download already had.
	Progress func(file string, done, total int64)
	// Notice, if set, receives remarks for people (a cached model used
	// because the hub could not be reached).
	Notice func(msg string)
	// Attempts is how many times a download is tried, each resuming where
	// the last one stopped (0 = 4).
	Attempts int
	// RetryDelay is the wait before the second attempt, doubled for each
	// later one (0 = 500ms).
	RetryDelay time.Duration
}

// NewFromEnv returns a client configured as huggingface_hub reads its
// environment: $HF_ENDPOINT, $HF_TOKEN (else the token file "hf auth
// login" writes: $HF_TOKEN_PATH, else $HF_HOME/token, else
// ~/.cache/huggingface/token) and $HF_HUB_OFFLINE (1, true, yes or on).
// dir is the store folder ("" = DefaultDir()).
func NewFromEnv(dir string) *Client {
	if dir == "" {
		dir = DefaultDir()
	}
	off := strings.ToLower(os.Getenv("HF_HUB_OFFLINE"))
	return &Client{
		Endpoint: os.Getenv("HF_ENDPOINT"),
		Token:    envToken(),
		Offline:  off == "1" || off == "true" || off == "yes" || off == "on",
		Dir:      dir,
	}
}

// envToken is $HF_TOKEN, else the first line of the token file.
func envToken() string {
	if t := strings.TrimSpace(os.Getenv("HF_TOKEN")); t != "" {
		return t
	}
	name := os.Getenv("HF_TOKEN_PATH")
	if name == "" {
		home := os.Getenv("HF_HOME")
		if home == "" {
			d, err := os.UserCacheDir()
			if err != nil {
				return ""
			}
			home = filepath.Join(d, "huggingface")
		}
		name = filepath.Join(home, "token")
	}
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// DefaultDir is the store's default folder: $HF_HOME/vkllm when $HF_HOME is
// set, else vkllm/models in the user's cache folder ($XDG_CACHE_HOME or
// ~/.cache on Linux), else vkllm-models in the working folder.
func DefaultDir() string {
	if h := os.Getenv("HF_HOME"); h != "" {
		return filepath.Join(h, "vkllm")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "vkllm", "models")
	}
	return "vkllm-models"
}

// File is a file of a model: its path in the repository, its size and its
// SHA-256 (hex, "" when the hub publishes none).
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

// Model is a model in the store: the manifest Pull writes.
type Model struct {
	Repo     string `json:"repo"`
	Quant    string `json:"quant"`
	Revision string `json:"revision"`
	// Files are the model's files, the parts of a split model in order.
	Files []File `json:"files"`
	// MMProj is the vision projector, nil for none.
	MMProj *File     `json:"mmproj,omitempty"`
	Pulled time.Time `json:"pulled"`
	dir    string
}

// Name is the model's store name, repo:quant.
func (m *Model) Name() string { return m.Repo + ":" + m.Quant }

// Path is the local path of the model's (first) file.
func (m *Model) Path() string { return m.local(m.Files[0]) }

// MMProjPath is the local path of the vision projector, "" for none.
func (m *Model) MMProjPath() string {
	if m.MMProj == nil {
		return ""
	}
	return m.local(*m.MMProj)
}

// Size is the bytes of the model's files and projector.
func (m *Model) Size() int64 {
	var n int64
	for _, f := range m.all() {
		n += f.Size
	}
	return n
}

func (m *Model) all() []File {
	fs := append([]File(nil), m.Files...)
	if m.MMProj != nil {
		fs = append(fs, *m.MMProj)
	}
	return fs
}

func (m *Model) local(f File) string {
	return filepath.Join(m.dir, "models", filepath.FromSlash(m.Repo), filepath.FromSlash(f.Path))
}

// StatusError is a hub answer other than success.
type StatusError struct {
	URL    string
	Status int
	Repo   string
}

func (e *StatusError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Sprintf("%s: %d %s from the hub: the repository is gated, private or missing; set HF_TOKEN to a token that has access (%s)",
			e.Repo, e.Status, http.StatusText(e.Status), e.URL)
	case http.StatusNotFound:
		return fmt.Sprintf("%s: not found on the hub (%s)", e.Repo, e.URL)
	}
	return fmt.Sprintf("%s: %d %s from the hub (%s)", e.Repo, e.Status, http.StatusText(e.Status), e.URL)
}

// HashError is a downloaded file whose SHA-256 is not the published one.
type HashError struct {
	File      string
	Got, Want string
}

func (e *HashError) Error() string {
	return fmt.Sprintf("%s: downloaded file is corrupt: SHA-256 %s, the hub publishes %s; it was deleted", e.File, e.Got, e.Want)
}

func (c *Client) endpoint() string {
	if c.Endpoint == "" {
		return DefaultEndpoint
	}
	return strings.TrimRight(c.Endpoint, "/")
}

// httpClient is c.HTTP with the redirect policy: the token goes to the
// endpoint's host alone.
func (c *Client) httpClient() (*http.Client, error) {
	base, err := url.Parse(c.endpoint())
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("hub endpoint %q is no URL (HF_ENDPOINT)", c.endpoint())
	}
	hc := &http.Client{}
	if c.HTTP != nil {
		cp := *c.HTTP
		hc = &cp
	}
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("more than 10 redirects")
		}
		if req.URL.Host != base.Host || req.URL.Scheme != base.Scheme {
			req.Header.Del("Authorization")
		}
		return nil
	}
	return hc, nil
}

func (c *Client) newRequest(ctx context.Context, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "vkllm")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// list returns the files of repo at revision rev, following the listing's
// pages (Link rel="next" on the endpoint's host).
func (c *Client) list(ctx context.Context, hc *http.Client, repo, rev string) ([]entry, error) {
	u := fmt.Sprintf("%s/api/models/%s/tree/%s?recursive=true", c.endpoint(), repo, url.PathEscape(rev))
	var all []entry
	for page := 0; u != ""; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("%s: the listing has more than %d pages", repo, maxPages)
		}
		req, err := c.newRequest(ctx, u)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxListing+1))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, &StatusError{URL: u, Status: resp.StatusCode, Repo: repo}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading the listing: %w", repo, err)
		}
		if len(body) > maxListing {
			return nil, fmt.Errorf("%s: the listing is over %d bytes", repo, maxListing)
		}
		var entries []entry
		if err := json.Unmarshal(body, &entries); err != nil {
			return nil, fmt.Errorf("%s: the hub's listing is not a JSON file list: %v", repo, err)
		}
		all = append(all, entries...)
		u = nextLink(resp.Header.Get("Link"), resp.Request.URL)
	}
	return all, nil
}

// nextLink returns the rel="next" URL of a Link header on from's host, ""
// for none.
func nextLink(h string, from *url.URL) string {
	for _, part := range strings.Split(h, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		u, err := from.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err == nil && u.Host == from.Host {
			return u.String()
		}
	}
	return ""
}

// Pull makes ref's model present in the store and returns it: it lists
// the repository, picks the files, downloads those the store lacks (with
// the projector when withMMProj) and writes the manifest. Offline it
// returns the stored model or an error saying it is not stored; when the
// hub cannot be reached (no answer at all) a stored model is used with a
// Notice.
func (c *Client) Pull(ctx context.Context, ref Ref, withMMProj bool) (*Model, error) {
	if c.Offline {
		m, err := c.Cached(ref)
		if err != nil {
			return nil, fmt.Errorf("offline (HF_HUB_OFFLINE): %w", err)
		}
		return m, nil
	}
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	const rev = "main"
	entries, err := c.list(ctx, hc, ref.Repo, rev)
	if err != nil {
		var se *StatusError
		if !errors.As(err, &se) && ctx.Err() == nil {
			if m, cerr := c.Cached(ref); cerr == nil {
				c.notice(fmt.Sprintf("the hub could not be reached (%v); using the stored %s", err, m.Name()))
				return m, nil
			}
			return nil, fmt.Errorf("%s: the hub %s could not be reached (%w), and the model is not in the store %s", ref, c.endpoint(), err, c.Dir)
		}
		return nil, err
	}
	files, mmproj, quant, err := pick(entries, ref)
	if err != nil {
		return nil, err
	}
	if !withMMProj {
		mmproj = nil
	}
	m := &Model{Repo: ref.Repo, Quant: quant, Revision: rev, Files: files, MMProj: mmproj, dir: c.Dir}
	for _, f := range m.all() {
		if err := checkPath(f.Path); err != nil {
			return nil, fmt.Errorf("%s: %w", ref.Repo, err)
		}
	}
	known := c.knownHashes(ref.Repo)
	for _, f := range m.all() {
		if err := c.fetch(ctx, hc, m, f, known); err != nil {
			return nil, err
		}
	}
	m.Pulled = time.Now().UTC()
	if err := c.writeManifest(m); err != nil {
		return nil, err
	}
	return m, nil
}

func (c *Client) notice(s string) {
	if c.Notice != nil {
		c.Notice(s)
	}
}

// checkPath refuses repository paths that would leave the store.
func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("file path %q is not a plain relative path", p)
	}
	return nil
}

// fetch makes f present at its local path: kept when the stored file has
// f's size and hash (as a manifest recorded it, or hashed now), else
// downloaded.
func (c *Client) fetch(ctx context.Context, hc *http.Client, m *Model, f File, known map[string]string) error {
	dst := m.local(f)
	if present(dst, f, known) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// One download of a file at a time: another pull of it waits, then
	// finds it present.
	lockName := filepath.Join(c.Dir, "locks", filepath.FromSlash(m.Repo), filepath.FromSlash(f.Path)+".lock")
	if err := os.MkdirAll(filepath.Dir(lockName), 0o755); err != nil {
		return err
	}
	unlock, err := lock(ctx, lockName, func() {
		c.notice(fmt.Sprintf("%s: waiting for another pull downloading it", f.Path))
	})
	if err != nil {
		return fmt.Errorf("locking %s: %w", dst, err)
	}
	defer unlock()
	if present(dst, f, nil) {
		return nil
	}
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", c.endpoint(), m.Repo, url.PathEscape(m.Revision), escapePath(f.Path))
	attempts, delay := c.Attempts, c.RetryDelay
	if attempts <= 0 {
		attempts = 4
	}
	if delay <= 0 {
		delay = 500 * time.Millisecond
	}
	part := dst + ".part"
	// A part left by an earlier command may be of another version of the
	// file: when the result does not verify, it is fetched once more whole.
	st, err := os.Stat(part)
	stale := err == nil && st.Size() > 0
	for {
		err := c.downloadAttempts(ctx, hc, u, m.Repo, f, part, attempts, delay)
		if err != nil {
			return fmt.Errorf("downloading %s: %w", f.Path, err)
		}
		got, err := hashFile(part)
		if err != nil {
			return err
		}
		if f.SHA256 != "" && got != f.SHA256 {
			os.Remove(part)
			if stale {
				c.notice(fmt.Sprintf("%s: the download resumed from an earlier partial file does not verify; downloading it whole", f.Path))
				stale = false
				continue
			}
			return &HashError{File: f.Path, Got: got, Want: f.SHA256}
		}
		return os.Rename(part, dst)
	}
}

// downloadAttempts runs download up to attempts times while it fails for
// a reason a retry may cure, waiting delay, then twice that, and so on.
func (c *Client) downloadAttempts(ctx context.Context, hc *http.Client, u, repo string, f File, part string, attempts int, delay time.Duration) error {
	for a := 1; ; a++ {
		err := c.download(ctx, hc, u, repo, f, part)
		var se *StatusError
		if err == nil || errors.As(err, &se) && se.Status < 500 || ctx.Err() != nil || a == attempts {
			return err
		}
		c.notice(fmt.Sprintf("%s: download interrupted (%v); resuming", f.Path, err))
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay *= 2
	}
}

// present reports whether dst holds f: its size and, unless a manifest
// recorded that hash for it (known), its SHA-256.
func present(dst string, f File, known map[string]string) bool {
	st, err := os.Stat(dst)
	if err != nil || st.Size() != f.Size {
		return false
	}
	if f.SHA256 == "" || known[f.Path] == f.SHA256 {
		return true
	}
	got, err := hashFile(dst)
	return err == nil && got == f.SHA256
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// download brings part up to f.Size bytes: it asks for the bytes after
// those part has (Range), and starts over when the server sends the whole
// file (200) instead.
func (c *Client) download(ctx context.Context, hc *http.Client, u, repo string, f File, part string) error {
	out, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	st, err := out.Stat()
	if err != nil {
		return err
	}
	have := st.Size()
	if have > f.Size {
		have = 0
	}
	if have == f.Size && f.Size > 0 {
		return nil
	}
	req, err := c.newRequest(ctx, u)
	if err != nil {
		return err
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0 && strings.HasPrefix(resp.Header.Get("Content-Range"), "bytes "+strconv.FormatInt(have, 10)+"-"):
	case resp.StatusCode == http.StatusOK:
		have = 0
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// The part is no prefix of the file: start again.
		out.Truncate(0)
		return errors.New("the server refused to resume (416)")
	case resp.StatusCode == http.StatusPartialContent:
		out.Truncate(0)
		return fmt.Errorf("the server resumed at the wrong offset (Content-Range %q)", resp.Header.Get("Content-Range"))
	default:
		return &StatusError{URL: u, Status: resp.StatusCode, Repo: repo}
	}
	if err := out.Truncate(have); err != nil {
		return err
	}
	if _, err := out.Seek(have, io.SeekStart); err != nil {
		return err
	}
	w := &progressWriter{w: out, done: have, total: f.Size, file: f.Path, report: c.Progress}
	w.tick()
	n, err := io.Copy(w, io.LimitReader(resp.Body, f.Size-have+1))
	switch {
	case err != nil:
		return err
	case have+n > f.Size:
		out.Truncate(0)
		return fmt.Errorf("the server sent more than the %d bytes the hub lists", f.Size)
	case have+n < f.Size:
		return fmt.Errorf("the connection ended after %d of %d bytes: %w", have+n, f.Size, io.ErrUnexpectedEOF)
	}
	return nil
}

// progressWriter counts the bytes written and reports them.
type progressWriter struct {
	w           io.Writer
	done, total int64
	file        string
	report      func(string, int64, int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	p.tick()
	return n, err
}

func (p *progressWriter) tick() {
	if p.report != nil {
		p.report(p.file, p.done, p.total)
	}
}

func hashFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var h hash.Hash = sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
