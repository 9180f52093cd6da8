package jinja

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind int

const (
	tokEOF        tokKind = iota
	tokText               // template text between tags
	tokVarBegin           // {{
	tokVarEnd             // }}
	tokBlockBegin         // {%
	tokBlockEnd           // %}
	tokName               // identifier or keyword
	tokString             // string literal (val holds the decoded text)
	tokInt                // integer literal
	tokFloat              // float literal
	tokOp                 // operator or punctuation
)

func (k tokKind) String() string {
	switch k {
	case tokEOF:
		return "end of template"
	case tokText:
		return "text"
	case tokVarBegin:
		return "'{{'"
	case tokVarEnd:
		return "'}}'"
	case tokBlockBegin:
		return "'{%'"
	case tokBlockEnd:
		return "'%}'"
	case tokName:
		return "name"
	case tokString:
		return "string"
	case tokInt, tokFloat:
		return "number"
	}
	return "operator"
}

// token is one lexical token; pos is its byte offset in the source.
type token struct {
	kind tokKind
	val  string
	pos  int
}

func (t token) describe() string {
	switch t.kind {
	case tokName, tokOp:
		return "'" + t.val + "'"
	case tokString:
		return "string " + strconv.Quote(t.val)
	case tokInt, tokFloat:
		return "number " + t.val
	}
	return t.kind.String()
}

// lexer splits a template into tokens with Hugging Face's settings:
// trim_blocks and lstrip_blocks on, so a block tag alone on its line leaves
// no trace, and "-" / "+" marks on tags strip or keep whitespace.
type lexer struct {
	src  string
	pos  int
	toks []token
}

// lex tokenizes src. Errors carry the position where they occur.
func lex(src string) ([]token, error) {
	l := &lexer{src: src}
	if err := l.run(); err != nil {
		return nil, err
	}
	return l.toks, nil
}

// run scans text up to each tag, applying the whitespace rules of the tag
// that ends it and of the tag before it, then the tag itself.
func (l *lexer) run() error {
	trimNext := false    // the previous tag ended with "-": strip leading whitespace
	newlineNext := false // the previous block tag ended without "+": drop one newline
	for l.pos < len(l.src) {
		start := l.pos
		i := indexTagStart(l.src, l.pos)
		end := i
		if i < 0 {
			end = len(l.src)
		}
		text := l.src[start:end]
		lineStart := start == 0 || l.src[start-1] == '\n'
		if trimNext {
			text = strings.TrimLeft(text, " \t\r\n\f\v")
		} else if newlineNext {
			if strings.HasPrefix(text, "\n") {
				text, lineStart = text[1:], true
			} else if strings.HasPrefix(text, "\r\n") {
				text, lineStart = text[2:], true
			}
		}
		trimNext, newlineNext = false, false
		if i >= 0 {
			kind := l.src[i+1]
			mark := byte(0)
			if i+2 < len(l.src) {
				mark = l.src[i+2]
			}
			switch {
			case mark == '-':
				text = strings.TrimRight(text, " \t\r\n\f\v")
			case mark == '+':
			case kind == '%' || kind == '#':
				// lstrip_blocks: spaces and tabs from the line start to a block tag.
				j := strings.LastIndexByte(text, '\n')
				if strings.Trim(text[j+1:], " \t") == "" && (j >= 0 || lineStart) {
					text = text[:j+1]
				}
			}
		}
		if text != "" {
			l.toks = append(l.toks, token{kind: tokText, val: text, pos: start})
		}
		if i < 0 {
			break
		}
		l.pos = i
		var err error
		switch l.src[i+1] {
		case '#':
			trimNext, newlineNext, err = l.comment()
		case '{':
			trimNext, err = l.tag(tokVarBegin, tokVarEnd, "}}")
		case '%':
			if l.isRaw() {
				trimNext, newlineNext, err = l.raw()
			} else {
				trimNext, err = l.tag(tokBlockBegin, tokBlockEnd, "%}")
				newlineNext = !trimNext
			}
		}
		if err != nil {
			return err
		}
		if newlineNext && l.pos >= 3 && l.src[l.pos-3] == '+' {
			newlineNext = false
		}
	}
	l.toks = append(l.toks, token{kind: tokEOF, pos: len(l.src)})
	return nil
}

// indexTagStart returns the offset of the next "{{", "{%" or "{#" at or
// after from, or -1.
func indexTagStart(src string, from int) int {
	for i := from; i < len(src)-1; i++ {
		if src[i] == '{' {
			switch src[i+1] {
			case '{', '%', '#':
				return i
			}
		}
	}
	return -1
}

