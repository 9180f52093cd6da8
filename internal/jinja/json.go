package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParseJSON decodes a JSON document into render values, keeping the key
// order of objects (as Python's json.loads does), so that tojson prints
// them back in the order the client sent. Integers become int64 and other
// numbers float64.
func ParseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("jinja: JSON: data after the value at byte %d", dec.InputOffset())
	}
	return v, nil
}

const maxJSONDepth = 10000

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("jinja: JSON nested too deeply")
	}
	t, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("jinja: JSON: %w", err)
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("jinja: JSON: %w", err)
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.Set(k, v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			l := &List{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l.Items = append(l.Items, v)
			}
			_, err := dec.Token()
			return l, err
		}
	case json.Number:
		return FromGo(x)
	case string, bool, nil:
		return x, nil
	}
	return nil, fmt.Errorf("jinja: JSON: unexpected token %v", t)
}

// jsonOpts are the arguments of tojson, as Python's json.dumps takes them.
type jsonOpts struct {
	indent      string // "" and !indented: single line
	indented    bool
	itemSep     string
	keySep      string
	ensureASCII bool
	sortKeys    bool
}

// tojson is Hugging Face's tojson filter: json.dumps with
// ensure_ascii=False and the key order kept, taking indent, separators,
// ensure_ascii and sort_keys.
func (r *renderer) tojson(v any, args []any, kwargs []kwValue) (any, error) {
	o := jsonOpts{itemSep: ", ", keySep: ": "}
	ind := kwOr(args, kwargs, 0, "indent", nil)
	if b, ok := ind.(bool); ok && len(args) > 0 { // tojson(ensure_ascii) positionally
		o.ensureASCII, ind = b, kwOr(nil, kwargs, 0, "indent", nil)
	}
	switch x := ind.(type) {
	case nil, Undefined:
	case string:
		o.indent, o.indented = x, true
	default:
		n, ok := toInt(x)
		if !ok || n < 0 || n > 64 {
			return nil, fmt.Errorf("tojson: bad indent %s", repr(ind))
		}
		o.indent, o.indented = strings.Repeat(" ", int(n)), true
	}
	if o.indented {
		o.itemSep = ","
	}
	for _, k := range kwargs {
		switch k.name {
		case "ensure_ascii":
			o.ensureASCII = truthy(k.v)
		case "sort_keys":
			o.sortKeys = truthy(k.v)
		case "separators":
			l, ok := k.v.(*List)
			if k.v == nil {
				continue
			}
			if !ok || len(l.Items) != 2 {
				return nil, errors.New("tojson: separators must be a pair of strings")
			}
			a, ok1 := l.Items[0].(string)
			b, ok2 := l.Items[1].(string)
			if !ok1 || !ok2 {
				return nil, errors.New("tojson: separators must be a pair of strings")
			}
			o.itemSep, o.keySep = a, b
		case "indent":
		default:
			return nil, fmt.Errorf("tojson: unknown argument %q", k.name)
		}
	}
	var b strings.Builder
	if err := r.writeJSON(&b, v, o, 0); err != nil {
		return nil, err
	}
	return b.String(), nil
}

func (r *renderer) writeJSON(b *strings.Builder, v any, o jsonOpts, depth int) error {
	if depth > maxNesting {
		return errors.New("tojson: value nested too deeply (or circular)")
	}
	if err := r.step(1); err != nil {
		return err
	}
	if b.Len() > r.opt.MaxOutput {
		return r.allocStr(b.Len())
	}
	newline := func(d int) {
		if o.indented {
			b.WriteByte('\n')
			for range d {
				b.WriteString(o.indent)
			}
		}
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(x))
		}
	case string:
		writeJSONString(b, x, o.ensureASCII)
	case *List:
		if len(x.Items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x.Items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(depth + 1)
			if err := r.writeJSON(b, e, o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case *Dict, *Namespace:
		d, ok := x.(*Dict)
		if !ok {
			d = x.(*Namespace).attrs
		}
		if d.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := d.keys
		if o.sortKeys {
			keys = append([]any(nil), keys...)
			sorted, err := r.sortItems(keys, false, true, "")
			if err != nil {
				return err
			}
			keys = sorted
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(depth + 1)
			switch kk := k.(type) {
			case string:
				writeJSONString(b, kk, o.ensureASCII)
			case nil:
				b.WriteString(`"null"`)
			default:
				writeJSONString(b, str(jsonKey(kk)), o.ensureASCII)
			}
			b.WriteString(o.keySep)
			if err := r.writeJSON(b, d.m[k], o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	case Undefined:
		return fmt.Errorf("tojson: '%s' is undefined", x.Name)
	default:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// jsonKey is how json.dumps writes a non-string key: true, 1, 1.5.
func jsonKey(k any) any {
	if b, ok := k.(bool); ok {
		if b {
			return "true"
		}
		return "false"
	}
	return k
}

// writeJSONString writes s as json.dumps does: only quotes, backslashes
// and control characters escaped, and non-ASCII text as \u escapes when
// ensureASCII.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		raw := s[i : i+size]
		i += size
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		case ensureASCII && c > 0x7e:
			if c == utf8.RuneError && size == 1 {
				c = 0xfffd
			}
			if c >= 0x10000 {
				c -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(c>>10), 0xdc00+(c&0x3ff))
			} else {
				fmt.Fprintf(b, `\u%04x`, c)
			}
		default:
			b.WriteString(raw)
		}
	}
	b.WriteByte('"')
}
