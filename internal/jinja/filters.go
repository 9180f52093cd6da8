package jinja

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// knownFilter reports whether name is a filter this engine implements;
// Parse rejects others, as Jinja2 does when it compiles a template.
func knownFilter(name string) bool {
	switch name {
	case "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
		"first", "float", "format", "indent", "int", "items", "join", "last", "length", "list", "lower",
		"map", "max", "min", "pprint", "reject", "rejectattr", "replace", "reverse", "round", "safe",
		"select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper",
		"wordcount", "truncate", "batch", "forceescape", "striptags", "groupby":
		return true
	}
	return false
}

func (r *renderer) applyFilter(f *filterExpr, v any, sc *scope) (any, error) {
	args, err := r.evalArgs(f.args, sc)
	if err != nil {
		return nil, err
	}
	kwargs, err := r.evalKwargs(f.kwargs, sc)
	if err != nil {
		return nil, err
	}
	out, err := r.filter(f.name, v, args, kwargs)
	if err != nil {
		return nil, r.errAt(f.pos, err)
	}
	return out, nil
}

// attrPath reads a dotted attribute path ("a.b", "0") as Jinja2's filters
// do: items first, then attributes.
func (r *renderer) attrPath(v any, path string) (any, error) {
	for _, part := range strings.Split(path, ".") {
		var k any = part
		if n, err := strconv.ParseInt(part, 10, 64); err == nil {
			k = n
		}
		var err error
		if v, err = r.getItem(0, v, k); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// filter applies the filter called name to v.
func (r *renderer) filter(name string, v any, args []any, kwargs []kwValue) (any, error) {
	switch name {
	case "abs":
		switch n := v.(type) {
		case int64:
			if n < 0 {
				return -n, nil
			}
			return n, nil
		case float64:
			return math.Abs(n), nil
		case bool:
			i, _ := toInt(n)
			return i, nil
		}
		return nil, fmt.Errorf("bad operand type for abs(): '%s'", typeName(v))
	case "attr":
		n, ok := argOr(args, 0, nil).(string)
		if !ok {
			return nil, fmt.Errorf("attr: the name must be a string")
		}
		return r.getAttr(0, v, n)
	case "capitalize":
		return pyCapitalize(str(v)), nil
	case "title":
		return pyTitle(str(v)), nil
	case "lower":
		return strings.ToLower(str(v)), nil
	case "upper":
		return strings.ToUpper(str(v)), nil
	case "center":
		return r.stringMethod(str(v), "center", []any{kwOr(args, kwargs, 0, "width", int64(80))}, nil)
	case "count", "length":
		n, err := length(v)
		return int64(n), err
	case "d", "default":
		def := kwOr(args, kwargs, 0, "default_value", "")
		_, undef := v.(Undefined)
		if undef || (truthy(kwOr(args, kwargs, 1, "boolean", false)) && !truthy(v)) {
			return def, nil
		}
		return v, nil
	case "dictsort":
		d, ok := v.(*Dict)
		if !ok {
			return nil, fmt.Errorf("dictsort: expected a dict, got %s", typeName(v))
		}
		cs := truthy(kwOr(args, kwargs, 0, "case_sensitive", false))
		byValue := kwOr(args, kwargs, 1, "by", "key") == "value"
		pairs := make([]any, len(d.keys))
		for i, k := range d.keys {
			pairs[i] = &List{Items: []any{k, d.m[k]}, Tuple: true}
		}
		idx := "0"
		if byValue {
			idx = "1"
		}
		return r.sortList(pairs, truthy(kwOr(args, kwargs, 2, "reverse", false)), cs, idx)
	case "e", "escape", "forceescape":
		return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(str(v)), nil
	case "first", "last":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{Name: name + " item of an empty sequence"}, nil
		}
		if name == "first" {
			return items[0], nil
		}
		return items[len(items)-1], nil
	case "float":
		switch n := v.(type) {
		case float64:
			return n, nil
		case int64, bool:
			f, _ := toFloat(n)
			return f, nil
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(n), 64); err == nil {
				return f, nil
			}
		}
		return kwOr(args, kwargs, 0, "default", 0.0), nil
	case "int":
		switch n := v.(type) {
		case int64:
			return n, nil
		case bool:
			i, _ := toInt(n)
			return i, nil
		case float64:
			if !math.IsNaN(n) && !math.IsInf(n, 0) {
				return int64(n), nil
			}
		case string:
			s := strings.TrimSpace(n)
			base := int64(10)
			if b, ok := toInt(kwOr(args, kwargs, 1, "base", int64(10))); ok {
				base = b
			}
			if i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), int(base), 64); err == nil {
				return i, nil
			}
			if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				return int64(f), nil
			}
		}
		return kwOr(args, kwargs, 0, "default", int64(0)), nil
	case "format":
		f := str(v)
		return percentFormat(f, &List{Items: args, Tuple: true})
	case "indent":
		return r.indent(str(v), kwOr(args, kwargs, 0, "width", int64(4)), truthy(kwOr(args, kwargs, 1, "first", false)),
			truthy(kwOr(args, kwargs, 2, "blank", false)))
	case "items":
		switch d := v.(type) {
		case *Dict:
			return r.dictMethod(d, "items", nil, nil)
		case Undefined:
			return &List{}, nil
		}
		return nil, fmt.Errorf("items: expected a dict, got %s", typeName(v))
	case "join":
		items, err := iterate(v)
		if err != nil {
			return nil, fmt.Errorf("join: %v", err)
		}
		sep := str(kwOr(args, kwargs, 0, "d", ""))
		attr, _ := kwOr(args, kwargs, 1, "attribute", nil).(string)
		parts := make([]string, len(items))
		n := 0
		for i, it := range items {
			if attr != "" {
				if it, err = r.attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			parts[i] = str(it)
			n += len(parts[i]) + len(sep)
		}
		if err := r.allocStr(n); err != nil {
			return nil, err
		}
		return strings.Join(parts, sep), nil
	case "list":
		items, err := iterate(v)
		if err != nil {
			return nil, fmt.Errorf("list: %v", err)
		}
		return &List{Items: append([]any(nil), items...)}, r.step(len(items))
	case "map":
		return r.mapFilter(v, args, kwargs)
	case "max", "min":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{Name: name + " of an empty sequence"}, nil
		}
		attr, _ := kwOr(args, kwargs, 1, "attribute", "").(string)
		sorted, err := r.sortList(items, false, truthy(kwOr(args, kwargs, 0, "case_sensitive", false)), attr)
		if err != nil {
			return nil, err
		}
		l := sorted.(*List).Items
		if name == "max" {
			return l[len(l)-1], nil
		}
		return l[0], nil
	case "pprint":
		return repr(v), nil
	case "select", "reject", "selectattr", "rejectattr":
		return r.selectFilter(name, v, args)
	case "replace":
		return r.stringMethod(str(v), "replace", args, kwargs)
	case "reverse":
		switch x := v.(type) {
		case string:
			rs := []rune(x)
			slices.Reverse(rs)
			return string(rs), nil
		}
		items, err := iterate(v)
		if err != nil {
			return nil, fmt.Errorf("reverse: %v", err)
		}
		out := append([]any(nil), items...)
		slices.Reverse(out)
		return &List{Items: out}, r.step(len(out))
	case "round":
		f, ok := toFloat(v)
		if !ok {
			return nil, fmt.Errorf("round: expected a number, got %s", typeName(v))
		}
		prec, _ := toInt(kwOr(args, kwargs, 0, "precision", int64(0)))
		p := math.Pow(10, float64(prec))
		switch kwOr(args, kwargs, 1, "method", "common") {
		case "ceil":
			return math.Ceil(f*p) / p, nil
		case "floor":
			return math.Floor(f*p) / p, nil
		}
		return math.Round(f*p) / p, nil
	case "safe":
		return v, nil
	case "sort":
		items, err := iterate(v)
		if err != nil {
			return nil, fmt.Errorf("sort: %v", err)
		}
		attr, _ := kwOr(args, kwargs, 2, "attribute", "").(string)
		return r.sortList(items, truthy(kwOr(args, kwargs, 0, "reverse", false)), truthy(kwOr(args, kwargs, 1, "case_sensitive", false)), attr)
	case "string":
		return str(v), nil
	case "striptags":
		s := str(v)
		var b strings.Builder
		in := false
		for _, c := range s {
			switch {
			case c == '<':
				in = true
			case c == '>' && in:
				in = false
			case !in:
				b.WriteRune(c)
			}
		}
		return strings.Join(strings.Fields(b.String()), " "), nil
	case "sum":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		attr, _ := kwOr(args, kwargs, 0, "attribute", "").(string)
		var total any = kwOr(args, kwargs, 1, "start", int64(0))
		for _, it := range items {
			if attr != "" {
				if it, err = r.attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			if total, err = r.binop("+", total, it); err != nil {
				return nil, err
			}
		}
		return total, nil
	case "tojson":
		return r.tojson(v, args, kwargs)
	case "trim":
		return pyStrip(str(v), kwOr(args, kwargs, 0, "chars", nil), true, true)
	case "truncate":
		s := str(v)
		n, _ := toInt(kwOr(args, kwargs, 0, "length", int64(255)))
		end := str(kwOr(args, kwargs, 2, "end", "..."))
		leeway, _ := toInt(kwOr(args, kwargs, 3, "leeway", int64(5)))
		rs := []rune(s)
		if int64(len(rs)) <= n+leeway {
			return s, nil
		}
		cut := max(0, int(n)-len([]rune(end)))
		if truthy(kwOr(args, kwargs, 1, "killwords", false)) {
			return string(rs[:cut]) + end, nil
		}
		head := string(rs[:cut])
		if i := strings.LastIndexByte(head, ' '); i >= 0 {
			head = head[:i]
		}
		return head + end, nil
	case "unique":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		cs := truthy(kwOr(args, kwargs, 0, "case_sensitive", false))
		attr, _ := kwOr(args, kwargs, 1, "attribute", "").(string)
		out := &List{}
		var seen []any
		for _, it := range items {
			key := it
			if attr != "" {
				if key, err = r.attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			if s, ok := key.(string); ok && !cs {
				key = strings.ToLower(s)
			}
			if err := r.step(len(seen)/16 + 1); err != nil {
				return nil, err
			}
			if slices.ContainsFunc(seen, func(x any) bool { return equal(x, key) }) {
				continue
			}
			seen = append(seen, key)
			out.Items = append(out.Items, it)
		}
		return out, nil
	case "wordcount":
		return int64(len(strings.FieldsFunc(str(v), isPySpace))), nil
	case "batch":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		n, ok := toInt(argOr(args, 0, nil))
		if !ok || n <= 0 {
			return nil, fmt.Errorf("batch: the size must be a positive integer")
		}
		out := &List{}
		for i := 0; i < len(items); i += int(n) {
			b := &List{Items: append([]any(nil), items[i:min(len(items), i+int(n))]...)}
			if len(args) > 1 {
				for int64(len(b.Items)) < n {
					b.Items = append(b.Items, args[1])
				}
			}
			out.Items = append(out.Items, b)
		}
		return out, r.step(len(items))
	case "groupby":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		attr, _ := kwOr(args, kwargs, 0, "attribute", "").(string)
		sorted, err := r.sortList(items, false, false, attr)
		if err != nil {
			return nil, err
		}
		out := &List{}
		var cur *List
		var curKey any
		for _, it := range sorted.(*List).Items {
			k, err := r.attrPath(it, attr)
			if err != nil {
				return nil, err
			}
			if cur == nil || !equal(k, curKey) {
				cur, curKey = &List{}, k
				out.Items = append(out.Items, &List{Items: []any{k, cur}, Tuple: true})
			}
			cur.Items = append(cur.Items, it)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no filter named '%s'", name)
}

func (r *renderer) indent(s string, width any, first, blank bool) (any, error) {
	ind := ""
	switch w := width.(type) {
	case string:
		ind = w
	default:
		n, ok := toInt(w)
		if !ok || n < 0 || n > 1<<16 {
			return nil, fmt.Errorf("indent: bad width %s", repr(width))
		}
		ind = strings.Repeat(" ", int(n))
	}
	s += "\n"
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	lines = lines[:len(lines)-1] // what splitlines() drops after the final newline
	if err := r.allocStr(len(s) + len(lines)*len(ind)); err != nil {
		return nil, err
	}
	var rv string
	if blank {
		rv = strings.Join(lines, "\n"+ind)
	} else {
		rv = lines[0]
		for _, l := range lines[1:] {
			rv += "\n"
			if l != "" {
				rv += ind + l
			}
		}
	}
	if first {
		rv = ind + rv
	}
	return rv, nil
}

// sortList sorts items (by the attribute path attr when set), strings
// without case unless caseSensitive, as Jinja2's sort filter.
func (r *renderer) sortList(items []any, reverse, caseSensitive bool, attr string) (any, error) {
	sorted, err := r.sortItems(items, reverse, caseSensitive, attr)
	return &List{Items: sorted}, err
}

func (r *renderer) sortItems(items []any, reverse, caseSensitive bool, attr string) ([]any, error) {
	keys := make([]any, len(items))
	for i, it := range items {
		k := it
		if attr != "" {
			var err error
			if k, err = r.attrPath(it, attr); err != nil {
				return nil, err
			}
		}
		if s, ok := k.(string); ok && !caseSensitive {
			k = strings.ToLower(s)
		}
		keys[i] = k
	}
	if err := r.step(len(items) * 4); err != nil {
		return nil, err
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var cmpErr error
	slices.SortStableFunc(idx, func(a, b int) int {
		c, err := compare(keys[a], keys[b])
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if reverse {
			return -c
		}
		return c
	})
	if cmpErr != nil {
		return nil, fmt.Errorf("sort: %v", cmpErr)
	}
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, nil
}

func (r *renderer) mapFilter(v any, args []any, kwargs []kwValue) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, fmt.Errorf("map: %v", err)
	}
	out := &List{Items: make([]any, 0, len(items))}
	attr, hasAttr := "", false
	var def any
	hasDef := false
	for _, k := range kwargs {
		switch k.name {
		case "attribute":
			attr, hasAttr = str(k.v), true
		case "default":
			def, hasDef = k.v, true
		}
	}
	if hasAttr {
		for _, it := range items {
			x, err := r.attrPath(it, attr)
			if err != nil {
				return nil, err
			}
			if _, undef := x.(Undefined); undef && hasDef {
				x = def
			}
			out.Items = append(out.Items, x)
		}
		return out, r.step(len(items))
	}
	name, ok := argOr(args, 0, nil).(string)
	if !ok {
		return nil, fmt.Errorf("map: give a filter name or attribute=")
	}
	if !knownFilter(name) {
		return nil, fmt.Errorf("map: no filter named '%s'", name)
	}
	for _, it := range items {
		if err := r.step(1); err != nil {
			return nil, err
		}
		x, err := r.filter(name, it, args[1:], nil)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, x)
	}
	return out, nil
}

