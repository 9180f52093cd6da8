package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

var testTools = []ToolFunction{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{
		"city":{"type":"string","minLength":1,"maxLength":20},"unit":{"enum":["celsius","fahrenheit"]},
		"days":{"type":"integer","minimum":1,"maximum":14}},"required":["city"]}`)},
	{Name: "search", Parameters: json.RawMessage(`{"type":"object","properties":{
		"query":{"type":"string"},"filters":{"type":"array","items":{"$ref":"#/$defs/filter"},"maxItems":3}},
		"required":["query"],"$defs":{"filter":{"type":"object","properties":{"field":{"type":"string"},
		"value":{"type":["string","number"]}},"required":["field","value"]}}}`)},
	{Name: "now"},
}

// splitCalls undoes a format's wrapper and returns the call objects.
func splitCalls(t *testing.T, f ToolFormat, out string) []map[string]json.RawMessage {
	t.Helper()
	var raws []string
	switch f {
	case ToolFormatHermes:
		for _, block := range strings.Split(out, "</tool_call>") {
			block = strings.TrimPrefix(block, "\n")
			if block == "" {
				continue
			}
			if !strings.HasPrefix(block, "<tool_call>\n") {
				t.Fatalf("hermes block %q lacks <tool_call>", block)
			}
			raws = append(raws, strings.TrimPrefix(block, "<tool_call>\n"))
		}
	case ToolFormatLlama3:
		dec := json.NewDecoder(strings.NewReader(out))
		for {
			var m json.RawMessage
			if err := dec.Decode(&m); err != nil {
				break
			}
			raws = append(raws, string(m))
			rest := strings.TrimLeft(out[dec.InputOffset():], " \t\n")
			rest = strings.TrimPrefix(rest, ";")
			out = rest
			dec = json.NewDecoder(strings.NewReader(out))
		}
	case ToolFormatMistral:
		if !strings.HasPrefix(out, "[TOOL_CALLS]") {
			t.Fatalf("mistral output %q lacks [TOOL_CALLS]", out)
		}
		var arr []json.RawMessage
		if err := json.Unmarshal([]byte(strings.TrimPrefix(out, "[TOOL_CALLS]")), &arr); err != nil {
			t.Fatalf("mistral output %q: %v", out, err)
		}
		for _, a := range arr {
			raws = append(raws, string(a))
		}
	case ToolFormatGeneric:
		var w struct {
			One  json.RawMessage   `json:"tool_call"`
			Many []json.RawMessage `json:"tool_calls"`
		}
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatalf("generic output %q: %v", out, err)
		}
		if w.One != nil {
			raws = append(raws, string(w.One))
		}
		for _, m := range w.Many {
			raws = append(raws, string(m))
		}
	}
	var calls []map[string]json.RawMessage
	for _, r := range raws {
		var call map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r), &call); err != nil {
			t.Fatalf("call %q in %q: %v", r, out, err)
		}
		calls = append(calls, call)
	}
	return calls
}

func TestToolCallGeneration(t *testing.T) {
	v, err := genVocab()
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]string{}
	for _, f := range testTools {
		s := string(f.Parameters)
		if s == "" {
			s = `{"type":"object"}`
		}
		schemas[f.Name] = s
	}
	for _, format := range []ToolFormat{ToolFormatHermes, ToolFormatLlama3, ToolFormatMistral, ToolFormatGeneric} {
		for _, opts := range []ToolCallOptions{
			{Format: format},
			{Format: format, Parallel: true},
			{Format: format, Function: "search"},
		} {
			name := format.String()
			if opts.Parallel {
				name += "/parallel"
			}
			if opts.Function != "" {
				name += "/forced"
			}
			t.Run(name, func(t *testing.T) {
				src, err := ToolCallGrammar(testTools, opts)
				if err != nil {
					t.Fatal(err)
				}
				g, err := Parse(src, "")
				if err != nil {
					t.Fatalf("Parse(generated) = %v\n%s", err, src)
				}
				argsKey := "arguments"
				if format == ToolFormatLlama3 {
					argsKey = "parameters"
				}
				sawMany := false
				for seed := uint64(0); seed < 12; seed++ {
					out := generateN(t, g, v, rand.New(rand.NewPCG(seed, 3)), 600)
					calls := splitCalls(t, format, out)
					if len(calls) == 0 || (!opts.Parallel && len(calls) != 1) {
						t.Fatalf("seed %d: %d calls in %q, want %s", seed, len(calls), out, map[bool]string{true: "at least 1", false: "1"}[opts.Parallel])
					}
					sawMany = sawMany || len(calls) > 1
					for _, call := range calls {
						var fn string
						if err := json.Unmarshal(call["name"], &fn); err != nil {
							t.Fatalf("seed %d: name in %q: %v", seed, out, err)
						}
						schema, ok := schemas[fn]
						if !ok || opts.Function != "" && fn != opts.Function {
							t.Fatalf("seed %d: call to %q in %q, want one of the allowed functions", seed, fn, out)
						}
						if err := validate(compileSchema(t, schema), string(call[argsKey])); err != nil {
							t.Errorf("seed %d: %s arguments %s do not validate: %v", seed, fn, call[argsKey], err)
						}
					}
				}
				if opts.Parallel && !sawMany {
					t.Errorf("no seed produced several calls with Parallel set")
				}
			})
		}
	}
}

func TestToolCallGrammarMatch(t *testing.T) {
	tests := []matchCase{
		{"hermes", ToolCallOptions{Format: ToolFormatHermes},
			[]string{"<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
				"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3}}\n</tool_call>"},
			[]string{"<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",
				"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>",
				"<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"}},
		{"hermes parallel", ToolCallOptions{Format: ToolFormatHermes, Parallel: true},
			[]string{"<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}\n</tool_call>"},
			[]string{""}},
		{"llama3 forced", ToolCallOptions{Format: ToolFormatLlama3, Function: "get_weather"},
			[]string{`{"name": "get_weather", "parameters": {"city": "Rome", "unit": "celsius"}}`},
			[]string{`{"name": "now", "parameters": {}}`, `{"name": "get_weather", "arguments": {"city": "Rome"}}`,
				`{"name": "get_weather", "parameters": {"city": "Rome", "days": 15}}`}},
		{"mistral parallel", ToolCallOptions{Format: ToolFormatMistral, Parallel: true},
			[]string{`[TOOL_CALLS][{"name": "now", "arguments": {}}, {"name": "search", "arguments": {"query": "x", "filters": [{"field": "a", "value": 1}]}}]`},
			[]string{`[TOOL_CALLS][]`, `[{"name": "now", "arguments": {}}]`}},
		{"generic", ToolCallOptions{Format: ToolFormatGeneric},
			[]string{`{"tool_call": {"name": "now", "arguments": {"x": 1}}}`},
			[]string{`{"tool_calls": [{"name": "now", "arguments": {}}]}`}},
		{"hermes compact", ToolCallOptions{Format: ToolFormatHermes, Compact: true},
			[]string{"<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\",\"days\":3}}\n</tool_call>"},
			[]string{"<tool_call>\n{\"name\": \"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>",
				"<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\" }}\n</tool_call>",
				"<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\n\"city\":\"Oslo\"}}\n</tool_call>"}},
		{"generic compact forced", ToolCallOptions{Format: ToolFormatGeneric, Function: "search", Compact: true},
			[]string{`{"tool_call":{"name":"search","arguments":{"query":"x","filters":[{"field":"a","value":1}]}}}`},
			[]string{`{"tool_call": {"name":"search","arguments":{"query":"x"}}}`,
				`{"tool_call":{"name":"search","arguments":{"query":"x","filters":[ {"field":"a","value":1}]}}}`}},
		{"generic parallel", ToolCallOptions{Format: ToolFormatGeneric, Parallel: true},
			[]string{`{"tool_calls": [{"name": "now", "arguments": {}}, {"name": "now", "arguments": {}}]}`},
			[]string{`{"tool_calls": []}`, `{"tool_call": {"name": "now", "arguments": {}}}`}},
	}
	runMatchCases(t, testTools, tests)
}

func TestToolCallGrammarErrors(t *testing.T) {
	tests := []struct {
		name  string
		funcs []ToolFunction
		opts  ToolCallOptions
		msg   string
	}{
		{"none", nil, ToolCallOptions{}, "no functions"},
		{"unknown forced", testTools, ToolCallOptions{Function: "fly"}, `"fly" is not among`},
		{"duplicate", []ToolFunction{{Name: "a"}, {Name: "a"}}, ToolCallOptions{}, "listed twice"},
		{"unnamed", []ToolFunction{{}}, ToolCallOptions{}, "no name"},
		{"bad schema", []ToolFunction{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"not":{}}}}`)}},
			ToolCallOptions{}, `function "f" parameters: json schema at #/properties/x/not`},
		{"bad format", testTools, ToolCallOptions{Format: 9}, "unknown format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ToolCallGrammar(tt.funcs, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("ToolCallGrammar() = %v, want an error containing %q", err, tt.msg)
			}
		})
	}
}

