package grammar

import (
	"strconv"
	"strings"
)

// Syntax is a model family's own tool-call syntax, for the families whose
// calls are none of the ToolFormat wrappers (ToolCallOptions.Syntax):
// XML-like tags around the name and each parameter (Qwen3-Coder, GLM,
// MiniMax, DeepSeek's DSML), or a JSON arguments object inside the family's
// markers (DeepSeek, Kimi, Granite, Command R7B, ...). The arguments are
// constrained by the function's parameters schema either way.
type Syntax struct {
	// Open and Close surround all of an answer's calls; Sep goes between
	// two calls.
	Open, Close, Sep string
	// List writes the calls as a JSON list, "[" CALL ("," CALL)* "]",
	// inside Open and Close (Sep unused).
	List bool
	// Call is one call.
	Call []Part
	// How one parameter of PartParams is written: ParamOpen, the name,
	// ParamMid, the value, ParamClose. A parameter whose schema is of type
	// "string" has its value as raw text (not JSON); any other is a JSON
	// value, after ParamMidJSON when it is set (DSML's string="false").
	// KeyPlaceholder in ParamClose stands for the parameter's name
	// (MiniMax-M3 closes each parameter's element by its name); then an
	// object whose schema declares no properties takes no parameters.
	ParamOpen, ParamMid, ParamMidJSON, ParamClose string
	// ParamMidTypes, when set, is ParamMidJSON by the JSON type a
	// parameter's schema declares ("integer", "object", ...), for a
	// syntax that names the value's type (Kimi K3's type="number").
	ParamMidTypes map[string]string
	// ParamSep goes between two parameters (none when "").
	ParamSep string
	// Values is the notation of the parameters' values.
	Values ValueNotation
}

// KeyPlaceholder in Syntax.ParamClose is the parameter's name.
const KeyPlaceholder = "{key}"

// paramClose is ParamClose for the parameter k.
func (syn *Syntax) paramClose(k string) string {
	return strings.ReplaceAll(syn.ParamClose, KeyPlaceholder, k)
}

// ValueNotation is how a Syntax writes parameter values.
type ValueNotation int

// The value notations.
const (
	// ValuesRaw: a string parameter's value as raw text, others as JSON
	// (Qwen3-Coder, GLM, MiniMax, DSML).
	ValuesRaw ValueNotation = iota
	// ValuesJSON: every value as JSON (LFM2's Python call arguments).
	ValuesJSON
	// ValuesGemma: Gemma 4's notation, strings between <|"|> marks,
	// mappings with bare keys; a nested list or mapping is not bound by
	// the schema.
	ValuesGemma
)

// gemmaQuote is Gemma 4's string mark.
const gemmaQuote = `<|"|>`

// Part is a piece of Syntax.Call.
type Part struct {
	Kind PartKind
	Text string // PartText's literal
}

// PartKind says what a Part writes.
type PartKind int

// The parts of a call.
const (
	PartText     PartKind = iota // Text, literally
	PartName                     // the function's name as it is
	PartNameJSON                 // the function's name as a JSON string
	PartArgs                     // the arguments, a JSON object
	PartParams                   // the arguments, one parameter each (ParamOpen ...)
	PartIndex                    // a call index or id, decimal digits
	PartSpace                    // optional JSON white space (none when Compact)
)

// Text, Space, Name, NameJSON, Args, Params and Index are the Parts of
// those kinds.
func Text(s string) Part { return Part{Kind: PartText, Text: s} }

var (
	Space    = Part{Kind: PartSpace}
	Name     = Part{Kind: PartName}
	NameJSON = Part{Kind: PartNameJSON}
	Args     = Part{Kind: PartArgs}
	Params   = Part{Kind: PartParams}
	Index    = Part{Kind: PartIndex}
)

// JSONCall is a call written as a JSON object with the function's name
// under nameKey and its arguments under argsKey, after the members of lead
// (their values GBNF: Command R7B's "tool_call_id").
func JSONCall(nameKey, argsKey string, lead ...[2]string) []Part {
	p := []Part{Text("{"), Space}
	member := func(k string, v ...Part) {
		p = append(p, Text(jsonQuote(k)), Space, Text(":"), Space)
		p = append(p, v...)
		p = append(p, Space)
	}
	for _, l := range lead {
		member(l[0], Text(`"`), Index, Text(`"`))
		p = append(p, Text(","), Space)
	}
	member(nameKey, NameJSON)
	p = append(p, Text(","), Space)
	member(argsKey, Args)
	return append(p, Text("}"), Space)
}

