package grammar

import (
	"regexp/syntax"
	"strings"
	"unicode"
)

// pattern converts a JSON Schema "pattern" to a grammar expression for the
// JSON-encoded content of a string (without the quotes). The regular
// expression is parsed with Go's regexp/syntax (Perl flavour, which is what
// validators written in Go use for pattern); literals, classes, ., groups,
// alternation, *, +, ?, {m,n} and the anchors ^ and $ at the ends are
// supported. A pattern without ^ (or $) may have anything before (after) the
// match, as the keyword means.
func (c *schemaConverter) pattern(pat, path string) (string, error) {
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return "", schemaErr(path, "invalid pattern %q: %v", pat, err)
	}
	return c.patternBranch(re, path)
}

// patternBranch converts one top-level alternative of a pattern, whose ends
// may carry anchors.
func (c *schemaConverter) patternBranch(re *syntax.Regexp, path string) (string, error) {
	if re.Op == syntax.OpAlternate {
		var alts []string
		for _, s := range re.Sub {
			e, err := c.patternBranch(s, path)
			if err != nil {
				return "", err
			}
			alts = append(alts, e)
		}
		return "(" + strings.Join(alts, " | ") + ")", nil
	}
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	anchoredStart, anchoredEnd := false, false
	if len(subs) > 0 && (subs[0].Op == syntax.OpBeginText || subs[0].Op == syntax.OpBeginLine) {
		anchoredStart = true
		subs = subs[1:]
	}
	if n := len(subs); n > 0 && (subs[n-1].Op == syntax.OpEndText || subs[n-1].Op == syntax.OpEndLine) {
		anchoredEnd = true
		subs = subs[:n-1]
	}
	var parts []string
	if !anchoredStart {
		parts = append(parts, c.prim("char")+"*")
	}
	for _, s := range subs {
		e, err := c.regex(s, path)
		if err != nil {
			return "", err
		}
		parts = append(parts, e)
	}
	if !anchoredEnd {
		parts = append(parts, c.prim("char")+"*")
	}
	if len(parts) == 0 {
		return `""`, nil
	}
	return strings.Join(parts, " "), nil
}

func (c *schemaConverter) regex(re *syntax.Regexp, path string) (string, error) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return `""`, nil
	case syntax.OpLiteral:
		var parts []string
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && unicode.SimpleFold(r) != r {
				var rs []rune
				for f := r; ; {
					rs = append(rs, f, f)
					if f = unicode.SimpleFold(f); f == r {
						break
					}
				}
				parts = append(parts, jsonClass(rs))
				continue
			}
			parts = append(parts, jsonClass([]rune{r, r}))
		}
		return strings.Join(parts, " "), nil
	case syntax.OpCharClass:
		return jsonClass(re.Rune), nil
	case syntax.OpAnyCharNotNL:
		return c.prim("dot"), nil
	case syntax.OpAnyChar:
		return c.prim("char"), nil
	case syntax.OpCapture:
		e, err := c.regex(re.Sub[0], path)
		return "(" + e + ")", err
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		e, err := c.regex(re.Sub[0], path)
		if err != nil {
			return "", err
		}
		op := map[syntax.Op]string{syntax.OpStar: "*", syntax.OpPlus: "+", syntax.OpQuest: "?"}[re.Op]
		return "(" + e + ")" + op, nil
	case syntax.OpRepeat:
		if re.Min > maxRepeat || re.Max > maxRepeat {
			return "", schemaErr(path, "repetition over %d in pattern is not supported", maxRepeat)
		}
		e, err := c.regex(re.Sub[0], path)
		if err != nil {
			return "", err
		}
		return "(" + e + ")" + repeatSuffix(re.Min, re.Max), nil
	case syntax.OpConcat, syntax.OpAlternate:
		var parts []string
		for _, s := range re.Sub {
			e, err := c.regex(s, path)
			if err != nil {
				return "", err
			}
			parts = append(parts, e)
		}
		if re.Op == syntax.OpConcat {
			return strings.Join(parts, " "), nil
		}
		return "(" + strings.Join(parts, " | ") + ")", nil
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return "", schemaErr(path, "anchors are supported only at the start and end of a pattern")
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return "", schemaErr(path, `word boundaries (\b, \B) in patterns are not supported`)
	case syntax.OpNoMatch:
		return "", schemaErr(path, "pattern matches nothing")
	}
	return "", schemaErr(path, "pattern construct %v is not supported", re.Op)
}

// jsonClass returns a grammar expression for one character from the class
// given as regexp/syntax range pairs, written as it appears inside a JSON
// string: '"', '\' and control characters appear escaped.
func jsonClass(pairs []rune) string {
	var raw []string
	var escaped []string
	for i := 0; i+1 < len(pairs); i += 2 {
		lo, hi := pairs[i], pairs[i+1]
		for cp := lo; cp <= hi && cp < 0x20; cp++ {
			escaped = append(escaped, gbnfLiteral(jsonQuote(string(cp))[1:len(jsonQuote(string(cp)))-1]))
		}
		lo = max(lo, 0x20)
		for _, special := range []rune{'"', '\\'} {
			if lo <= special && special <= hi {
				escaped = append(escaped, gbnfLiteral(`\`+string(special)))
			}
		}
		// Split the range around '"' (0x22) and '\' (0x5C).
		for _, r := range splitRange(lo, hi, '"', '\\') {
			if r.lo == r.hi {
				raw = append(raw, classEscape(r.lo))
			} else {
				raw = append(raw, classEscape(r.lo)+"-"+classEscape(r.hi))
			}
		}
	}
	var alts []string
	if len(raw) > 0 {
		alts = append(alts, "["+strings.Join(raw, "")+"]")
	}
	alts = append(alts, escaped...)
	switch len(alts) {
	case 0:
		return "[^\\x00-\\U0010FFFF]" // matches nothing
	case 1:
		return alts[0]
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

func splitRange(lo, hi rune, cuts ...rune) []runeRange {
	out := []runeRange{{lo, hi}}
	for _, cut := range cuts {
		var next []runeRange
		for _, r := range out {
			if cut < r.lo || cut > r.hi {
				next = append(next, r)
				continue
			}
			if r.lo < cut {
				next = append(next, runeRange{r.lo, cut - 1})
			}
			if cut < r.hi {
				next = append(next, runeRange{cut + 1, r.hi})
			}
		}
		out = next
	}
	var valid []runeRange
	for _, r := range out {
		if r.lo <= r.hi {
			valid = append(valid, r)
		}
	}
	return valid
}