// selectFilter is select, reject, selectattr and rejectattr.
func (r *renderer) selectFilter(name string, v any, args []any) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	byAttr := strings.HasSuffix(name, "attr")
	want := strings.HasPrefix(name, "select")
	attr := ""
	if byAttr {
		a, ok := argOr(args, 0, nil).(string)
		if !ok {
			return nil, fmt.Errorf("%s: the first argument must be an attribute name", name)
		}
		attr, args = a, args[1:]
	}
	test := ""
	if len(args) > 0 {
		t, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("%s: the test must be a name", name)
		}
		if !knownTest(t) {
			return nil, fmt.Errorf("%s: no test named '%s'", name, t)
		}
		test, args = t, args[1:]
	}
	out := &List{}
	for _, it := range items {
		if err := r.step(1); err != nil {
			return nil, err
		}
		x := it
		if byAttr {
			if x, err = r.attrPath(it, attr); err != nil {
				return nil, err
			}
		}
		ok := truthy(x)
		if test != "" {
			if ok, err = r.test(test, x, args, nil); err != nil {
				return nil, err
			}
		}
		if ok == want {
			out.Items = append(out.Items, it)
		}
	}
	return out, nil
}

// knownTest reports whether name is a test this engine implements.
func knownTest(name string) bool {
	switch name {
	case "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number",
		"string", "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "in", "eq",
		"equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">",
		"ge", ">=", "odd", "even", "divisibleby", "lower", "upper", "filter", "test":
		return true
	}
	return false
}

