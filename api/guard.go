package api

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"strings"

	"github.com/valyala/fasthttp"
)

// The browser guard. A web page the user visits can send requests to a
// local server: "simple" cross-origin requests (text/plain bodies, no
// custom headers) go out without a CORS preflight, and DNS rebinding lets
// a page read the answers under its own host name. So:
//
//   - POST bodies must be declared application/json, which a page can only
//     send cross-origin after a preflight the server does not grant;
//   - a server listening on a loopback address answers only requests whose
//     Host is a loopback name (or one of Config.AllowedHosts), which a
//     rebound host name is not;
//   - a request from a browser page (an Origin header) must come from the
//     server's own origin or one of Config.CORSOrigins, which alone get CORS
//     headers and preflight answers.

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

// hostAllowed reports whether a request with Host host may be answered.
func (s *Server) hostAllowed(host []byte) bool {
	if !s.loopbackOnly && len(s.cfg.AllowedHosts) == 0 {
		return true
	}
	name := hostName(string(host))
	for _, h := range s.cfg.AllowedHosts {
		if h == "*" || strings.EqualFold(h, name) {
			return true
		}
	}
	if s.loopbackOnly {
		for _, h := range loopbackHosts {
			if name == h || strings.HasPrefix(name, "127.") && net.ParseIP(name) != nil {
				return true
			}
		}
	}
	return false
}

// corsOrigin returns whether the request's Origin (if any) may use the
// server, and whether to send CORS headers for it: an origin listed in
// Config.CORSOrigins ("*" lists all) gets them; the server's own origin
// (its Host) needs none.
func (s *Server) corsOrigin(ctx *fasthttp.RequestCtx) (allowed, cors bool) {
	origin := ctx.Request.Header.Peek("Origin")
	if len(origin) == 0 {
		return true, false
	}
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" || strings.EqualFold(o, string(origin)) {
			return true, true
		}
	}
	// Same origin: the page's authority is this server's Host.
	o := string(origin)
	if i := strings.Index(o, "://"); i >= 0 && strings.EqualFold(o[i+3:], string(ctx.Host())) {
		return true, false
	}
	return false, false
}

// guard applies the browser rules of this file before the router; it
// answers the request itself and returns false when the request must not
// go on.
func (s *Server) guard(ctx *fasthttp.RequestCtx) bool {
	if !s.hostAllowed(ctx.Host()) {
		s.writeError(ctx, errorf(403, "", "this server does not answer for the host named in the Host header; it listens on a loopback address and answers loopback names and --allowed-hosts"))
		return false
	}
	allowed, cors := s.corsOrigin(ctx)
	if !allowed {
		s.writeError(ctx, errorf(403, "", "requests from web pages of other origins are refused; allow an origin with --cors-origins"))
		return false
	}
	if cors {
		h := &ctx.Response.Header
		h.SetBytesV("Access-Control-Allow-Origin", ctx.Request.Header.Peek("Origin"))
		h.Set("Vary", "Origin")
		if ctx.IsOptions() {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			ctx.SetStatusCode(fasthttp.StatusNoContent)
			return false
		}
	}
	if ctx.IsPost() && !isJSONContentType(ctx.Request.Header.ContentType()) {
		s.writeError(ctx, errorf(415, "", "the request body must be sent with Content-Type: application/json"))
		return false
	}
	return true
}

// isJSONContentType reports whether ct is application/json, with or
// without parameters (charset).
func isJSONContentType(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(ct), []byte("application/json"))
}

// authorized reports whether the request carries the API key, when one is
// set, as "Authorization: Bearer <key>" (the scheme in any case, RFC
// 7235). The keys are compared through their SHA-256 digests, so the time
// taken tells nothing about the key, its length included.
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	h := ctx.Request.Header.Peek("Authorization")
	const scheme = "bearer "
	if len(h) < len(scheme) || !strings.EqualFold(string(h[:len(scheme)]), scheme) {
		return false
	}
	got := sha256.Sum256(bytes.TrimLeft(h[len(scheme):], " "))
	want := sha256.Sum256([]byte(s.cfg.APIKey))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
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