// syntaxCall returns the GBNF of one call of function name under syn; args
// is the arguments' rule, params (for PartParams) writes its parameters.
func (c *schemaConverter) syntaxCall(syn *Syntax, name, args string, params func() (string, error)) (string, error) {
	var seq []string
	for _, p := range syn.Call {
		switch p.Kind {
		case PartText:
			if p.Text != "" {
				seq = append(seq, gbnfLiteral(p.Text))
			}
		case PartName:
			seq = append(seq, gbnfLiteral(name))
		case PartNameJSON:
			seq = append(seq, gbnfLiteral(jsonQuote(name)))
		case PartArgs:
			seq = append(seq, args)
		case PartParams:
			e, err := params()
			if err != nil {
				return "", err
			}
			if e != "" {
				seq = append(seq, "("+e+")")
			}
		case PartIndex:
			seq = append(seq, "[0-9]{1,6}")
		case PartSpace:
			seq = append(seq, c.prim("space"))
		}
	}
	return strings.Join(seq, " "), nil
}

// xmlParams returns the GBNF of the parameters of a function with
// parameters schema s written as syn's tags: the schema's properties in
// their order, the required ones always, the others optionally; an object
// schema without properties takes any named parameters as raw text.
func (c *schemaConverter) xmlParams(syn *Syntax, s *jsonValue, stem, path string) (string, error) {
	if s.kind == jsonObject {
		if r := s.get("$ref"); r != nil {
			t, err := c.resolve(r.str, path)
			if err != nil {
				return "", err
			}
			s = t
		}
	}
	props := s.get("properties")
	if s.kind != jsonObject || props == nil || props.kind != jsonObject || len(props.keys) == 0 {
		keyChars := `[a-zA-Z0-9_.-]+`
		if syn.Values == ValuesJSON {
			keyChars = `[a-zA-Z_] [a-zA-Z0-9_]*` // Python's keyword arguments
		}
		key := c.addRule(stem+"-key", keyChars)
		if strings.Contains(syn.ParamClose, KeyPlaceholder) {
			// A closing that names the key cannot be matched to a free
			// key's opening: such an object takes no parameters.
			return `""`, nil
		}
		var val string
		switch syn.Values {
		case ValuesRaw:
			val = c.notContaining(stem+"-raw", syn.ParamClose)
		case ValuesJSON:
			val = c.prim("value")
		case ValuesGemma:
			val = c.gemmaValue()
		}
		one := gbnfLiteral(syn.ParamOpen) + " " + key + " " + gbnfLiteral(syn.ParamMid) + " " + val
		if syn.ParamClose != "" {
			one += " " + gbnfLiteral(syn.ParamClose)
		}
		if syn.ParamSep != "" {
			return "(" + one + " (" + gbnfLiteral(syn.ParamSep) + " " + one + ")*)?", nil
		}
		return "(" + one + ")*", nil
	}
	if len(props.keys) > MaxSchemaProperties {
		return "", schemaErr(pathJoin(path, "properties"), "%d properties; at most %d are supported", len(props.keys), MaxSchemaProperties)
	}
	required := map[string]bool{}
	if r := s.get("required"); r != nil && r.kind == jsonArray {
		for _, e := range r.arr {
			if e.kind == jsonString {
				required[e.str] = true
			}
		}
	}
	var seq []string
	var opt []bool
	for i, k := range props.keys {
		ps := props.vals[i]
		pp := pathJoin(path, "properties", k)
		pstem := stem + "-" + strconv.Itoa(i)
		var mid, val string
		raw, ok, err := "", false, error(nil)
		switch syn.Values {
		case ValuesRaw:
			raw, ok, err = c.rawString(ps, pstem, pp, syn.paramClose(k))
		case ValuesGemma:
			raw, ok, err = c.rawString(ps, pstem, pp, gemmaQuote)
			if ok {
				raw = gbnfLiteral(gemmaQuote) + " " + raw + " " + gbnfLiteral(gemmaQuote)
			} else if err == nil && !scalarSchema(ps) {
				raw, ok = c.gemmaValue(), true
				if t := ps.get("type"); ps.kind == jsonObject && t != nil && t.kind == jsonString {
					switch t.str {
					case "array":
						raw = "gemma-list"
					case "object":
						raw = "gemma-map"
					}
				}
			}
		}
		if err != nil {
			return "", err
		} else if ok {
			mid, val = syn.ParamMid, raw
		} else {
			v, err := c.expr(ps, pstem, pp)
			if err != nil {
				return "", err
			}
			mid = syn.ParamMid
			if syn.ParamMidJSON != "" {
				mid = syn.ParamMidJSON
			}
			if t := ps.get("type"); ps.kind == jsonObject && t != nil && t.kind == jsonString {
				if m, ok := syn.ParamMidTypes[t.str]; ok {
					mid = m
				}
			}
			val = v
		}
		one := gbnfLiteral(syn.ParamOpen+k+mid) + " " + val
		if syn.ParamClose != "" {
			one += " " + gbnfLiteral(syn.paramClose(k))
		}
		seq = append(seq, c.addRule(pstem+"-param", one))
		opt = append(opt, !required[k])
	}
	if syn.ParamSep == "" {
		for i := range seq {
			if opt[i] {
				seq[i] += "?"
			}
		}
		return strings.Join(seq, " "), nil
	}
	// With separators: the first parameter written, then each later one
	// after a separator (as the JSON object's members).
	sep := gbnfLiteral(syn.ParamSep)
	rest := make([]string, len(seq)+1) // rest[i]: a rule for the parameters from i on, each after sep
	for i := len(seq) - 1; i >= 0; i-- {
		r := "(" + sep + " " + seq[i] + ")"
		if opt[i] {
			r += "?"
		}
		rest[i] = c.addRule(stem+"-rest"+strconv.Itoa(i), strings.TrimSpace(r+" "+rest[i+1]))
	}
	var alts []string
	for i := range seq {
		alts = append(alts, strings.TrimSpace(seq[i]+" "+rest[i+1]))
		if !opt[i] {
			break
		}
		if i == len(seq)-1 {
			alts = append(alts, `""`) // every parameter optional: none at all
		}
	}
	return c.addRule(stem+"-params", strings.Join(alts, " | ")), nil
}