// test applies the test called name to v.
func (r *renderer) test(name string, v any, args []any, sc *scope) (bool, error) {
	arg := argOr(args, 0, nil)
	switch name {
	case "defined":
		_, u := v.(Undefined)
		return !u, nil
	case "undefined":
		_, u := v.(Undefined)
		return u, nil
	case "none":
		return v == nil, nil
	case "boolean":
		_, ok := v.(bool)
		return ok, nil
	case "false":
		return v == false, nil
	case "true":
		return v == true, nil
	case "integer":
		_, ok := v.(int64)
		return ok, nil
	case "float":
		_, ok := v.(float64)
		return ok, nil
	case "number":
		switch v.(type) {
		case int64, float64, bool:
			return true, nil
		}
		return false, nil
	case "string":
		_, ok := v.(string)
		return ok, nil
	case "mapping":
		_, ok := v.(*Dict)
		return ok, nil
	case "iterable":
		switch v.(type) {
		case string, *List, *Dict:
			return true, nil
		}
		return false, nil
	case "sequence":
		switch v.(type) {
		case string, *List, *Dict:
			return true, nil
		}
		return false, nil
	case "callable":
		switch v.(type) {
		case *macro, *builtin, *boundMethod:
			return true, nil
		}
		return false, nil
	case "sameas":
		switch v.(type) {
		case *List, *Dict, *Namespace:
			return v == arg, nil
		}
		return equal(v, arg) && typeName(v) == typeName(arg), nil
	case "escaped":
		return false, nil
	case "in":
		return contains(arg, v)
	case "eq", "equalto", "==":
		return equal(v, arg), nil
	case "ne", "!=":
		return !equal(v, arg), nil
	case "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=":
		op := map[string]string{"lt": "<", "lessthan": "<", "le": "<=", "gt": ">", "greaterthan": ">", "ge": ">="}[name]
		if op == "" {
			op = name
		}
		res, err := r.binop(op, v, arg)
		if err != nil {
			return false, err
		}
		return res.(bool), nil
	case "odd", "even":
		n, ok := toInt(v)
		if !ok {
			return false, fmt.Errorf("%s: expected an integer, got %s", name, typeName(v))
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		n, ok1 := toInt(v)
		d, ok2 := toInt(arg)
		if !ok1 || !ok2 || d == 0 {
			return false, fmt.Errorf("divisibleby: expected non-zero integers")
		}
		return n%d == 0, nil
	case "lower":
		s, ok := v.(string)
		return ok && strings.ToLower(s) == s, nil
	case "upper":
		s, ok := v.(string)
		return ok && strings.ToUpper(s) == s, nil
	case "filter":
		s, ok := v.(string)
		return ok && knownFilter(s), nil
	case "test":
		s, ok := v.(string)
		return ok && knownTest(s), nil
	}
	return false, fmt.Errorf("no test named '%s'", name)
}
