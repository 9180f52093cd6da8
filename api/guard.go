package api

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// The browser guard. A web page the user visits can send requests to a
// local server: "simple" cross-origin requests (text/plain or form bodies,
// no custom headers) go out without a CORS preflight, and DNS rebinding
// lets a page read the answers under its own host name. Browsers say where
// a request comes from; other clients (curl, SDKs, scripts) say nothing and
// are not a page's victims. So:
//
//   - a server listening on a loopback address answers only requests whose
//     Host is a loopback name (or one of Config.AllowedHosts), which a
//     rebound host name is not; one listening on another address, without
//     Config.AllowedHosts or an API key, answers only Host names no public
//     DNS can point at it (hostAllowed);
//   - a request that may change state (any method but GET, HEAD and
//     OPTIONS) from another site's page is refused, by the rule of Go's
//     net/http.CrossOriginProtection (crossOrigin below): Sec-Fetch-Site
//     cross-site or same-site, or without it an Origin whose host is not
//     the request's Host, unless the Origin is one of Config.CORSOrigins.
//     A request with neither header is accepted whatever its content
//     type, and its body is read as JSON: curl -d sends a form type;
//   - the origins of Config.CORSOrigins alone get CORS headers and
//     preflight answers; a preflight from another origin is refused.
//
// The guard also refuses multipart bodies (multipartBody below) before a
// byte of them is read.

// loopbackHosts are the Host names of a loopback listener.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1", "[::1]"}

// isLoopbackAddr reports whether addr (a listener address) is a loopback
// address.
func isLoopbackAddr(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// hostName returns the host of a Host header or an origin's authority,
// without the port, lower-cased.
func hostName(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h)
	}
	return strings.ToLower(strings.Trim(hostport, "[]"))
}

// hostAllowed reports whether a request with Host host may be answered:
//
//   - a listed name (Config.AllowedHosts; "*" lists every name);
//   - on a loopback listener, a loopback name, and nothing else;
//   - elsewhere, with a list, nothing else; with an API key, any name (a
//     rebound page cannot send the key); without either, a name no public
//     DNS answers for, so that no other site can rebind it
//     (rebindSafeHost).
func (s *Server) hostAllowed(host []byte) bool {
	name := hostName(string(host))
	for _, h := range s.cfg.AllowedHosts {
		if h == "*" || strings.EqualFold(h, name) {
			return true
		}
	}
	switch {
	case s.loopbackOnly:
		for _, h := range loopbackHosts {
			if name == h || strings.HasPrefix(name, "127.") && net.ParseIP(name) != nil {
				return true
			}
		}
		return false
	case len(s.cfg.AllowedHosts) > 0:
		return false
	case s.cfg.APIKey != "":
		return true
	}
	return rebindSafeHost(name, s.hostname)
}

// privateSuffixes are the name suffixes no public DNS delegates (RFC 6761,
// 6762, 8375 and the private-use .internal and .lan).
var privateSuffixes = []string{".localhost", ".local", ".internal", ".lan", ".home.arpa"}

// rebindSafeHost reports whether name, a request's Host without its port,
// is one a DNS-rebinding page cannot use: rebinding needs a name whose
// public DNS the attacker controls, and a page's requests carry its own
// name. So an IP address (the server's own, as a client typed it), a name
// without a dot (localhost, a Docker service or a machine on the LAN),
// a name under a suffix public DNS does not serve, the machine's own
// hostname and an empty Host (no browser sends one) are safe; any other
// name is a public one and must be listed (--allowed-hosts).
func rebindSafeHost(name, hostname string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || !strings.Contains(name, ".") || strings.EqualFold(name, hostname) {
		return true
	}
	if ip, _, _ := strings.Cut(name, "%"); net.ParseIP(ip) != nil {
		return true
	}
	for _, suf := range privateSuffixes {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

// trustedOrigin reports whether origin, a request's Origin header, is
// listed in Config.CORSOrigins ("*" lists every origin).
func (s *Server) trustedOrigin(origin []byte) bool {
	if len(origin) == 0 {
		return false
	}
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" || strings.EqualFold(o, string(origin)) {
			return true
		}
	}
	return false
}