func TestToolCallTrigger(t *testing.T) {
	for _, f := range []ToolFormat{ToolFormatHermes, ToolFormatLlama3, ToolFormatMistral, ToolFormatGeneric} {
		for _, parallel := range []bool{false, true} {
			src, err := ToolCallGrammar(testTools, ToolCallOptions{Format: f, Parallel: parallel})
			if err != nil {
				t.Fatal(err)
			}
			g, err := Parse(src, "")
			if err != nil {
				t.Fatal(err)
			}
			m := NewMatcher(g, nil)
			trigger := ToolCallTrigger(f)
			if err := m.AcceptBytes([]byte(trigger)); err != nil {
				t.Errorf("%v parallel %v: AcceptBytes(ToolCallTrigger() = %q) = %v, want nil", f, parallel, trigger, err)
			}
			if m.IsComplete() {
				t.Errorf("%v: IsComplete() after the trigger = true, want false", f)
			}
		}
	}
}

// TestToolCallSyntax: calls in a family's own syntax, XML-like parameters
// (raw text for string parameters, JSON for the others, required ones
// always, optional ones in the schema's order) or a JSON arguments object
// in the family's markers, with the model's reasoning allowed before them.
func TestToolCallSyntax(t *testing.T) {
	xml := &Syntax{Open: "<tool_call>\n", Close: "</tool_call>", Sep: "<tool_call>\n",
		Call:      []Part{Text("<function="), Name, Text(">\n"), Params, Text("</function>\n")},
		ParamOpen: "<parameter=", ParamMid: ">\n", ParamClose: "\n</parameter>\n"}
	markers := &Syntax{Open: "<|calls|>", Close: "<|end|>", List: true, Call: JSONCall("name", "arguments")}
	idJSON := &Syntax{Open: "<A>", Close: "</A>", List: true, Call: JSONCall("tool_name", "parameters", [2]string{"tool_call_id", ""})}
	dsml := &Syntax{Call: []Part{Text(`<invoke name="`), Name, Text("\">\n"), Params, Text("</invoke>\n")},
		ParamOpen: `<parameter name="`, ParamMid: `" string="true">`, ParamMidJSON: `" string="false">`, ParamClose: "</parameter>\n"}
	keyed := &Syntax{Call: []Part{Text(`<invoke name="`), Name, Text(`">`), Params, Text("</invoke>")},
		ParamOpen: "<", ParamMid: ">", ParamClose: "</" + KeyPlaceholder + ">"}
	tests := []matchCase{
		{"closed by the key", ToolCallOptions{Syntax: keyed, Function: "get_weather"},
			[]string{`<invoke name="get_weather"><city>Oslo</city><days>2</days></invoke>`, `<invoke name="get_weather"><city>San José</city><unit>celsius</unit></invoke>`},
			[]string{`<invoke name="get_weather"><city>Oslo</days></invoke>`, `<invoke name="get_weather"><city>a</city> b</city></invoke>`}},
		{"keyed, free object", ToolCallOptions{Syntax: keyed, Function: "now"},
			[]string{`<invoke name="now"></invoke>`}, []string{`<invoke name="now"><a>1</a></invoke>`}},
		{"xml", ToolCallOptions{Syntax: xml},
			[]string{"<tool_call>\n<function=now>\n</function>\n</tool_call>",
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nSan José\n</parameter>\n</function>\n</tool_call>",
				"<tool_call>\n<function=search>\n<parameter=query>\na <b> </parameter </para\nx\n</parameter>\n</function>\n</tool_call>",
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"},
			[]string{"<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
				"<tool_call>\n<function=get_weather>\n<parameter=city>\n\n</parameter>\n</function>\n</tool_call>",
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=unit>\nkelvin\n</parameter>\n</function>\n</tool_call>",
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n15\n</parameter>\n</function>\n</tool_call>",
				"<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>",
				"<tool_call>\n<function=nope>\n</function>\n</tool_call>"}},
		{"xml parallel", ToolCallOptions{Syntax: xml, Parallel: true},
			[]string{"<tool_call>\n<function=now>\n</function>\n<tool_call>\n<function=now>\n</function>\n</tool_call>"}, nil},
		{"json in markers", ToolCallOptions{Syntax: markers, Parallel: true},
			[]string{`<|calls|>[{"name": "now", "arguments": {}}, {"name":"get_weather","arguments":{"city":"x"}}]<|end|>`},
			[]string{`<|calls|>[]<|end|>`, `<|calls|>[{"name": "get_weather", "arguments": {}}]<|end|>`}},
		{"json with an id", ToolCallOptions{Syntax: idJSON, Function: "now"},
			[]string{`<A>[{"tool_call_id": "0", "tool_name": "now", "parameters": {}}]</A>`},
			[]string{`<A>[{"tool_call_id": "x", "tool_name": "now", "parameters": {}}]</A>`, `<A>[{"tool_name": "now", "parameters": {}}]</A>`}},
		{"attributes by type", ToolCallOptions{Syntax: dsml, Function: "get_weather"},
			[]string{"<invoke name=\"get_weather\">\n<parameter name=\"city\" string=\"true\">Oslo</parameter>\n<parameter name=\"days\" string=\"false\">2</parameter>\n</invoke>\n"},
			[]string{"<invoke name=\"get_weather\">\n<parameter name=\"city\" string=\"false\">\"Oslo\"</parameter>\n</invoke>\n"}},
		{"reasoning first", ToolCallOptions{Syntax: markers, ReasoningStart: "<think>", ReasoningEnd: "</think>"},
			[]string{`<|calls|>[{"name": "now", "arguments": {}}]<|end|>`, "<think>a < b, </thin</think>\n" + `<|calls|>[{"name": "now", "arguments": {}}]<|end|>`},
			[]string{"<think>a</think>b</think>" + `<|calls|>[{"name": "now", "arguments": {}}]<|end|>`}},
		{"reasoning open", ToolCallOptions{Syntax: markers, ReasoningStart: "<think>", ReasoningEnd: "</think>", ReasoningOpen: true},
			[]string{"so</think>" + `<|calls|>[{"name": "now", "arguments": {}}]<|end|>`},
			[]string{`<|calls|>[{"name": "now", "arguments": {}}]<|end|>`}},
	}
	runMatchCases(t, testTools, tests)
}

// TestToolCallSyntaxSeparators: parameters with separators between them
// (LFM2's Python arguments, Gemma 4's notation), optional ones left out
// without a stray separator.
func TestToolCallSyntaxSeparators(t *testing.T) {
	funcs := []ToolFunction{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":3},"c":{"type":"array"}}}`)}}
	py := &Syntax{Call: []Part{Name, Text("("), Params, Text(")")}, ParamMid: "=", ParamSep: ", ", Values: ValuesJSON}
	gemma := &Syntax{Call: []Part{Text("call:"), Name, Text("{"), Params, Text("}")}, ParamMid: ":", ParamSep: ",", Values: ValuesGemma}
	runMatchCases(t, funcs, []matchCase{
		{"python", ToolCallOptions{Syntax: py}, []string{`f()`, `f(a=1)`, `f(b="xyz")`, `f(a=1, b="x")`, `f(a=1, c=[1, {"k": 2}])`, `f(b="", c=[])`},
			[]string{`f(, b="x")`, `f(b="x", a=1)`, `f(a=1,)`, `f(b="long")`, `f(b=x)`}},
		{"gemma", ToolCallOptions{Syntax: gemma}, []string{`call:f{}`, `call:f{a:1}`, `call:f{b:<|"|>x<|"|>}`, `call:f{a:2,c:[<|"|>s<|"|>,{k:1}]}`},
			[]string{`call:f{,a:1}`, `call:f{b:"x"}`, `call:f{b:<|"|>long<|"|>}`, `call:f{c:1}`}},
	})
}

// checkMatches parses the grammar src and checks that it matches every
// string of accept and none of reject.
func checkMatches(t *testing.T, src string, accept, reject []string) {
	t.Helper()
	g, err := Parse(src, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	for _, s := range accept {
		if !g.Match(s) {
			t.Errorf("Match(%q) = false, want true\n%s", s, src)
		}
	}
	for _, s := range reject {
		if g.Match(s) {
			t.Errorf("Match(%q) = true, want false", s)
		}
	}
}

// matchCase is a grammar of the options and strings it must and must not
// match.
type matchCase struct {
	name           string
	opts           ToolCallOptions
	accept, reject []string
}

// runMatchCases checks each case's grammar over funcs.
func runMatchCases(t *testing.T, funcs []ToolFunction, cases []matchCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			src, err := ToolCallGrammar(funcs, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkMatches(t, src, tt.accept, tt.reject)
		})
	}
}
