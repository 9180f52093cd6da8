package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
)

// Parsers of the tool-call formats that write arguments other than as one
// JSON object per call (XML-like tags, Python calls), and of the JSON
// lists some families wrap in their own markers.

// cursor reads a text from s at i (the call readers of Gemma 4,
// MiniMax-M3 and streamed calls).
type cursor struct {
	s string
	i int
}

// space skips white space.
func (r *cursor) space() {
	for r.i < len(r.s) && strings.IndexByte(" \t\r\n", r.s[r.i]) >= 0 {
		r.i++
	}
}

// lit reads lit if the text goes on with it.
func (r *cursor) lit(lit string) bool {
	if strings.HasPrefix(r.s[r.i:], lit) {
		r.i += len(lit)
		return true
	}
	return false
}

// paramType returns the JSON Schema type the tool named name declares for
// its parameter key ("" when it declares none, or a list of types).
func paramType(known []tool, name, key string) string {
	for _, t := range known {
		if t.name != name || t.parameters == nil {
			continue
		}
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(t.parameters, &schema) != nil {
			return ""
		}
		s, _ := schema.Properties[key].Type.(string)
		return s
	}
	return ""
}

// typedValue turns an argument written as bare text into JSON: text as
// it is where the tool's schema says the parameter is a string, otherwise
// JSON values as they are and other text as a string (argValue).
func typedValue(known []tool, name, key, v string) json.RawMessage {
	if paramType(known, name, key) == "string" {
		b, _ := json.Marshal(v)
		return b
	}
	return argValue(v)
}

// parseXMLFunctions reads calls written as
// <function=NAME><parameter=K>V</parameter></function>, each in the
// family's wrapper (<tool_call> for Qwen3-Coder, <seed:tool_call> for
// Seed-OSS), the first one's opening wrapper optional. With trimNL, one
// newline on each side of a value is the format's and not the value's.
func parseXMLFunctions(text, wrapper string, trimNL bool, known []tool) (string, []toolCall, bool) {
	start := strings.Index(text, "<function=")
	if start < 0 {
		return "", nil, false
	}
	if w := strings.Index(text, wrapper); w >= 0 && w < start {
		start = w
	}
	var calls []toolCall
	rest := text[start:]
	for {
		i := strings.Index(rest, "<function=")
		if i < 0 {
			break
		}
		rest = rest[i+len("<function="):]
		name, body, ok := strings.Cut(rest, ">")
		if !ok {
			return "", nil, false
		}
		body, rest, _ = strings.Cut(body, "</function>")
		var keys []string
		var vals []json.RawMessage
		for {
			_, after, found := strings.Cut(body, "<parameter=")
			if !found {
				break
			}
			key, val, ok := strings.Cut(after, ">")
			if !ok {
				return "", nil, false
			}
			val, body, _ = strings.Cut(val, "</parameter>")
			if trimNL {
				val = strings.TrimSuffix(strings.TrimPrefix(val, "\n"), "\n")
			}
			keys, vals = append(keys, key), append(vals, typedValue(known, name, key, val))
		}
		c, ok := newCall(name, objectJSON(keys, vals))
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
	}
	return strings.TrimSpace(text[:start]), calls, len(calls) > 0
}

