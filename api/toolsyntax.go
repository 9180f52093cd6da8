package api

import (
	"strings"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// The call syntax of each family whose calls are none of the grammar's
// ToolFormat wrappers: a grammar that constrains a call (tool_choice
// "required" or a named function, and "auto" from the call's first marker
// on) writes it as the family's model writes it and as its parser reads it
// (toolfamily.go, toolformats.go), its arguments bound by the tool's
// schema (Gemma 4's nested lists and mappings, in its own notation, are
// not).

// jsonListCall is a call object {"name": ..., "arguments": {...}} in a JSON list.
var jsonListCall = grammar.JSONCall("name", "arguments")

// callSyntax returns the syntax of the family's calls as the template src
// shows them, nil where the family has none (ToolFormat or generic).
func (f toolFamily) callSyntax(src string) *grammar.Syntax {
	T := grammar.Text
	switch f {
	case familyQwen3Coder:
		return &grammar.Syntax{Sep: "\n",
			Call:      []grammar.Part{T("<tool_call>\n<function="), grammar.Name, T(">\n"), grammar.Params, T("</function>\n</tool_call>")},
			ParamOpen: "<parameter=", ParamMid: ">\n", ParamClose: "\n</parameter>\n"}
	case familySeedOSS:
		return &grammar.Syntax{Sep: "\n",
			Call:      []grammar.Part{T("<seed:tool_call>\n<function="), grammar.Name, T(">\n"), grammar.Params, T("</function>\n</seed:tool_call>")},
			ParamOpen: "<parameter=", ParamMid: ">", ParamClose: "</parameter>\n"}
	case familyGLM, familyLing:
		return &grammar.Syntax{Sep: "\n",
			Call:      []grammar.Part{T("<tool_call>"), grammar.Name, T("\n"), grammar.Params, T("</tool_call>")},
			ParamOpen: "<arg_key>", ParamMid: "</arg_key>\n<arg_value>", ParamClose: "</arg_value>\n"}
	case familyMiniMax:
		return &grammar.Syntax{Open: "<minimax:tool_call>\n", Close: "</minimax:tool_call>",
			Call:      []grammar.Part{T(`<invoke name="`), grammar.Name, T("\">\n"), grammar.Params, T("</invoke>\n")},
			ParamOpen: `<parameter name="`, ParamMid: `">`, ParamClose: "</parameter>\n"}
	case familyDSML:
		block := "function_calls"
		if strings.Contains(src, "｜DSML｜tool_calls") {
			block = "tool_calls"
		}
		return &grammar.Syntax{Open: "<｜DSML｜" + block + ">\n", Close: "</｜DSML｜" + block + ">",
			Call:      []grammar.Part{T(`<｜DSML｜invoke name="`), grammar.Name, T("\">\n"), grammar.Params, T("</｜DSML｜invoke>\n")},
			ParamOpen: `<｜DSML｜parameter name="`, ParamMid: `" string="true">`, ParamMidJSON: `" string="false">`,
			ParamClose: "</｜DSML｜parameter>\n"}
	case familyDeepSeek:
		// V3.1: NAME<sep>ARGS, the calls one after the other.
		syn := &grammar.Syntax{Open: "<｜tool▁calls▁begin｜>", Close: "<｜tool▁calls▁end｜>",
			Call: []grammar.Part{T("<｜tool▁call▁begin｜>"), grammar.Name, T("<｜tool▁sep｜>"), grammar.Args, T("<｜tool▁call▁end｜>")}}
		if strings.Contains(src, "function<｜tool▁sep｜>") || strings.Contains(src, "tool['type'] + '<｜tool▁sep｜>'") {
			// R1 and V3: function<sep>NAME, then the arguments in a json
			// block, a newline between two calls.
			syn.Sep = "\n"
			syn.Call = []grammar.Part{T("<｜tool▁call▁begin｜>function<｜tool▁sep｜>"), grammar.Name, T("\n```json\n"),
				grammar.Args, T("\n```<｜tool▁call▁end｜>")}
		}
		return syn
	case familyKimi:
		return &grammar.Syntax{Open: "<|tool_calls_section_begin|>", Close: "<|tool_calls_section_end|>",
			Call: []grammar.Part{T("<|tool_call_begin|>functions."), grammar.Name, T(":"), grammar.Index,
				T("<|tool_call_argument_begin|>"), grammar.Args, T("<|tool_call_end|>")}}
	case familyGCML:
		return &grammar.Syntax{Open: "<｜GCML｜tool_calls>\n", Close: "</｜GCML｜tool_calls>", Sep: "\n",
			Call:      []grammar.Part{T(`<｜GCML｜invoke name="`), grammar.Name, T("\">\n"), grammar.Params, T("</｜GCML｜invoke>")},
			ParamOpen: `<｜GCML｜parameter name="`, ParamMid: `" string="true">`, ParamMidJSON: `" string="false">`,
			ParamClose: "</｜GCML｜parameter>\n"}
	case familyHunyuan:
		return &grammar.Syntax{Open: hyTag("tool_calls") + "\n", Close: hyTag("/tool_calls"),
			Call:      []grammar.Part{T(hyTag("tool_call")), grammar.Name, T(hyTag("tool_sep") + "\n"), grammar.Params, T(hyTag("/tool_call") + "\n")},
			ParamOpen: hyTag("arg_key"), ParamMid: hyTag("/arg_key") + "\n" + hyTag("arg_value"), ParamClose: hyTag("/arg_value") + "\n"}
	case familyMiniMaxM3:
		// Each parameter an element named by its key, closed by its name.
		return &grammar.Syntax{Open: m3CallsOpen + "\n", Close: m3NS + "</tool_call>",
			Call:      []grammar.Part{T(m3NS + `<invoke name="`), grammar.Name, T(`">`), grammar.Params, T(m3NS + "</invoke>\n")},
			ParamOpen: m3NS + "<", ParamMid: ">", ParamClose: m3NS + "</" + grammar.KeyPlaceholder + ">"}
	case familyMiniCPM5:
		return &grammar.Syntax{Sep: "\n",
			Call:      []grammar.Part{T(`<function name="`), grammar.Name, T(`">`), grammar.Params, T("</function>")},
			ParamOpen: `<param name="`, ParamMid: `">`, ParamClose: "</param>"}
	case familyGigaChat3:
		return &grammar.Syntax{Call: append([]grammar.Part{T("<|message_sep|>\n\nfunction call<|role_sep|>\n")}, jsonListCall...)}
	case familyGigaChat31:
		return &grammar.Syntax{Call: append([]grammar.Part{T("<|function_call|>")}, jsonListCall...)}
	case familyCommandRPlus:
		return &grammar.Syntax{Open: "Action:\n```json\n", Close: "\n```", List: true, Call: grammar.JSONCall("tool_name", "parameters")}
	case familyFunctionary:
		return &grammar.Syntax{Call: []grammar.Part{T("<function="), grammar.Name, T(">"), grammar.Args, T("</function>")}}
	case familyFunctionaryV32:
		return &grammar.Syntax{Sep: ">>>", Call: []grammar.Part{grammar.Name, T("\n"), grammar.Args}}
	case familyHarmony:
		return &grammar.Syntax{Call: []grammar.Part{T("<|channel|>commentary to=functions."), grammar.Name,
			T(" <|constrain|>json<|message|>"), grammar.Args}}
	case familySolarOpen:
		return &grammar.Syntax{Open: "<|tool_calls|>",
			Call: []grammar.Part{T("<|tool_call:begin|>"), grammar.Index, T("<|tool_call:name|>"), grammar.Name,
				T("<|tool_call:args|>"), grammar.Args, T("<|tool_call:end|>")}}
	case familyCommandR7B:
		return &grammar.Syntax{Open: "<|START_ACTION|>", Close: "<|END_ACTION|>", List: true,
			Call: grammar.JSONCall("tool_name", "parameters", [2]string{"tool_call_id", ""})}
	case familyFirefunction:
		return &grammar.Syntax{Open: "functools", List: true, Call: jsonListCall}
	case familyGranite:
		return &grammar.Syntax{Open: "<|tool_call|>", List: true, Call: jsonListCall}
	case familyNemotron:
		return &grammar.Syntax{Open: "<TOOLCALL>", Close: "</TOOLCALL>", List: true, Call: jsonListCall}
	case familyApriel:
		return &grammar.Syntax{Open: "<tool_calls>", Close: "</tool_calls>", List: true, Call: jsonListCall}
	case familyApertus:
		return &grammar.Syntax{Open: "<|tools_prefix|>", Close: "<|tools_suffix|>", List: true,
			Call: []grammar.Part{T("{"), grammar.Space, grammar.NameJSON, grammar.Space, T(":"), grammar.Space, grammar.Args, T("}"), grammar.Space}}
	case familyGemma4:
		return &grammar.Syntax{Call: []grammar.Part{T(gemma4CallOpen + "call:"), grammar.Name, T("{"), grammar.Params, T("}" + gemma4CallClose)},
			ParamMid: ":", ParamSep: ",", Values: grammar.ValuesGemma}
	case familyLFM2:
		return &grammar.Syntax{Open: "<|tool_call_start|>[", Close: "]<|tool_call_end|>", Sep: ", ",
			Call:     []grammar.Part{grammar.Name, T("("), grammar.Params, T(")")},
			ParamMid: "=", ParamSep: ", ", Values: grammar.ValuesJSON}
	case familyKimiK3:
		// Each argument names its value's type: raw text for a string,
		// JSON for the others (a schema of no one type: none, the parser
		// types it by the schema).
		mid := func(typ string) string { return `" type="` + typ + `"<|sep|>` }
		return &grammar.Syntax{Open: xtmlOpen("tools"), Close: xtmlClose("tools"),
			Call:      []grammar.Part{T(xtmlCallOpen), grammar.Name, T(`" index="`), grammar.Index, T(`"<|sep|>`), grammar.Params, T(xtmlClose("call"))},
			ParamOpen: `<|open|>argument key="`, ParamMid: mid("string"), ParamMidJSON: `"<|sep|>`, ParamClose: xtmlClose("argument"),
			ParamMidTypes: map[string]string{"integer": mid("number"), "number": mid("number"), "boolean": mid("boolean"),
				"object": mid("object"), "array": mid("array"), "null": mid("null")}}
	case familyMuse:
		// A message to the function each call, as MiniMax-M2's invokes.
		return &grammar.Syntax{Sep: "<|eom|><|start|>assistant",
			Call: []grammar.Part{T(" to="), grammar.Name, T("<|message|><atem:function_calls>\n<atem:invoke name=\""), grammar.Name, T("\">\n"),
				grammar.Params, T("</atem:invoke>\n</atem:function_calls>")},
			ParamOpen: `<atem:parameter name="`, ParamMid: `">`, ParamClose: "</atem:parameter>\n"}
	case familyMistral:
		if strings.Contains(src, "[ARGS]") {
			// Mistral Small 3.2, Magistral, Devstral: [TOOL_CALLS]NAME[ARGS]{...} per call.
			return &grammar.Syntax{Call: []grammar.Part{T("[TOOL_CALLS]"), grammar.Name, T("[ARGS]"), grammar.Args}}
		}
	}
	return nil
}

// syntaxTrigger is the text that starts the calls of syn: its opening, or
// the first literal of a call.
func syntaxTrigger(syn *grammar.Syntax) string {
	if syn.Open != "" {
		return syn.Open
	}
	for _, p := range syn.Call {
		if p.Kind != grammar.PartText {
			break
		}
		if p.Text != "" {
			return strings.TrimSuffix(strings.SplitN(p.Text, "\n", 2)[0], "\n")
		}
	}
	return ""
}

// callTrigger is the text that starts a call of t's model: where an
// "auto" call's grammar starts to hold.
func (t *chatTemplate) callTrigger() string {
	if t.syntax != nil {
		return syntaxTrigger(t.syntax)
	}
	return grammar.ToolCallTrigger(t.format)
}
