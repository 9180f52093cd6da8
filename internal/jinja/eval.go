package jinja

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Template is a parsed template. It is immutable: Render may be called
// from several goroutines at once.
type Template struct {
	src  string // as Parse was given it
	text string // src with its newlines normalized: what positions count in
	body []node
}

// Parse parses a Jinja template with Hugging Face's settings (trim_blocks
// and lstrip_blocks on). A syntax error is an *Error with its line and
// column. As the reference's lexer (and Jinja2's), it reads "\r\n" and
// "\r" as "\n" and drops one trailing newline of the source.
func Parse(src string) (*Template, error) {
	text := normalizeNewlines(src)
	toks, err := lex(text)
	if err != nil {
		return nil, err
	}
	p := &parser{src: text, toks: toks}
	body, _, err := p.parseBody(token{})
	if err != nil {
		return nil, err
	}
	return &Template{src: src, text: text, body: body}, nil
}

// normalizeNewlines is src with "\r\n" and "\r" read as "\n", less one
// trailing newline when src ends with "\n" (keep_trailing_newline off).
func normalizeNewlines(src string) string {
	text := src
	if strings.Contains(text, "\r") {
		text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	}
	if strings.HasSuffix(src, "\n") {
		text = text[:len(text)-1]
	}
	return text
}

// Source returns the template text Parse was given.
func (t *Template) Source() string { return t.src }

// Options bound and parameterize a render. The zero value is usable.
type Options struct {
	// Now is the time strftime_now formats; zero means time.Now().
	Now time.Time
	// MaxOutput caps the rendered text and every string built on the way,
	// in bytes (default 64 MiB).
	MaxOutput int
	// MaxWork caps the work of one render: one unit per statement,
	// expression and loop iteration, one per list element built and one
	// per 64 bytes of string built (default 20 million, about a second).
	MaxWork int
}

// Default limits of Options.
const (
	DefaultMaxOutput = 64 << 20
	DefaultMaxWork   = 20_000_000
	maxCallDepth     = 100
)

