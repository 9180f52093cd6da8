package jinja

import (
	"slices"
	"strconv"
	"strings"
)

// maxNesting bounds how deeply statements and expressions nest, so that a
// hostile template cannot exhaust the stack of the parser or evaluator.
const maxNesting = 256

// parser builds the syntax tree from the tokens by recursive descent,
// following Jinja2's grammar and operator precedence.
type parser struct {
	src   string
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) errf(pos int, msg string) *Error { return errAt(p.src, pos, msg) }

// isOp reports whether the next token is operator op.
func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.val == op
}

// isName reports whether the next token is the name (keyword) n.
func (p *parser) isName(n string) bool {
	t := p.peek()
	return t.kind == tokName && t.val == n
}

func (p *parser) expectOp(op string) error {
	t := p.next()
	if t.kind != tokOp || t.val != op {
		return p.errf(t.pos, "expected '"+op+"', found "+t.describe())
	}
	return nil
}

func (p *parser) expectName() (token, error) {
	t := p.next()
	if t.kind != tokName {
		return t, p.errf(t.pos, "expected a name, found "+t.describe())
	}
	return t, nil
}

func (p *parser) expectKind(k tokKind) error {
	t := p.next()
	if t.kind != k {
		return p.errf(t.pos, "expected "+k.String()+", found "+t.describe())
	}
	return nil
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > maxNesting {
		return p.errf(pos, "template nested too deeply (more than "+strconv.Itoa(maxNesting)+" levels)")
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parseBody parses statements until a block tag named in ends, and returns
// them with that tag's name (the parser then stands after the name). With
// no ends it parses to the end of the template.
func (p *parser) parseBody(open token, ends ...string) ([]node, string, error) {
	var body []node
	for {
		t := p.peek()
		switch t.kind {
		case tokEOF:
			if len(ends) > 0 {
				return nil, "", p.errf(open.pos, "unclosed '"+open.val+"' block: missing '{% "+ends[len(ends)-1]+" %}'")
			}
			return body, "", nil
		case tokText:
			p.next()
			body = append(body, &textNode{pos: t.pos, text: t.val})
		case tokVarBegin:
			p.next()
			x, err := p.parseTuple(true)
			if err != nil {
				return nil, "", err
			}
			if err := p.expectKind(tokVarEnd); err != nil {
				return nil, "", err
			}
			body = append(body, &outputNode{pos: t.pos, x: x})
		case tokBlockBegin:
			p.next()
			name := p.peek()
			if name.kind != tokName {
				return nil, "", p.errf(name.pos, "expected a statement name after '{%', found "+name.describe())
			}
			if slices.Contains(ends, name.val) {
				p.next()
				return body, name.val, nil
			}
			n, err := p.parseStatement()
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				body = append(body, n)
			}
		default:
			return nil, "", p.errf(t.pos, "unexpected "+t.describe())
		}
	}
}

// parseStatement parses the statement whose name is the next token.
func (p *parser) parseStatement() (node, error) {
	t := p.next()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	switch t.val {
	case "if":
		return p.parseIf(t)
	case "for":
		return p.parseFor(t)
	case "set":
		return p.parseSet(t)
	case "macro":
		return p.parseMacro(t)
	case "call":
		return p.parseCallBlock(t)
	case "filter":
		return p.parseFilterBlock(t)
	case "with":
		return p.parseWith(t)
	case "do":
		x, err := p.parseTuple(true)
		if err != nil {
			return nil, err
		}
		return &doNode{pos: t.pos, x: x}, p.expectKind(tokBlockEnd)
	case "break":
		return &breakNode{pos: t.pos}, p.expectKind(tokBlockEnd)
	case "continue":
		return &continueNode{pos: t.pos}, p.expectKind(tokBlockEnd)
	case "generation":
		// Hugging Face's {% generation %} marks assistant text for
		// training masks; rendering shows its body unchanged.
		if err := p.expectKind(tokBlockEnd); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody(t, "endgeneration")
		if err != nil {
			return nil, err
		}
		return &ifNode{pos: t.pos, conds: []expr{&constExpr{v: true}}, bodys: [][]node{body}}, p.expectKind(tokBlockEnd)
	}
	return nil, p.errf(t.pos, "unknown statement '"+t.val+"'")
}

func (p *parser) parseIf(open token) (node, error) {
	n := &ifNode{pos: open.pos}
	for {
		cond, err := p.parseTuple(false)
		if err != nil {
			return nil, err
		}
		if err := p.expectKind(tokBlockEnd); err != nil {
			return nil, err
		}
		body, end, err := p.parseBody(open, "elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodys = append(n.bodys, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.expectKind(tokBlockEnd); err != nil {
				return nil, err
			}
			n.els, _, err = p.parseBody(open, "endif")
			if err != nil {
				return nil, err
			}
		}
		return n, p.expectKind(tokBlockEnd)
	}
}

