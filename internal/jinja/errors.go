package jinja

import (
	"fmt"
	"strings"
)

// Error is a template error at a place in the source: a syntax error from
// Parse, or a failure while rendering. Line and Col count from 1 (Col in
// characters).
type Error struct {
	Line, Col int
	Msg       string
}

// Error returns "line L, column C: message".
func (e *Error) Error() string { return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg) }

// RaiseError is the error of a template that called raise_exception(msg).
// Its Error is the template's own message.
type RaiseError struct {
	Msg       string
	Line, Col int
}

// Error returns the template's message.
func (e *RaiseError) Error() string { return e.Msg }

// LimitError is returned when a render exceeds Options.MaxOutput or
// Options.MaxWork.
type LimitError struct{ Msg string }

// Error returns the message.
func (e *LimitError) Error() string { return e.Msg }

// position returns the 1-based line and column (in characters) of offset
// pos in src.
func position(src string, pos int) (line, col int) {
	if pos > len(src) {
		pos = len(src)
	}
	before := src[:pos]
	line = strings.Count(before, "\n") + 1
	col = len([]rune(before[strings.LastIndexByte(before, '\n')+1:])) + 1
	return line, col
}

func errAt(src string, pos int, msg string) *Error {
	line, col := position(src, pos)
	return &Error{Line: line, Col: col, Msg: msg}
}
