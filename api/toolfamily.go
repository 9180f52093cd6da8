package api

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// toolFamily is how a model family writes tool calls in its output, as
// its chat template shows them. Parsing tries the family's own format
// first and then the formats parseToolCalls knows.
type toolFamily int

const (
	familyGeneric        toolFamily = iota // {"tool_call": {...}} (vkllm's own prompt)
	familyHermes                           // Hermes 2/3, Qwen 2.5/3: <tool_call>{json}</tool_call>
	familyQwen3Coder                       // <tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>
	familyLlama3                           // Llama 3.x: {"name", "parameters"}, <|python_tag|>
	familyMistral                          // [TOOL_CALLS][{...}] or [TOOL_CALLS]NAME[ARGS]{...}
	familyDeepSeek                         // DeepSeek R1/V3/V3.1: <｜tool▁calls▁begin｜>...
	familyHarmony                          // gpt-oss: <|channel|>commentary to=functions.NAME ... <|message|>{...}<|call|>
	familyGLM                              // GLM 4.5+: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
	familyKimi                             // Kimi K2: <|tool_call_begin|>functions.NAME:i<|tool_call_argument_begin|>{...}<|tool_call_end|>
	familyFunctionary                      // Functionary v3.1: <function=NAME>{...}</function>
	familyCommandR7B                       // Command R7B: <|START_ACTION|>[{"tool_name", "parameters"}]<|END_ACTION|>
	familyFirefunction                     // Firefunction v2: functools[{...}]
	familySeedOSS                          // Seed-OSS: <seed:tool_call><function=NAME><parameter=K>V</parameter></function></seed:tool_call>
	familyGranite                          // Granite 3.x: <|tool_call|>[{...}]
	familyApertus                          // Apertus: <|tools_prefix|>[{"NAME": {...}}]<|tools_suffix|>
	familyFunctionaryV32                   // Functionary v3.2: NAME\n{...}, >>>NAME\n{...}, all\ncontent
	familyNemotron                         // Nemotron Nano v2: <TOOLCALL>[{...}]</TOOLCALL>
	familyLFM2                             // LFM2: <|tool_call_start|>[NAME(k=v, ...)]<|tool_call_end|>
	familyMiniMax                          // MiniMax-M2: <minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter></invoke>
	familyDSML                             // DeepSeek V3.2/V4: <｜DSML｜function_calls><｜DSML｜invoke name="NAME">...
	familyApriel                           // Apriel 1.5: <tool_calls>[{...}]</tool_calls>
	familyGemma4                           // Gemma 4: <|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>
	familyLing                             // Ling 3.0: GLM's tags; its turns end with <|role_end|>
	familySolarOpen                        // Solar Open: <|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{...}<|tool_call:end|>
	familyGigaChat3                        // GigaChat 3: <|message_sep|>\n\nfunction call<|role_sep|>\n{"name", "arguments"}
	familyGigaChat31                       // GigaChat 3.1: <|function_call|>{"name", "arguments"}
	familyGCML                             // GigaChat 3.5: <｜GCML｜tool_calls>\n<｜GCML｜invoke name="NAME">...
	familyCommandRPlus                     // Command R+: Action:\n```json\n[{"tool_name", "parameters"}]\n```
	familyMiniCPM5                         // MiniCPM5: <function name="NAME"><param name="K">V</param></function>
	familyMiniMaxM3                        // MiniMax-M3: ]<]minimax[>[<tool_call> ]<]minimax[>[<invoke name="NAME">]<]minimax[>[<KEY>V]<]minimax[>[</KEY>... (toolminimax3.go)
	familyHunyuan                          // Hunyuan Hy3: <tool_calls:opensource><tool_call:opensource>NAME<tool_sep:opensource>\n<arg_key:opensource>K</arg_key:opensource>...
	familyKimiK3                           // Kimi K3: <|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|><|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|>...
	familyMuse                             // Muse Glimmer: messages " to=NAME<|message|><atem:function_calls><atem:invoke name="NAME">...
)