// parseTargets parses assignment targets: a name or names separated by
// commas, optionally in parentheses.
func (p *parser) parseTargets() ([]string, error) {
	paren := false
	if p.isOp("(") {
		p.next()
		paren = true
	}
	var names []string
	for {
		t, err := p.expectName()
		if err != nil {
			return nil, err
		}
		names = append(names, t.val)
		if !p.isOp(",") {
			break
		}
		p.next()
		if paren && p.isOp(")") {
			break
		}
	}
	if paren {
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func (p *parser) parseFor(open token) (node, error) {
	n := &forNode{pos: open.pos}
	var err error
	if n.targets, err = p.parseTargets(); err != nil {
		return nil, err
	}
	if !p.isName("in") {
		t := p.peek()
		return nil, p.errf(t.pos, "expected 'in' in for loop, found "+t.describe())
	}
	p.next()
	// The iterable is no conditional expression: "if" filters the loop.
	if n.iter, err = p.parseTupleNoCond(); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.next()
		if n.filter, err = p.parseTuple(false); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		p.next()
		n.recursive = true
	}
	if err := p.expectKind(tokBlockEnd); err != nil {
		return nil, err
	}
	body, end, err := p.parseBody(open, "else", "endfor")
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.expectKind(tokBlockEnd); err != nil {
			return nil, err
		}
		if n.els, _, err = p.parseBody(open, "endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.expectKind(tokBlockEnd)
}

func (p *parser) parseSet(open token) (node, error) {
	first, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n := &setNode{pos: open.pos, targets: []string{first.val}}
	switch {
	case p.isOp("."):
		p.next()
		a, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.attr = a.val
	case p.isOp(","):
		for p.isOp(",") {
			p.next()
			t, err := p.expectName()
			if err != nil {
				return nil, err
			}
			n.targets = append(n.targets, t.val)
		}
	case p.peek().kind == tokBlockEnd || p.isOp("|"):
		// {% set name %}...{% endset %}, optionally through filters.
		b := &setBlockNode{pos: open.pos, name: first.val}
		for p.isOp("|") {
			p.next()
			f, err := p.parseFilter(nil)
			if err != nil {
				return nil, err
			}
			b.filters = append(b.filters, f)
		}
		if err := p.expectKind(tokBlockEnd); err != nil {
			return nil, err
		}
		if b.body, _, err = p.parseBody(open, "endset"); err != nil {
			return nil, err
		}
		return b, p.expectKind(tokBlockEnd)
	}
	if err := p.expectOp("="); err != nil {
		return nil, err
	}
	if n.x, err = p.parseTuple(true); err != nil {
		return nil, err
	}
	return n, p.expectKind(tokBlockEnd)
}

// parseParams parses "(a, b=default, ...)".
func (p *parser) parseParams() ([]param, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	var ps []param
	for !p.isOp(")") {
		if len(ps) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		t, err := p.expectName()
		if err != nil {
			return nil, err
		}
		pr := param{name: t.val}
		if p.isOp("=") {
			p.next()
			if pr.def, err = p.parseExpr(true); err != nil {
				return nil, err
			}
		}
		ps = append(ps, pr)
	}
	p.next()
	return ps, nil
}

func (p *parser) parseMacro(open token) (node, error) {
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n := &macroNode{pos: open.pos, name: name.val}
	if n.params, err = p.parseParams(); err != nil {
		return nil, err
	}
	if err := p.expectKind(tokBlockEnd); err != nil {
		return nil, err
	}
	if n.body, _, err = p.parseBody(open, "endmacro"); err != nil {
		return nil, err
	}
	if p.peek().kind == tokName { // {% endmacro name %}
		p.next()
	}
	return n, p.expectKind(tokBlockEnd)
}

func (p *parser) parseCallBlock(open token) (node, error) {
	n := &callBlockNode{pos: open.pos}
	var err error
	if p.isOp("(") {
		if n.params, err = p.parseParams(); err != nil {
			return nil, err
		}
	}
	x, err := p.parseExpr(true)
	if err != nil {
		return nil, err
	}
	c, ok := x.(*callExpr)
	if !ok {
		return nil, p.errf(x.exprPos(), "expected a call after 'call'")
	}
	n.call = c
	if err := p.expectKind(tokBlockEnd); err != nil {
		return nil, err
	}
	if n.body, _, err = p.parseBody(open, "endcall"); err != nil {
		return nil, err
	}
	return n, p.expectKind(tokBlockEnd)
}

func (p *parser) parseFilterBlock(open token) (node, error) {
	n := &filterBlockNode{pos: open.pos}
	for {
		f, err := p.parseFilter(nil)
		if err != nil {
			return nil, err
		}
		n.filters = append(n.filters, f)
		if !p.isOp("|") {
			break
		}
		p.next()
	}
	if err := p.expectKind(tokBlockEnd); err != nil {
		return nil, err
	}
	var err error
	if n.body, _, err = p.parseBody(open, "endfilter"); err != nil {
		return nil, err
	}
	return n, p.expectKind(tokBlockEnd)
}

func (p *parser) parseWith(open token) (node, error) {
	n := &withNode{pos: open.pos}
	for p.peek().kind != tokBlockEnd {
		if len(n.names) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		t, err := p.expectName()
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		x, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		n.names, n.vals = append(n.names, t.val), append(n.vals, x)
	}
	p.next()
	var err error
	if n.body, _, err = p.parseBody(open, "endwith"); err != nil {
		return nil, err
	}
	return n, p.expectKind(tokBlockEnd)
}

// parseTuple parses an expression, or several separated by commas as a
// tuple (as in "{% set a = 1, 2 %}").
func (p *parser) parseTuple(cond bool) (expr, error) {
	pos := p.peek().pos
	x, err := p.parseExpr(cond)
	if err != nil || !p.isOp(",") {
		return x, err
	}
	items := []expr{x}
	for p.isOp(",") {
		p.next()
		if !p.startsExpr() {
			break
		}
		y, err := p.parseExpr(cond)
		if err != nil {
			return nil, err
		}
		items = append(items, y)
	}
	return &listExpr{pos: pos, items: items, tuple: true}, nil
}

func (p *parser) parseTupleNoCond() (expr, error) { return p.parseTuple(false) }

// startsExpr reports whether the next token can begin an expression.
func (p *parser) startsExpr() bool {
	t := p.peek()
	switch t.kind {
	case tokName, tokString, tokInt, tokFloat:
		return true
	case tokOp:
		return t.val == "(" || t.val == "[" || t.val == "{" || t.val == "-" || t.val == "+"
	}
	return false
}

// parseExpr parses a full expression; cond allows "a if b else c" at the
// top level.
func (p *parser) parseExpr(cond bool) (expr, error) {
	pos := p.peek().pos
	if err := p.enter(pos); err != nil {
		return nil, err
	}
	defer p.leave()
	x, err := p.parseOr()
	if err != nil || !cond {
		return x, err
	}
	for p.isName("if") {
		p.next()
		c, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var els expr
		if p.isName("else") {
			p.next()
			if els, err = p.parseExpr(true); err != nil {
				return nil, err
			}
		}
		x = &condExpr{pos: pos, cond: c, then: x, els: els}
	}
	return x, nil
}

func (p *parser) parseOr() (expr, error) {
	x, err := p.parseAnd()
	for err == nil && p.isName("or") {
		t := p.next()
		var r expr
		if r, err = p.parseAnd(); err == nil {
			x = &binaryExpr{pos: t.pos, op: "or", l: x, r: r}
		}
	}
	return x, err
}

func (p *parser) parseAnd() (expr, error) {
	x, err := p.parseNot()
	for err == nil && p.isName("and") {
		t := p.next()
		var r expr
		if r, err = p.parseNot(); err == nil {
			x = &binaryExpr{pos: t.pos, op: "and", l: x, r: r}
		}
	}
	return x, err
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos: t.pos, op: "not", x: x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	x, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var lastR expr // right operand of the previous comparison of a chain
	for {
		t := p.peek()
		op := ""
		switch {
		case t.kind == tokOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			op = t.val
		case t.kind == tokName && t.val == "in":
			op = "in"
		case t.kind == tokName && t.val == "not" && p.toks[p.i+1].kind == tokName && p.toks[p.i+1].val == "in":
			p.next()
			op = "not in"
		default:
			return x, nil
		}
		p.next()
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		// Chains (a < b < c) compare pairwise, as Python does.
		if lastR != nil {
			x = &binaryExpr{pos: t.pos, op: "and", l: x, r: &binaryExpr{pos: t.pos, op: op, l: lastR, r: r}}
		} else {
			x = &binaryExpr{pos: t.pos, op: op, l: x, r: r}
		}
		lastR = r
	}
}

func (p *parser) parseBinary(ops []string, sub func() (expr, error)) (expr, error) {
	x, err := sub()
	for err == nil {
		t := p.peek()
		if t.kind != tokOp || !slices.Contains(ops, t.val) {
			break
		}
		p.next()
		var r expr
		if r, err = sub(); err == nil {
			x = &binaryExpr{pos: t.pos, op: t.val, l: x, r: r}
		}
	}
	return x, err
}

func (p *parser) parseMath1() (expr, error) {
	return p.parseBinary([]string{"+", "-"}, p.parseConcat)
}

func (p *parser) parseConcat() (expr, error) {
	return p.parseBinary([]string{"~"}, p.parseMath2)
}

func (p *parser) parseMath2() (expr, error) {
	return p.parseBinary([]string{"*", "/", "//", "%"}, p.parsePow)
}

func (p *parser) parsePow() (expr, error) {
	return p.parseBinary([]string{"**"}, func() (expr, error) { return p.parseUnary(true) })
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	t := p.peek()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	var x expr
	var err error
	if t.kind == tokOp && (t.val == "-" || t.val == "+") {
		p.next()
		y, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		x = &unaryExpr{pos: t.pos, op: t.val, x: y}
	} else if x, err = p.parsePrimary(); err != nil {
		return nil, err
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tokName:
		switch t.val {
		case "true", "True":
			return &constExpr{pos: t.pos, v: true}, nil
		case "false", "False":
			return &constExpr{pos: t.pos, v: false}, nil
		case "none", "None":
			return &constExpr{pos: t.pos, v: nil}, nil
		}
		return &nameExpr{pos: t.pos, name: t.val}, nil
	case tokString:
		s := t.val
		for p.peek().kind == tokString { // adjacent literals join
			s += p.next().val
		}
		return &constExpr{pos: t.pos, v: s}, nil
	case tokInt:
		v, _ := strconv.ParseInt(t.val, 10, 64)
		return &constExpr{pos: t.pos, v: v}, nil
	case tokFloat:
		v, _ := strconv.ParseFloat(t.val, 64)
		return &constExpr{pos: t.pos, v: v}, nil
	case tokOp:
		switch t.val {
		case "(":
			if p.isOp(")") {
				p.next()
				return &listExpr{pos: t.pos, tuple: true}, nil
			}
			x, err := p.parseExpr(true)
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				items := []expr{x}
				for p.isOp(",") {
					p.next()
					if p.isOp(")") {
						break
					}
					y, err := p.parseExpr(true)
					if err != nil {
						return nil, err
					}
					items = append(items, y)
				}
				x = &listExpr{pos: t.pos, items: items, tuple: true}
			}
			return x, p.expectOp(")")
		case "[":
			items, err := p.parseList("]")
			return &listExpr{pos: t.pos, items: items}, err
		case "{":
			d := &dictExpr{pos: t.pos}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.parseExpr(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpr(true)
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
			}
			p.next()
			return d, nil
		}
	}
	return nil, p.errf(t.pos, "unexpected "+t.describe())
}

// parseList parses comma-separated expressions up to the closing op.
func (p *parser) parseList(closer string) ([]expr, error) {
	var items []expr
	for !p.isOp(closer) {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp(closer) {
				break
			}
		}
		x, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	p.next()
	return items, nil
}

func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		t := p.peek()
		if t.kind != tokOp {
			return x, nil
		}
		switch t.val {
		case ".":
			p.next()
			a := p.next()
			switch a.kind {
			case tokName:
				x = &attrExpr{pos: a.pos, x: x, name: a.val}
			case tokInt:
				v, _ := strconv.ParseInt(a.val, 10, 64)
				x = &indexExpr{pos: a.pos, x: x, index: &constExpr{pos: a.pos, v: v}}
			default:
				return nil, p.errf(a.pos, "expected an attribute name after '.', found "+a.describe())
			}
		case "[":
			p.next()
			var err error
			if x, err = p.parseSubscript(t.pos, x); err != nil {
				return nil, err
			}
		case "(":
			var err error
			if x, err = p.parseCall(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
	}
}

// parseSubscript parses what follows "[": an index or a slice.
func (p *parser) parseSubscript(pos int, x expr) (expr, error) {
	var parts [3]expr
	n := 0
	for {
		if !p.isOp(":") && !p.isOp("]") {
			y, err := p.parseExpr(true)
			if err != nil {
				return nil, err
			}
			parts[n] = y
		}
		if p.isOp("]") {
			p.next()
			break
		}
		if err := p.expectOp(":"); err != nil {
			return nil, err
		}
		n++
		if n > 2 {
			return nil, p.errf(p.peek().pos, "too many ':' in slice")
		}
	}
	if n == 0 {
		if parts[0] == nil {
			return nil, p.errf(pos, "empty subscript")
		}
		return &indexExpr{pos: pos, x: x, index: parts[0]}, nil
	}
	return &sliceExpr{pos: pos, x: x, start: parts[0], stop: parts[1], step: parts[2]}, nil
}

// parseArgs parses "(args, name=value)" after the "(".
func (p *parser) parseArgs() ([]expr, []kwarg, error) {
	var args []expr
	var kwargs []kwarg
	for !p.isOp(")") {
		if len(args)+len(kwargs) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		t := p.peek()
		if t.kind == tokName && p.toks[p.i+1].kind == tokOp && p.toks[p.i+1].val == "=" {
			p.next()
			p.next()
			x, err := p.parseExpr(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name: t.val, x: x})
			continue
		}
		if len(kwargs) > 0 {
			return nil, nil, p.errf(t.pos, "positional argument after keyword argument")
		}
		x, err := p.parseExpr(true)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, x)
	}
	p.next()
	return args, kwargs, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	t := p.next() // (
	args, kwargs, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos: t.pos, fn: fn, args: args, kwargs: kwargs}, nil
}

