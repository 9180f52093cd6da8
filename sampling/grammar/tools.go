package grammar

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ToolFormat selects how a model family writes tool (function) calls.
type ToolFormat int

// The wrapper formats ToolCallGrammar can produce. In each, a call object
// is {"name": NAME, "arguments": ARGS} (Llama 3: "parameters") with ARGS
// matching the function's parameters schema.
const (
	// ToolFormatHermes is Hermes 2 Pro / Qwen 2.5 / Qwen 3:
	//   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
	// Several calls are separated by "\n".
	ToolFormatHermes ToolFormat = iota
	// ToolFormatLlama3 is Llama 3.1-3.3 JSON tool calling:
	//   {"name": ..., "parameters": {...}}
	// Several calls are separated by ";" and optional space.
	ToolFormatLlama3
	// ToolFormatMistral is Mistral's [TOOL_CALLS] prefix followed by a JSON
	// array of call objects. "[TOOL_CALLS]" is a control token in Mistral
	// vocabularies: give it its text in the Vocab so the grammar can emit it.
	ToolFormatMistral
	// ToolFormatGeneric is the model-neutral JSON form (as llama.cpp's
	// generic handler): {"tool_call": CALL} for one call, {"tool_calls":
	// [CALL, ...]} when several are allowed.
	ToolFormatGeneric
)

// String returns the format's name as ParseToolFormat accepts it.
func (f ToolFormat) String() string {
	switch f {
	case ToolFormatHermes:
		return "hermes"
	case ToolFormatLlama3:
		return "llama3"
	case ToolFormatMistral:
		return "mistral"
	case ToolFormatGeneric:
		return "generic"
	}
	return "ToolFormat(" + strconv.Itoa(int(f)) + ")"
}

// ParseToolFormat returns the format named s ("hermes", "qwen", "llama3",
// "mistral", "generic").
func ParseToolFormat(s string) (ToolFormat, error) {
	switch strings.ToLower(s) {
	case "hermes", "qwen":
		return ToolFormatHermes, nil
	case "llama3", "llama":
		return ToolFormatLlama3, nil
	case "mistral":
		return ToolFormatMistral, nil
	case "generic", "":
		return ToolFormatGeneric, nil
	}
	return 0, fmt.Errorf("grammar: unknown tool-call format %q", s)
}

// ToolFunction is one callable function: its name and the JSON Schema of
// its arguments (nil or empty: any JSON object).
type ToolFunction struct {
	Name       string
	Parameters json.RawMessage
}

// ToolCallOptions says which calls the grammar allows. The zero value
// allows exactly one call, to any of the functions, in the Hermes format.
type ToolCallOptions struct {
	Format ToolFormat
	// Function forces calls to the function of this name; "" allows any.
	Function string
	// Parallel allows one or more calls; otherwise exactly one.
	Parallel bool
	// Compact allows no whitespace between JSON tokens (the wrappers'
	// own newlines stay). A forced call (tool_choice "required" or a
	// named function) uses it, so that a model cannot spend its whole
	// budget on the whitespace JSON allows and never finish the call.
	Compact bool
	// Budget bounds the compile (the parameters schemas converted and the
	// grammar checked); the zero Budget is the default.
	Budget Budget
	// Syntax, when set, is the family's own call syntax (Format is then
	// unused).
	Syntax *Syntax
	// ReasoningStart and ReasoningEnd, when set, allow the model's
	// reasoning between them before the calls (any text without
	// ReasoningEnd); with ReasoningOpen the prompt already opened it, so
	// the answer starts inside it and must close it.
	ReasoningStart, ReasoningEnd string
	ReasoningOpen                bool
}

// usesArgs reports whether syn writes the arguments as one JSON object.
func (syn *Syntax) usesArgs() bool {
	for _, p := range syn.Call {
		if p.Kind == PartArgs {
			return true
		}
	}
	return false
}