// crossOrigin returns the 403 for a request from another site's page that
// may change state, or nil. It is the rule of Go's
// net/http.CrossOriginProtection.Check, with Config.CORSOrigins as its
// trusted origins:
//
//   - GET, HEAD and OPTIONS are safe methods (no route changes state on
//     them) and are always allowed;
//   - Sec-Fetch-Site same-origin or none (the user's own action) is
//     allowed; cross-site or same-site is refused unless the Origin is
//     trusted;
//   - without Sec-Fetch-Site (browsers before 2023), an Origin whose host
//     is the request's Host is allowed, another one refused unless it is
//     trusted ("null" included);
//   - a request with neither header is same-origin or not from a browser,
//     and allowed.
func (s *Server) crossOrigin(ctx *fasthttp.RequestCtx) *Error {
	if ctx.IsGet() || ctx.IsHead() || ctx.IsOptions() {
		return nil
	}
	origin := ctx.Request.Header.Peek("Origin")
	switch site := ctx.Request.Header.Peek("Sec-Fetch-Site"); string(site) {
	case "":
		// Go on with Origin.
	case "same-origin", "none":
		return nil
	default:
		if s.trustedOrigin(origin) {
			return nil
		}
		return errorf(403, "", "cross-origin request refused: the browser sent Sec-Fetch-Site: %s and the Origin %q is not in --cors-origins (requests from other sites' pages need their origin listed there)", site, origin)
	}
	if len(origin) == 0 {
		return nil
	}
	if o, err := url.Parse(string(origin)); err == nil && o.Host == string(ctx.Host()) {
		// The page is this server's own (without the scheme: an old
		// browser's HTTP page calling HTTPS passes, as in Go).
		return nil
	}
	if s.trustedOrigin(origin) {
		return nil
	}
	return errorf(403, "", "cross-origin request refused: the Origin %q is neither this server (Host %q) nor in --cors-origins (requests from other sites' pages need their origin listed there)", origin, ctx.Host())
}

// multipartBody returns the 415 for a request whose Content-Type is a
// multipart type, or nil. No route reads multipart, and no body of parts
// is JSON; refusing it here, before the API key check and readBody,
// leaves it unread (fasthttp's pre-parsing of multipart/form-data is off,
// Server.DisablePreParseMultipartForm), so a client without a key cannot
// make the server read or buffer one.
func multipartBody(ctx *fasthttp.RequestCtx) *Error {
	ct := ctx.Request.Header.ContentType()
	mediaType, _, _ := bytes.Cut(ct, []byte(";"))
	mediaType = bytes.TrimSpace(mediaType)
	const prefix = "multipart/"
	if len(mediaType) < len(prefix) || !strings.EqualFold(string(mediaType[:len(prefix)]), prefix) {
		return nil
	}
	return errorf(415, "", "unsupported Content-Type %q: request bodies are JSON, multipart bodies are not read", mediaType)
}

// guard applies the browser rules of this file before the router; it
// answers the request itself and returns false when the request must not
// go on.
func (s *Server) guard(ctx *fasthttp.RequestCtx) bool {
	if !s.hostAllowed(ctx.Host()) {
		why := "it listens on a loopback address and answers loopback names and --allowed-hosts"
		switch {
		case !s.loopbackOnly && len(s.cfg.AllowedHosts) > 0:
			why = "it answers the names of --allowed-hosts"
		case !s.loopbackOnly:
			why = "without --allowed-hosts or --api-key it answers only IP addresses and names public DNS cannot point at it (no dot, .local, .internal, .lan, .localhost, .home.arpa, its hostname), against DNS rebinding; list this name in --allowed-hosts or set --api-key"
		}
		s.writeError(ctx, errorf(403, "", "this server does not answer for the host named in the Host header: %s", why))
		return false
	}
	if e := s.crossOrigin(ctx); e != nil {
		s.writeError(ctx, e)
		return false
	}
	if e := multipartBody(ctx); e != nil {
		s.writeError(ctx, e)
		return false
	}
	origin := ctx.Request.Header.Peek("Origin")
	if !s.trustedOrigin(origin) {
		if ctx.IsOptions() && len(origin) > 0 && len(ctx.Request.Header.Peek("Access-Control-Request-Method")) > 0 {
			// A CORS preflight: the browser asks whether the page may
			// send its request. Only listed origins may.
			s.writeError(ctx, errorf(403, "", "CORS preflight refused: the Origin %q is not in --cors-origins", origin))
			return false
		}
		return true
	}
	h := &ctx.Response.Header
	h.SetBytesV("Access-Control-Allow-Origin", origin)
	h.Set("Vary", "Origin")
	if ctx.IsOptions() {
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		h.Set("Access-Control-Max-Age", "600")
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		return false
	}
	return true
}

