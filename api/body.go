package api

import (
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
	held := 0
	release = func() { s.bodyBytes.Add(-int64(held)) }
	take := func(n int) bool {
		if !s.takeBodyBytes(n) {
			return false
		}
		held += n
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