// Render renders the template with vars (converted with FromGo) as its
// variables. Besides Jinja2's globals (range, dict, namespace, joiner,
// cycler) it provides Hugging Face's raise_exception(msg), which fails the
// render with a *RaiseError, and strftime_now(format). Errors are *Error
// (with the line and column of the failing expression), *RaiseError or
// *LimitError.
func (t *Template) Render(vars map[string]any, opt Options) (string, error) {
	if opt.MaxOutput <= 0 {
		opt.MaxOutput = DefaultMaxOutput
	}
	if opt.MaxWork <= 0 {
		opt.MaxWork = DefaultMaxWork
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	r := &renderer{t: t, opt: opt, out: &strings.Builder{}}
	root := &scope{vars: map[string]any{}, parent: r.globals()}
	for k, v := range vars {
		c, err := FromGo(v)
		if err != nil {
			return "", fmt.Errorf("variable %q: %w", k, err)
		}
		root.vars[k] = c
	}
	if err := r.exec(t.body, root); err != nil {
		switch {
		case errors.Is(err, errBreak), errors.Is(err, errContinue):
			return "", &Error{Line: 1, Col: 1, Msg: "break or continue outside a loop"}
		}
		return "", err
	}
	return r.out.String(), nil
}

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// scope is a frame of variables; lookups walk up the parents.
type scope struct {
	vars   map[string]any
	parent *scope
}

func (s *scope) lookup(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

func (s *scope) child() *scope { return &scope{vars: map[string]any{}, parent: s} }

// renderer holds the state of one render.
type renderer struct {
	t     *Template
	opt   Options
	out   *strings.Builder
	work  int
	calls int // macro call depth
}

// step charges n units of work.
func (r *renderer) step(n int) error {
	r.work += n
	if r.work > r.opt.MaxWork {
		return &LimitError{Msg: fmt.Sprintf("template render exceeded its work limit (%d steps): a loop that does not end, or a template too large for this input", r.opt.MaxWork)}
	}
	return nil
}

// allocStr charges for a string of n bytes about to be built.
func (r *renderer) allocStr(n int) error {
	if n > r.opt.MaxOutput {
		return &LimitError{Msg: fmt.Sprintf("template render built a string of %d bytes, over the limit of %d", n, r.opt.MaxOutput)}
	}
	return r.step(n/64 + 1)
}

func (r *renderer) write(s string) error {
	if r.out.Len()+len(s) > r.opt.MaxOutput {
		return &LimitError{Msg: fmt.Sprintf("template output exceeded its limit of %d bytes", r.opt.MaxOutput)}
	}
	if err := r.step(len(s)/64 + 1); err != nil {
		return err
	}
	r.out.WriteString(s)
	return nil
}

// capture runs f with output going to a fresh buffer and returns the text.
func (r *renderer) capture(f func() error) (string, error) {
	saved := r.out
	r.out = &strings.Builder{}
	err := f()
	s := r.out.String()
	r.out = saved
	return s, err
}

// errAt returns a render error at source offset pos; errors that already
// carry a position pass through.
func (r *renderer) errAt(pos int, err error) error {
	var e *Error
	var re *RaiseError
	var le *LimitError
	if errors.As(err, &e) || errors.As(err, &re) || errors.As(err, &le) || err == errBreak || err == errContinue {
		return err
	}
	return errAt(r.t.text, pos, err.Error())
}

func (r *renderer) errorf(pos int, format string, args ...any) error {
	return errAt(r.t.text, pos, fmt.Sprintf(format, args...))
}

func (r *renderer) exec(body []node, sc *scope) error {
	for _, n := range body {
		if err := r.step(1); err != nil {
			return err
		}
		if err := r.execNode(n, sc); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) execNode(n node, sc *scope) error {
	switch n := n.(type) {
	case *textNode:
		return r.write(n.text)
	case *outputNode:
		v, err := r.eval(n.x, sc)
		if err != nil {
			return err
		}
		return r.write(str(v))
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c, sc)
			if err != nil {
				return err
			}
			if truthy(v) {
				return r.exec(n.bodys[i], sc)
			}
		}
		return r.exec(n.els, sc)
	case *forNode:
		it, err := r.eval(n.iter, sc)
		if err != nil {
			return err
		}
		return r.execFor(n, it, sc, 0)
	case *setNode:
		v, err := r.eval(n.x, sc)
		if err != nil {
			return err
		}
		if n.attr != "" {
			obj, _ := sc.lookup(n.targets[0])
			switch o := obj.(type) {
			case *Namespace:
				o.attrs.Set(n.attr, v)
			case *Dict:
				o.Set(n.attr, v)
			default:
				return r.errorf(n.pos, "cannot assign attribute %q on %s %q: only namespace() objects take attribute assignments", n.attr, typeName(obj), n.targets[0])
			}
			return nil
		}
		return r.assign(n.pos, n.targets, v, sc)
	case *setBlockNode:
		s, err := r.capture(func() error { return r.exec(n.body, sc) })
		if err != nil {
			return err
		}
		var v any = s
		for _, f := range n.filters {
			if v, err = r.applyFilter(f, v, sc); err != nil {
				return err
			}
		}
		sc.vars[n.name] = v
		return nil
	case *macroNode:
		sc.vars[n.name] = &macro{name: n.name, params: n.params, body: n.body, closure: sc}
		return nil
	case *callBlockNode:
		caller := &macro{name: "caller", params: n.params, body: n.body, closure: sc}
		v, err := r.evalCall(n.call, sc, caller)
		if err != nil {
			return err
		}
		return r.write(str(v))
	case *filterBlockNode:
		s, err := r.capture(func() error { return r.exec(n.body, sc) })
		if err != nil {
			return err
		}
		var v any = s
		for _, f := range n.filters {
			if v, err = r.applyFilter(f, v, sc); err != nil {
				return err
			}
		}
		return r.write(str(v))
	case *withNode:
		inner := sc.child()
		for i, name := range n.names {
			v, err := r.eval(n.vals[i], sc)
			if err != nil {
				return err
			}
			inner.vars[name] = v
		}
		return r.exec(n.body, inner)
	case *doNode:
		_, err := r.eval(n.x, sc)
		return err
	case *breakNode:
		return errBreak
	case *continueNode:
		return errContinue
	}
	return fmt.Errorf("BUG: jinja: unknown node %T", n)
}

// assign binds targets in sc: one name, or several unpacked from a sequence.
func (r *renderer) assign(pos int, targets []string, v any, sc *scope) error {
	if len(targets) == 1 {
		sc.vars[targets[0]] = v
		return nil
	}
	items, err := iterate(v)
	if err != nil {
		return r.errorf(pos, "cannot unpack %s into %d names", typeName(v), len(targets))
	}
	if len(items) != len(targets) {
		return r.errorf(pos, "cannot unpack %d values into %d names", len(items), len(targets))
	}
	for i, t := range targets {
		sc.vars[t] = items[i]
	}
	return nil
}

// execFor runs a for loop over it; depth counts recursive loop() calls.
func (r *renderer) execFor(n *forNode, it any, sc *scope, depth int) error {
	if depth > maxCallDepth {
		return r.errorf(n.pos, "recursive loop nested more than %d levels", maxCallDepth)
	}
	items, err := iterate(it)
	if err != nil {
		return r.errorf(n.iter.exprPos(), "for loop: %v", err)
	}
	if d, ok := it.(*Dict); ok {
		items = append([]any(nil), d.keys...) // the loop may change the dict
	} else if l, ok := it.(*List); ok {
		items = append([]any(nil), l.Items...)
	}
	inner := sc.child()
	if n.filter != nil {
		kept := items[:0:0]
		for _, x := range items {
			if err := r.step(1); err != nil {
				return err
			}
			if err := r.assign(n.pos, n.targets, x, inner); err != nil {
				return err
			}
			v, err := r.eval(n.filter, inner)
			if err != nil {
				return err
			}
			if truthy(v) {
				kept = append(kept, x)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.exec(n.els, sc)
	}
	loop := &loopInfo{items: items, depth: depth}
	if n.recursive {
		loop.recurse = func(v any) (string, error) {
			return r.capture(func() error { return r.execFor(n, v, sc, depth+1) })
		}
	}
	inner.vars["loop"] = loop
	for i, x := range items {
		if err := r.step(1); err != nil {
			return err
		}
		loop.i = i
		if err := r.assign(n.pos, n.targets, x, inner); err != nil {
			return err
		}
		err := r.exec(n.body, inner)
		if err == errBreak {
			break
		}
		if err != nil && err != errContinue {
			return err
		}
	}
	return nil
}

// loopInfo is the loop variable of a for loop.
type loopInfo struct {
	items   []any
	i       int
	depth   int
	recurse func(any) (string, error)
}

func (l *loopInfo) attr(name string) any {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.i + 1)
	case "index0":
		return int64(l.i)
	case "revindex":
		return int64(n - l.i)
	case "revindex0":
		return int64(n - l.i - 1)
	case "first":
		return l.i == 0
	case "last":
		return l.i == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(l.depth + 1)
	case "depth0":
		return int64(l.depth)
	case "previtem":
		if l.i > 0 {
			return l.items[l.i-1]
		}
	case "nextitem":
		if l.i < n-1 {
			return l.items[l.i+1]
		}
	case "cycle":
		return &boundMethod{recv: l, name: "cycle"}
	}
	return Undefined{Name: "loop." + name}
}

// macro is a macro (or the caller of a call block) with the scope it was
// defined in.
type macro struct {
	name    string
	params  []param
	body    []node
	closure *scope
}

// kwValue is an evaluated keyword argument.
type kwValue struct {
	name string
	v    any
}

func (r *renderer) callMacro(pos int, m *macro, args []any, kwargs []kwValue, caller *macro) (any, error) {
	if r.calls >= maxCallDepth {
		return nil, r.errorf(pos, "macro %s: calls nested more than %d deep", m.name, maxCallDepth)
	}
	r.calls++
	defer func() { r.calls-- }()
	sc := m.closure.child()
	var extra []any
	for i, a := range args {
		if i < len(m.params) {
			sc.vars[m.params[i].name] = a
		} else {
			extra = append(extra, a)
		}
	}
	kw := NewDict()
	for _, k := range kwargs {
		found := false
		for _, p := range m.params {
			if p.name == k.name {
				sc.vars[k.name] = k.v
				found = true
			}
		}
		if !found {
			kw.Set(k.name, k.v)
		}
	}
	for _, p := range m.params {
		if _, ok := sc.vars[p.name]; ok {
			continue
		}
		if p.def == nil {
			sc.vars[p.name] = Undefined{Name: p.name}
			continue
		}
		v, err := r.eval(p.def, sc)
		if err != nil {
			return nil, err
		}
		sc.vars[p.name] = v
	}
	sc.vars["varargs"] = &List{Items: extra, Tuple: true}
	sc.vars["kwargs"] = kw
	if caller != nil {
		sc.vars["caller"] = caller
	}
	s, err := r.capture(func() error { return r.exec(m.body, sc) })
	if err == errBreak || err == errContinue {
		err = nil
	}
	return s, err
}

func (r *renderer) eval(x expr, sc *scope) (any, error) {
	if err := r.step(1); err != nil {
		return nil, err
	}
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(x.name); ok {
			return v, nil
		}
		return Undefined{Name: x.name}, nil
	case *listExpr:
		l := &List{Items: make([]any, len(x.items)), Tuple: x.tuple}
		for i, e := range x.items {
			v, err := r.eval(e, sc)
			if err != nil {
				return nil, err
			}
			l.Items[i] = v
		}
		return l, nil
	case *dictExpr:
		d := NewDict()
		for i := range x.keys {
			k, err := r.eval(x.keys[i], sc)
			if err != nil {
				return nil, err
			}
			if !hashable(k) {
				return nil, r.errorf(x.keys[i].exprPos(), "unhashable dict key of type '%s'", typeName(k))
			}
			v, err := r.eval(x.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.Set(k, v)
		}
		return d, nil
	case *attrExpr:
		obj, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		return r.getAttr(x.pos, obj, x.name)
	case *indexExpr:
		obj, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		k, err := r.eval(x.index, sc)
		if err != nil {
			return nil, err
		}
		return r.getItem(x.pos, obj, k)
	case *sliceExpr:
		return r.evalSlice(x, sc)
	case *callExpr:
		return r.evalCall(x, sc, nil)
	case *filterExpr:
		v, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		return r.applyFilter(x, v, sc)
	case *testExpr:
		v, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		args, err := r.evalArgs(x.args, sc)
		if err != nil {
			return nil, err
		}
		ok, err := r.test(x.name, v, args, sc)
		if err != nil {
			return nil, r.errAt(x.pos, err)
		}
		return ok != x.negate, nil
	case *unaryExpr:
		v, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch n := v.(type) {
			case int64:
				return -n, nil
			case float64:
				return -n, nil
			case bool:
				i, _ := toInt(n)
				return -i, nil
			}
		case "+":
			switch v.(type) {
			case int64, float64:
				return v, nil
			case bool:
				i, _ := toInt(v)
				return i, nil
			}
		}
		if u, ok := v.(Undefined); ok {
			return nil, r.errorf(x.pos, "'%s' is undefined", u.Name)
		}
		return nil, r.errorf(x.pos, "bad operand type for unary %s: '%s'", x.op, typeName(v))
	case *binaryExpr:
		return r.evalBinary(x, sc)
	case *condExpr:
		c, err := r.eval(x.cond, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return r.eval(x.then, sc)
		}
		if x.els == nil {
			return Undefined{Name: "else branch"}, nil
		}
		return r.eval(x.els, sc)
	}
	return nil, fmt.Errorf("BUG: jinja: unknown expression %T", x)
}

