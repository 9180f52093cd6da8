package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// sseWriter writes Server-Sent Events frames: "data: <json>\n\n", flushed
// per event. After a failed write or flush every later call returns the
// same error, so the caller cancels its generation at the next step.
type sseWriter struct {
	w   *bufio.Writer
	buf []byte
	err error

	// conn, when set, gets a write deadline idle from now before each
	// event: --timeout bounds how long one write may wait for the
	// client, not the stream.
	conn net.Conn
	idle time.Duration
	// timedOut says a write failed by that deadline; sentError is the
	// error event the stream ended with, if any (for the log).
	timedOut  bool
	sentError *Error
}

func newSSEWriter(w *bufio.Writer) *sseWriter { return &sseWriter{w: w, buf: make([]byte, 0, 512)} }

// errEncode ends a stream whose chunk did not encode.
var errEncode = errors.New("api: a stream chunk could not be encoded")

// data writes one data frame holding payload and flushes it. An empty
// payload is what a failed json.Marshal leaves: instead of an empty "data: "
// frame the stream gets a 500 error event and ends (every later call
// returns errEncode).
func (s *sseWriter) data(payload []byte) error {
	if s.err != nil {
		return s.err
	}
	if len(payload) == 0 {
		return s.fail(errEncode)
	}
	s.buf = append(s.buf[:0], "data: "...)
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, '\n', '\n')
	return s.write()
}

func (s *sseWriter) write() error {
	if s.conn != nil && s.idle > 0 {
		s.conn.SetWriteDeadline(time.Now().Add(s.idle))
	}
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = err
	} else if err := s.w.Flush(); err != nil {
		s.err = err
	}
	if s.err != nil && (isTimeout(s.err) || s.conn != nil && writeTimedOut(s.conn)) {
		s.timedOut = true
	}
	return s.err
}

// done writes the terminating "data: [DONE]" frame.
func (s *sseWriter) done() error { return s.data([]byte("[DONE]")) }

// error writes an error event: "event: error" and the error body.
func (s *sseWriter) error(e *Error) error {
	if s.err != nil {
		return s.err
	}
	s.sentError = e
	s.buf = append(s.buf[:0], "event: error\ndata: "...)
	s.buf = appendErrorBody(s.buf, e)
	s.buf = append(s.buf, '\n', '\n')
	return s.write()
}

// json writes v, encoded as JSON, as one data frame. A value that does not
// encode (a NaN or infinite number) ends the stream with a 500 error event
// naming the cause, never a frame without data.
func (s *sseWriter) json(v any) error {
	if s.err != nil {
		return s.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s.fail(fmt.Errorf("%w: %v", errEncode, err))
	}
	return s.data(b)
}

// fail ends the stream with a 500 error event for cause and returns cause
// from then on.
func (s *sseWriter) fail(cause error) error {
	s.error(errorf(500, "", "internal error: %v", cause))
	if s.err == nil {
		s.err = cause
	}
	return s.err
}
