package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// builtin is a global function.
type builtin struct {
	name string
	fn   func(r *renderer, pos int, args []any, kwargs []kwValue) (any, error)
}

// boundMethod is a method of a string, list, dict or loop read as a value.
type boundMethod struct {
	recv any
	name string
}

// globals returns the scope of the built-in functions of one render.
func (r *renderer) globals() *scope {
	g := &scope{vars: map[string]any{}}
	for _, b := range []*builtin{
		{"range", builtinRange},
		{"namespace", builtinNamespace},
		{"dict", builtinDict},
		{"raise_exception", builtinRaise},
		{"strftime_now", builtinStrftimeNow},
		{"joiner", builtinJoiner},
		{"cycler", builtinCycler},
	} {
		g.vars[b.name] = b
	}
	return g
}

func builtinRange(r *renderer, pos int, args []any, kwargs []kwValue) (any, error) {
	if len(kwargs) > 0 || len(args) == 0 || len(args) > 3 {
		return nil, fmt.Errorf("range() takes 1 to 3 integer arguments")
	}
	var n [3]int64
	for i, a := range args {
		v, ok := toInt(a)
		if !ok {
			return nil, fmt.Errorf("range() argument %d: '%s' object cannot be interpreted as an integer", i+1, typeName(a))
		}
		n[i] = v
	}
	start, stop, step := int64(0), n[0], int64(1)
	if len(args) >= 2 {
		start, stop = n[0], n[1]
	}
	if len(args) == 3 {
		step = n[2]
	}
	if step == 0 {
		return nil, fmt.Errorf("range() arg 3 must not be zero")
	}
	// In float64 first: the int64 difference of extreme bounds overflows.
	span := (float64(stop) - float64(start)) / float64(step)
	if span > float64(r.opt.MaxWork) {
		return nil, r.step(r.opt.MaxWork + 1)
	}
	// Unsigned differences cannot overflow once the sign is known.
	count := int64(0)
	if step > 0 && stop > start {
		count = int64((uint64(stop)-uint64(start)-1)/uint64(step) + 1)
	} else if step < 0 && stop < start {
		count = int64((uint64(start)-uint64(stop)-1)/(uint64(-(step+1))+1) + 1)
	}
	if count < 0 || count > int64(r.opt.MaxWork) {
		return nil, r.step(r.opt.MaxWork + 1)
	}
	if err := r.step(int(count)); err != nil {
		return nil, err
	}
	l := &List{Items: make([]any, count)}
	for i := range l.Items {
		l.Items[i] = start + int64(i)*step
	}
	return l, nil
}

func builtinNamespace(r *renderer, pos int, args []any, kwargs []kwValue) (any, error) {
	ns := &Namespace{attrs: NewDict()}
	for _, a := range args {
		d, ok := a.(*Dict)
		if !ok {
			return nil, fmt.Errorf("namespace() takes a dict and keyword arguments, not %s", typeName(a))
		}
		for _, k := range d.keys {
			ns.attrs.Set(k, d.m[k])
		}
	}
	for _, k := range kwargs {
		ns.attrs.Set(k.name, k.v)
	}
	return ns, nil
}

func builtinDict(r *renderer, pos int, args []any, kwargs []kwValue) (any, error) {
	d := NewDict()
	for _, a := range args {
		switch x := a.(type) {
		case *Dict:
			for _, k := range x.keys {
				d.Set(k, x.m[k])
			}
		case *List:
			for _, it := range x.Items {
				p, ok := it.(*List)
				if !ok || len(p.Items) != 2 || !hashable(p.Items[0]) {
					return nil, fmt.Errorf("dict(): each item must be a pair with a hashable key")
				}
				d.Set(p.Items[0], p.Items[1])
			}
		default:
			return nil, fmt.Errorf("dict() takes a dict, pairs or keyword arguments, not %s", typeName(a))
		}
	}
	for _, k := range kwargs {
		d.Set(k.name, k.v)
	}
	return d, nil
}

func builtinRaise(r *renderer, pos int, args []any, kwargs []kwValue) (any, error) {
	msg := "the template raised an exception"
	if len(args) > 0 {
		msg = str(args[0])
	}
	line, col := position(r.t.text, pos)
	return nil, &RaiseError{Msg: msg, Line: line, Col: col}
}