func (r *renderer) evalArgs(xs []expr, sc *scope) ([]any, error) {
	if len(xs) == 0 {
		return nil, nil
	}
	out := make([]any, len(xs))
	for i, x := range xs {
		v, err := r.eval(x, sc)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r *renderer) evalKwargs(ks []kwarg, sc *scope) ([]kwValue, error) {
	if len(ks) == 0 {
		return nil, nil
	}
	out := make([]kwValue, len(ks))
	for i, k := range ks {
		v, err := r.eval(k.x, sc)
		if err != nil {
			return nil, err
		}
		out[i] = kwValue{k.name, v}
	}
	return out, nil
}

func (r *renderer) evalBinary(x *binaryExpr, sc *scope) (any, error) {
	l, err := r.eval(x.l, sc)
	if err != nil {
		return nil, err
	}
	switch x.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(x.r, sc)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(x.r, sc)
	}
	rv, err := r.eval(x.r, sc)
	if err != nil {
		return nil, err
	}
	v, err := r.binop(x.op, l, rv)
	if err != nil {
		return nil, r.errAt(x.pos, err)
	}
	return v, nil
}

// binop applies a binary operator other than and/or.
func (r *renderer) binop(op string, l, rv any) (any, error) {
	switch op {
	case "==":
		return equal(l, rv), nil
	case "!=":
		return !equal(l, rv), nil
	case "<", ">", "<=", ">=":
		if err := undefinedOperand(l, rv); err != nil {
			return nil, err
		}
		c, err := compare(l, rv)
		if err != nil {
			return nil, err
		}
		switch op {
		case "<":
			return c < 0, nil
		case ">":
			return c > 0, nil
		case "<=":
			return c <= 0, nil
		}
		return c >= 0, nil
	case "in", "not in":
		ok, err := contains(rv, l)
		if err != nil {
			return nil, err
		}
		return ok == (op == "in"), nil
	case "~":
		s := str(l) + str(rv)
		return s, r.allocStr(len(s))
	}
	if err := undefinedOperand(l, rv); err != nil {
		return nil, err
	}
	switch op {
	case "+":
		switch a := l.(type) {
		case string:
			if b, ok := rv.(string); ok {
				if err := r.allocStr(len(a) + len(b)); err != nil {
					return nil, err
				}
				return a + b, nil
			}
		case *List:
			if b, ok := rv.(*List); ok && a.Tuple == b.Tuple {
				if err := r.step(len(a.Items) + len(b.Items)); err != nil {
					return nil, err
				}
				items := make([]any, 0, len(a.Items)+len(b.Items))
				return &List{Items: append(append(items, a.Items...), b.Items...), Tuple: a.Tuple}, nil
			}
		}
	case "*":
		if n, ok := toInt(rv); ok {
			switch a := l.(type) {
			case string:
				if n <= 0 {
					return "", nil
				}
				if n > int64(r.opt.MaxOutput) || int64(len(a))*n > int64(r.opt.MaxOutput) {
					return nil, r.allocStr(r.opt.MaxOutput + 1)
				}
				if err := r.allocStr(len(a) * int(n)); err != nil {
					return nil, err
				}
				return strings.Repeat(a, int(n)), nil
			case *List:
				if n <= 0 {
					return &List{Tuple: a.Tuple}, nil
				}
				if n > int64(r.opt.MaxWork) || int64(len(a.Items))*n > int64(r.opt.MaxWork) {
					return nil, r.step(r.opt.MaxWork + 1)
				}
				if err := r.step(len(a.Items) * int(n)); err != nil {
					return nil, err
				}
				out := &List{Tuple: a.Tuple}
				for range n {
					out.Items = append(out.Items, a.Items...)
				}
				return out, nil
			}
		}
		if _, ok := l.(string); !ok {
			if s, ok := rv.(string); ok {
				return r.binop("*", s, l)
			}
		}
	case "%":
		if f, ok := l.(string); ok {
			s, err := percentFormat(f, rv)
			if err != nil {
				return nil, err
			}
			return s, r.allocStr(len(s))
		}
	}
	return arith(op, l, rv)
}