func (l *lexer) comment() (trim, newline bool, err error) {
	start := l.pos
	j := strings.Index(l.src[l.pos+2:], "#}")
	if j < 0 {
		return false, false, errAt(l.src, start, "unclosed comment: missing '#}'")
	}
	end := l.pos + 2 + j
	l.pos = end + 2
	trim = end > start+2 && l.src[end-1] == '-'
	newline = !trim && !(end > start+2 && l.src[end-1] == '+')
	return trim, newline, nil
}

// isRaw reports whether the block tag at l.pos is {% raw %}.
func (l *lexer) isRaw() bool {
	s := l.src[l.pos+2:]
	s = strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+"), " \t\r\n")
	if !strings.HasPrefix(s, "raw") {
		return false
	}
	s = strings.TrimLeft(s[3:], " \t\r\n")
	return strings.HasPrefix(s, "%}") || strings.HasPrefix(s, "-%}") || strings.HasPrefix(s, "+%}")
}

// raw emits everything up to {% endraw %} as text.
func (l *lexer) raw() (trim, newline bool, err error) {
	start := l.pos
	open := strings.Index(l.src[l.pos:], "%}") + l.pos
	body := open + 2
	if l.src[open-1] == '-' {
		for body < len(l.src) && strings.ContainsRune(" \t\r\n", rune(l.src[body])) {
			body++
		}
	} else if l.src[open-1] != '+' && strings.HasPrefix(l.src[body:], "\n") {
		body++
	}
	for k := body; ; {
		j := strings.Index(l.src[k:], "{%")
		if j < 0 {
			return false, false, errAt(l.src, start, "unclosed raw block: missing '{% endraw %}'")
		}
		k += j
		s := l.src[k+2:]
		mark := byte(0)
		if len(s) > 0 {
			mark = s[0]
		}
		t := strings.TrimLeft(strings.TrimLeft(s, "-+"), " \t\r\n")
		if !strings.HasPrefix(t, "endraw") {
			k += 2
			continue
		}
		t = strings.TrimLeft(t[6:], " \t\r\n")
		closeLen := 2
		switch {
		case strings.HasPrefix(t, "-%}"), strings.HasPrefix(t, "+%}"):
			closeLen = 3
		case !strings.HasPrefix(t, "%}"):
			return false, false, errAt(l.src, k, "malformed endraw tag")
		}
		text := l.src[body:k]
		if mark == '-' {
			text = strings.TrimRight(text, " \t\r\n\f\v")
		} else if mark != '+' {
			j := strings.LastIndexByte(text, '\n')
			if j >= 0 && strings.Trim(text[j+1:], " \t") == "" {
				text = text[:j+1]
			}
		}
		if text != "" {
			l.toks = append(l.toks, token{kind: tokText, val: text, pos: body})
		}
		endPos := len(l.src) - len(t) + closeLen
		trim = closeLen == 3 && t[0] == '-'
		l.pos = endPos
		return trim, !trim, nil
	}
}

// tag lexes one {{ ... }} or {% ... %} tag from l.pos and reports whether
// it ended with "-".
func (l *lexer) tag(begin, end tokKind, closer string) (bool, error) {
	start := l.pos
	l.toks = append(l.toks, token{kind: begin, pos: l.pos})
	l.pos += 2
	if l.pos < len(l.src) && (l.src[l.pos] == '-' || l.src[l.pos] == '+') {
		l.pos++
	}
	var open []int // offsets of the brackets not closed yet
	for {
		depth := len(open)
		for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
			l.pos++
		}
		if l.pos >= len(l.src) {
			if depth > 0 {
				p := open[depth-1]
				return false, errAt(l.src, p, "unclosed '"+l.src[p:p+1]+"'")
			}
			return false, errAt(l.src, start, "unclosed tag: missing '"+closer+"'")
		}
		s := l.src[l.pos:]
		if depth == 0 {
			for _, m := range []string{"-", "+", ""} {
				if strings.HasPrefix(s, m+closer) {
					l.toks = append(l.toks, token{kind: end, pos: l.pos})
					l.pos += len(m) + 2
					return m == "-", nil
				}
			}
		}
		c := s[0]
		switch {
		case c == '_' || isLetter(c) || c >= utf8.RuneSelf:
			j := 1
			for j < len(s) && (s[j] == '_' || isLetter(s[j]) || isDigit(s[j])) {
				j++
			}
			if j == 1 && c >= utf8.RuneSelf {
				return false, errAt(l.src, l.pos, "unexpected character "+strconv.QuoteRune(firstRune(s)))
			}
			l.toks = append(l.toks, token{kind: tokName, val: s[:j], pos: l.pos})
			l.pos += j
		case isDigit(c) || (c == '.' && len(s) > 1 && isDigit(s[1]) && !l.afterValue()):
			if err := l.number(); err != nil {
				return false, err
			}
		case c == '"' || c == '\'':
			if err := l.str(); err != nil {
				return false, err
			}
		default:
			op := ""
			for _, o := range []string{"**", "//", "==", "!=", "<=", ">="} {
				if strings.HasPrefix(s, o) {
					op = o
					break
				}
			}
			if op == "" {
				if !strings.ContainsRune("+-*/%~<>=()[]{},.:|!", rune(c)) {
					return false, errAt(l.src, l.pos, "unexpected character "+strconv.QuoteRune(firstRune(s)))
				}
				op = s[:1]
			}
			switch op {
			case "(", "[", "{":
				open = append(open, l.pos)
			case ")", "]", "}":
				if depth > 0 {
					p := open[depth-1]
					if closing(l.src[p]) != op[0] {
						return false, errAt(l.src, p, "unclosed '"+l.src[p:p+1]+"': found '"+op+"' first")
					}
					open = open[:depth-1]
				}
			}
			l.toks = append(l.toks, token{kind: tokOp, val: op, pos: l.pos})
			l.pos += len(op)
		}
	}
}

