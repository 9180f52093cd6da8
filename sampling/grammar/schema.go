package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// SchemaError reports a JSON Schema the converter cannot turn into a
// grammar, naming the place in the schema as a JSON pointer ("#/properties/a").
type SchemaError struct {
	Path string
	Msg  string
}

// Error returns "json schema at PATH: MSG".
func (e *SchemaError) Error() string {
	return fmt.Sprintf("json schema at %s: %s", e.Path, e.Msg)
}

// Primitive rules, shared by every generated grammar and added on first use.
// They follow llama.cpp's json-schema-to-grammar, except that exponents are
// capped at two digits so that every generated number fits a float64.
var primitiveRules = []struct {
	name, body string
	deps       []string
}{
	{"space", `| " " | "\n"{1,2} [ \t]{0,20}`, nil},
	{"boolean", `("true" | "false") space`, []string{"space"}},
	{"null", `"null" space`, []string{"space"}},
	{"integral-part", `[0] | [1-9] [0-9]{0,15}`, nil},
	{"decimal-part", `[0-9]{1,16}`, nil},
	{"integer", `("-"? integral-part) space`, []string{"integral-part", "space"}},
	{"number", `("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space`, []string{"integral-part", "decimal-part", "space"}},
	{"char", `[^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})`, nil},
	{"string", `"\"" char* "\"" space`, []string{"char", "space"}},
	{"value", `object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	{"object", `"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space`, []string{"string", "space", "value"}},
	{"array", `"[" space ( value ("," space value)* )? "]" space`, []string{"space", "value"}},
	{"dot", `[^"\\\x7F\x00-\x1F\n] | [\\] (["\\/bfrt] | "u" [0-9a-fA-F]{4})`, nil},
	{"hex", `[0-9a-fA-F]`, nil},
	{"date", `[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`, nil},
	{"time", `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,3} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	{"date-time", `date "T" time`, []string{"date", "time"}},
	{"uuid", `hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}`, []string{"hex"}},
	{"date-string", `"\"" date "\"" space`, []string{"date", "space"}},
	{"time-string", `"\"" time "\"" space`, []string{"time", "space"}},
	{"date-time-string", `"\"" date-time "\"" space`, []string{"date-time", "space"}},
	{"uuid-string", `"\"" uuid "\"" space`, []string{"uuid", "space"}},
}

// Keywords the converter knows and cannot honour; a schema using them is
// refused rather than silently loosened.
var unsupportedKeywords = []string{
	"not", "if", "then", "else", "patternProperties", "propertyNames", "contains", "minContains",
	"maxContains", "dependentSchemas", "dependentRequired", "dependencies", "unevaluatedProperties",
	"unevaluatedItems", "minProperties", "maxProperties", "multipleOf", "$dynamicRef", "$recursiveRef",
}

// SchemaToGrammar converts a JSON Schema document to GBNF whose start rule
// is "root". It supports type (one or a list), properties in schema order
// with required and optional ones, additionalProperties (false, true or a
// schema; absent means false when properties are given, as in llama.cpp),
// items and prefixItems, minItems/maxItems, enum, const, anyOf/oneOf,
// allOf over objects, $ref to "#", "#/$defs/..." and "#/definitions/..."
// (recursion allowed), minLength/maxLength, pattern, format date, time,
// date-time and uuid, minimum/maximum/exclusiveMinimum/exclusiveMaximum on
// integers and numbers (exact for bounds within ±2^63 with up to 30
// fraction digits, rounded inward beyond; bounds past ±2^63 that do not
// restrict, such as zod's float64 limits, are dropped; bounded numbers are
// written without an exponent), and nullable
// (OpenAPI). Annotations are ignored. Anything else it cannot honour is a
// *SchemaError naming the schema path.
func SchemaToGrammar(schema []byte) (string, error) { return SchemaToGrammarBudget(schema, Budget{}) }

// SchemaToGrammarBudget is SchemaToGrammar within b, which counts the
// subschemas converted and the elements of the grammar checked: more is an
// error wrapping ErrBudget, and b.Ctx's end stops it with an error wrapping
// the context's.
func SchemaToGrammarBudget(schema []byte, b Budget) (string, error) {
	root, err := parseJSONValue(schema)
	if err != nil {
		return "", &SchemaError{Path: "#", Msg: "invalid JSON: " + err.Error()}
	}
	c := newSchemaConverter(root)
	c.work = b.start()
	body, err := c.expr(root, "root", "#")
	if err != nil {
		return "", err
	}
	c.setRule("root", body)
	src := c.format()
	if err := c.check(src, "#"); err != nil {
		return "", err
	}
	return src, nil
}

// JSONObjectGrammar returns GBNF for any JSON object (response_format
// json_object).
func JSONObjectGrammar() string {
	c := newSchemaConverter(nil)
	c.setRule("root", c.prim("object"))
	return c.format()
}

// Limits that keep a schema's compilation linear in its size and bounded:
// a request's schema is compiled before it is admitted, so its cost must
// not depend on anything but these.
const (
	// MaxSchemaProperties bounds the properties and the required names of
	// one object schema.
	MaxSchemaProperties = 1000
	// MaxSchemaAlternatives bounds the members of one enum, anyOf or
	// oneOf: each is a parse the matcher follows in parallel.
	MaxSchemaAlternatives = 1000
	// MaxSchemaRules bounds the rules of the grammar a schema (or a set of
	// tools) compiles to.
	MaxSchemaRules = 10000
	// maxSchemaSteps bounds the subschemas the converter visits; a schema
	// that reuses large parts through allOf could otherwise cost the
	// product of their sizes.
	maxSchemaSteps = 100000
)

type schemaConverter struct {
	root     *jsonValue
	rules    map[string]string
	order    []string
	refNames map[string]string // scope + "$ref" pointer -> rule name
	scope    string            // tells apart the documents of several tools
	steps    int               // subschemas visited, against maxSchemaSteps
	compact  bool              // no free whitespace: "space" matches nothing
	work     *work             // the compile's budget (nil: the default)

	// For addRule: the rule of each base name and body, the next numeric
	// suffix to try per base name, and the base name of each added rule.
	byBody  map[string]string
	nextSfx map[string]int
	baseOf  map[string]string
}

func newSchemaConverter(root *jsonValue) *schemaConverter {
	return &schemaConverter{root: root, rules: map[string]string{}, refNames: map[string]string{},
		byBody: map[string]string{}, nextSfx: map[string]int{}, baseOf: map[string]string{}}
}

// format writes root first, then the other rules by name.
func (c *schemaConverter) format() string {
	names := append([]string(nil), c.order...)
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("root ::= " + c.rules["root"] + "\n")
	for _, n := range names {
		switch {
		case n == "root":
		case n == "space" && c.compact:
			b.WriteString(`space ::= ""` + "\n")
		default:
			b.WriteString(n + " ::= " + c.rules[n] + "\n")
		}
	}
	return b.String()
}

// prim adds a primitive rule (and what it uses) and returns its name.
func (c *schemaConverter) prim(name string) string {
	if _, ok := c.rules[name]; ok {
		return name
	}
	for _, p := range primitiveRules {
		if p.name == name {
			c.setRule(name, p.body)
			for _, d := range p.deps {
				c.prim(d)
			}
			return name
		}
	}
	panic("BUG: unknown primitive rule " + name)
}

func (c *schemaConverter) setRule(name, body string) {
	if _, ok := c.rules[name]; !ok {
		c.order = append(c.order, name)
	}
	c.rules[name] = body
	if base, ok := c.baseOf[name]; ok {
		c.byBody[base+"\x00"+body] = name
	}
}

var ruleNameBad = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// addRule adds body under a name derived from want and returns the name; an
// identical existing rule of the same base name is reused. Each base name
// keeps a counter of the suffixes it used, so that adding n rules of one
// base name costs O(n), not O(n²).
func (c *schemaConverter) addRule(want, body string) string {
	base := strings.Trim(ruleNameBad.ReplaceAllString(want, "-"), "-")
	if base == "" {
		base = "r"
	}
	if name, ok := c.byBody[base+"\x00"+body]; ok && c.rules[name] == body {
		return name
	}
	name := base
	for {
		_, taken := c.rules[name]
		if !taken && !isPrimitive(name) {
			break
		}
		c.nextSfx[base]++
		name = base + strconv.Itoa(c.nextSfx[base])
	}
	c.baseOf[name] = base
	c.setRule(name, body)
	return name
}

// isPrimitive reports whether name is reserved for a primitive rule.
func isPrimitive(name string) bool {
	for _, p := range primitiveRules {
		if p.name == name {
			return true
		}
	}
	return false
}

// check parses the generated grammar, which Parse also checks: a schema
// whose references loop without consuming input (for example {"$ref":
// "#"}) gives a grammar that matches nothing or is left-recursive, and
// one with too many optional members a grammar too ambiguous to follow,
// reported here as schema errors that quote the grammar's own complaint.
// check parses src, the converter's output, within the converter's budget.
func (c *schemaConverter) check(src, path string) error {
	w := c.work
	if w == nil {
		w = Budget{}.start()
	}
	if _, err := parseWork(src, "", w); err != nil {
		if errors.Is(err, ErrBudget) || w.ctx != nil && w.ctx.Err() != nil {
			return err
		}
		return schemaErr(path, "schema gives an unusable grammar: %v", err)
	}
	return nil
}

func schemaErr(path, format string, args ...any) error {
	return &SchemaError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

func pathJoin(path string, parts ...string) string {
	for _, p := range parts {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1")
		path += "/" + p
	}
	return path
}

// gbnfLiteral quotes s as a GBNF string literal.
func gbnfLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7F:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsonQuote returns s as a JSON string, without HTML escaping.
func jsonQuote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// literalJSON returns a grammar expression for exactly the JSON value v
// (written compactly), followed by space.
func (c *schemaConverter) literalJSON(v *jsonValue) string {
	var b strings.Builder
	v.encode(&b, false)
	return gbnfLiteral(b.String()) + " " + c.prim("space")
}

// expr returns a grammar expression for schema s; name is the stem for any
// rules it adds and path the schema location for errors.
func (c *schemaConverter) expr(s *jsonValue, name, path string) (string, error) {
	if c.steps++; c.steps > maxSchemaSteps {
		return "", schemaErr(path, "schema too large: over %d subschemas to compile", maxSchemaSteps)
	}
	if c.work != nil {
		if err := c.work.spend(1); err != nil {
			return "", err
		}
	}
	if len(c.order) > MaxSchemaRules {
		return "", schemaErr(path, "schema too large: it needs over %d grammar rules", MaxSchemaRules)
	}
	switch s.kind {
	case jsonBool:
		if !s.b {
			return "", schemaErr(path, "schema false matches nothing")
		}
		return c.prim("value"), nil
	case jsonObject:
	default:
		return "", schemaErr(path, "schema must be an object or a boolean")
	}
	for _, k := range unsupportedKeywords {
		if s.get(k) != nil {
			return "", schemaErr(pathJoin(path, k), "keyword %q is not supported", k)
		}
	}
	if u := s.get("uniqueItems"); u != nil && !(u.kind == jsonBool && !u.b) {
		return "", schemaErr(pathJoin(path, "uniqueItems"), "uniqueItems is not supported")
	}
	if n := s.get("nullable"); n != nil && n.kind == jsonBool && n.b {
		inner := withoutKey(s, "nullable")
		e, err := c.expr(inner, name, path)
		if err != nil {
			return "", err
		}
		return "(" + e + " | " + c.prim("null") + ")", nil
	}
	if ref := s.get("$ref"); ref != nil {
		for _, k := range s.keys {
			if isConstraintKeyword(k) {
				return "", schemaErr(pathJoin(path, k), "keyword %q beside $ref is not supported", k)
			}
		}
		return c.ref(ref, pathJoin(path, "$ref"))
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		alts := s.get(kw)
		if alts == nil {
			continue
		}
		if alts.kind != jsonArray || len(alts.arr) == 0 {
			return "", schemaErr(pathJoin(path, kw), "%s must be a non-empty array", kw)
		}
		if len(alts.arr) > MaxSchemaAlternatives {
			return "", schemaErr(pathJoin(path, kw), "%s has %d members; at most %d are supported", kw, len(alts.arr), MaxSchemaAlternatives)
		}
		for _, k := range s.keys {
			if k != kw && isConstraintKeyword(k) {
				return "", schemaErr(pathJoin(path, k), "keyword %q beside %s is not supported", k, kw)
			}
		}
		var parts []string
		for i, a := range alts.arr {
			e, err := c.expr(a, name+"-"+strconv.Itoa(i), pathJoin(path, kw, strconv.Itoa(i)))
			if err != nil {
				return "", err
			}
			parts = append(parts, c.addRule(name+"-"+strconv.Itoa(i), e))
		}
		return "(" + strings.Join(parts, " | ") + ")", nil
	}
	if all := s.get("allOf"); all != nil {
		merged, err := c.mergeAllOf(s, path)
		if err != nil {
			return "", err
		}
		return c.expr(merged, name, path)
	}
	if cv := s.get("const"); cv != nil {
		return c.literalJSON(cv), nil
	}
	if en := s.get("enum"); en != nil {
		if en.kind != jsonArray || len(en.arr) == 0 {
			return "", schemaErr(pathJoin(path, "enum"), "enum must be a non-empty array")
		}
		if len(en.arr) > MaxSchemaAlternatives {
			return "", schemaErr(pathJoin(path, "enum"), "enum has %d values; at most %d are supported", len(en.arr), MaxSchemaAlternatives)
		}
		var parts []string
		for _, v := range en.arr {
			var b strings.Builder
			v.encode(&b, false)
			parts = append(parts, gbnfLiteral(b.String()))
		}
		return "(" + strings.Join(parts, " | ") + ") " + c.prim("space"), nil
	}

	typ := s.get("type")
	if typ != nil && typ.kind == jsonArray {
		if len(typ.arr) == 0 {
			return "", schemaErr(pathJoin(path, "type"), "type must not be an empty list")
		}
		var parts []string
		seen := map[string]bool{}
		for i, t := range typ.arr {
			if t.kind != jsonString {
				return "", schemaErr(pathJoin(path, "type", strconv.Itoa(i)), "type must be a string")
			}
			if seen[t.str] {
				return "", schemaErr(pathJoin(path, "type", strconv.Itoa(i)), "type %q listed twice", t.str)
			}
			seen[t.str] = true
			one := withKey(s, "type", t)
			e, err := c.expr(one, name+"-"+t.str, path)
			if err != nil {
				return "", err
			}
			parts = append(parts, e)
		}
		return "(" + strings.Join(parts, " | ") + ")", nil
	}
	t := ""
	if typ != nil {
		if typ.kind != jsonString {
			return "", schemaErr(pathJoin(path, "type"), "type must be a string or a list of strings")
		}
		t = typ.str
	} else {
		switch {
		case s.get("properties") != nil || s.get("additionalProperties") != nil || s.get("required") != nil:
			t = "object"
		case s.get("items") != nil || s.get("prefixItems") != nil || s.get("minItems") != nil || s.get("maxItems") != nil:
			t = "array"
		case s.get("pattern") != nil || s.get("minLength") != nil || s.get("maxLength") != nil || s.get("format") != nil:
			t = "string"
		case s.get("minimum") != nil || s.get("maximum") != nil || s.get("exclusiveMinimum") != nil || s.get("exclusiveMaximum") != nil:
			t = "number"
		default:
			return c.prim("value"), nil
		}
	}
	switch t {
	case "object":
		return c.object(s, name, path)
	case "array":
		return c.array(s, name, path)
	case "string":
		return c.stringExpr(s, name, path)
	case "integer":
		return c.integer(s, name, path)
	case "number":
		return c.number(s, path)
	case "boolean":
		return c.prim("boolean"), nil
	case "null":
		return c.prim("null"), nil
	}
	return "", schemaErr(pathJoin(path, "type"), "unknown type %q", t)
}

// isConstraintKeyword reports whether k constrains values (as opposed to
// annotating them or holding definitions).
func isConstraintKeyword(k string) bool {
	switch k {
	case "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
		"readOnly", "writeOnly", "$defs", "definitions", "$anchor", "contentEncoding", "contentMediaType",
		"discriminator", "example", "$ref", "nullable":
		return false
	}
	return true
}

func withoutKey(s *jsonValue, key string) *jsonValue {
	out := &jsonValue{kind: jsonObject}
	for i, k := range s.keys {
		if k != key {
			out.add(k, s.vals[i])
		}
	}
	return out
}

func withKey(s *jsonValue, key string, v *jsonValue) *jsonValue {
	out := withoutKey(s, key)
	out.add(key, v)
	return out
}

// resolve follows a local JSON pointer ("#", "#/$defs/x", ...).
func (c *schemaConverter) resolve(ref, path string) (*jsonValue, error) {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return nil, schemaErr(path, "only local references (#/...) are supported, not %q", ref)
	}
	v := c.root
	if ref == "#" {
		return v, nil
	}
	for _, part := range strings.Split(ref[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch v.kind {
		case jsonObject:
			v = v.get(part)
		case jsonArray:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v.arr) {
				v = nil
			} else {
				v = v.arr[i]
			}
		default:
			v = nil
		}
		if v == nil {
			return nil, schemaErr(path, "reference %q does not resolve", ref)
		}
	}
	return v, nil
}

func (c *schemaConverter) ref(ref *jsonValue, path string) (string, error) {
	if ref.kind != jsonString {
		return "", schemaErr(path, "$ref must be a string")
	}
	if name, ok := c.refNames[c.scope+ref.str]; ok {
		return name, nil
	}
	target, err := c.resolve(ref.str, path)
	if err != nil {
		return "", err
	}
	stem := "ref"
	if i := strings.LastIndexByte(ref.str, '/'); i >= 0 && i+1 < len(ref.str) {
		stem = ref.str[i+1:]
	} else if ref.str == "#" {
		stem = "root-ref"
	}
	// Reserve the name before converting, so recursive references resolve.
	name := c.addRule(stem, "\x00pending "+ref.str)
	c.refNames[c.scope+ref.str] = name
	body, err := c.expr(target, name, strings.TrimPrefix(ref.str, ""))
	if err != nil {
		return "", err
	}
	c.setRule(name, body)
	return name, nil
}

// mergeAllOf merges the allOf members of s (after following $refs) into one
// object schema: properties and required lists are united.
func (c *schemaConverter) mergeAllOf(s *jsonValue, path string) (*jsonValue, error) {
	all := s.get("allOf")
	if all.kind != jsonArray || len(all.arr) == 0 {
		return nil, schemaErr(pathJoin(path, "allOf"), "allOf must be a non-empty array")
	}
	props := &jsonValue{kind: jsonObject}
	required := &jsonValue{kind: jsonArray}
	seenReq := map[string]bool{}
	merged := withoutKey(s, "allOf")
	var addl *jsonValue
	add := func(m *jsonValue, p string) error {
		for i, k := range m.keys {
			v := m.vals[i]
			switch {
			case k == "properties":
				if v.kind != jsonObject {
					return schemaErr(pathJoin(p, k), "properties must be an object")
				}
				for j, pk := range v.keys {
					if props.get(pk) != nil {
						return schemaErr(pathJoin(p, k, pk), "property %q defined by two allOf members", pk)
					}
					props.add(pk, v.vals[j])
				}
			case k == "required":
				for _, r := range v.arr {
					if r.kind == jsonString && !seenReq[r.str] {
						seenReq[r.str] = true
						required.arr = append(required.arr, r)
					}
				}
			case k == "additionalProperties":
				addl = v
			case k == "type":
				if v.kind != jsonString || v.str != "object" {
					return schemaErr(pathJoin(p, k), "allOf is supported only over object schemas")
				}
			case isConstraintKeyword(k):
				return schemaErr(pathJoin(p, k), "keyword %q inside allOf is not supported", k)
			}
		}
		return nil
	}
	if err := add(merged, path); err != nil {
		return nil, err
	}
	for i, m := range all.arr {
		p := pathJoin(path, "allOf", strconv.Itoa(i))
		for depth := 0; m.get("$ref") != nil; depth++ {
			if depth > 32 {
				return nil, schemaErr(p, "reference chain too long")
			}
			r := m.get("$ref")
			if r.kind != jsonString {
				return nil, schemaErr(pathJoin(p, "$ref"), "$ref must be a string")
			}
			t, err := c.resolve(r.str, pathJoin(p, "$ref"))
			if err != nil {
				return nil, err
			}
			m, p = t, r.str
		}
		if m.kind != jsonObject {
			return nil, schemaErr(p, "allOf member must be an object schema")
		}
		if m.get("allOf") != nil || m.get("anyOf") != nil || m.get("oneOf") != nil {
			return nil, schemaErr(p, "nested combinators inside allOf are not supported")
		}
		if err := add(m, p); err != nil {
			return nil, err
		}
	}
	out := &jsonValue{kind: jsonObject}
	out.add("type", &jsonValue{kind: jsonString, str: "object"})
	out.add("properties", props)
	out.add("required", required)
	if addl != nil {
		out.add("additionalProperties", addl)
	}
	return out, nil
}

func (c *schemaConverter) object(s *jsonValue, name, path string) (string, error) {
	props := s.get("properties")
	if props != nil && props.kind != jsonObject {
		return "", schemaErr(pathJoin(path, "properties"), "properties must be an object")
	}
	if props != nil && len(props.keys) > MaxSchemaProperties {
		return "", schemaErr(pathJoin(path, "properties"), "%d properties; at most %d are supported", len(props.keys), MaxSchemaProperties)
	}
	required := map[string]bool{}
	if r := s.get("required"); r != nil {
		if r.kind != jsonArray {
			return "", schemaErr(pathJoin(path, "required"), "required must be an array")
		}
		if len(r.arr) > MaxSchemaProperties {
			return "", schemaErr(pathJoin(path, "required"), "%d required names; at most %d are supported", len(r.arr), MaxSchemaProperties)
		}
		var extra *jsonValue // props plus the required names it lacks
		for i, e := range r.arr {
			if e.kind != jsonString {
				return "", schemaErr(pathJoin(path, "required", strconv.Itoa(i)), "required entries must be strings")
			}
			if required[e.str] {
				continue
			}
			required[e.str] = true
			if props.get(e.str) != nil {
				continue
			}
			// A required name without a schema may hold any value,
			// unless additional properties are explicitly banned.
			if a := s.get("additionalProperties"); a != nil && a.kind == jsonBool && !a.b {
				return "", schemaErr(pathJoin(path, "required", strconv.Itoa(i)),
					"required property %q has no schema in properties and additionalProperties is false", e.str)
			}
			if extra == nil {
				extra = &jsonValue{kind: jsonObject}
				if props != nil {
					for j, k := range props.keys {
						extra.add(k, props.vals[j])
					}
				}
			}
			extra.add(e.str, &jsonValue{kind: jsonBool, b: true})
		}
		if extra != nil {
			props = extra
		}
	}
	addl := s.get("additionalProperties")
	if props == nil && addl == nil {
		return c.prim("object"), nil
	}
	type part struct {
		kv   string
		kind byte // 'r' required, 'o' optional, '*' repeated additional
	}
	var parts []part
	var keys []string
	sp := c.prim("space")
	if props != nil {
		// Required properties first, then optional ones, each group in
		// schema order (as llama.cpp does).
		for pass := 0; pass < 2; pass++ {
			for i, k := range props.keys {
				if required[k] != (pass == 0) {
					continue
				}
				stem := name + "-" + k
				e, err := c.expr(props.vals[i], stem, pathJoin(path, "properties", k))
				if err != nil {
					return "", err
				}
				kv := c.addRule(stem+"-kv", gbnfLiteral(jsonQuote(k))+" "+sp+" \":\" "+sp+" "+e)
				kind := byte('o')
				if pass == 0 {
					kind = 'r'
				}
				parts = append(parts, part{kv, kind})
			}
		}
		keys = props.keys
	}
	if addl != nil && !(addl.kind == jsonBool && !addl.b) {
		var val string
		if addl.kind == jsonBool || addl.kind == jsonObject && len(addl.keys) == 0 {
			val = c.prim("value")
		} else {
			var err error
			if val, err = c.expr(addl, name+"-additional", pathJoin(path, "additionalProperties")); err != nil {
				return "", err
			}
		}
		key := c.prim("string")
		if len(keys) > 0 {
			key = c.notKeys(name+"-additional-k", keys)
		}
		parts = append(parts, part{c.addRule(name+"-additional-kv", key+" \":\" "+sp+" "+val), '*'})
	}
	// first(i): parts i.. with nothing written yet; rest(i): after a member.
	comma := `"," ` + sp + " "
	rest := ""
	first := ""
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		var r, f string
		switch p.kind {
		case 'r':
			r = comma + p.kv + " " + rest
			f = p.kv + " " + rest
		case 'o':
			r = "(" + comma + p.kv + ")? " + rest
			f = p.kv + " " + rest
			if first != "" {
				f = "(" + f + " | " + first + ")"
			} else {
				f = "(" + f + ")?"
			}
		case '*':
			r = "(" + comma + p.kv + ")*"
			f = "(" + p.kv + " " + r + ")?"
		}
		if i > 0 && len(r) > 80 {
			r = c.addRule(fmt.Sprintf("%s-rest%d", name, i), r)
		}
		if i > 0 && len(f) > 80 {
			f = c.addRule(fmt.Sprintf("%s-first%d", name, i), f)
		}
		rest, first = strings.TrimSpace(r), strings.TrimSpace(f)
	}
	return `"{" ` + sp + " " + first + ` "}" ` + sp, nil
}

// notKeys returns a rule for a JSON string (with trailing space) that is
// none of keys: a trie of the keys where every branch may leave the trie.
func (c *schemaConverter) notKeys(name string, keys []string) string {
	type trieN struct {
		children map[rune]*trieN
		order    []rune
		end      bool
	}
	root := &trieN{children: map[rune]*trieN{}}
	for _, k := range keys {
		q := jsonQuote(k)
		n := root
		for _, r := range q[1 : len(q)-1] {
			ch := n.children[r]
			if ch == nil {
				ch = &trieN{children: map[rune]*trieN{}}
				n.children[r] = ch
				n.order = append(n.order, r)
			}
			n = ch
		}
		n.end = true
	}
	char := c.prim("char")
	var walk func(n *trieN) string
	walk = func(n *trieN) string {
		var alts []string
		excl := `"\\\x7F\x00-\x1F`
		for _, r := range n.order {
			alts = append(alts, classLiteral(r)+" "+walk(n.children[r]))
			excl += classEscape(r)
		}
		alts = append(alts, "[^"+excl+"] "+char+"*")
		if _, ok := n.children['\\']; !ok {
			alts = append(alts, `[\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) `+char+"*")
		}
		out := "(" + strings.Join(alts, " | ") + ")"
		if !n.end {
			out += "?"
		}
		return out
	}
	// The root itself: the empty key is allowed unless it is one of keys.
	return c.addRule(name, `"\"" `+walk(root)+` "\"" `+c.prim("space"))
}