// CheckCORSOrigins reports whether each of origins (--cors-origins) is an
// origin a browser sends, "scheme://host[:port]" without a path, query or
// fragment, or "*"; any other value would never match and is an error, as
// in net/http.CrossOriginProtection.AddTrustedOrigin.
func CheckCORSOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		switch {
		case err != nil:
			return fmt.Errorf("--cors-origins: invalid origin %q: %v", o, err)
		case u.Scheme == "":
			return fmt.Errorf("--cors-origins: invalid origin %q: the scheme is required (https://app.example)", o)
		case u.Host == "":
			return fmt.Errorf("--cors-origins: invalid origin %q: the host is required (https://app.example)", o)
		case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
			return fmt.Errorf("--cors-origins: invalid origin %q: an origin has no path, query or fragment (https://app.example)", o)
		}
	}
	return nil
}

// authorized reports whether the request carries an API key, when keys
// are set (authKey).
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	_, ok := s.authKey(ctx)
	return ok
}

// apiKeyDigests returns the SHA-256 digests of the comma-separated keys
// of --api-key (none for "").
func apiKeyDigests(keys string) [][32]byte {
	var d [][32]byte
	for k := range strings.SplitSeq(keys, ",") {
		if k = strings.TrimSpace(k); k != "" {
			d = append(d, sha256.Sum256([]byte(k)))
		}
	}
	return d
}

// authKey reports whether the request carries one of the API keys, when
// keys are set, as "Authorization: Bearer <key>" (the scheme in any case,
// RFC 7235), and which (its index; 0 when no key is set). The keys are
// compared through their SHA-256 digests, every one of them each time,
// so the time taken tells nothing about the keys, their lengths included.
func (s *Server) authKey(ctx *fasthttp.RequestCtx) (int, bool) {
	if len(s.keys) == 0 {
		return 0, true
	}
	h := ctx.Request.Header.Peek("Authorization")
	const scheme = "bearer "
	if len(h) < len(scheme) || !strings.EqualFold(string(h[:len(scheme)]), scheme) {
		return 0, false
	}
	got := sha256.Sum256(bytes.TrimLeft(h[len(scheme):], " "))
	found := -1
	for i := range s.keys {
		if subtle.ConstantTimeCompare(got[:], s.keys[i][:]) == 1 {
			found = i
		}
	}
	return max(found, 0), found >= 0
}

// cacheScopeKey is the user value of a request under one of several API
// keys: the key's index, its prompt-cache scope.
const cacheScopeKey = "vkllm.cache_scope"

// cacheScope returns the prompt-cache scope of the request ("" when keys
// do not separate scopes) and the tokens of the public prefix
// (Config.CacheShare) that every scope shares.
func (s *Server) cacheScope(ctx *fasthttp.RequestCtx) (string, []int32) {
	key, ok := ctx.UserValue(cacheScopeKey).(int)
	if !ok {
		return "", nil
	}
	s.shareOnce.Do(func() {
		if s.cfg.CacheShare != "" {
			// As prompts are tokenized: special tokens parsed, the
			// model's BOS first when it adds one.
			toks, err := s.backend.Tokenize(s.cfg.CacheShare, true, true)
			if err != nil {
				s.cfg.Logger.Warn("--cache-share: cannot tokenize; nothing is shared between API keys", "err", err)
			}
			s.shareToks = toks
		}
	})
	return "key" + strconv.Itoa(key), s.shareToks
}

// redact returns a log message of fasthttp without the raw request bytes
// some of its errors quote (its header parser appends the whole buffer,
// API keys included): everything from "Buffer size=" or "contents:" on is
// cut, and an Authorization header left anywhere is masked.
func redact(msg string) string {
	for _, marker := range []string{"Buffer size=", "contents:"} {
		if i := strings.Index(msg, marker); i >= 0 {
			msg = strings.TrimRight(msg[:i], " .,") + " [request bytes not logged]"
		}
	}
	lower := strings.ToLower(msg)
	for from := 0; ; {
		i := strings.Index(lower[from:], "authorization")
		if i < 0 {
			break
		}
		i += from + len("authorization")
		end := i
		for end < len(msg) && msg[end] != '\r' && msg[end] != '\n' && msg[end] != '"' {
			end++
		}
		msg = msg[:i] + ": [redacted]" + msg[end:]
		lower = strings.ToLower(msg)
		from = i + len(": [redacted]")
	}
	return msg
}