func builtinStrftimeNow(r *renderer, pos int, args []any, kwargs []kwValue) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("strftime_now() takes one format string")
	}
	f, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("strftime_now(): the format must be a string, not %s", typeName(args[0]))
	}
	return Strftime(r.opt.Now, f), nil
}

func builtinJoiner(r *renderer, pos int, args []any, kwargs []kwValue) (any, error) {
	sep := ", "
	if len(args) > 0 {
		sep = str(args[0])
	}
	used := false
	return &builtin{name: "joiner", fn: func(*renderer, int, []any, []kwValue) (any, error) {
		if !used {
			used = true
			return "", nil
		}
		return sep, nil
	}}, nil
}

func builtinCycler(r *renderer, pos int, args []any, kwargs []kwValue) (any, error) {
	items := append([]any(nil), args...)
	i := 0
	d := NewDict()
	d.Set("next", &builtin{name: "next", fn: func(*renderer, int, []any, []kwValue) (any, error) {
		if len(items) == 0 {
			return nil, nil
		}
		v := items[i%len(items)]
		i++
		return v, nil
	}})
	d.Set("reset", &builtin{name: "reset", fn: func(*renderer, int, []any, []kwValue) (any, error) {
		i = 0
		return nil, nil
	}})
	return d, nil
}

// Strftime formats t with the C strftime directives templates use (%d,
// %-d, %b, %B, %Y, %m, %H, %M, %S, %y, %a, %A, %j, %p, %I, %e, %Z, %z, %%).
func Strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' || i+1 >= len(f) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true
		if f[i] == '-' && i+1 < len(f) {
			pad = false
			i++
		}
		num := func(v, width int) {
			s := strconv.Itoa(v)
			if pad {
				for len(s) < width {
					s = "0" + s
				}
			}
			b.WriteString(s)
		}
		switch f[i] {
		case 'd':
			num(t.Day(), 2)
		case 'e':
			s := strconv.Itoa(t.Day())
			if pad && len(s) < 2 {
				s = " " + s
			}
			b.WriteString(s)
		case 'm':
			num(int(t.Month()), 2)
		case 'Y':
			num(t.Year(), 4)
		case 'y':
			num(t.Year()%100, 2)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if !pad {
				b.WriteByte('-')
			}
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// percentFormat is Python's "format % args" for %s, %d, %i, %f, %r and %%.
func percentFormat(f string, arg any) (string, error) {
	var args []any
	if l, ok := arg.(*List); ok && l.Tuple {
		args = l.Items
	} else {
		args = []any{arg}
	}
	var b strings.Builder
	next := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		j := i + 1
		for j < len(f) && strings.IndexByte("0123456789.-+ ", f[j]) >= 0 {
			j++
		}
		if j >= len(f) {
			return "", fmt.Errorf("incomplete format")
		}
		spec := f[i+1 : j]
		verb := f[j]
		i = j
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if next >= len(args) {
			return "", fmt.Errorf("not enough arguments for format string")
		}
		a := args[next]
		next++
		switch verb {
		case 's':
			fmt.Fprintf(&b, "%"+spec+"s", str(a))
		case 'r':
			fmt.Fprintf(&b, "%"+spec+"s", repr(a))
		case 'd', 'i':
			n, ok := toInt(a)
			if !ok {
				fl, ok := toFloat(a)
				if !ok {
					return "", fmt.Errorf("%%d format: a number is required, not %s", typeName(a))
				}
				n = int64(fl)
			}
			fmt.Fprintf(&b, "%"+spec+"d", n)
		case 'f', 'e', 'g':
			fl, ok := toFloat(a)
			if !ok {
				return "", fmt.Errorf("%%%c format: a number is required, not %s", verb, typeName(a))
			}
			if !strings.Contains(spec, ".") && verb == 'f' {
				spec += ".6"
			}
			fmt.Fprintf(&b, "%"+spec+string(verb), fl)
		default:
			return "", fmt.Errorf("unsupported format character '%c'", verb)
		}
	}
	if next < len(args) && len(args) > 1 {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}