// familyNames are the families' names, in the order of their values.
var familyNames = [...]string{"generic", "hermes", "qwen3-coder", "llama3", "mistral", "deepseek", "gpt-oss",
	"glm", "kimi", "functionary", "command-r7b", "firefunction", "seed-oss", "granite", "apertus",
	"functionary-v3.2", "nemotron", "lfm2", "minimax", "deepseek-dsml", "apriel", "gemma4", "ling", "solar-open",
	"gigachat3", "gigachat3.1", "gigachat-gcml", "command-r-plus", "minicpm5", "minimax-m3", "hunyuan",
	"kimi-k3", "muse-glimmer"}

// String names the family.
func (f toolFamily) String() string { return familyNames[f] }

// detectToolFamily reads the tool-call format from a template's source.
func detectToolFamily(src string) toolFamily {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(src, x) {
				return false
			}
		}
		return true
	}
	switch {
	case xtmlSource(src):
		return familyKimiK3
	case has("<atem:function_calls>"):
		return familyMuse
	case has("<|tool_call>call:"):
		return familyGemma4
	case has("<|tool_call:begin|>"):
		return familySolarOpen
	case has("｜DSML｜"):
		return familyDSML
	case has("｜GCML｜"):
		return familyGCML
	case has(hyTagSuffix, "<tool_sep{}>"):
		// Hunyuan's tags are built with .format(HYTK) (":opensource").
		return familyHunyuan
	case has("<|function_call|>", "<|role_sep|>"):
		return familyGigaChat31
	case has("function call", "<|role_sep|>"):
		return familyGigaChat3
	case has(`<function name="`, `<param name="`):
		return familyMiniCPM5
	case has("<minimax:tool_call>"):
		return familyMiniMax
	case has(m3NS):
		// Before Hermes: its call block is ]<]minimax[>[ + '<tool_call>'.
		return familyMiniMaxM3
	case has("<seed:tool_call>"):
		return familySeedOSS
	case has("<|tool_call_start|>"):
		return familyLFM2
	case has("<|tools_prefix|>"):
		return familyApertus
	case has("<TOOLCALL>"):
		return familyNemotron
	case has("<|tool_call|>"):
		return familyGranite
	case has(">>>all"):
		return familyFunctionaryV32
	case has("<tool_calls>") && !has("<tool_call>"):
		return familyApriel
	case has("<|tool_calls_section_begin|>"):
		return familyKimi
	case has("tool▁calls▁begin"):
		return familyDeepSeek
	case has("<|channel|>"), has("to=functions."):
		return familyHarmony
	case has("<arg_key>", "<|role_end|>"):
		return familyLing
	case has("<arg_key>"):
		return familyGLM
	case has("<tool_call>", "<function="):
		return familyQwen3Coder
	case has("<tool_call>"):
		return familyHermes
	case has("[TOOL_CALLS]"):
		return familyMistral
	case has("<|START_ACTION|>"):
		return familyCommandR7B
	case has("Action:", "```json", "tool_name"):
		return familyCommandRPlus
	case has("functools["):
		return familyFirefunction
	case has("<function="):
		return familyFunctionary
	case has("<|python_tag|>"), has("ipython"):
		return familyLlama3
	}
	return familyGeneric
}

// grammarFormat is the grammar format that constrains the family's calls;
// families the grammar cannot write use the generic JSON form when a call
// is required, and are left unconstrained under "auto" (see
// constrainsAuto).
func (f toolFamily) grammarFormat() grammar.ToolFormat {
	switch f {
	case familyHermes:
		return grammar.ToolFormatHermes
	case familyLlama3:
		return grammar.ToolFormatLlama3
	case familyMistral:
		return grammar.ToolFormatMistral
	}
	return grammar.ToolFormatGeneric
}