// scalarSchema reports whether s is a schema of a number, integer,
// boolean or null (or an enum or const of such), which every notation
// writes as JSON does.
func scalarSchema(s *jsonValue) bool {
	if s.kind != jsonObject {
		return false
	}
	if t := s.get("type"); t != nil && t.kind == jsonString {
		switch t.str {
		case "number", "integer", "boolean", "null":
			return true
		}
		return false
	}
	vals := []*jsonValue{s.get("const")}
	if e := s.get("enum"); e != nil && e.kind == jsonArray {
		vals = e.arr
	}
	for _, v := range vals {
		if v == nil || v.kind == jsonObject || v.kind == jsonArray || v.kind == jsonString {
			return false
		}
	}
	return true
}

// gemmaValue returns the rule of any Gemma 4 value.
func (c *schemaConverter) gemmaValue() string {
	if _, ok := c.rules["gemma-value"]; ok {
		return "gemma-value"
	}
	q := gbnfLiteral(gemmaQuote)
	str := q + " " + c.notContaining("gemma-text", gemmaQuote) + " " + q
	c.setRule("gemma-value", str+` | gemma-map | gemma-list | `+c.prim("number")+` | ("true" | "false" | "null")`)
	c.setRule("gemma-map", `"{" (gemma-key ":" gemma-value ("," gemma-key ":" gemma-value)*)? "}"`)
	c.setRule("gemma-list", `"[" (gemma-value ("," gemma-value)*)? "]"`)
	c.setRule("gemma-key", `[a-zA-Z0-9_.-]+`)
	return "gemma-value"
}