// afterValue reports whether the previous token ends a value, so a "."
// before a digit is attribute access (x.0) and not a float (.5).
func (l *lexer) afterValue() bool {
	if len(l.toks) == 0 {
		return false
	}
	t := l.toks[len(l.toks)-1]
	return t.kind == tokName || t.kind == tokString || t.kind == tokInt || t.kind == tokFloat ||
		(t.kind == tokOp && (t.val == ")" || t.val == "]" || t.val == "}"))
}

func (l *lexer) number() error {
	s := l.src[l.pos:]
	j := 0
	isFloat := false
	digits := func() {
		for j < len(s) && (isDigit(s[j]) || (s[j] == '_' && j+1 < len(s) && isDigit(s[j+1]))) {
			j++
		}
	}
	digits()
	// "1." followed by a name is attribute access on an int, rare; a digit makes a float.
	if j < len(s) && s[j] == '.' && j+1 < len(s) && isDigit(s[j+1]) {
		isFloat = true
		j++
		digits()
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			isFloat = true
			j = k
			digits()
		}
	}
	text := strings.ReplaceAll(s[:j], "_", "")
	kind := tokInt
	if isFloat {
		kind = tokFloat
		if _, err := strconv.ParseFloat(text, 64); err != nil {
			return errAt(l.src, l.pos, "bad number "+s[:j])
		}
	} else if _, err := strconv.ParseInt(text, 10, 64); err != nil {
		return errAt(l.src, l.pos, "integer "+s[:j]+" out of range")
	}
	l.toks = append(l.toks, token{kind: kind, val: text, pos: l.pos})
	l.pos += j
	return nil
}

// str lexes a quoted string with Python's escapes.
func (l *lexer) str() error {
	start := l.pos
	q := l.src[l.pos]
	var b strings.Builder
	i := l.pos + 1
	for {
		if i >= len(l.src) {
			return errAt(l.src, start, "unterminated string")
		}
		c := l.src[i]
		if c == q {
			i++
			break
		}
		if c != '\\' || i+1 >= len(l.src) {
			b.WriteByte(c)
			i++
			continue
		}
		e := l.src[i+1]
		i += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'a':
			b.WriteByte('\a')
		case '0':
			b.WriteByte(0)
		case '\\', '\'', '"':
			b.WriteByte(e)
		case '\n':
		case 'x', 'u', 'U':
			n := 2
			if e == 'u' {
				n = 4
			} else if e == 'U' {
				n = 8
			}
			if i+n > len(l.src) {
				return errAt(l.src, i-2, "truncated \\"+string(e)+" escape")
			}
			r, err := strconv.ParseUint(l.src[i:i+n], 16, 32)
			if err != nil || r > utf8.MaxRune {
				return errAt(l.src, i-2, "bad \\"+string(e)+" escape")
			}
			b.WriteRune(rune(r))
			i += n
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	l.toks = append(l.toks, token{kind: tokString, val: b.String(), pos: start})
	l.pos = i
	return nil
}

// closing returns the bracket that closes open.
func closing(open byte) byte {
	switch open {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}