func undefinedOperand(l, rv any) error {
	if u, ok := l.(Undefined); ok {
		return fmt.Errorf("'%s' is undefined", u.Name)
	}
	if u, ok := rv.(Undefined); ok {
		return fmt.Errorf("'%s' is undefined", u.Name)
	}
	return nil
}

// arith applies a numeric operator with Python's int/float rules.
func arith(op string, l, rv any) (any, error) {
	ia, aInt := toInt(l)
	ib, bInt := toInt(rv)
	fa, aNum := toFloat(l)
	fb, bNum := toFloat(rv)
	if !aNum || !bNum {
		return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(rv))
	}
	if aInt && bInt {
		switch op {
		case "+":
			return ia + ib, nil
		case "-":
			return ia - ib, nil
		case "*":
			return ia * ib, nil
		case "//", "%":
			if ib == 0 {
				return nil, errors.New("integer division or modulo by zero")
			}
			q, m := ia/ib, ia%ib
			if m != 0 && (m < 0) != (ib < 0) {
				q--
				m += ib
			}
			if op == "//" {
				return q, nil
			}
			return m, nil
		case "**":
			if ib >= 0 {
				if ib > 64 && ia != 0 && ia != 1 && ia != -1 {
					return math.Pow(float64(ia), float64(ib)), nil
				}
				res := int64(1)
				for range ib {
					res *= ia
				}
				return res, nil
			}
		}
	}
	switch op {
	case "+":
		return fa + fb, nil
	case "-":
		return fa - fb, nil
	case "*":
		return fa * fb, nil
	case "/":
		if fb == 0 {
			return nil, errors.New("division by zero")
		}
		return fa / fb, nil
	case "//":
		if fb == 0 {
			return nil, errors.New("float floor division by zero")
		}
		return math.Floor(fa / fb), nil
	case "%":
		if fb == 0 {
			return nil, errors.New("float modulo by zero")
		}
		m := math.Mod(fa, fb)
		if m != 0 && (m < 0) != (fb < 0) {
			m += fb
		}
		return m, nil
	case "**":
		return math.Pow(fa, fb), nil
	}
	return nil, fmt.Errorf("unsupported operator %s", op)
}