// parseFilter parses "name" or "name(args)" after a "|".
func (p *parser) parseFilter(x expr) (*filterExpr, error) {
	t, err := p.expectName()
	if err != nil {
		return nil, err
	}
	name := t.val
	for p.isOp(".") { // dotted filter names
		p.next()
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		name += "." + n.val
	}
	// An unknown filter fails when it runs, as in the reference's engine
	// (and Python's Jinja inside a condition): a template that names one
	// only in a branch it never takes loads and renders.
	f := &filterExpr{pos: t.pos, x: x, name: name}
	if p.isOp("(") {
		p.next()
		if f.args, f.kwargs, err = p.parseArgs(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (p *parser) parseFilterExpr(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			f, err := p.parseFilter(x)
			if err != nil {
				return nil, err
			}
			x = f
		case p.isName("is"):
			t := p.next()
			neg := false
			if p.isName("not") {
				p.next()
				neg = true
			}
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			te := &testExpr{pos: t.pos, x: x, name: name.val, negate: neg}
			switch name.val {
			case "none", "true", "false", "True", "False", "None":
				te.name = strings.ToLower(name.val)
			}
			// An unknown test, like an unknown filter, fails when it runs.
			if p.isOp("(") {
				p.next()
				args, _, err := p.parseArgs()
				if err != nil {
					return nil, err
				}
				te.args = args
			} else if p.startsTestArg() {
				a, err := p.parsePrimary()
				if err != nil {
					return nil, err
				}
				if a, err = p.parsePostfix(a); err != nil {
					return nil, err
				}
				te.args = []expr{a}
			}
			x = te
		case p.isOp("("):
			var err error
			if x, err = p.parseCall(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
	}
}

// startsTestArg reports whether a test name is followed by an argument
// without parentheses ("is divisibleby 3", "is sameas none").
func (p *parser) startsTestArg() bool {
	t := p.peek()
	switch t.kind {
	case tokString, tokInt, tokFloat:
		return true
	case tokName:
		switch t.val {
		case "else", "or", "and", "if", "in", "not", "is", "recursive":
			return false
		}
		return true
	case tokOp:
		return t.val == "[" || t.val == "{"
	}
	return false
}