// ToolCallGrammar returns GBNF (start rule "root") for the tool calls the
// options allow over funcs. The output must be a call (tool_choice
// "required" or a named function); for "auto", where the model may answer
// in prose instead, apply the grammar lazily from ToolCallTrigger on.
// Errors name the function; a parameters schema the converter cannot honour
// gives an error wrapping *SchemaError.
func ToolCallGrammar(funcs []ToolFunction, opts ToolCallOptions) (string, error) {
	if len(funcs) == 0 {
		return "", fmt.Errorf("grammar: ToolCallGrammar: no functions")
	}
	argsKey := "arguments"
	if opts.Format == ToolFormatLlama3 {
		argsKey = "parameters"
	}
	c := newSchemaConverter(nil)
	c.compact = opts.Compact
	c.work = opts.Budget.start()
	sp := c.prim("space")
	seen := map[string]bool{}
	var calls []string
	for i, f := range funcs {
		if f.Name == "" {
			return "", fmt.Errorf("grammar: ToolCallGrammar: function %d has no name", i)
		}
		if seen[f.Name] {
			return "", fmt.Errorf("grammar: ToolCallGrammar: function %q listed twice", f.Name)
		}
		seen[f.Name] = true
		if opts.Function != "" && f.Name != opts.Function {
			continue
		}
		params := f.Parameters
		if len(strings.TrimSpace(string(params))) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object"}`)
		}
		root, err := parseJSONValue(params)
		if err != nil {
			return "", fmt.Errorf("grammar: function %q parameters: %w", f.Name, &SchemaError{Path: "#", Msg: "invalid JSON: " + err.Error()})
		}
		stem := "fn-" + f.Name
		c.root = root
		c.scope = strconv.Itoa(i) + ":"
		var args string
		if opts.Syntax == nil || opts.Syntax.usesArgs() {
			a, err := c.expr(root, stem+"-args", "#")
			if err != nil {
				return "", fmt.Errorf("grammar: function %q parameters: %w", f.Name, err)
			}
			args = c.addRule(stem+"-args", a)
		}
		if opts.Syntax != nil {
			call, err := c.syntaxCall(opts.Syntax, f.Name, args, func() (string, error) {
				return c.xmlParams(opts.Syntax, root, stem, "#")
			})
			if err != nil {
				return "", fmt.Errorf("grammar: function %q parameters: %w", f.Name, err)
			}
			calls = append(calls, c.addRule(stem+"-call", call))
			continue
		}
		call := `"{" ` + sp + " " + gbnfLiteral(`"name"`) + " " + sp + ` ":" ` + sp + " " +
			gbnfLiteral(jsonQuote(f.Name)) + " " + sp + ` "," ` + sp + " " +
			gbnfLiteral(jsonQuote(argsKey)) + " " + sp + ` ":" ` + sp + " " + args + ` "}" ` + sp
		calls = append(calls, c.addRule(stem+"-call", call))
	}
	if len(calls) == 0 {
		return "", fmt.Errorf("grammar: ToolCallGrammar: forced function %q is not among the functions", opts.Function)
	}
	c.setRule("tool-call", strings.Join(calls, " | "))
	var root string
	switch {
	case opts.Syntax != nil:
		root = c.syntaxRoot(opts.Syntax, opts.Parallel)
	case opts.Format == ToolFormatHermes:
		c.setRule("tool-call-block", `"<tool_call>\n" tool-call "\n</tool_call>"`)
		root = "tool-call-block"
		if opts.Parallel {
			root += ` ("\n" tool-call-block)*`
		}
	case opts.Format == ToolFormatLlama3:
		root = "tool-call"
		if opts.Parallel {
			root += ` (";" ` + sp + " tool-call)*"
		}
	case opts.Format == ToolFormatMistral:
		root = `"[TOOL_CALLS]" "[" ` + sp + " tool-call"
		if opts.Parallel {
			root += ` ("," ` + sp + " tool-call)*"
		}
		root += ` "]"`
	case opts.Format == ToolFormatGeneric:
		if opts.Parallel {
			root = `"{" ` + sp + ` "\"tool_calls\"" ` + sp + ` ":" ` + sp + ` "[" ` + sp +
				` tool-call ("," ` + sp + ` tool-call)* "]" ` + sp + ` "}" ` + sp
		} else {
			root = `"{" ` + sp + ` "\"tool_call\"" ` + sp + ` ":" ` + sp + ` tool-call "}" ` + sp
		}
	default:
		return "", fmt.Errorf("grammar: ToolCallGrammar: unknown format %v", opts.Format)
	}
	if opts.ReasoningEnd != "" {
		// The model's reasoning first, as its family writes it.
		think := c.notContaining("reasoning-text", opts.ReasoningEnd) + " " + gbnfLiteral(opts.ReasoningEnd) + " " + `[ \t\n]*`
		if !opts.ReasoningOpen {
			think = "(" + gbnfLiteral(opts.ReasoningStart) + " " + think + ")?"
		}
		c.setRule("reasoning", think)
		root = "reasoning (" + root + ")"
	}
	c.setRule("root", root)
	src := c.format()
	if err := c.check(src, "#"); err != nil {
		return "", fmt.Errorf("grammar: ToolCallGrammar: %w", err)
	}
	return src, nil
}

// ToolCallTrigger returns the text that starts a tool call in format f: a
// prefix of the calls ToolCallGrammar accepts. For tool_choice "auto",
// generate unconstrained until the output contains the trigger, then
// create the matcher, feed it the output from the trigger on with
// AcceptBytes, and constrain the rest (llama.cpp's lazy grammar).
func ToolCallTrigger(f ToolFormat) string {
	switch f {
	case ToolFormatHermes:
		return "<tool_call>"
	case ToolFormatLlama3:
		return `{"name":`
	case ToolFormatMistral:
		return "[TOOL_CALLS]"
	}
	return `{"tool_call`
}
