package api

import (
	"encoding/json"
	"slices"
	"strings"
)

// MiniMax-M3's tool calls: every tag behind the namespace token
// ]<]minimax[>[, a parameter's name its element's tag, and objects and
// arrays expanded into nested elements (one per key; <item> per array
// element), as its template's to_xml writes them:
//
//	]<]minimax[>[<tool_call>
//	]<]minimax[>[<invoke name="NAME">]<]minimax[>[<KEY>VALUE]<]minimax[>[</KEY>]<]minimax[>[</invoke>
//	]<]minimax[>[</tool_call>
//
// The text of an element is typed by the tool's JSON Schema, as the
// reference's parser reads it: a value that may be a string is the raw
// text up to its closing tag (nested-looking markup included), other
// scalars are JSON (argValue), and nested elements are an object or,
// when they are <item>s, an array.

const (
	m3NS        = "]<]minimax[>["
	m3CallsOpen = m3NS + "<tool_call>"
)

// valueSchema is the part of a JSON Schema that types a value written as
// elements.
type valueSchema struct {
	Type       any                     `json:"type"` // a type name or a list of them
	Properties map[string]*valueSchema `json:"properties"`
	Items      *valueSchema            `json:"items"`
	AnyOf      []*valueSchema          `json:"anyOf"`
	OneOf      []*valueSchema          `json:"oneOf"`
}

// toolSchema returns the parameters schema of the tool named name (an
// empty, untyped one when it has none or is unknown).
func toolSchema(known []tool, name string) *valueSchema {
	s := &valueSchema{}
	for _, t := range known {
		if t.name == name && t.parameters != nil {
			if json.Unmarshal(t.parameters, s) != nil {
				return &valueSchema{}
			}
			break
		}
	}
	return s
}

// types returns the type names s declares itself.
func (s *valueSchema) types() []string {
	switch t := s.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if n, ok := x.(string); ok {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

// declared returns s, or the alternative of its anyOf/oneOf, that
// declares type t; nil when none does.
func (s *valueSchema) declared(t string) *valueSchema {
	if slices.Contains(s.types(), t) {
		return s
	}
	for _, a := range append(slices.Clone(s.AnyOf), s.OneOf...) {
		if d := a.declared(t); d != nil {
			return d
		}
	}
	return nil
}

// as returns the schema a value of type t is read under: the alternative
// that declares t, or s itself when it declares no type at all; nil when
// t does not fit s.
func (s *valueSchema) as(t string) *valueSchema {
	if d := s.declared(t); d != nil {
		return d
	}
	if s.Type == nil && len(s.AnyOf)+len(s.OneOf) == 0 {
		return s
	}
	return nil
}

// prop and items return the schema of a property or of an array's
// elements (untyped when s says none).
func (s *valueSchema) prop(k string) *valueSchema {
	if p := s.Properties[k]; p != nil {
		return p
	}
	return &valueSchema{}
}

func (s *valueSchema) items() *valueSchema {
	if s.Items != nil {
		return s.Items
	}
	return &valueSchema{}
}

// m3Reader reads MiniMax-M3 call markup from s at i.
type m3Reader struct{ cursor }

// open reads an opening tag, ]<]minimax[>[<NAME>, returning NAME.
func (r *m3Reader) open() (string, bool) {
	rest := r.s[r.i:]
	if !strings.HasPrefix(rest, m3NS+"<") || strings.HasPrefix(rest, m3NS+"</") {
		return "", false
	}
	name, _, ok := strings.Cut(rest[len(m3NS)+1:], ">")
	if !ok || name == "" || strings.ContainsAny(name, "<\n") {
		return "", false
	}
	r.i += len(m3NS) + len(name) + 2
	return name, true
}

// close reads the closing tag of the element name.
func (r *m3Reader) close(name string) bool { return r.lit(m3NS + "</" + name + ">") }

// value reads the content of the element key (its opening tag read) and
// its closing tag, as sch types it.
func (r *m3Reader) value(key string, sch *valueSchema) (json.RawMessage, bool) {
	if sch.declared("string") != nil {
		// A string, or a union with a string alternative: the raw text.
		end := m3NS + "</" + key + ">"
		j := strings.Index(r.s[r.i:], end)
		if j < 0 {
			return nil, false
		}
		v := r.s[r.i : r.i+j]
		r.i += j + len(end)
		return appendJSONString(nil, v), true
	}
	start := r.i
	r.space()
	if child, ok := (&m3Reader{r.cursor}).open(); ok {
		if arr := sch.as("array"); child == "item" && arr != nil {
			return r.elements(key, arr.items(), true)
		}
		obj := sch.as("object")
		if obj == nil {
			obj = &valueSchema{} // elements where the schema wants none: read untyped
		}
		return r.elements(key, obj, false)
	}
	r.i = start
	j := strings.Index(r.s[r.i:], m3NS)
	if j < 0 {
		return nil, false
	}
	text := r.s[r.i : r.i+j]
	r.i += j
	if !r.close(key) {
		return nil, false
	}
	if strings.TrimSpace(text) == "" {
		// An empty object or array writes no elements.
		if sch.declared("object") != nil {
			return json.RawMessage("{}"), true
		}
		if sch.declared("array") != nil {
			return json.RawMessage("[]"), true
		}
	}
	return argValue(text), true
}

// elements reads the child elements of the element parent up to its
// closing tag: as an array of <item>s, each typed by sch, or as an object,
// each member typed by sch's property.
func (r *m3Reader) elements(parent string, sch *valueSchema, array bool) (json.RawMessage, bool) {
	var keys []string
	var vals []json.RawMessage
	for {
		r.space()
		if r.close(parent) {
			break
		}
		name, ok := r.open()
		if !ok || array && name != "item" {
			return nil, false
		}
		sub := sch
		if !array {
			sub = sch.prop(name)
		}
		v, ok := r.value(name, sub)
		if !ok {
			return nil, false
		}
		keys, vals = append(keys, name), append(vals, v)
	}
	if !array {
		return json.RawMessage(objectJSON(keys, vals)), true
	}
	b := []byte{'['}
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']'), true
}

// parseMiniMaxM3 reads MiniMax-M3's block of calls; the text before it is
// the content. Markup that does not read as calls fails the parse (the
// text is then content).
func parseMiniMaxM3(text string, known []tool) (string, []toolCall, bool) {
	start := strings.Index(text, m3CallsOpen)
	if start < 0 {
		return "", nil, false
	}
	r := &m3Reader{cursor{s: text, i: start + len(m3CallsOpen)}}
	var calls []toolCall
	for {
		r.space()
		if !r.lit(m3NS + `<invoke name="`) {
			break
		}
		name, _, ok := strings.Cut(r.s[r.i:], `">`)
		if !ok {
			return "", nil, false
		}
		r.i += len(name) + 2
		args, ok := r.elements("invoke", toolSchema(known, name), false)
		if !ok {
			return "", nil, false
		}
		c, ok := newCall(name, string(args))
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
	}
	return strings.TrimSpace(text[:start]), calls, len(calls) > 0
}