// parseInvokes reads calls written as <invoke name="NAME"><parameter
// name="K">V</parameter></invoke> after one of starts, the tags under
// prefix (MiniMax-M2: none; DeepSeek V3.2 DSML: "｜DSML｜"). A parameter's
// string="true" makes its value a string, string="false" JSON; without
// it the value is typed as the tool's schema says.
func parseInvokes(text string, starts []string, prefix string, known []tool) (string, []toolCall, bool) {
	start := -1
	for _, m := range starts {
		if i := strings.Index(text, m); i >= 0 && (start < 0 || i < start) {
			start = i
		}
	}
	if start < 0 {
		return "", nil, false
	}
	invoke, param := "<"+prefix+"invoke name=\"", "<"+prefix+"parameter name=\""
	calls, ok := callsFrom(strings.Split(text[start:], invoke)[1:], func(body string) (string, string, bool) {
		body, _, _ = strings.Cut(body, "</"+prefix+"invoke>")
		name, body, ok := strings.Cut(body, "\">")
		if !ok {
			return "", "", false
		}
		var keys []string
		var vals []json.RawMessage
		for _, p := range strings.Split(body, param)[1:] {
			head, val, ok := strings.Cut(p, ">")
			if !ok {
				return "", "", false
			}
			val, _, _ = strings.Cut(val, "</"+prefix+"parameter>")
			key, attrs, _ := strings.Cut(head, "\"")
			var v json.RawMessage
			switch {
			case strings.Contains(attrs, `string="true"`):
				v, _ = json.Marshal(val)
			case strings.Contains(attrs, `string="false"`):
				v = argValue(val)
			default:
				v = typedValue(known, name, key, val)
			}
			keys, vals = append(keys, key), append(vals, v)
		}
		return name, objectJSON(keys, vals), true
	})
	return strings.TrimSpace(text[:start]), calls, ok && len(calls) > 0
}

// parseJSONList reads a JSON list of {"name", "arguments"} objects after
// open (and before close, when the family writes one).
func parseJSONList(text, open, close string) (string, []toolCall, bool) {
	start := strings.Index(text, open)
	if start < 0 {
		return "", nil, false
	}
	body := text[start+len(open):]
	if close != "" {
		body, _, _ = strings.Cut(body, close)
	}
	var items []json.RawMessage
	if json.NewDecoder(strings.NewReader(body)).Decode(&items) != nil {
		return "", nil, false
	}
	calls, ok := callsFromJSON(items)
	return strings.TrimSpace(text[:start]), calls, ok && len(calls) > 0
}

// callsFromJSON builds the calls of JSON {"name", "arguments"} objects
// (callFromJSON); one that is not a call fails them all.
func callsFromJSON(items []json.RawMessage) ([]toolCall, bool) {
	return callsFrom(items, func(it json.RawMessage) (string, string, bool) {
		c, ok := callFromJSON(it)
		return c.name, c.arguments, ok
	})
}

// parseApertus reads Apertus calls, a JSON list of {"NAME": {args}}
// between <|tools_prefix|> and <|tools_suffix|>.
func parseApertus(text string) (string, []toolCall, bool) {
	start := strings.Index(text, "<|tools_prefix|>")
	if start < 0 {
		return "", nil, false
	}
	body, _, _ := strings.Cut(text[start+len("<|tools_prefix|>"):], "<|tools_suffix|>")
	var items []map[string]json.RawMessage
	if json.Unmarshal([]byte(strings.TrimSpace(body)), &items) != nil {
		return "", nil, false
	}
	calls, ok := callsFrom(items, func(it map[string]json.RawMessage) (string, string, bool) {
		for name, args := range it {
			return name, string(args), len(it) == 1
		}
		return "", "", false
	})
	return strings.TrimSpace(text[:start]), calls, ok && len(calls) > 0
}

// parseFunctionaryV32 reads a Functionary v3.2 answer: messages each
// headed by its recipient's line, separated by ">>>" (the prompt writes
// the first one's): "all" heads content, a function name that function's
// JSON arguments (python takes its code as it is). An answer in that
// form is parsed even when it holds no call, its content freed of the
// headers.
func parseFunctionaryV32(text string) (string, []toolCall, bool) {
	var content strings.Builder
	var calls []toolCall
	for _, msg := range strings.Split(strings.TrimPrefix(text, ">>>"), ">>>") {
		recipient, body, found := strings.Cut(msg, "\n")
		recipient = strings.TrimSpace(recipient)
		switch {
		case !found || recipient == "":
			return "", nil, false
		case recipient == "all":
			content.WriteString(body)
			continue
		case recipient == "python" && !json.Valid([]byte(strings.TrimSpace(body))):
			code, _ := json.Marshal(map[string]string{"code": body})
			body = string(code)
		}
		c, ok := newCall(recipient, body)
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
	}
	return content.String(), calls, true
}