func classEscape(r rune) string {
	switch {
	case r == '\\' || r == ']' || r == '-' || r == '^' || r == '[' || r == '"':
		return `\` + string(r)
	case r < 0x20 || r == 0x7F:
		return fmt.Sprintf(`\x%02X`, r)
	case r > 0xFFFF:
		return fmt.Sprintf(`\U%08X`, r)
	case r > 0x7F:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return string(r)
}

func classLiteral(r rune) string { return "[" + classEscape(r) + "]" }

func (c *schemaConverter) array(s *jsonValue, name, path string) (string, error) {
	sp := c.prim("space")
	if pre := s.get("prefixItems"); pre != nil {
		if pre.kind != jsonArray {
			return "", schemaErr(pathJoin(path, "prefixItems"), "prefixItems must be an array")
		}
		if it := s.get("items"); it != nil && !(it.kind == jsonBool && !it.b) {
			return "", schemaErr(pathJoin(path, "items"), "items beside prefixItems is not supported (use items: false)")
		}
		var parts []string
		for i, p := range pre.arr {
			e, err := c.expr(p, fmt.Sprintf("%s-%d", name, i), pathJoin(path, "prefixItems", strconv.Itoa(i)))
			if err != nil {
				return "", err
			}
			if i > 0 {
				parts = append(parts, `"," `+sp)
			}
			parts = append(parts, e)
		}
		return `"[" ` + sp + " " + strings.Join(parts, " ") + ` "]" ` + sp, nil
	}
	var item string
	if it := s.get("items"); it == nil {
		item = c.prim("value")
	} else {
		if it.kind == jsonArray {
			return "", schemaErr(pathJoin(path, "items"), "items as an array (draft-04 tuples) is not supported; use prefixItems")
		}
		e, err := c.expr(it, name+"-item", pathJoin(path, "items"))
		if err != nil {
			return "", err
		}
		item = c.addRule(name+"-item", e)
	}
	lo, hi, err := countRange(s, "minItems", "maxItems", path)
	if err != nil {
		return "", err
	}
	var list string
	switch {
	case hi == 0:
		list = ""
	case lo == 0:
		list = "(" + item + ` ("," ` + sp + " " + item + ")" + repeatSuffix(0, hi-1) + ")?"
	default:
		list = item + ` ("," ` + sp + " " + item + ")" + repeatSuffix(lo-1, hi-1)
	}
	return `"[" ` + sp + " " + list + ` "]" ` + sp, nil
}

// repeatSuffix returns the GBNF repetition for lo..hi (hi < 0: unbounded).
func repeatSuffix(lo, hi int) string {
	switch {
	case hi < 0 && lo == 0:
		return "*"
	case hi < 0 && lo == 1:
		return "+"
	case hi < 0:
		return fmt.Sprintf("{%d,}", lo)
	case lo == hi:
		return fmt.Sprintf("{%d}", lo)
	}
	return fmt.Sprintf("{%d,%d}", lo, hi)
}

// countRange reads a minX/maxX pair of non-negative integers; hi < 0 means
// no maximum.
func countRange(s *jsonValue, minKey, maxKey, path string) (lo, hi int, err error) {
	hi = -1
	for _, k := range []string{minKey, maxKey} {
		v := s.get(k)
		if v == nil {
			continue
		}
		n, ok := jsonInt(v)
		if !ok || n < 0 {
			return 0, 0, schemaErr(pathJoin(path, k), "%s must be a non-negative integer", k)
		}
		if n > maxRepeat {
			return 0, 0, schemaErr(pathJoin(path, k), "%s over %d is not supported", k, maxRepeat)
		}
		if k == minKey {
			lo = int(n)
		} else {
			hi = int(n)
		}
	}
	if hi >= 0 && hi < lo {
		return 0, 0, schemaErr(pathJoin(path, maxKey), "%s %d is below %s %d", maxKey, hi, minKey, lo)
	}
	return lo, hi, nil
}

func jsonInt(v *jsonValue) (int64, bool) {
	if v.kind != jsonNumber {
		return 0, false
	}
	f, err := v.num.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

func (c *schemaConverter) stringExpr(s *jsonValue, name, path string) (string, error) {
	sp := c.prim("space")
	if p := s.get("pattern"); p != nil {
		if p.kind != jsonString {
			return "", schemaErr(pathJoin(path, "pattern"), "pattern must be a string")
		}
		if s.get("minLength") != nil || s.get("maxLength") != nil {
			return "", schemaErr(path, "pattern together with minLength/maxLength is not supported")
		}
		e, err := c.pattern(p.str, pathJoin(path, "pattern"))
		if err != nil {
			return "", err
		}
		return `"\"" ` + c.addRule(name+"-pattern", e) + ` "\"" ` + sp, nil
	}
	if f := s.get("format"); f != nil && f.kind == jsonString && s.get("minLength") == nil && s.get("maxLength") == nil {
		switch f.str {
		case "date", "time", "date-time", "uuid":
			return c.prim(f.str + "-string"), nil
		}
	}
	lo, hi, err := countRange(s, "minLength", "maxLength", path)
	if err != nil {
		return "", err
	}
	if lo == 0 && hi < 0 {
		return c.prim("string"), nil
	}
	return `"\"" ` + c.prim("char") + repeatSuffix(lo, hi) + ` "\"" ` + sp, nil
}

// digitRange returns a GBNF sequence for the digit strings of equal length
// from a to b inclusive (a <= b).
func digitRange(a, b string) string {
	if a == b {
		return gbnfLiteral(a)
	}
	if len(a) == 1 {
		return "[" + a + "-" + b + "]"
	}
	if a[0] == b[0] {
		return gbnfLiteral(a[:1]) + " (" + digitRange(a[1:], b[1:]) + ")"
	}
	n := len(a) - 1
	var alts []string
	lowAll := a[1:] == strings.Repeat("0", n)
	highAll := b[1:] == strings.Repeat("9", n)
	from, to := a[0], b[0]
	if !lowAll {
		alts = append(alts, gbnfLiteral(a[:1])+" ("+digitRange(a[1:], strings.Repeat("9", n))+")")
		from++
	}
	if !highAll {
		to--
	}
	if from <= to {
		cls := "[" + string(from) + "-" + string(to) + "]"
		if from == to {
			cls = "[" + string(from) + "]"
		}
		alts = append(alts, cls+" [0-9]"+repeatSuffix(n, n))
	}
	if !highAll {
		alts = append(alts, gbnfLiteral(b[:1])+" ("+digitRange(strings.Repeat("0", n), b[1:])+")")
	}
	return strings.Join(alts, " | ")
}
