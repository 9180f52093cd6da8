package jinja

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Values in a render are plain Go values of these types:
//
//	nil          Python None
//	Undefined    a missing variable, attribute or item
//	bool         True, False
//	int64        int
//	float64      float
//	string       str
//	*List        list, or tuple when Tuple is set
//	*Dict        dict, keys kept in insertion order
//	*Namespace   namespace(...)
//	callables    *builtin, *macro, *boundMethod, *loopInfo (loop(...) in recursive loops)
//
// Render converts the variables it is given with FromGo.

// Undefined is the value of a missing variable, attribute or item. It
// prints as nothing, is false, iterates as empty, and fails in arithmetic
// or when its own attributes are read, as in Jinja2.
type Undefined struct {
	// Name is what was looked up, for error messages.
	Name string
}

// List is a mutable Python list, or a tuple when Tuple is set.
type List struct {
	Items []any
	Tuple bool
}

// NewList returns a list holding items.
func NewList(items ...any) *List { return &List{Items: items} }

// Dict is a Python dict: keys are strings, integers, floats, bools or
// None, and iteration follows insertion order (as tojson prints them).
type Dict struct {
	keys []any
	m    map[any]any
}

// NewDict returns an empty dict.
func NewDict() *Dict { return &Dict{m: map[any]any{}} }

// Len returns the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// Keys returns the keys in insertion order; the slice must not be modified.
func (d *Dict) Keys() []any { return d.keys }

// Get returns the value of key k.
func (d *Dict) Get(k any) (any, bool) {
	v, ok := d.m[normKey(k)]
	return v, ok
}

// Set sets key k to v, keeping the position of an existing key.
func (d *Dict) Set(k, v any) {
	k = normKey(k)
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

// Delete removes key k and reports whether it was there.
func (d *Dict) Delete(k any) bool {
	k = normKey(k)
	if _, ok := d.m[k]; !ok {
		return false
	}
	delete(d.m, k)
	for i, x := range d.keys {
		if x == k {
			d.keys = append(d.keys[:i:i], d.keys[i+1:]...)
			break
		}
	}
	return true
}

func (d *Dict) copy() *Dict {
	c := &Dict{keys: append([]any(nil), d.keys...), m: make(map[any]any, len(d.m))}
	for k, v := range d.m {
		c.m[k] = v
	}
	return c
}

// DeepCopy returns v with its lists, dicts and namespaces copied at every
// depth, so that a render that changes them (list.append, dict.update,
// {% set x.attr = v %}) leaves v itself as it was.
func DeepCopy(v any) any {
	switch x := v.(type) {
	case *List:
		c := &List{Items: make([]any, len(x.Items)), Tuple: x.Tuple}
		for i, it := range x.Items {
			c.Items[i] = DeepCopy(it)
		}
		return c
	case *Dict:
		c := &Dict{keys: append([]any(nil), x.keys...), m: make(map[any]any, len(x.m))}
		for k, it := range x.m {
			c.m[k] = DeepCopy(it)
		}
		return c
	case *Namespace:
		return &Namespace{attrs: DeepCopy(x.attrs).(*Dict)}
	}
	return v
}

// normKey makes equal Python keys equal Go map keys: True is 1, 2.0 is 2.
func normKey(k any) any {
	switch x := k.(type) {
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	case int:
		return int64(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return int64(x)
		}
	}
	return k
}

func hashable(k any) bool {
	switch k.(type) {
	case nil, bool, int64, float64, string, int:
		return true
	}
	return false
}

// Namespace is the mutable object namespace(...) returns; set ns.x = v
// assigns its attributes from any scope.
type Namespace struct{ attrs *Dict }

// FromGo converts decoded JSON (map[string]any, []any, json.Number,
// float64, string, bool, nil) and Go scalars to render values. Maps become
// dicts with sorted keys (Go maps have no order); pass a *Dict built with
// ParseJSON to keep a document's key order.
func FromGo(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, *List, *Dict, *Namespace, Undefined:
		return v, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("jinja: number %q: %v", x, err)
		}
		return f, nil
	case []any:
		l := &List{Items: make([]any, len(x))}
		for i, e := range x {
			c, err := FromGo(e)
			if err != nil {
				return nil, err
			}
			l.Items[i] = c
		}
		return l, nil
	case []string:
		l := &List{Items: make([]any, len(x))}
		for i, e := range x {
			l.Items[i] = e
		}
		return l, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := NewDict()
		for _, k := range keys {
			c, err := FromGo(x[k])
			if err != nil {
				return nil, err
			}
			d.Set(k, c)
		}
		return d, nil
	}
	return nil, fmt.Errorf("jinja: cannot use a Go %T as a template value", v)
}

// typeName is the Python type name of v, for error messages.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *List:
		if x.Tuple {
			return "tuple"
		}
		return "list"
	case *Dict:
		return "dict"
	case *Namespace:
		return "Namespace"
	case *macro:
		return "macro"
	case *loopInfo:
		return "LoopContext"
	}
	return "function"
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case *List:
		return len(x.Items) > 0
	case *Dict:
		return x.Len() > 0
	}
	return true
}

// str is Python's str(v) (Undefined prints as "").
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case Undefined:
		return ""
	}
	var b strings.Builder
	writeRepr(&b, v, false, 0)
	return b.String()
}

