package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// Request bodies are decoded without building a generic tree: parseJSON
// checks the whole body once with a streaming decoder (jsontext, the
// standard library's encoding/json/jsontext from Go 1.27 on), and every
// value is then a jsonValue, a slice of the body. Accessors decode only the
// leaves a request asks for, straight into their typed fields, so decoding
// takes about the body's size again instead of the 14-20x that
// map[string]any trees of json.Number cost (issue 17 item 3).

// jsonValue is one value of a request body as its JSON text, a slice of
// the (already validated) body without surrounding space. nil stands for
// JSON null and for an absent member alike, as nil did in the generic tree.
type jsonValue []byte

// jsonObject holds the members of an object that reader.object was asked
// for, by name; a JSON null member is present with a nil value.
type jsonObject map[string]jsonValue

// decodeOptions are those of every decoder over a body: duplicate names
// are allowed (the last one wins, as in encoding/json, and tracking the
// names of a huge object would cost memory), and invalid UTF-8 becomes
// U+FFFD, as encoding/json did.
var decodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// parseJSON checks that body holds exactly one JSON value and returns it.
// Malformed JSON is a 400 saying where.
func parseJSON(body []byte) (jsonValue, *Error) {
	if len(trimSpace(body)) == 0 {
		return nil, badRequest("", "empty request body, want a JSON object")
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), decodeOptions...)
	v, err := dec.ReadValue()
	if err != nil {
		return nil, badRequest("", "malformed JSON: %v", jsonErrMsg(err, len(body)))
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, badRequest("", "malformed JSON: unexpected data after the top-level value at byte %d", dec.InputOffset())
	}
	return valueOf(v), nil
}

// valueOf returns v as a jsonValue: nil for null.
func valueOf(v jsontext.Value) jsonValue {
	if len(v) == 4 && v[0] == 'n' {
		return nil
	}
	return jsonValue(v)
}

func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func jsonErrMsg(err error, n int) string {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input at byte " + strconv.Itoa(n)
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		msg := se.Err.Error()
		if errors.Is(se.Err, io.ErrUnexpectedEOF) {
			msg = "unexpected end of input"
		}
		return msg + " at byte " + strconv.FormatInt(se.ByteOffset, 10)
	}
	return err.Error()
}

// Kinds of jsonValue, by their first byte.
func (v jsonValue) isObject() bool { return len(v) > 0 && v[0] == '{' }
func (v jsonValue) isArray() bool  { return len(v) > 0 && v[0] == '[' }
func (v jsonValue) isString() bool { return len(v) > 0 && v[0] == '"' }
func (v jsonValue) isBool() bool   { return len(v) > 0 && (v[0] == 't' || v[0] == 'f') }
func (v jsonValue) isNumber() bool { return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') }

// decoders are reused across the objects and arrays a body holds, which
// may be many small ones (messages).
var decoders = sync.Pool{New: func() any { return new(decoder) }}

type decoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

// openDecoder returns a pooled decoder over v; give it back with
// closeDecoder.
func openDecoder(v jsonValue) *decoder {
	d := decoders.Get().(*decoder)
	d.buf = *bytes.NewBuffer(v)
	d.dec.Reset(&d.buf, decodeOptions...)
	return d
}

func closeDecoder(d *decoder) {
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf)
	decoders.Put(d)
}

// members calls f with each member of object v in order until f returns
// false. v must be an object of a validated body.
func (v jsonValue) members(f func(name string, val jsonValue) bool) {
	d := openDecoder(v)
	defer closeDecoder(d)
	dec := &d.dec
	if _, err := dec.ReadToken(); err != nil {
		return
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return
		}
		name := tok.String() // before the next read voids tok
		val, err := dec.ReadValue()
		if err != nil || !f(name, valueOf(val)) {
			return
		}
	}
}