// constrainsAuto reports whether tool_choice "auto" constrains calls with
// the grammar from its trigger on: only where the grammar writes the
// family's own format, or the family is vkllm's generic one.
func (f toolFamily) constrainsAuto() bool {
	switch f {
	case familyHermes, familyLlama3, familyMistral, familyGeneric:
		return true
	}
	return false
}

// triggers are the texts that start a call in the family's output.
func (f toolFamily) triggers() []string {
	switch f {
	case familyHermes, familyGLM, familyLing:
		return []string{"<tool_call>"}
	case familySolarOpen:
		return []string{"<|tool_calls|>", "<|tool_call:begin|>"}
	case familyGemma4:
		return []string{gemma4CallOpen}
	case familyQwen3Coder:
		return []string{"<tool_call>", "<function="}
	case familySeedOSS:
		return []string{"<seed:tool_call>", "<function="}
	case familyGranite:
		return []string{"<|tool_call|>"}
	case familyApertus:
		return []string{"<|tools_prefix|>"}
	case familyNemotron:
		return []string{"<TOOLCALL>"}
	case familyLFM2:
		return []string{"<|tool_call_start|>"}
	case familyMiniMax:
		return []string{"<minimax:tool_call>"}
	case familyMiniMaxM3:
		return []string{m3CallsOpen}
	case familyDSML:
		return []string{"<｜DSML｜function_calls>", "<｜DSML｜tool_calls>"}
	case familyApriel:
		return []string{"<tool_calls>"}
	case familyMistral:
		return []string{"[TOOL_CALLS]"}
	case familyDeepSeek:
		return []string{"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"}
	case familyHarmony:
		return []string{"<|channel|>commentary to=functions.", "<|start|>assistant<|channel|>commentary to=", " to=functions."}
	case familyKimiK3:
		return []string{xtmlOpen("tools"), xtmlCallOpen}
	case familyMuse:
		// A message's header: its recipient says whether it is a call
		// (harmony.go reads the messages).
		return []string{"<|start|>assistant to=", " to="}
	case familyKimi:
		return []string{"<|tool_calls_section_begin|>", "<|tool_call_begin|>"}
	case familyFunctionary:
		return []string{"<function=", "<|python_tag|>"}
	case familyCommandR7B:
		return []string{"<|START_ACTION|>", "<|START_THINKING|>"}
	case familyFirefunction:
		return []string{"functools["}
	case familyGigaChat3:
		return []string{"function call<|role_sep|>"}
	case familyGigaChat31:
		return []string{"<|function_call|>"}
	case familyGCML:
		return []string{"<｜GCML｜tool_calls>"}
	case familyHunyuan:
		return []string{"<tool_calls" + hyTagSuffix + ">", "<tool_call" + hyTagSuffix + ">"}
	case familyCommandRPlus:
		return []string{"Action:"}
	case familyMiniCPM5:
		return []string{`<function name="`}
	case familyLlama3:
		return []string{"<|python_tag|>", "{"}
	}
	return nil
}

// mayStart reports whether text (the output so far) is or may become the
// start of a tool call, so streaming holds it back. A Functionary v3.2
// answer is held whole: even its content starts with a recipient line.
func (f toolFamily) mayStart(text string) bool {
	if f == familyFunctionaryV32 || mayStartToolCall(text) {
		return true
	}
	t := strings.TrimLeft(text, " \t\r\n")
	for _, p := range f.triggers() {
		if strings.HasPrefix(t, p) || strings.HasPrefix(p, t) {
			return true
		}
	}
	return false
}

// markers are the triggers that start a call wherever they appear in the
// output (not only at its start): text before them streams as content,
// and in a reasoning left open they end the reasoning (reasoning.go).
func (f toolFamily) markers() []string {
	if f.messages() || f == familyFunctionaryV32 {
		return nil
	}
	var out []string
	for _, t := range f.triggers() {
		if t != "{" {
			out = append(out, t)
		}
	}
	return out
}