// parseLFM2 reads LFM2 calls, a Python list of calls
// [NAME(k=v, ...), ...] between <|tool_call_start|> and <|tool_call_end|>,
// the values Python literals.
func parseLFM2(text string) (string, []toolCall, bool) {
	start := strings.Index(text, "<|tool_call_start|>")
	if start < 0 {
		return "", nil, false
	}
	body, _, _ := strings.Cut(text[start+len("<|tool_call_start|>"):], "<|tool_call_end|>")
	p := &pyParser{s: strings.TrimSpace(body)}
	calls, ok := p.calls()
	if !ok {
		return "", nil, false
	}
	return strings.TrimSpace(text[:start]), calls, len(calls) > 0
}

// pyParser reads Python call lists and literals, writing the literals as
// JSON.
type pyParser struct {
	s string
	i int
}

// skip passes white space.
func (p *pyParser) skip() {
	for p.i < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.i])) {
		p.i++
	}
}

// eat passes c (after white space) and reports whether it was there.
func (p *pyParser) eat(c byte) bool {
	p.skip()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// ident reads a (dotted) name.
func (p *pyParser) ident() string {
	p.skip()
	j := p.i
	for p.i < len(p.s) {
		r := rune(p.s[p.i])
		if r != '_' && r != '.' && !unicode.IsLetter(r) && !unicode.IsDigit(r) && r < 0x80 {
			break
		}
		p.i++
	}
	return p.s[j:p.i]
}

// calls reads [NAME(k=v, ...), ...] to the end of the text.
func (p *pyParser) calls() ([]toolCall, bool) {
	if !p.eat('[') {
		return nil, false
	}
	var calls []toolCall
	for !p.eat(']') {
		if len(calls) > 0 && !p.eat(',') {
			return nil, false
		}
		name := p.ident()
		if name == "" || !p.eat('(') {
			return nil, false
		}
		var keys []string
		var vals []json.RawMessage
		for !p.eat(')') {
			if len(keys) > 0 && !p.eat(',') {
				return nil, false
			}
			key := p.ident()
			if key == "" || !p.eat('=') {
				return nil, false
			}
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			keys, vals = append(keys, key), append(vals, v)
		}
		c, ok := newCall(name, objectJSON(keys, vals))
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	p.skip()
	return calls, p.i == len(p.s)
}

// value reads a Python (or JSON) literal: a string, number, True, False,
// None, list or dict.
func (p *pyParser) value() (json.RawMessage, bool) {
	p.skip()
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '"' || c == '\'':
		s, ok := p.str(c)
		if !ok {
			return nil, false
		}
		b, _ := json.Marshal(s)
		return b, true
	case c == '[':
		return p.list()
	case c == '{':
		return p.dict()
	}
	var word string
	if c := p.s[p.i]; c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9' {
		// A number: a sign only first or after its exponent's e.
		j := p.i
		for p.i < len(p.s) {
			c := p.s[p.i]
			sign := (c == '-' || c == '+') && (p.i == j || p.s[p.i-1] == 'e' || p.s[p.i-1] == 'E')
			if !sign && !strings.ContainsRune("0123456789.eE_", rune(c)) {
				break
			}
			p.i++
		}
		word = strings.ReplaceAll(p.s[j:p.i], "_", "")
	} else {
		word = p.ident()
	}
	switch word {
	case "True", "true":
		return json.RawMessage("true"), true
	case "False", "false":
		return json.RawMessage("false"), true
	case "None", "null":
		return json.RawMessage("null"), true
	}
	f, err := strconv.ParseFloat(word, 64)
	if err != nil {
		return nil, false
	}
	if !json.Valid([]byte(word)) { // Python's +5, .5, 5.
		word = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return json.RawMessage(word), true
}

// str reads a string literal quoted by q, decoding its escapes.
func (p *pyParser) str(q byte) (string, bool) {
	var b strings.Builder
	for p.i++; p.i < len(p.s); p.i++ {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), true
		case c == '\\' && p.i+1 < len(p.s):
			p.i++
			switch e := p.s[p.i]; e {
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
			case 'u':
				// \uXXXX, as Python and JSON write a character (a UTF-16
				// surrogate pair as two).
				r, n := pyUnicodeEscape(p.s[p.i-1:])
				if n == 0 {
					b.WriteByte(e)
					break
				}
				b.WriteRune(r)
				p.i += n - 2
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

// pyUnicodeEscape decodes the \uXXXX escape (or surrogate pair of two) s
// starts with, returning the character and the bytes it takes (0 when s
// holds none).
func pyUnicodeEscape(s string) (rune, int) {
	hex := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex(s)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex(s[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
				return d, 12
			}
		}
		return unicode.ReplacementChar, 6
	}
	return r, 6
}

// list reads [v, ...].
func (p *pyParser) list() (json.RawMessage, bool) {
	p.i++
	var items []json.RawMessage
	for !p.eat(']') {
		if len(items) > 0 && !p.eat(',') {
			return nil, false
		}
		if p.eat(']') { // a trailing comma
			break
		}
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		items = append(items, v)
	}
	b, _ := json.Marshal(items)
	if items == nil {
		b = []byte("[]")
	}
	return b, true
}

// dict reads {k: v, ...}, its keys string literals.
func (p *pyParser) dict() (json.RawMessage, bool) {
	p.i++
	var keys []string
	var vals []json.RawMessage
	for !p.eat('}') {
		if len(keys) > 0 && !p.eat(',') {
			return nil, false
		}
		p.skip()
		if p.i >= len(p.s) || p.s[p.i] != '"' && p.s[p.i] != '\'' {
			return nil, false
		}
		k, ok := p.str(p.s[p.i])
		if !ok || !p.eat(':') {
			return nil, false
		}
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	return json.RawMessage(objectJSON(keys, vals)), true
}

// parseJSONCalls reads calls written each as marker then a JSON object
// {"name", "arguments"} (GigaChat 3's "function call" turn, GigaChat
// 3.1's <|function_call|>); the text before the first marker is the
// content.
func parseJSONCalls(text, marker string) (string, []toolCall, bool) {
	start := strings.Index(text, marker)
	if start < 0 {
		return "", nil, false
	}
	var items []json.RawMessage
	for _, part := range strings.Split(text[start:], marker)[1:] {
		var it json.RawMessage
		if json.NewDecoder(strings.NewReader(part)).Decode(&it) != nil {
			return "", nil, false
		}
		items = append(items, it)
	}
	calls, ok := callsFromJSON(items)
	return strings.TrimSpace(text[:start]), calls, ok && len(calls) > 0
}

// parseCommandRPlus reads Command R+ calls: "Action:" and a ```json block
// holding a list of {"tool_name", "parameters"}; the text before
// "Action:" is the content.
func parseCommandRPlus(text string) (string, []toolCall, bool) {
	start := strings.Index(text, "Action:")
	if start < 0 {
		return "", nil, false
	}
	rest := strings.TrimLeft(text[start+len("Action:"):], " \t\r\n")
	rest, ok := strings.CutPrefix(rest, "```json")
	if !ok {
		return "", nil, false
	}
	calls, ok := cohereActions(rest)
	return strings.TrimSpace(text[:start]), calls, ok
}

// successiveCalls reads calls that follow one another (white space
// between them allowed) from the first open in text: call reads one from
// just after its open and returns it and the length it read. The text
// before the first is the content; what follows the last is not read.
// One call that does not read fails them all.
func successiveCalls(text, open string, call func(s string) (toolCall, int, bool)) (string, []toolCall, bool) {
	start := strings.Index(text, open)
	if start < 0 {
		return "", nil, false
	}
	var calls []toolCall
	rest := text[start:]
	for strings.HasPrefix(rest, open) {
		c, n, ok := call(rest[len(open):])
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
		rest = strings.TrimLeft(rest[len(open)+n:], " \t\r\n")
	}
	return strings.TrimSpace(text[:start]), calls, true
}

// parseMiniCPM5 reads MiniCPM5 calls,
// <function name="NAME"><param name="K">V</param></function>, one after
// another; a value in <![CDATA[...]]> is that text as it is (it may hold
// markup, </param> included), another is typed by the tool's schema.
func parseMiniCPM5(text string, known []tool) (string, []toolCall, bool) {
	return successiveCalls(text, `<function name="`, func(s string) (toolCall, int, bool) {
		const param = `<param name="`
		name, body, ok := strings.Cut(s, `">`)
		if !ok {
			return toolCall{}, 0, false
		}
		var keys []string
		var vals []json.RawMessage
		for strings.HasPrefix(body, param) {
			key, val, ok := strings.Cut(body[len(param):], `">`)
			if !ok {
				return toolCall{}, 0, false
			}
			var v json.RawMessage
			if cdata, ok := strings.CutPrefix(val, "<![CDATA["); ok {
				raw, after, ok := strings.Cut(cdata, "]]>")
				if !ok {
					return toolCall{}, 0, false
				}
				v, _ = json.Marshal(raw)
				val = after
			} else {
				i := strings.Index(val, "</param>")
				if i < 0 {
					return toolCall{}, 0, false
				}
				v, val = typedValue(known, name, key, val[:i]), val[i:]
			}
			body, ok = strings.CutPrefix(val, "</param>")
			if !ok {
				return toolCall{}, 0, false
			}
			keys, vals = append(keys, key), append(vals, v)
		}
		body, ok = strings.CutPrefix(body, "</function>")
		if !ok {
			return toolCall{}, 0, false
		}
		c, ok := newCall(name, objectJSON(keys, vals))
		return c, len(s) - len(body), ok
	})
}

// hyTagSuffix ends each of Hunyuan Hy3's tags ("<tool_call:opensource>").
const hyTagSuffix = ":opensource"

// hyTag is Hunyuan's tag name (with "/" for a closing tag).
func hyTag(name string) string { return "<" + name + hyTagSuffix + ">" }

// parseHunyuan reads Hunyuan Hy3 calls, GLM's layout in its own tags:
// <tool_calls:opensource>, then per call <tool_call:opensource>NAME
// <tool_sep:opensource> and <arg_key:opensource>K</arg_key:opensource>
// <arg_value:opensource>V</arg_value:opensource> pairs (V typed by the
// tool's schema), </tool_call:opensource>.
func parseHunyuan(text string, known []tool) (string, []toolCall, bool) {
	return blockCalls(text, []string{hyTag("tool_calls"), hyTag("tool_call")}, hyTag("tool_call"), hyTag("/tool_call"),
		func(body string) (string, string, bool) {
			name, args, ok := strings.Cut(body, hyTag("tool_sep"))
			if !ok {
				return "", "", false
			}
			name = strings.TrimSpace(name)
			keys, raws, cut, ok := tagPairs(args, hyTag("arg_key"), hyTag("/arg_key"), hyTag("arg_value"), hyTag("/arg_value"))
			if cut || !ok {
				return "", "", false
			}
			vals := make([]json.RawMessage, len(raws))
			for i, v := range raws {
				vals[i] = typedValue(known, name, keys[i], strings.Trim(v, "\n"))
			}
			return name, objectJSON(keys, vals), true
		})
}

// Kimi K3 writes its answer in XTML tags, <|open|>TAG attrs<|sep|> ...
// <|close|>TAG<|sep|>, the attribute values escaped as its template's
// escape_attr writes them (& as &amp;, " as &quot;):
//
//	<|open|>think<|sep|>REASONING<|close|>think<|sep|>
//	<|open|>response<|sep|>CONTENT<|close|>response<|sep|>
//	<|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|>
//	<|open|>argument key="K" type="number"<|sep|>VALUE<|close|>argument<|sep|>...
//	<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>
//
// A call's arguments may instead be one JSON object,
// <|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>.

// xtmlOpen and xtmlClose write a tag without attributes.
func xtmlOpen(tag string) string  { return "<|open|>" + tag + "<|sep|>" }
func xtmlClose(tag string) string { return "<|close|>" + tag + "<|sep|>" }

// xtmlTokens are the control tokens XTML tags are made of: rendered, the
// parser sees Kimi K3's tags (its think section's among them).
var xtmlTokens = []string{"<|open|>", "<|close|>", "<|sep|>"}

// xtmlCallOpen starts a call's tag.
const xtmlCallOpen = `<|open|>call tool="`

// xtmlSource reports whether a template's source writes XTML tags (its
// macros build them: '<|open|>' + tag ... '<|sep|>').
func xtmlSource(src string) bool {
	return strings.Contains(src, "<|open|>") && strings.Contains(src, "<|close|>") && strings.Contains(src, "<|sep|>")
}

// xtmlUnescape undoes escape_attr.
var xtmlUnescape = strings.NewReplacer("&quot;", `"`, "&amp;", "&")

// xtmlAttrs reads a tag's attributes, ` k="v"` each.
func xtmlAttrs(s string) map[string]string {
	attrs := map[string]string{}
	for {
		k, rest, ok := strings.Cut(s, `="`)
		if !ok {
			return attrs
		}
		v, after, _ := strings.Cut(rest, `"`)
		attrs[strings.TrimSpace(k)] = xtmlUnescape.Replace(v)
		s = after
	}
}

// parseKimiK3 reads Kimi K3's calls. An argument's type attribute says how
// its value is written: "string" as raw text, the other types as JSON
// (text that is not JSON stays a string); without one the value is typed
// as the tool's schema says.
func parseKimiK3(text string, known []tool) (string, []toolCall, bool) {
	start := firstMarker([]byte(text), []string{xtmlOpen("tools"), xtmlCallOpen})
	if start < 0 {
		return "", nil, false
	}
	calls, ok := callsFrom(strings.Split(text[start:], "<|open|>call ")[1:], func(body string) (string, string, bool) {
		body, _, _ = strings.Cut(body, xtmlClose("call"))
		head, body, ok := strings.Cut(body, "<|sep|>")
		name := xtmlAttrs(head)["tool"]
		if !ok || name == "" {
			return "", "", false
		}
		if js, found := strings.CutPrefix(strings.TrimSpace(body), "<|open|>json"); found {
			_, js, _ = strings.Cut(js, "<|sep|>")
			js, _, _ = strings.Cut(js, xtmlClose("json"))
			return name, js, true
		}
		var keys []string
		var vals []json.RawMessage
		for _, arg := range strings.Split(body, "<|open|>argument ")[1:] {
			head, val, ok := strings.Cut(arg, "<|sep|>")
			if !ok {
				return "", "", false
			}
			val, _, _ = strings.Cut(val, xtmlClose("argument"))
			attrs := xtmlAttrs(head)
			key := attrs["key"]
			var v json.RawMessage
			switch attrs["type"] {
			case "string":
				v, _ = json.Marshal(val)
			case "":
				v = typedValue(known, name, key, val)
			default:
				v = argValue(val)
			}
			keys, vals = append(keys, key), append(vals, v)
		}
		return name, objectJSON(keys, vals), true
	})
	return strings.TrimSpace(text[:start]), calls, ok && len(calls) > 0
}
