package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
)

// parseJSON decodes body into a generic tree (objects as map[string]any,
// numbers as json.Number). Malformed JSON is a 400 saying where.
func parseJSON(body []byte) (any, *Error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, badRequest("", "empty request body, want a JSON object")
		}
		return nil, badRequest("", "malformed JSON: %v", jsonErrMsg(err, len(body)))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("", "malformed JSON: unexpected data after the top-level value at byte %d", dec.InputOffset())
	}
	return v, nil
}

func jsonErrMsg(err error, n int) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at byte " + strconv.FormatInt(se.Offset, 10)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input at byte " + strconv.Itoa(n)
	}
	return err.Error()
}

// reader walks a decoded JSON tree with typed accessors. The first error is
// kept in err and later calls do nothing useful, so request decoders read
// straight through and check err once.
type reader struct {
	err *Error
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func (r *reader) fail(e *Error) {
	if r.err == nil {
		r.err = e
	}
}

func (r *reader) typeErr(path, want string, v any) {
	r.fail(badRequest(path, "%s: wrong type %s, want %s", path, typeName(v), want))
}

// object checks that v is an object whose keys are all in known, naming
// the first unknown one (sorted, so the message is stable).
func (r *reader) object(v any, path string, known ...string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		name := path
		if name == "" {
			name = "request body"
		}
		r.fail(badRequest(path, "%s: wrong type %s, want object", name, typeName(v)))
		return nil
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		p := joinPath(path, unknown[0])
		r.fail(badRequest(p, "unknown field %q", p))
	}
	return m
}

func (r *reader) str(m map[string]any, path, key string, def string) string {
	v, ok := m[key]
	if !ok || r.err != nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		r.typeErr(joinPath(path, key), "string", v)
	}
	return s
}

// optStr returns the string and whether it was present (null counts as absent).
func (r *reader) optStr(m map[string]any, path, key string) (string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		r.typeErr(joinPath(path, key), "string", v)
		return "", false
	}
	return s, true
}

func (r *reader) boolean(m map[string]any, path, key string, def bool) bool {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		r.typeErr(joinPath(path, key), "boolean", v)
		return def
	}
	return b
}

func (r *reader) number(m map[string]any, path, key string, def float64) float64 {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	return r.numberValue(v, joinPath(path, key))
}

func (r *reader) numberValue(v any, path string) float64 {
	n, ok := v.(json.Number)
	if !ok {
		r.typeErr(path, "number", v)
		return 0
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		r.fail(badRequest(path, "%s: %s is out of range for a number", path, n))
		return 0
	}
	return f
}

func (r *reader) integer(m map[string]any, path, key string, def int64) int64 {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	return r.integerValue(v, joinPath(path, key))
}

func (r *reader) integerValue(v any, path string) int64 {
	n, ok := v.(json.Number)
	if !ok {
		r.typeErr(path, "integer", v)
		return 0
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		r.fail(badRequest(path, "%s: %s is not an integer in range, want integer", path, n))
		return 0
	}
	return int64(f)
}

// intRange reads an integer field and checks lo <= x <= hi.
func (r *reader) intRange(m map[string]any, path, key string, def, lo, hi int64) int64 {
	x := r.integer(m, path, key, def)
	if r.err == nil && (x < lo || x > hi) {
		p := joinPath(path, key)
		r.fail(badRequest(p, "%s: %d is out of range [%d, %d]", p, x, lo, hi))
	}
	return x
}

// strOrStrings reads a string or an array of strings; present reports
// whether the field was there (and not null).
func (r *reader) strOrStrings(m map[string]any, path, key string, maxLen int) (out []string, isArray, present bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, false, false
	}
	p := joinPath(path, key)
	switch x := v.(type) {
	case string:
		return []string{x}, false, true
	case []any:
		if len(x) > maxLen {
			r.fail(badRequest(p, "%s: %d strings, at most %d allowed", p, len(x), maxLen))
			return nil, true, true
		}
		out = make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				r.typeErr(indexPath(p, i), "string", e)
				return nil, true, true
			}
			out[i] = s
		}
		return out, true, true
	}
	r.typeErr(p, "string or array of strings", v)
	return nil, false, true
}

func (r *reader) array(m map[string]any, path, key string) ([]any, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		r.typeErr(joinPath(path, key), "array", v)
		return nil, false
	}
	return a, true
}

// rawJSON re-encodes a decoded subtree (for schemas and tool arguments).
func rawJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("null")
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// toPlain converts json.Number leaves to float64 or int64 so templates see
// ordinary numbers.
func toPlain(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toPlain(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = toPlain(e)
		}
		return out
	}
	return v
}