// genericMarkers start calls in the formats every family falls back to
// (parseToolCalls) wherever they appear in an answer.
var genericMarkers = []string{"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"}

// holdMarkers are the markers a stream holds an answer back from: the
// family's, and those of the formats its parse falls back to, so that a
// streamed answer's calls are the whole answer's.
func (f toolFamily) holdMarkers() []string {
	out := f.markers()
	for _, m := range genericMarkers {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// wrappers are the markers the family wraps its answer's text in, which
// are not part of the content: Command R7B's response markers (the
// reference strips them whether or not it parses reasoning) and the end of
// a Ling turn, which may come spelled out as text.
func (f toolFamily) wrappers() []string {
	switch f {
	case familyCommandR7B:
		// Cohere2 MoE writes its answer's text in <|START_TEXT|>...<|END_TEXT|>.
		return []string{"<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"}
	case familyCommandRPlus:
		return []string{"<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}
	case familyGigaChat3:
		return []string{"<|message_sep|>"}
	case familyLing:
		return []string{"<|role_end|>"}
	case familySolarOpen:
		// Its answer is a turn of its own after the reasoning's:
		// <|end|><|begin|>assistant<|content|>...
		return []string{"<|begin|>assistant", "<|content|>", "<|end|>", "<|tool_calls|>"}
	case familyKimiK3:
		// Its answer is a response section after the think section,
		// and the message's end.
		return []string{xtmlOpen("response"), xtmlClose("response"), xtmlClose("message"), "<|end_of_msg|>"}
	}
	return nil
}

// messages reports whether the family's answers are a sequence of
// messages, each to a recipient, which harmony.go reads: gpt-oss's
// Harmony and Muse Glimmer. Their reasoning is a message of its own, not
// text between think markers.
func (f toolFamily) messages() bool { return f == familyHarmony || f == familyMuse }

// unwrap removes the family's wrappers from a whole answer's content.
func (f toolFamily) unwrap(text string) string {
	for _, w := range f.wrappers() {
		text = strings.ReplaceAll(text, w, "")
	}
	return text
}

// parse extracts tool calls from generated text in the family's format,
// falling back to the formats parseToolCalls knows. It returns the text
// before the calls (reasoning markup of the family removed) and the calls.
func (f toolFamily) parse(text string, known []tool) (string, []toolCall) {
	isKnown := func(name string) bool {
		for _, t := range known {
			if t.name == name {
				return true
			}
		}
		return false
	}
	var prefix string
	var calls []toolCall
	ok := false
	switch f {
	case familyDeepSeek:
		prefix, calls, ok = parseDeepSeek(text)
	case familyHarmony, familyMuse:
		_, prefix, calls = parseMessages(f, text, known)
		ok = len(calls) > 0
	case familyGLM:
		prefix, calls, ok = parseGLM(text)
	case familyLing:
		prefix, calls, ok = parseLing(text)
	case familySolarOpen:
		prefix, calls, ok = blockCalls(text, []string{"<|tool_calls|>", "<|tool_call:begin|>"}, "<|tool_call:begin|>", "<|tool_call:end|>",
			func(body string) (string, string, bool) {
				_, rest, ok1 := strings.Cut(body, "<|tool_call:name|>")
				name, args, ok2 := strings.Cut(rest, "<|tool_call:args|>")
				return name, args, ok1 && ok2
			})
		prefix = f.unwrap(prefix)
	case familyGemma4:
		prefix, calls, ok = parseGemma4(text)
	case familyLlama3:
		prefix, calls, ok = parseLlama3Builtin(text, known)
	case familyQwen3Coder:
		prefix, calls, ok = parseXMLFunctions(text, "<tool_call>", true, known)
	case familyKimi:
		prefix, calls, ok = parseKimi(text)
	case familyFunctionary:
		prefix, calls, ok = parseFunctionary(text)
	case familyCommandR7B:
		prefix, calls, ok = parseCommandR7B(text)
	case familyFirefunction:
		if i := strings.Index(text, "functools["); i >= 0 {
			_, calls = parseToolCalls("[TOOL_CALLS]"+text[i+len("functools"):], known)
			prefix, ok = strings.TrimSpace(text[:i]), len(calls) > 0
		}
	case familyMistral:
		prefix, calls, ok = parseMistralArgs(text)
	case familySeedOSS:
		prefix, calls, ok = parseXMLFunctions(text, "<seed:tool_call>", false, known)
	case familyGranite:
		prefix, calls, ok = parseJSONList(text, "<|tool_call|>", "")
	case familyApertus:
		prefix, calls, ok = parseApertus(text)
	case familyFunctionaryV32:
		prefix, calls, ok = parseFunctionaryV32(text)
	case familyNemotron:
		prefix, calls, ok = parseJSONList(text, "<TOOLCALL>", "</TOOLCALL>")
	case familyApriel:
		prefix, calls, ok = parseJSONList(text, "<tool_calls>", "</tool_calls>")
	case familyLFM2:
		prefix, calls, ok = parseLFM2(text)
	case familyMiniMax:
		prefix, calls, ok = parseInvokes(text, []string{"<minimax:tool_call>"}, "", known)
	case familyMiniMaxM3:
		prefix, calls, ok = parseMiniMaxM3(text, known)
	case familyDSML:
		prefix, calls, ok = parseInvokes(text, []string{"<｜DSML｜function_calls>", "<｜DSML｜tool_calls>"}, "｜DSML｜", known)
	case familyGCML:
		prefix, calls, ok = parseInvokes(text, []string{"<｜GCML｜tool_calls>"}, "｜GCML｜", known)
	case familyHunyuan:
		prefix, calls, ok = parseHunyuan(text, known)
	case familyGigaChat3:
		prefix, calls, ok = parseJSONCalls(text, "function call<|role_sep|>")
	case familyGigaChat31:
		prefix, calls, ok = parseJSONCalls(text, "<|function_call|>")
	case familyCommandRPlus:
		prefix, calls, ok = parseCommandRPlus(text)
	case familyMiniCPM5:
		prefix, calls, ok = parseMiniCPM5(text, known)
	case familyKimiK3:
		prefix, calls, ok = parseKimiK3(text, known)
	}
	if ok {
		for _, c := range calls {
			if !isKnown(c.name) {
				return text, nil
			}
		}
		return prefix, calls
	}
	return parseToolCalls(text, known)
}

// callsFrom builds a call of each item, its name and JSON arguments as
// decode reads them; an item that is not a call fails them all (the text
// is then not this family's calls).
func callsFrom[T any](items []T, decode func(T) (name, args string, ok bool)) ([]toolCall, bool) {
	calls := make([]toolCall, 0, len(items))
	for _, it := range items {
		name, args, ok := decode(it)
		if !ok {
			return nil, false
		}
		c, ok := newCall(name, args)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, true
}

// newCall builds a call with compact JSON arguments; args that are not
// a JSON object fail.
func newCall(name, args string) (toolCall, bool) {
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(args)) != nil || buf.Bytes()[0] != '{' {
		return toolCall{}, false // arguments are a JSON object
	}
	return toolCall{id: newCallID(), name: strings.TrimSpace(name), arguments: buf.String()}, true
}

// cut returns what lies between open and close in s after from, and the
// offset after close (the end of s when close is missing).
func between(s, open, close string) (string, int, bool) {
	i := strings.Index(s, open)
	if i < 0 {
		return "", 0, false
	}
	rest := s[i+len(open):]
	j := strings.Index(rest, close)
	if j < 0 {
		return rest, len(s), true
	}
	return rest[:j], i + len(open) + j + len(close), true
}

func parseDeepSeek(text string) (string, []toolCall, bool) {
	return blockCalls(text, []string{"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"}, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
		func(body string) (string, string, bool) {
			head, args, found := strings.Cut(body, "<｜tool▁sep｜>")
			if !found {
				return "", "", false
			}
			name := head
			if strings.TrimSpace(head) == "function" { // R1/V3: function<sep>NAME\n```json\nARGS\n```
				name, args, _ = strings.Cut(args, "\n")
				args = strings.TrimSpace(args)
				args = strings.TrimPrefix(args, "```json")
				args = strings.TrimSuffix(strings.TrimSpace(args), "```")
			}
			return name, args, true
		})
}

// blockCalls parses tool calls written as blocks open...close, from the
// first of starts (the section's opening markers, in order of preference)
// on; the text before it is the content. decode turns a block's body into
// the call's name and JSON arguments; false, or arguments that are not
// JSON, mean the text is not this family's calls.
func blockCalls(text string, starts []string, open, close string, decode func(body string) (name, args string, ok bool)) (string, []toolCall, bool) {
	prefix, calls, _, ok := blockCallsEnd(text, starts, open, close, decode)
	return prefix, calls, ok
}

// blockCallsEnd is blockCalls, also returning where the last call ends.
func blockCallsEnd(text string, starts []string, open, close string, decode func(body string) (name, args string, ok bool)) (string, []toolCall, int, bool) {
	start := -1
	for _, m := range starts {
		if start = strings.Index(text, m); start >= 0 {
			break
		}
	}
	if start < 0 {
		return "", nil, 0, false
	}
	var calls []toolCall
	rest := text[start:]
	for {
		body, end, ok := between(rest, open, close)
		if !ok {
			break
		}
		rest = rest[end:]
		name, args, ok := decode(body)
		if !ok {
			return "", nil, 0, false
		}
		c, ok := newCall(name, args)
		if !ok {
			return "", nil, 0, false
		}
		calls = append(calls, c)
	}
	return strings.TrimSpace(text[:start]), calls, len(text) - len(rest), len(calls) > 0
}

// argValue turns a GLM/Qwen3-Coder argument value into JSON: JSON values
// as they are, other text as a string, as written.
func argValue(v string) json.RawMessage {
	if t := strings.TrimSpace(v); json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(v)
	return b
}

// objectJSON writes keys and values as a JSON object in the given order.
func objectJSON(keys []string, vals []json.RawMessage) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendJSONString(nil, k))
		b.WriteByte(':')
		b.Write(vals[i])
	}
	b.WriteByte('}')
	return b.String()
}