// contains is Python's "needle in haystack".
func contains(haystack, needle any) (bool, error) {
	switch h := haystack.(type) {
	case string:
		n, ok := needle.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(needle))
		}
		return strings.Contains(h, n), nil
	case *List:
		for _, x := range h.Items {
			if equal(x, needle) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		if !hashable(needle) {
			return false, nil
		}
		_, ok := h.Get(needle)
		return ok, nil
	case *Namespace:
		_, ok := h.attrs.Get(needle)
		return ok, nil
	case Undefined, nil:
		return false, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(haystack))
}

// getAttr is obj.name: an item of a dict or namespace, a method of a
// string, list or dict, a field of loop; Undefined when there is none, and
// Undefined again on Undefined itself (the reference's engine returns
// undefined for a member of undefined where Jinja2 raises: a macro called
// without an argument it reads, message.tool_calls, renders).
func (r *renderer) getAttr(pos int, obj any, name string) (any, error) {
	switch o := obj.(type) {
	case Undefined:
		return Undefined{Name: o.Name + "." + name}, nil
	case *Dict:
		if v, ok := o.Get(name); ok {
			return v, nil
		}
		if isMethod(obj, name) {
			return &boundMethod{recv: obj, name: name}, nil
		}
	case *Namespace:
		if v, ok := o.attrs.Get(name); ok {
			return v, nil
		}
	case *loopInfo:
		return o.attr(name), nil
	default:
		if isMethod(obj, name) {
			return &boundMethod{recv: obj, name: name}, nil
		}
	}
	return Undefined{Name: name}, nil
}

