package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// jsonValue is a decoded JSON value that keeps object keys in document
// order: the generated grammar writes properties in the order the schema
// lists them, which encoding/json's maps would lose.
type jsonValue struct {
	kind jsonKind
	b    bool
	num  json.Number
	str  string
	arr  []*jsonValue
	keys []string
	vals []*jsonValue
	// index maps each key to its position once an object has more than
	// indexFrom members, so that get stays O(1) on the huge objects a
	// hostile schema may hold. Members are added only with add.
	index map[string]int
}

// indexFrom is the member count from which an object keeps an index.
const indexFrom = 8

type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// maxJSONDepth bounds nesting in schemas, so hostile input cannot exhaust
// the stack.
const maxJSONDepth = 200

func parseJSONValue(data []byte) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the top-level value at offset %d", dec.InputOffset())
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder, depth int) (*jsonValue, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d at offset %d", maxJSONDepth, dec.InputOffset())
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jsonValue{kind: jsonNull}, nil
	case bool:
		return &jsonValue{kind: jsonBool, b: t}, nil
	case json.Number:
		return &jsonValue{kind: jsonNumber, num: t}, nil
	case string:
		return &jsonValue{kind: jsonString, str: t}, nil
	case json.Delim:
		if t == '[' {
			v := &jsonValue{kind: jsonArray}
			for dec.More() {
				e, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, e)
			}
			_, err := dec.Token()
			return v, err
		}
		v := &jsonValue{kind: jsonObject}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			e, err := decodeJSONValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if v.get(k) != nil {
				return nil, fmt.Errorf("duplicate key %q at offset %d", k, dec.InputOffset())
			}
			v.add(k, e)
		}
		_, err := dec.Token()
		return v, err
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// add appends the member key: val to an object; the caller makes sure key
// is not there yet.
func (v *jsonValue) add(key string, val *jsonValue) {
	v.keys = append(v.keys, key)
	v.vals = append(v.vals, val)
	switch {
	case v.index != nil:
		v.index[key] = len(v.keys) - 1
	case len(v.keys) > indexFrom:
		v.index = make(map[string]int, 2*len(v.keys))
		for i, k := range v.keys {
			v.index[k] = i
		}
	}
}

// get returns the member key of an object, or nil.
func (v *jsonValue) get(key string) *jsonValue {
	if v == nil || v.kind != jsonObject {
		return nil
	}
	if v.index != nil {
		if i, ok := v.index[key]; ok {
			return v.vals[i]
		}
		return nil
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

// encode writes v as compact JSON, keys in document order; escapeHTML
// escapes <, > and & in strings as encoding/json does by default.
func (v *jsonValue) encode(b *strings.Builder, escapeHTML bool) {
	quote := func(s string) {
		if escapeHTML {
			q, _ := json.Marshal(s)
			b.Write(q)
		} else {
			b.WriteString(jsonQuote(s))
		}
	}
	switch v.kind {
	case jsonNull:
		b.WriteString("null")
	case jsonBool:
		b.WriteString(strconv.FormatBool(v.b))
	case jsonNumber:
		b.WriteString(v.num.String())
	case jsonString:
		quote(v.str)
	case jsonArray:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			e.encode(b, escapeHTML)
		}
		b.WriteByte(']')
	case jsonObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			quote(k)
			b.WriteByte(':')
			v.vals[i].encode(b, escapeHTML)
		}
		b.WriteByte('}')
	}
}

func (v *jsonValue) String() string {
	var b strings.Builder
	v.encode(&b, true)
	return b.String()
}
