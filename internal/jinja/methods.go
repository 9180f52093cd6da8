package jinja

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// isMethod reports whether obj has a Python method called name that
// templates may call.
func isMethod(obj any, name string) bool {
	switch obj.(type) {
	case string:
		switch name {
		case "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
			"upper", "lower", "title", "capitalize", "swapcase", "replace", "find", "rfind", "index", "rindex",
			"count", "join", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric",
			"isdecimal", "istitle", "format", "removeprefix", "removesuffix", "partition", "rpartition",
			"center", "ljust", "rjust", "zfill", "encode":
			return true
		}
	case *List:
		switch name {
		case "append", "extend", "pop", "insert", "index", "count", "remove", "reverse", "copy", "clear", "sort":
			return true
		}
	case *Dict:
		switch name {
		case "items", "keys", "values", "get", "update", "pop", "setdefault", "copy", "clear":
			return true
		}
	case *loopInfo:
		return name == "cycle"
	}
	return false
}

// pyStrip trims characters in cutset, or Python's whitespace when cutset
// is nil.
func pyStrip(s string, cutset any, left, right bool) (string, error) {
	var f func(rune) bool
	switch c := cutset.(type) {
	case nil, Undefined:
		f = isPySpace
	case string:
		f = func(r rune) bool { return strings.ContainsRune(c, r) }
	default:
		return "", fmt.Errorf("strip arg must be None or str, not %s", typeName(cutset))
	}
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s, nil
}

func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

func argOr(args []any, i int, def any) any {
	if i < len(args) {
		return args[i]
	}
	return def
}

func kwOr(args []any, kwargs []kwValue, i int, name string, def any) any {
	for _, k := range kwargs {
		if k.name == name {
			return k.v
		}
	}
	return argOr(args, i, def)
}

// pySplit is str.split / str.rsplit.
func pySplit(s string, sep any, maxsplit int64, right bool) (*List, error) {
	out := &List{}
	switch sp := sep.(type) {
	case nil, Undefined:
		fields := strings.FieldsFunc(s, isPySpace)
		if maxsplit >= 0 && int64(len(fields)) > maxsplit+1 {
			// Rejoin the tail (or head) as Python keeps it unsplit.
			if right {
				cut := len(fields) - int(maxsplit)
				head := strings.TrimRightFunc(s, isPySpace)
				for range fields[cut:] {
					i := strings.LastIndexFunc(head, isPySpace)
					head = strings.TrimRightFunc(head[:i+1], isPySpace)
				}
				fields = append([]string{strings.TrimLeftFunc(head, isPySpace)}, fields[cut:]...)
			} else {
				tail := strings.TrimLeftFunc(s, isPySpace)
				for range fields[:maxsplit] {
					i := strings.IndexFunc(tail, isPySpace)
					tail = strings.TrimLeftFunc(tail[i:], isPySpace)
				}
				fields = append(fields[:maxsplit:maxsplit], strings.TrimRightFunc(tail, isPySpace))
			}
		}
		for _, f := range fields {
			out.Items = append(out.Items, f)
		}
	case string:
		if sp == "" {
			return nil, fmt.Errorf("empty separator")
		}
		var parts []string
		switch {
		case maxsplit < 0:
			parts = strings.Split(s, sp)
		case right:
			parts = nil
			rest := s
			for n := int64(0); n < maxsplit; n++ {
				i := strings.LastIndex(rest, sp)
				if i < 0 {
					break
				}
				parts = append([]string{rest[i+len(sp):]}, parts...)
				rest = rest[:i]
			}
			parts = append([]string{rest}, parts...)
		default:
			parts = strings.SplitN(s, sp, int(min(maxsplit+1, int64(len(s)+1))))
		}
		for _, p := range parts {
			out.Items = append(out.Items, p)
		}
	default:
		return nil, fmt.Errorf("must be str or None, not %s", typeName(sep))
	}
	return out, nil
}

func (r *renderer) callMethod(recv any, name string, args []any, kwargs []kwValue) (any, error) {
	switch o := recv.(type) {
	case string:
		return r.stringMethod(o, name, args, kwargs)
	case *List:
		return r.listMethod(o, name, args, kwargs)
	case *Dict:
		return r.dictMethod(o, name, args, kwargs)
	case *loopInfo:
		if len(args) == 0 {
			return nil, fmt.Errorf("loop.cycle() needs at least one argument")
		}
		return args[o.i%len(args)], nil
	}
	return nil, fmt.Errorf("'%s' object has no attribute '%s'", typeName(recv), name)
}