// elems calls f with each element of array v in order until f returns
// false. v must be an array of a validated body.
func (v jsonValue) elems(f func(i int, val jsonValue) bool) {
	d := openDecoder(v)
	defer closeDecoder(d)
	dec := &d.dec
	if _, err := dec.ReadToken(); err != nil {
		return
	}
	for i := 0; dec.PeekKind() != ']'; i++ {
		val, err := dec.ReadValue()
		if err != nil || !f(i, valueOf(val)) {
			return
		}
	}
}

// count returns the number of elements of array v (or members of object
// v) without decoding them.
func (v jsonValue) count() int {
	n := 0
	if v.isObject() {
		v.members(func(string, jsonValue) bool { n++; return true })
	} else {
		v.elems(func(int, jsonValue) bool { n++; return true })
	}
	return n
}

// str decodes string v.
func (v jsonValue) str() string {
	if len(v) >= 2 && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v[1:len(v)-1]) {
		return string(v[1 : len(v)-1])
	}
	b, _ := jsontext.AppendUnquote(nil, v) // invalid UTF-8 became U+FFFD
	return string(b)
}

// reader decodes request fields from jsonValues with typed accessors. The
// first error is kept in err and later calls do nothing useful, so request
// decoders read straight through and check err once.
type reader struct {
	err *Error
	// compile bounds the grammar and schema compiles of the request's
	// validation: its context is done when the client leaves or the
	// server shuts down.
	compile grammar.Budget
}

// cancelled reports whether b's context is done.
func cancelled(b grammar.Budget) bool { return b.Ctx != nil && b.Ctx.Err() != nil }

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func typeName(v jsonValue) string {
	switch {
	case v == nil:
		return "null"
	case v.isBool():
		return "boolean"
	case v.isNumber():
		return "number"
	case v.isString():
		return "string"
	case v.isArray():
		return "array"
	case v.isObject():
		return "object"
	}
	return "unknown"
}

func (r *reader) fail(e *Error) {
	if r.err == nil {
		r.err = e
	}
}

func (r *reader) typeErr(path, want string, v jsonValue) {
	r.fail(badRequest(path, "%s: wrong type %s, want %s", path, typeName(v), want))
}

// object checks that v is an object whose names are all in known, naming
// the first unknown one (the least in sorted order, so the message is
// stable), and returns its known members. Only the known members are kept,
// so a hostile object with a million names costs no memory.
func (r *reader) object(v jsonValue, path string, known ...string) jsonObject {
	if !v.isObject() {
		name := path
		if name == "" {
			name = "request body"
		}
		r.fail(badRequest(path, "%s: wrong type %s, want object", name, typeName(v)))
		return nil
	}
	m := make(jsonObject, min(len(known), 8))
	unknown, found := "", false
	v.members(func(name string, val jsonValue) bool {
		if slices.Contains(known, name) {
			m[name] = val
		} else if !found || name < unknown {
			unknown, found = name, true
		}
		return true
	})
	if found {
		p := joinPath(path, unknown)
		r.fail(badRequest(p, "unknown field %q", p))
	}
	return m
}

func (r *reader) str(m jsonObject, path, key string, def string) string {
	v, ok := m[key]
	if !ok || r.err != nil {
		return def
	}
	if !v.isString() {
		r.typeErr(joinPath(path, key), "string", v)
		return def
	}
	return v.str()
}

// optStr returns the string and whether it was present (null counts as absent).
func (r *reader) optStr(m jsonObject, path, key string) (string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false
	}
	if !v.isString() {
		r.typeErr(joinPath(path, key), "string", v)
		return "", false
	}
	return v.str(), true
}

func (r *reader) boolean(m jsonObject, path, key string, def bool) bool {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	if !v.isBool() {
		r.typeErr(joinPath(path, key), "boolean", v)
		return def
	}
	return v[0] == 't'
}

func (r *reader) number(m jsonObject, path, key string, def float64) float64 {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	return r.numberValue(v, joinPath(path, key))
}