// getItem is obj[k].
func (r *renderer) getItem(pos int, obj, k any) (any, error) {
	switch o := obj.(type) {
	case Undefined: // as getAttr: undefined, as the reference's engine
		return Undefined{Name: o.Name + "[" + repr(k) + "]"}, nil
	case *Dict:
		if hashable(k) {
			if v, ok := o.Get(k); ok {
				return v, nil
			}
		}
	case *List:
		if i, ok := toInt(k); ok {
			if i < 0 {
				i += int64(len(o.Items))
			}
			if i >= 0 && i < int64(len(o.Items)) {
				return o.Items[i], nil
			}
			return Undefined{Name: "index " + strconv.FormatInt(i, 10)}, nil
		}
	case string:
		if i, ok := toInt(k); ok {
			rs := []rune(o)
			if i < 0 {
				i += int64(len(rs))
			}
			if i >= 0 && i < int64(len(rs)) {
				return string(rs[i]), nil
			}
			return Undefined{Name: "index " + strconv.FormatInt(i, 10)}, nil
		}
	}
	if s, ok := k.(string); ok {
		return r.getAttr(pos, obj, s)
	}
	return Undefined{Name: repr(k)}, nil
}

func (r *renderer) evalSlice(x *sliceExpr, sc *scope) (any, error) {
	obj, err := r.eval(x.x, sc)
	if err != nil {
		return nil, err
	}
	var bounds [3]*int64
	for i, e := range []expr{x.start, x.stop, x.step} {
		if e == nil {
			continue
		}
		v, err := r.eval(e, sc)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		n, ok := toInt(v)
		if !ok {
			return nil, r.errorf(e.exprPos(), "slice indices must be integers or None, not %s", typeName(v))
		}
		bounds[i] = &n
	}
	var items []any
	var s []rune
	switch o := obj.(type) {
	case *List:
		items = o.Items
	case string:
		s = []rune(o)
	case Undefined:
		return nil, r.errorf(x.pos, "'%s' is undefined (slicing it)", o.Name)
	default:
		return nil, r.errorf(x.pos, "'%s' object is not subscriptable", typeName(obj))
	}
	n := len(items)
	if s != nil {
		n = len(s)
	}
	idx, err := sliceIndices(n, bounds)
	if err != nil {
		return nil, r.errorf(x.pos, "%v", err)
	}
	if err := r.step(len(idx)); err != nil {
		return nil, err
	}
	if s != nil {
		out := make([]rune, len(idx))
		for i, j := range idx {
			out[i] = s[j]
		}
		return string(out), nil
	}
	out := &List{Items: make([]any, len(idx)), Tuple: obj.(*List).Tuple}
	for i, j := range idx {
		out.Items[i] = items[j]
	}
	return out, nil
}