func (r *renderer) stringMethod(s, name string, args []any, kwargs []kwValue) (any, error) {
	argStr := func(i int, what string) (string, error) {
		v := argOr(args, i, nil)
		x, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("str.%s(): %s must be a string, not %s", name, what, typeName(v))
		}
		return x, nil
	}
	switch name {
	case "strip":
		return pyStrip(s, argOr(args, 0, nil), true, true)
	case "lstrip":
		return pyStrip(s, argOr(args, 0, nil), true, false)
	case "rstrip":
		return pyStrip(s, argOr(args, 0, nil), false, true)
	case "split", "rsplit":
		maxsplit := int64(-1)
		if m, ok := toInt(kwOr(args, kwargs, 1, "maxsplit", int64(-1))); ok {
			maxsplit = m
		}
		l, err := pySplit(s, kwOr(args, kwargs, 0, "sep", nil), maxsplit, name == "rsplit")
		if err != nil {
			return nil, fmt.Errorf("str.%s(): %v", name, err)
		}
		return l, r.step(len(l.Items))
	case "splitlines":
		l := &List{}
		for _, line := range strings.FieldsFunc(strings.ReplaceAll(s, "\r\n", "\n"), func(c rune) bool { return c == '\n' || c == '\r' }) {
			l.Items = append(l.Items, line)
		}
		return l, nil
	case "startswith", "endswith":
		var cands []any
		switch p := argOr(args, 0, nil).(type) {
		case string:
			cands = []any{p}
		case *List:
			cands = p.Items
		default:
			return nil, fmt.Errorf("str.%s(): the argument must be a string or a tuple of strings, not %s", name, typeName(p))
		}
		for _, c := range cands {
			p, ok := c.(string)
			if !ok {
				return nil, fmt.Errorf("str.%s(): the tuple must hold strings", name)
			}
			if (name == "startswith" && strings.HasPrefix(s, p)) || (name == "endswith" && strings.HasSuffix(s, p)) {
				return true, nil
			}
		}
		return false, nil
	case "upper":
		return strings.ToUpper(s), nil
	case "lower":
		return strings.ToLower(s), nil
	case "title":
		return pyTitle(s), nil
	case "capitalize":
		return pyCapitalize(s), nil
	case "swapcase":
		return strings.Map(func(c rune) rune {
			if unicode.IsUpper(c) {
				return unicode.ToLower(c)
			}
			return unicode.ToUpper(c)
		}, s), nil
	case "replace":
		old, err := argStr(0, "old")
		if err != nil {
			return nil, err
		}
		nw, err := argStr(1, "new")
		if err != nil {
			return nil, err
		}
		n := int64(-1)
		if c, ok := toInt(kwOr(args, kwargs, 2, "count", int64(-1))); ok {
			n = c
		}
		if old != "" {
			cnt := int64(strings.Count(s, old))
			if n >= 0 {
				cnt = min(cnt, n)
			}
			if err := r.allocStr(len(s) + int(cnt)*(len(nw)-len(old))); err != nil {
				return nil, err
			}
		} else if err := r.allocStr(len(s) + (len(s)+1)*len(nw)); err != nil {
			return nil, err
		}
		return strings.Replace(s, old, nw, int(n)), nil
	case "find", "rfind", "index", "rindex", "count":
		sub, err := argStr(0, "sub")
		if err != nil {
			return nil, err
		}
		var i int
		switch name {
		case "count":
			return int64(strings.Count(s, sub)), nil
		case "find", "index":
			i = strings.Index(s, sub)
		default:
			i = strings.LastIndex(s, sub)
		}
		if i < 0 && (name == "index" || name == "rindex") {
			return nil, fmt.Errorf("substring not found")
		}
		if i >= 0 {
			i = len([]rune(s[:i]))
		}
		return int64(i), nil
	case "join":
		items, err := iterate(argOr(args, 0, nil))
		if err != nil {
			return nil, fmt.Errorf("str.join(): %v", err)
		}
		parts := make([]string, len(items))
		n := 0
		for i, it := range items {
			p, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("str.join(): sequence item %d: expected str instance, %s found", i, typeName(it))
			}
			parts[i] = p
			n += len(p) + len(s)
		}
		if err := r.allocStr(n); err != nil {
			return nil, err
		}
		return strings.Join(parts, s), nil
	case "isdigit", "isdecimal", "isnumeric":
		return s != "" && strings.IndexFunc(s, func(c rune) bool { return !unicode.IsDigit(c) }) < 0, nil
	case "isalpha":
		return s != "" && strings.IndexFunc(s, func(c rune) bool { return !unicode.IsLetter(c) }) < 0, nil
	case "isalnum":
		return s != "" && strings.IndexFunc(s, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) }) < 0, nil
	case "isspace":
		return s != "" && strings.IndexFunc(s, func(c rune) bool { return !isPySpace(c) }) < 0, nil
	case "isupper":
		return strings.IndexFunc(s, unicode.IsUpper) >= 0 && strings.IndexFunc(s, unicode.IsLower) < 0, nil
	case "islower":
		return strings.IndexFunc(s, unicode.IsLower) >= 0 && strings.IndexFunc(s, unicode.IsUpper) < 0, nil
	case "istitle":
		return s != "" && pyTitle(s) == s, nil
	case "removeprefix":
		p, err := argStr(0, "prefix")
		return strings.TrimPrefix(s, p), err
	case "removesuffix":
		p, err := argStr(0, "suffix")
		return strings.TrimSuffix(s, p), err
	case "partition", "rpartition":
		sep, err := argStr(0, "sep")
		if err != nil {
			return nil, err
		}
		i := strings.Index(s, sep)
		if name == "rpartition" {
			i = strings.LastIndex(s, sep)
		}
		if i < 0 || sep == "" {
			if name == "rpartition" {
				return &List{Items: []any{"", "", s}, Tuple: true}, nil
			}
			return &List{Items: []any{s, "", ""}, Tuple: true}, nil
		}
		return &List{Items: []any{s[:i], sep, s[i+len(sep):]}, Tuple: true}, nil
	case "center", "ljust", "rjust", "zfill":
		w, ok := toInt(argOr(args, 0, nil))
		if !ok {
			return nil, fmt.Errorf("str.%s(): the width must be an integer", name)
		}
		fill := " "
		if name == "zfill" {
			fill = "0"
		} else if f, ok := argOr(args, 1, " ").(string); ok && len([]rune(f)) == 1 {
			fill = f
		}
		n := int(w) - len([]rune(s))
		if n <= 0 {
			return s, nil
		}
		if err := r.allocStr(len(s) + n*len(fill)); err != nil {
			return nil, err
		}
		switch name {
		case "ljust":
			return s + strings.Repeat(fill, n), nil
		case "rjust", "zfill":
			return strings.Repeat(fill, n) + s, nil
		}
		left := n / 2
		if n%2 == 1 && int(w)%2 == 1 {
			left++
		}
		return strings.Repeat(fill, left) + s + strings.Repeat(fill, n-left), nil
	case "format":
		return r.pyFormat(s, args, kwargs)
	case "encode":
		return s, nil
	}
	return nil, fmt.Errorf("'str' object has no attribute '%s'", name)
}