// rawString returns, for a parameter schema of type "string", the GBNF of
// its value written as raw text before close: one of its enum or
// const values, its pattern (the pattern's characters as JSON writes
// them), its length bounds over characters other than "<", or any text
// that does not contain ParamClose. ok is false for other schemas.
func (c *schemaConverter) rawString(s *jsonValue, stem, path, close string) (string, bool, error) {
	if s.kind != jsonObject {
		return "", false, nil
	}
	// Raw where the parsers read the value as a string: a schema of type
	// "string", or one without a type whose enum or const values are
	// strings.
	if t := s.get("type"); t != nil && (t.kind != jsonString || t.str != "string") {
		return "", false, nil
	} else if t == nil && s.get("enum") == nil && s.get("const") == nil {
		return "", false, nil
	}
	if e := s.get("enum"); e != nil && e.kind == jsonArray && len(e.arr) > 0 {
		var alts []string
		for _, v := range e.arr {
			if v.kind != jsonString {
				return "", false, nil
			}
			alts = append(alts, gbnfLiteral(v.str))
		}
		return "(" + strings.Join(alts, " | ") + ")", true, nil
	}
	if v := s.get("const"); v != nil {
		if v.kind != jsonString {
			return "", false, nil
		}
		return gbnfLiteral(v.str), true, nil
	}
	if p := s.get("pattern"); p != nil && p.kind == jsonString && s.get("minLength") == nil && s.get("maxLength") == nil {
		e, err := c.pattern(p.str, pathJoin(path, "pattern"))
		if err != nil {
			return "", false, err
		}
		return c.addRule(stem+"-pattern", e), true, nil
	}
	lo, hi, err := countRange(s, "minLength", "maxLength", path)
	if err != nil {
		return "", false, err
	}
	if lo > 0 || hi >= 0 {
		return `[^<\x00]` + repeatSuffix(lo, hi), true, nil
	}
	return c.notContaining(stem+"-raw", close), true, nil
}

// notContaining adds a rule for any text that does not contain lit and
// returns its name (the text may end with a part of lit, which lit itself
// may then follow). Where lit's first character comes again inside lit
// (other than at its end) a text holding that repeat may be refused:
// enough for the tags and markers it is used with.
func (c *schemaConverter) notContaining(name, lit string) string {
	rs := []rune(lit)
	if len(rs) == 0 {
		return c.addRule(name, `[^\x00]*`)
	}
	if len(rs) == 1 {
		return c.addRule(name, "[^"+classEscape(rs[0])+`\x00]*`)
	}
	// Rule i (1 <= i < len(rs)): rs[:i] was just read; one more character
	// that does not complete lit, then back to the start.
	rule := make([]string, len(rs))
	for i := len(rs) - 1; i >= 1; i-- {
		rule[i] = name + "-" + strconv.Itoa(i)
	}
	first := classEscape(rs[0])
	for i := 1; i < len(rs); i++ {
		cls := classEscape(rs[i])
		if rs[i] != rs[0] {
			cls += first
		}
		alts := []string{"[^" + cls + `\x00]`}
		if i < len(rs)-1 {
			alts = append(alts, classLiteral(rs[i])+" "+rule[i+1])
		}
		if rs[i] != rs[0] {
			alts = append(alts, classLiteral(rs[0])+" "+rule[1])
		}
		c.setRule(rule[i], strings.Join(alts, " | "))
	}
	// After the last whole step no part of lit has been read: the text may
	// end with a proper prefix of it.
	tail := classLiteral(rs[len(rs)-2])
	for i := len(rs) - 3; i >= 0; i-- {
		tail = classLiteral(rs[i]) + " (" + tail + ")?"
	}
	return c.addRule(name, "([^"+first+`\x00] | `+classLiteral(rs[0])+" "+rule[1]+")* ("+tail+")?")
}

// syntaxRoot returns the GBNF of the answer: the calls under syn, between
// its Open and Close.
func (c *schemaConverter) syntaxRoot(syn *Syntax, parallel bool) string {
	var seq []string
	if syn.Open != "" {
		seq = append(seq, gbnfLiteral(syn.Open))
	}
	switch {
	case syn.List:
		sp := c.prim("space")
		body := `"[" ` + sp + " tool-call"
		if parallel {
			body += ` ("," ` + sp + " tool-call)*"
		}
		seq = append(seq, body+` "]"`)
	case parallel:
		sep := ""
		if syn.Sep != "" {
			sep = gbnfLiteral(syn.Sep) + " "
		}
		seq = append(seq, "tool-call ("+sep+"tool-call)*")
	default:
		seq = append(seq, "tool-call")
	}
	if syn.Close != "" {
		seq = append(seq, gbnfLiteral(syn.Close))
	}
	return strings.Join(seq, " ")
}