// sliceIndices returns the indices Python's seq[start:stop:step] visits.
func sliceIndices(n int, b [3]*int64) ([]int, error) {
	step := int64(1)
	if b[2] != nil {
		step = *b[2]
	}
	if step == 0 {
		return nil, errors.New("slice step cannot be zero")
	}
	clamp := func(p *int64, def, lo, hi int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += int64(n)
		}
		return max(lo, min(v, hi))
	}
	var out []int
	if step > 0 {
		start, stop := clamp(b[0], 0, 0, int64(n)), clamp(b[1], int64(n), 0, int64(n))
		for i := start; i < stop; i += step {
			out = append(out, int(i))
		}
	} else {
		start, stop := clamp(b[0], int64(n)-1, -1, int64(n)-1), clamp(b[1], -1, -1, int64(n)-1)
		if b[1] != nil && *b[1] < 0 && *b[1]+int64(n) < 0 {
			stop = -1
		}
		for i := start; i > stop; i += step {
			out = append(out, int(i))
		}
	}
	return out, nil
}

// evalCall calls a function, macro or method; caller is the body of a
// {% call %} block.
func (r *renderer) evalCall(x *callExpr, sc *scope, caller *macro) (any, error) {
	var fn any
	if a, ok := x.fn.(*attrExpr); ok {
		obj, err := r.eval(a.x, sc)
		if err != nil {
			return nil, err
		}
		if isMethod(obj, a.name) {
			fn = &boundMethod{recv: obj, name: a.name}
		} else if fn, err = r.getAttr(a.pos, obj, a.name); err != nil {
			return nil, err
		}
	} else {
		var err error
		if fn, err = r.eval(x.fn, sc); err != nil {
			return nil, err
		}
	}
	args, err := r.evalArgs(x.args, sc)
	if err != nil {
		return nil, err
	}
	kwargs, err := r.evalKwargs(x.kwargs, sc)
	if err != nil {
		return nil, err
	}
	v, err := r.call(x.pos, fn, args, kwargs, caller)
	if err != nil {
		return nil, r.errAt(x.pos, err)
	}
	return v, nil
}

func (r *renderer) call(pos int, fn any, args []any, kwargs []kwValue, caller *macro) (any, error) {
	switch f := fn.(type) {
	case *macro:
		return r.callMacro(pos, f, args, kwargs, caller)
	case *builtin:
		return f.fn(r, pos, args, kwargs)
	case *boundMethod:
		return r.callMethod(f.recv, f.name, args, kwargs)
	case *loopInfo:
		if f.recurse == nil {
			return nil, errors.New("loop() needs a loop marked 'recursive'")
		}
		if len(args) != 1 {
			return nil, errors.New("loop() takes one argument")
		}
		return f.recurse(args[0])
	case Undefined:
		return nil, fmt.Errorf("'%s' is undefined (called as a function)", f.Name)
	}
	return nil, fmt.Errorf("'%s' object is not callable", typeName(fn))
}
