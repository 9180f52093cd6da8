package api

import (
	"context"
	"errors"
	"io"

	"github.com/valyala/fasthttp"
)

// Request bodies are read by readBody, not by fasthttp: only once the
// request passed the browser guard and authentication, and only when its
// bytes fit the server's budget of body bytes in flight
// (Config.MaxBodyBytesInFlight). So a flood of large bodies is refused
// before it is read, and the memory that bodies and their decoding take is
// bounded across all requests (issue 17 item 3).

// bodyReadKey marks a request whose body readBody consumed (a user value).
const bodyReadKey = "vkllm.bodyRead"

// bodyHeldKey is the user value of a request whose body readBody read: a
// *int, the bytes of the in-flight budget it holds (its body's, and what
// its decoding was charged, chargeDecoded), which its release gives back.
const bodyHeldKey = "vkllm.bodyHeld"

// decodedJSONCost is what one byte of the JSON that chat templates read
// (tools, chat_template_kwargs) costs once parsed into template values
// (jinja.ParseJSON: maps, interfaces, key order): 20x for an object of
// many small objects, 7x for long arrays (TestDecodedJSONCost measures
// it). The request is charged that much in the in-flight budget, on top
// of its body, before they are parsed.
const decodedJSONCost = 24

// chargeKey is the context value of the request's charge (chargeDecoded).
type chargeKey struct{}

// chargeDecoded charges decodedJSONCost times n bytes of field's JSON to
// the request of ctx (validationBudget's context); nil when they fit, else
// the answer: a 413 naming field when they cannot ever fit
// --max-inflight-bytes, a 503 when other requests hold the budget now.
func chargeDecoded(ctx context.Context, field string, n int) *Error {
	if ctx == nil || n <= 0 {
		return nil // a decode outside a request (tests, the budget unset)
	}
	if f, ok := ctx.Value(chargeKey{}).(func(string, int) *Error); ok {
		return f(field, decodedJSONCost*n)
	}
	return nil
}

// charger returns the charge function of rc's requests (chargeDecoded):
// it takes the bytes from the in-flight budget and leaves them to the
// request's release (readBody). Without a body read, nothing is charged.
func (s *Server) charger(rc *fasthttp.RequestCtx) func(string, int) *Error {
	return func(field string, n int) *Error {
		held, ok := rc.UserValue(bodyHeldKey).(*int)
		if !ok {
			return nil
		}
		if n > s.cfg.MaxBodyBytesInFlight {
			return errorf(413, field, "%s: %d bytes of JSON take about %d bytes once decoded, more than the %d bytes of requests the server reads or serves at once (--max-inflight-bytes)",
				field, n/decodedJSONCost, n, s.cfg.MaxBodyBytesInFlight)
		}
		if !s.takeBodyBytes(n) {
			return s.errBodyBudget(n)
		}
		*held += n
		return nil
	}
}

// takeBodyBytes reserves n bytes of the in-flight budget; false when they
// do not fit.
func (s *Server) takeBodyBytes(n int) bool {
	for {
		cur := s.bodyBytes.Load()
		if cur+int64(n) > int64(s.cfg.MaxBodyBytesInFlight) {
			return false
		}
		if s.bodyBytes.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

// errBodyBudget answers a body that does not fit the in-flight budget.
func (s *Server) errBodyBudget(n int) *Error {
	return errorf(503, "", "the server is busy with other large request bodies: %d more bytes do not fit the %d bytes of bodies it reads or serves at once (--max-inflight-bytes); try again shortly",
		n, s.cfg.MaxBodyBytesInFlight)
}

// readBody reads the request body into a buffer of its own, reserving its
// bytes in the in-flight budget, and installs it as the request's body
// (ctx.PostBody returns it). release gives the bytes back; call it when the
// request is answered. A body over MaxRequestBytes is a 413, one that does
// not fit the budget a 503, both before it is read.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) (release func(), e *Error) {
	ctx.SetUserValue(bodyReadKey, true)
	held := new(int)
	ctx.SetUserValue(bodyHeldKey, held)
	release = func() {
		s.bodyBytes.Add(-int64(*held))
		*held = 0
		ctx.RemoveUserValue(bodyHeldKey)
	}
	take := func(n int) bool {
		if !s.takeBodyBytes(n) {
			return false
		}
		*held += n
		return true
	}
	cl := ctx.Request.Header.ContentLength()
	limit := s.cfg.MaxRequestBytes
	if cl > limit {
		return release, errorf(413, "", "request body too large: %d bytes, the limit is %d bytes (--max-request-bytes)", cl, limit)
	}
	stream := ctx.RequestBodyStream()
	if cl == 0 || stream == nil {
		return release, nil
	}
	var buf []byte
	if cl > 0 {
		if !take(cl) {
			return release, s.errBodyBudget(cl)
		}
		buf = make([]byte, cl)
		if _, err := io.ReadFull(stream, buf); err != nil {
			return release, bodyReadError(err)
		}
	} else {
		// Chunked: the budget is taken as the body arrives.
		const step = 64 << 10
		for {
			if len(buf) == cap(buf) {
				grow := min(max(cap(buf), step), limit+1-cap(buf))
				if grow <= 0 {
					return release, errorf(413, "", "request body too large: the limit is %d bytes (--max-request-bytes)", limit)
				}
				if !take(grow) {
					return release, s.errBodyBudget(grow)
				}
				nb := make([]byte, len(buf), cap(buf)+grow)
				copy(nb, buf)
				buf = nb
			}
			n, err := stream.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return release, bodyReadError(err)
			}
		}
		if len(buf) > limit {
			return release, errorf(413, "", "request body too large: the limit is %d bytes (--max-request-bytes)", limit)
		}
	}
	ctx.Request.SetBodyRaw(buf)
	return release, nil
}

// bodyReadError maps a failure to read the body.
func bodyReadError(err error) *Error {
	if isTimeout(err) {
		return errorf(408, "", "timed out reading the request body")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return badRequest("", "the request body ended before its Content-Length")
	}
	return badRequest("", "reading the request body failed")
}