// pyFormat is str.format for {}, {0} and {name} fields (no format specs
// beyond an empty one).
func (r *renderer) pyFormat(s string, args []any, kwargs []kwValue) (any, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			b.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			b.WriteByte('}')
			i++
		case c == '{':
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("str.format(): single '{' encountered in format string")
			}
			field, _, _ := strings.Cut(s[i+1:i+j], ":")
			i += j
			var v any
			switch {
			case field == "":
				if auto >= len(args) {
					return nil, fmt.Errorf("str.format(): not enough arguments")
				}
				v = args[auto]
				auto++
			case field[0] >= '0' && field[0] <= '9':
				n := 0
				fmt.Sscan(field, &n)
				if n >= len(args) {
					return nil, fmt.Errorf("str.format(): no argument %d", n)
				}
				v = args[n]
			default:
				v = kwOr(nil, kwargs, 0, field, Undefined{Name: field})
				if _, ok := v.(Undefined); ok {
					return nil, fmt.Errorf("str.format(): no argument %q", field)
				}
			}
			b.WriteString(str(v))
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), r.allocStr(b.Len())
}

func pyTitle(s string) string {
	prevCased := false
	return strings.Map(func(c rune) rune {
		out := c
		if unicode.IsLetter(c) {
			if prevCased {
				out = unicode.ToLower(c)
			} else {
				out = unicode.ToTitle(c)
			}
			prevCased = true
		} else {
			prevCased = false
		}
		return out
	}, s)
}

func pyCapitalize(s string) string {
	if s == "" {
		return s
	}
	rs := []rune(strings.ToLower(s))
	rs[0] = unicode.ToTitle(rs[0])
	return string(rs)
}