// repr is Python's repr(v).
func repr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, true, 0)
	return b.String()
}

// maxReprDepth bounds the nesting repr and equality follow, so a list
// that contains itself prints as [...] instead of recursing forever.
const maxReprDepth = 64

func writeRepr(b *strings.Builder, v any, quote bool, depth int) {
	if depth > maxReprDepth {
		b.WriteString("...")
		return
	}
	if b.Len() > maxReprLen {
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case Undefined:
		if quote {
			b.WriteString("Undefined")
		}
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case string:
		if quote {
			b.WriteString(pyQuote(x))
		} else {
			b.WriteString(x)
		}
	case *List:
		open, close := "[", "]"
		if x.Tuple {
			open, close = "(", ")"
		}
		b.WriteString(open)
		for i, e := range x.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, true, depth+1)
		}
		if x.Tuple && len(x.Items) == 1 {
			b.WriteByte(',')
		}
		b.WriteString(close)
	case *Dict:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, k, true, depth+1)
			b.WriteString(": ")
			writeRepr(b, x.m[k], true, depth+1)
		}
		b.WriteByte('}')
	case *Namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, x.attrs, true, depth+1)
		b.WriteByte('>')
	default:
		fmt.Fprintf(b, "<%s>", typeName(v))
	}
}

// maxReprLen stops repr of huge nested values (lists sharing items can
// describe exponentially long text) at 1 MiB.
const maxReprLen = 1 << 20

// maxEqualNodes bounds the items one == compares, for the same reason.
const maxEqualNodes = 1 << 20

// pyQuote is Python's repr of a string: single quotes unless the text has
// single quotes and no double quotes.
func pyQuote(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// pyFloat is Python's repr of a float: the shortest digits that read back,
// in fixed notation for exponents -4..15 and always with a fraction or
// exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expS)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		out = fmt.Sprintf("%se%s%02d", m, sign, exp)
	} else if exp < 0 {
		out = "0." + strings.Repeat("0", -exp-1) + digits
	} else if len(digits) <= exp+1 {
		out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	} else {
		out = digits[:exp+1] + "." + digits[exp+1:]
	}
	if neg {
		out = "-" + out
	}
	return out
}

// equal is Python's ==.
func equal(a, b any) bool {
	budget := maxEqualNodes
	return equalDepth(a, b, 0, &budget)
}

func equalDepth(a, b any, depth int, budget *int) bool {
	*budget--
	if depth > maxReprDepth || *budget < 0 {
		return false
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool, int64, float64:
		fa, ok1 := toFloat(a)
		fb, ok2 := toFloat(b)
		if !ok1 || !ok2 {
			return false
		}
		ia, isIntA := toInt(a)
		ib, isIntB := toInt(b)
		if isIntA && isIntB {
			return ia == ib
		}
		return fa == fb
	case *List:
		y, ok := b.(*List)
		if !ok || x.Tuple != y.Tuple || len(x.Items) != len(y.Items) {
			return false
		}
		for i := range x.Items {
			if !equalDepth(x.Items[i], y.Items[i], depth+1, budget) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			w, ok := y.m[k]
			if !ok || !equalDepth(x.m[k], w, depth+1, budget) {
				return false
			}
		}
		return true
	}
	return a == b
}

// toFloat returns numbers (bools included, as Python) as float64.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// toInt returns ints and bools as int64.
func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return x, true
	}
	return 0, false
}

// compare orders numbers, strings and sequences as Python's <.
func compare(a, b any) (int, error) { return compareDepth(a, b, 0) }

func compareDepth(a, b any, depth int) (int, error) {
	if depth > maxReprDepth {
		return 0, errors.New("comparison nested too deeply")
	}
	if fa, ok := toFloat(a); ok {
		if fb, ok := toFloat(b); ok {
			ia, ia1 := toInt(a)
			ib, ib1 := toInt(b)
			switch {
			case ia1 && ib1 && ia < ib, !(ia1 && ib1) && fa < fb:
				return -1, nil
			case ia1 && ib1 && ia > ib, !(ia1 && ib1) && fa > fb:
				return 1, nil
			}
			return 0, nil
		}
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case *List:
		if y, ok := b.(*List); ok {
			for i := 0; i < len(x.Items) && i < len(y.Items); i++ {
				if equal(x.Items[i], y.Items[i]) {
					continue
				}
				return compareDepth(x.Items[i], y.Items[i], depth+1)
			}
			return len(x.Items) - len(y.Items), nil
		}
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
}

// iterate returns the items a for loop or filter visits: list items, dict
// keys, string characters, nothing for Undefined and None (the reference
// iterates None as empty, where Python would fail).
func iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case *List:
		return x.Items, nil
	case *Dict:
		return x.keys, nil
	case string:
		out := make([]any, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case Undefined, nil:
		return nil, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", typeName(v))
}

// length is Python's len(v).
func length(v any) (int, error) {
	switch x := v.(type) {
	case *List:
		return len(x.Items), nil
	case *Dict:
		return x.Len(), nil
	case string:
		return len([]rune(x)), nil
	case Undefined:
		return 0, nil
	case *Namespace:
		return x.attrs.Len(), nil
	}
	return 0, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}
