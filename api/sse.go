package api

import (
	"bufio"
)

// sseWriter writes Server-Sent Events frames: "data: <json>\n\n", flushed
// per event. After a failed write or flush every later call returns the
// same error, so the caller cancels its generation at the next step.
type sseWriter struct {
	w   *bufio.Writer
	buf []byte
	err error
}

func newSSEWriter(w *bufio.Writer) *sseWriter { return &sseWriter{w: w, buf: make([]byte, 0, 512)} }

// data writes one data frame holding payload and flushes it.
func (s *sseWriter) data(payload []byte) error {
	if s.err != nil {
		return s.err
	}
	s.buf = append(s.buf[:0], "data: "...)
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, '\n', '\n')
	return s.write()
}

func (s *sseWriter) write() error {
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = err
		return err
	}
	if err := s.w.Flush(); err != nil {
		s.err = err
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
	s.buf = append(s.buf[:0], "event: error\ndata: "...)
	s.buf = appendErrorBody(s.buf, e)
	s.buf = append(s.buf, '\n', '\n')
	return s.write()
}