func (r *reader) numberValue(v jsonValue, path string) float64 {
	if !v.isNumber() {
		r.typeErr(path, "number", v)
		return 0
	}
	f, err := strconv.ParseFloat(unsafeString(v), 64)
	if err != nil || math.IsInf(f, 0) {
		r.fail(badRequest(path, "%s: %s is out of range for a number", path, v))
		return 0
	}
	return f
}

func (r *reader) integer(m jsonObject, path, key string, def int64) int64 {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	return r.integerValue(v, joinPath(path, key))
}

func (r *reader) integerValue(v jsonValue, path string) int64 {
	if !v.isNumber() {
		r.typeErr(path, "integer", v)
		return 0
	}
	if i, err := strconv.ParseInt(unsafeString(v), 10, 64); err == nil {
		return i
	}
	f, err := strconv.ParseFloat(unsafeString(v), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		r.fail(badRequest(path, "%s: %s is not an integer in range, want integer", path, v))
		return 0
	}
	return int64(f)
}

// intRange reads an integer field and checks lo <= x <= hi.
func (r *reader) intRange(m jsonObject, path, key string, def, lo, hi int64) int64 {
	x := r.integer(m, path, key, def)
	if r.err == nil && (x < lo || x > hi) {
		p := joinPath(path, key)
		r.fail(badRequest(p, "%s: %d is out of range [%d, %d]", p, x, lo, hi))
	}
	return x
}

// strOrStrings reads a string or an array of at most maxLen strings;
// present reports whether the field was there (and not null).
func (r *reader) strOrStrings(m jsonObject, path, key string, maxLen int) (out []string, isArray, present bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, false, false
	}
	p := joinPath(path, key)
	switch {
	case v.isString():
		return []string{v.str()}, false, true
	case v.isArray():
		out = []string{}
		v.elems(func(i int, e jsonValue) bool {
			if i >= maxLen {
				r.fail(badRequest(p, "%s: more than %d strings, at most %d allowed", p, maxLen, maxLen))
				return false
			}
			if !e.isString() {
				r.typeErr(indexPath(p, i), "string", e)
				return false
			}
			out = append(out, e.str())
			return true
		})
		if r.err != nil {
			return nil, true, true
		}
		return out, true, true
	}
	r.typeErr(p, "string or array of strings", v)
	return nil, false, true
}

// array returns the array field key; present is false when it is absent or
// null.
func (r *reader) array(m jsonObject, path, key string) (a jsonValue, present bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, false
	}
	if !v.isArray() {
		r.typeErr(joinPath(path, key), "array", v)
		return nil, false
	}
	return v, true
}

// each calls f with the elements of array a, at most maxLen of them (more
// are a 400 naming path), until r holds an error.
func (r *reader) each(a jsonValue, path string, maxLen int, f func(i int, v jsonValue)) {
	a.elems(func(i int, v jsonValue) bool {
		if i >= maxLen {
			r.fail(badRequest(path, "%s: more than %d elements, at most %d allowed", path, maxLen, maxLen))
			return false
		}
		f(i, v)
		return r.err == nil
	})
}

// rawJSON returns the JSON text of v ("null" for nil).
func rawJSON(v jsonValue) []byte {
	if v == nil {
		return []byte("null")
	}
	return v
}

// plainJSON decodes v into ordinary Go values (objects as map[string]any,
// numbers as int64 or float64), for the few small parts of a request that
// templates read as values.
func plainJSON(v jsonValue) any {
	if v == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil {
		return nil
	}
	return toPlain(x)
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

// marshalPlain encodes a value of plain Go types as compact JSON without
// HTML escaping (object keys sorted).
func marshalPlain(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("null")
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// compactJSON returns object v as compact JSON text with its keys sorted,
// as tool-call arguments given as objects are passed on.
func compactJSON(v jsonValue) string { return string(marshalPlain(plainJSON(v))) }
