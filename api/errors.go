package api

import (
	"fmt"
	"strconv"
	"strings"
)

// Error is an API error: the HTTP status, the message and the request field
// it is about ("" when none). It is written as API-NOTES.md's error body.
type Error struct {
	Status  int
	Message string
	Param   string
}

// Error returns the message, prefixed by the field when there is one.
func (e *Error) Error() string {
	if e.Param != "" && !startsWithParam(e.Message, e.Param) && !strings.Contains(e.Message, `"`+e.Param+`"`) {
		return e.Param + ": " + e.Message
	}
	return e.Message
}

func startsWithParam(msg, param string) bool {
	return len(msg) >= len(param) && msg[:len(param)] == param
}

func errorf(status int, param, format string, args ...any) *Error {
	return &Error{Status: status, Param: param, Message: fmt.Sprintf(format, args...)}
}

func badRequest(param, format string, args ...any) *Error {
	return errorf(400, param, format, args...)
}

// errorType returns the error type string of API-NOTES.md for status.
func errorType(status int) string {
	switch status {
	case 400, 408, 413, 415, 431:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 422:
		return "unprocessable_entity_error"
	case 503:
		return "unavailable_error"
	}
	return "server_error"
}

// appendErrorBody appends {"error":{...}} for e to dst.
func appendErrorBody(dst []byte, e *Error) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendJSONString(dst, e.Error())
	dst = append(dst, `,"type":"`...)
	dst = append(dst, errorType(e.Status)...)
	dst = append(dst, `","param":`...)
	if e.Param == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, e.Param)
	}
	dst = append(dst, `,"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Status), 10)
	return append(dst, "}}"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == 0xFFFD && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		if r == 0x2028 || r == 0x2029 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