func parseGLM(text string) (string, []toolCall, bool) {
	prefix, calls, _, ok := glmCalls(text)
	return prefix, calls, ok
}

// parseLing reads Ling 3.0's calls, written as GLM's; the prose after the
// last call is content too, as the reference's Ling parser
// (common/parsers/ling3.cpp) keeps it.
func parseLing(text string) (string, []toolCall, bool) {
	prefix, calls, end, ok := glmCalls(text)
	if !ok {
		return "", nil, false
	}
	return strings.TrimSpace(prefix + text[end:]), calls, true
}

// glmCalls reads GLM's <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
// blocks, returning the content before them, the calls, and where the
// last ends.
func glmCalls(text string) (string, []toolCall, int, bool) {
	return blockCallsEnd(text, []string{"<tool_call>"}, "<tool_call>", "</tool_call>", func(body string) (string, string, bool) {
		name, args, _ := strings.Cut(body, "<arg_key>")
		name = strings.TrimSpace(name)
		if strings.HasPrefix(name, "{") {
			return "", "", false // Hermes JSON inside: leave it to parseToolCalls
		}
		keys, raws, _, ok := tagPairs("<arg_key>"+args, "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
		if !ok {
			return "", "", false
		}
		vals := make([]json.RawMessage, len(raws))
		for i, v := range raws {
			vals[i] = argValue(strings.TrimSpace(v))
		}
		return name, objectJSON(keys, vals), true
	})
}

// tagPairs reads the parameters written kOpen K kClose vOpen V vClose
// one after another in args (GLM's arg_key/arg_value and Hunyuan's tags):
// the keys, white space trimmed, and the raw values. cut is true when
// args ends inside a key (the pairs before it are read); ok is false
// when a key has no value.
func tagPairs(args, kOpen, kClose, vOpen, vClose string) (keys, vals []string, cut, ok bool) {
	for {
		k, e1, found := between(args, kOpen, kClose)
		if !found {
			return keys, vals, false, true
		}
		if e1 == len(args) && !strings.Contains(args, kClose) {
			return keys, vals, true, true
		}
		v, e2, found := between(args[e1:], vOpen, vClose)
		if !found {
			return nil, nil, false, false
		}
		args = args[e1+e2:]
		keys, vals = append(keys, strings.TrimSpace(k)), append(vals, v)
	}
}

// parseKimi reads Kimi K2 calls: each call runs from <|tool_call_begin|>
// to <|tool_call_end|>, or to the next call or the end of the text when
// the model leaves the end markers out.
func parseKimi(text string) (string, []toolCall, bool) {
	start := strings.Index(text, "<|tool_calls_section_begin|>")
	if j := strings.Index(text, "<|tool_call_begin|>"); start < 0 || j >= 0 && j < start {
		start = j
	}
	if start < 0 {
		return "", nil, false
	}
	calls, ok := callsFrom(strings.Split(text[start:], "<|tool_call_begin|>")[1:], func(body string) (string, string, bool) {
		body, _, _ = strings.Cut(body, "<|tool_call_end|>")
		body, _, _ = strings.Cut(body, "<|tool_calls_section_end|>")
		id, args, found := strings.Cut(body, "<|tool_call_argument_begin|>")
		name := strings.TrimPrefix(strings.TrimSpace(id), "functions.")
		if k := strings.LastIndexByte(name, ':'); k >= 0 {
			name = name[:k]
		}
		return name, args, found
	})
	return strings.TrimSpace(text[:start]), calls, ok && len(calls) > 0
}

func parseFunctionary(text string) (string, []toolCall, bool) {
	start := strings.Index(text, "<function=")
	if start < 0 {
		return "", nil, false
	}
	var calls []toolCall
	rest := text[start:]
	for {
		i := strings.Index(rest, "<function=")
		if i < 0 {
			break
		}
		rest = rest[i+len("<function="):]
		j := strings.IndexByte(rest, '>')
		if j < 0 {
			return "", nil, false
		}
		name, body := rest[:j], rest[j+1:]
		if k := strings.Index(body, "</function>"); k >= 0 {
			body, rest = body[:k], body[k+len("</function>"):]
		} else {
			rest = ""
		}
		c, ok := newCall(name, body)
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
	}
	return strings.TrimSpace(text[:start]), calls, len(calls) > 0
}

func parseCommandR7B(text string) (string, []toolCall, bool) {
	body, _, ok := between(text, "<|START_ACTION|>", "<|END_ACTION|>")
	if !ok {
		return "", nil, false
	}
	calls, ok := cohereActions(body)
	if !ok {
		return "", nil, false
	}
	prefix := text[:strings.Index(text, "<|START_ACTION|>")]
	if _, after, found := strings.Cut(prefix, "<|END_THINKING|>"); found {
		prefix = after
	} else if strings.Contains(prefix, "<|START_THINKING|>") {
		prefix = ""
	}
	return strings.TrimSpace(prefix), calls, true
}

// cohereActions reads the JSON list of {"tool_name", "parameters"}
// actions that Cohere's models write (Command R7B, Command R+) at the
// start of text; what follows the list is not read.
func cohereActions(text string) ([]toolCall, bool) {
	type item struct {
		ToolName   string          `json:"tool_name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	var items []item
	if json.NewDecoder(strings.NewReader(text)).Decode(&items) != nil || len(items) == 0 {
		return nil, false
	}
	return callsFrom(items, func(it item) (string, string, bool) {
		return it.ToolName, string(it.Parameters), it.ToolName != ""
	})
}

// parseMistralArgs reads Mistral Small 3.2 / Magistral calls,
// [TOOL_CALLS]NAME[ARGS]{...}; the JSON-array form goes to parseToolCalls.
func parseMistralArgs(text string) (string, []toolCall, bool) {
	start := strings.Index(text, "[TOOL_CALLS]")
	if start < 0 || !strings.Contains(text[start:], "[ARGS]") {
		return "", nil, false
	}
	var calls []toolCall
	rest := text[start:]
	for {
		i := strings.Index(rest, "[TOOL_CALLS]")
		if i < 0 {
			break
		}
		rest = rest[i+len("[TOOL_CALLS]"):]
		name, after, ok := strings.Cut(rest, "[ARGS]")
		if !ok {
			return "", nil, false
		}
		name, _, _ = strings.Cut(name, "[CALL_ID]") // Mistral Small 3.2 writes the call's id

		dec := json.NewDecoder(strings.NewReader(after))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return "", nil, false
		}
		c, ok := newCall(name, string(raw))
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
		rest = after[dec.InputOffset():]
	}
	return strings.TrimSpace(text[:start]), calls, len(calls) > 0
}

// thinkTokens are the texts of the control tokens that mark t's
// reasoning (see isThinkMarkerToken): its markers (thinkMarkersOf),
// Gemma 4's channel tokens, the tokens Kimi K3's tags are built of and
// Muse Glimmer's message headers; none for a template without markers.
func (t *chatTemplate) thinkTokens() []string {
	if t.family == familyMuse {
		return museHeaderTokens
	}
	if m := thinkPairOf(t.source); m != nil {
		return m.renderTokens()
	}
	return nil
}

// museHeaderTokens are Muse Glimmer's message headers and the end of a
// message another follows: its reasoning is a message (to=self).
var museHeaderTokens = []string{"<|start|>", "<|message|>", "<|eom|>"}

// isThinkMarkerToken reports whether a control token's text marks
// reasoning in some family (thinkMarkers and the tokens they are made of,
// Muse Glimmer's message headers), so that answers of a thinking template
// whose own marker it is (thinkTokens) render it for the reasoning split.
func isThinkMarkerToken(txt string) bool {
	if slices.Contains(museHeaderTokens, txt) {
		return true
	}
	for _, m := range thinkMarkers {
		// Solar Open's markers are text; an <|end|> control token ends
		// other families' turns (gpt-oss, Phi-3) and stays unrendered.
		if txt == m.start || txt == m.end && txt != "<|end|>" || slices.Contains(m.tokens, txt) {
			return true
		}
	}
	return false
}

// isToolMarkupToken reports whether a control token's text marks tool
// calls in some family, so that requests with tools render it in the
// output for the parser (llama.cpp's preserved tokens).
func isToolMarkupToken(txt string) bool {
	switch txt {
	case "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "<tool_call>", "</tool_call>",
		"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>",
		"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
		"<|tool_call_argument_begin|>", "<|tool_call_end|>",
		"<|START_ACTION|>", "<|END_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>",
		"<|channel|>", "<|message|>", "<|call|>", "<|constrain|>", "<|start|>",
		"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
		gemma4CallOpen, gemma4CallClose, gemma4Quote, gemma4Channel, gemma4ChannelEnd,
		"<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>",
		"<|function_call|>", "<|role_sep|>", "<|message_sep|>",
		m3NS: // MiniMax-M3's namespace token, before each of its call tags
		return true
	}
	// Hunyuan Hy3's tags: <tool_call:opensource>, </arg_value:opensource>, ...
	return strings.HasPrefix(txt, "<") && strings.HasSuffix(txt, hyTagSuffix+">")
}