func (r *renderer) listMethod(l *List, name string, args []any, kwargs []kwValue) (any, error) {
	if l.Tuple && name != "index" && name != "count" {
		return nil, fmt.Errorf("'tuple' object has no attribute '%s'", name)
	}
	switch name {
	case "append":
		if len(args) != 1 {
			return nil, fmt.Errorf("list.append() takes exactly one argument (%d given)", len(args))
		}
		if err := r.step(1); err != nil {
			return nil, err
		}
		l.Items = append(l.Items, args[0])
		return nil, nil
	case "extend":
		items, err := iterate(argOr(args, 0, nil))
		if err != nil {
			return nil, fmt.Errorf("list.extend(): %v", err)
		}
		if err := r.step(len(items)); err != nil {
			return nil, err
		}
		l.Items = append(l.Items, items...)
		return nil, nil
	case "pop":
		if len(l.Items) == 0 {
			return nil, fmt.Errorf("pop from empty list")
		}
		i := int64(len(l.Items) - 1)
		if len(args) > 0 {
			n, ok := toInt(args[0])
			if !ok {
				return nil, fmt.Errorf("list.pop(): the index must be an integer")
			}
			if n < 0 {
				n += int64(len(l.Items))
			}
			if n < 0 || n >= int64(len(l.Items)) {
				return nil, fmt.Errorf("pop index out of range")
			}
			i = n
		}
		v := l.Items[i]
		l.Items = slices.Delete(l.Items, int(i), int(i)+1)
		return v, nil
	case "insert":
		n, ok := toInt(argOr(args, 0, nil))
		if !ok || len(args) != 2 {
			return nil, fmt.Errorf("list.insert() takes an integer index and a value")
		}
		if n < 0 {
			n = max(0, n+int64(len(l.Items)))
		}
		n = min(n, int64(len(l.Items)))
		if err := r.step(1); err != nil {
			return nil, err
		}
		l.Items = slices.Insert(l.Items, int(n), args[1])
		return nil, nil
	case "index":
		for i, x := range l.Items {
			if equal(x, argOr(args, 0, nil)) {
				return int64(i), nil
			}
		}
		return nil, fmt.Errorf("%s is not in list", repr(argOr(args, 0, nil)))
	case "count":
		n := 0
		for _, x := range l.Items {
			if equal(x, argOr(args, 0, nil)) {
				n++
			}
		}
		return int64(n), nil
	case "remove":
		for i, x := range l.Items {
			if equal(x, argOr(args, 0, nil)) {
				l.Items = slices.Delete(l.Items, i, i+1)
				return nil, nil
			}
		}
		return nil, fmt.Errorf("list.remove(x): x not in list")
	case "reverse":
		slices.Reverse(l.Items)
		return nil, nil
	case "copy":
		return &List{Items: append([]any(nil), l.Items...)}, r.step(len(l.Items))
	case "clear":
		l.Items = nil
		return nil, nil
	case "sort":
		sorted, err := r.sortItems(l.Items, truthy(kwOr(nil, kwargs, 0, "reverse", false)), false, "")
		if err != nil {
			return nil, err
		}
		l.Items = sorted
		return nil, nil
	}
	return nil, fmt.Errorf("'list' object has no attribute '%s'", name)
}

func (r *renderer) dictMethod(d *Dict, name string, args []any, kwargs []kwValue) (any, error) {
	switch name {
	case "items":
		l := &List{Items: make([]any, len(d.keys))}
		for i, k := range d.keys {
			l.Items[i] = &List{Items: []any{k, d.m[k]}, Tuple: true}
		}
		return l, r.step(len(d.keys))
	case "keys":
		return &List{Items: append([]any(nil), d.keys...)}, r.step(len(d.keys))
	case "values":
		l := &List{Items: make([]any, len(d.keys))}
		for i, k := range d.keys {
			l.Items[i] = d.m[k]
		}
		return l, r.step(len(d.keys))
	case "get":
		k := argOr(args, 0, nil)
		if hashable(k) {
			if v, ok := d.Get(k); ok {
				return v, nil
			}
		}
		return argOr(args, 1, nil), nil
	case "update":
		for _, a := range args {
			o, ok := a.(*Dict)
			if !ok {
				return nil, fmt.Errorf("dict.update() takes a dict, not %s", typeName(a))
			}
			for _, k := range o.keys {
				d.Set(k, o.m[k])
			}
		}
		for _, k := range kwargs {
			d.Set(k.name, k.v)
		}
		return nil, nil
	case "pop":
		k := argOr(args, 0, nil)
		if hashable(k) {
			if v, ok := d.Get(k); ok {
				d.Delete(k)
				return v, nil
			}
		}
		if len(args) > 1 {
			return args[1], nil
		}
		return nil, fmt.Errorf("KeyError: %s", repr(k))
	case "setdefault":
		k := argOr(args, 0, nil)
		if !hashable(k) {
			return nil, fmt.Errorf("unhashable type: '%s'", typeName(k))
		}
		if v, ok := d.Get(k); ok {
			return v, nil
		}
		v := argOr(args, 1, nil)
		d.Set(k, v)
		return v, nil
	case "copy":
		return d.copy(), r.step(d.Len())
	case "clear":
		d.keys, d.m = nil, map[any]any{}
		return nil, nil
	}
	return nil, fmt.Errorf("'dict' object has no attribute '%s'", name)
}
