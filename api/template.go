package api

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/vkllm/vkllm/internal/jinja"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// TemplateNames lists the named chat templates; "jinja" is the model's own.
var TemplateNames = []string{"plain", "chatml", "llama-2", "llama-3", "mistral-instruct", "gemma",
	"phi-3", "zephyr", "vicuna", "alpaca", "jinja"}

// chatTemplate renders a conversation into a prompt.
type chatTemplate struct {
	name   string
	jinja  *jinja.Template // for "jinja"
	source string
	format grammar.ToolFormat // how the grammar constrains tool calls
	family toolFamily         // how the model writes tool calls, for parsing
	syntax *grammar.Syntax    // the family's own call syntax for grammars (nil: format's)
	caps   templateCaps       // for "jinja"
}

// templateCaps is what a Jinja template does with the parts of a chat
// request, found as the reference finds it: from the source and from
// renders of probe conversations.
type templateCaps struct {
	// nativeTools: the source mentions tools or tool calls. Tools, tool
	// calls and tool results go to every Jinja template unchanged, as the
	// reference passes them; a template that ignores them renders the
	// conversation without them, as the reference's does.
	nativeTools bool
	// systemRole: a system message is rendered; otherwise it is folded
	// into the first user message, separated by a newline.
	systemRole bool
	// objectArguments: tool-call arguments must be objects (the template
	// prints them with tojson); otherwise the JSON text is passed.
	objectArguments bool
	// typedContent: content must be a list of {type: text, text} parts.
	typedContent bool
	// thinking: the template supports reasoning, found as the reference's
	// template analysis finds it (see detectThinking); enable_thinking is
	// true for it and false for every other template.
	thinking bool
	// reasoning: answers are parsed for reasoning (reasoning.go). Besides
	// the thinking templates, as the reference: a template that renders
	// reasoning_content only beside tool calls (its analysis' "tools only"
	// reasoning: Kimi K2 Thinking, the reference's copy of Command R7B's),
	// LFM2.5, whose own handler in the reference parses <think>, and
	// Command R7B (whose original template reads tool_plan). None changes
	// enable_thinking: those templates do not read it.
	reasoning bool
}

// newChatTemplate returns the template called name; src is the model's
// tokenizer.chat_template for "jinja".
func newChatTemplate(name, src string) (*chatTemplate, error) {
	t := &chatTemplate{name: name}
	switch name {
	case "chatml":
		t.format, t.family = grammar.ToolFormatHermes, familyHermes
	case "llama-3":
		t.format, t.family = grammar.ToolFormatLlama3, familyLlama3
	case "mistral-instruct":
		t.format, t.family = grammar.ToolFormatMistral, familyMistral
	case "plain", "llama-2", "gemma", "phi-3", "zephyr", "vicuna", "alpaca":
		t.format, t.family = grammar.ToolFormatGeneric, familyGeneric
	case "jinja":
		if src == "" {
			return nil, errors.New("the model has no tokenizer.chat_template")
		}
		tpl, err := jinja.Parse(src)
		if err != nil {
			return nil, fmt.Errorf("the model's chat template does not parse: %v", err)
		}
		t.jinja, t.source = tpl, src
		t.family = detectToolFamily(src)
		t.format = t.family.grammarFormat()
		t.caps = probeCaps(tpl, src)
		t.syntax = t.family.callSyntax(src)
	default:
		return nil, fmt.Errorf("unknown template %q, want one of %s", name, strings.Join(TemplateNames, ", "))
	}
	return t, nil
}

// detectToolFormat returns the grammar format of the tool calls a
// template's model writes.
func detectToolFormat(src string) grammar.ToolFormat { return detectToolFamily(src).grammarFormat() }

// Probe texts: unlikely in any template.
const (
	probeSystem = "<vkllm-probe-system>"
	probeUser   = "<vkllm-probe-user>"
	probeArg    = "vkllm_probe_argument"
)

// probeCaps finds what tpl supports by rendering probe conversations, as
// the reference does; a probe that fails counts as "not supported".
func probeCaps(tpl *jinja.Template, src string) templateCaps {
	c := templateCaps{
		nativeTools: strings.Contains(src, "tools") || strings.Contains(src, "tool_calls"),
	}
	try := func(msgs ...*jinja.Dict) string {
		return probeRender(tpl, nil, msgs...)
	}
	c.systemRole = strings.Contains(try(msg("system", probeSystem), msg("user", probeUser)), probeSystem)
	if !strings.Contains(try(msg("user", probeUser)), probeUser) {
		part := jinja.NewDict()
		part.Set("type", "text")
		part.Set("text", probeUser)
		c.typedContent = strings.Contains(try(msg("user", jinja.NewList(part))), probeUser)
	}
	if c.nativeTools {
		// shows renders a call with args and returns whether the argument
		// name appears, whether only JSON-escaped (a string printed with
		// tojson), and the output.
		shows := func(args any) (shown, escaped bool, out string) {
			for _, content := range []any{"", nil} {
				fn := jinja.NewDict()
				fn.Set("name", "vkllm_probe_tool")
				fn.Set("arguments", args)
				call := jinja.NewDict()
				call.Set("id", "call00001")
				call.Set("type", "function")
				call.Set("function", fn)
				a := msg("assistant", content)
				a.Set("tool_calls", jinja.NewList(call))
				out := try(msg("user", probeUser), a)
				if strings.Contains(out, probeArg) {
					return true, strings.Contains(out, `\"`+probeArg), out
				}
			}
			return false, false, ""
		}
		obj := jinja.NewDict()
		obj.Set(probeArg, "x")
		strShown, strEscaped, _ := shows(`{"` + probeArg + `": "x"}`)
		objShown, _, objOut := shows(obj)
		// Object arguments as the reference decides: the template reads
		// the arguments' members (it iterates them, as Gemma 4's does,
		// rather than printing the object whole), or a string would only
		// show JSON-escaped.
		membersRead := objShown && !strings.Contains(objOut, `{"`+probeArg+`": "x"}`) &&
			!strings.Contains(objOut, `{'`+probeArg+`': 'x'}`) && !strings.Contains(objOut, `{"`+probeArg+`":"x"}`)
		c.objectArguments = objShown && (!strShown || strEscaped || membersRead)
	}
	c.thinking = detectThinking(tpl, src)
	fam := detectToolFamily(src)
	c.reasoning = c.thinking || (c.nativeTools && reasoningWithCalls(tpl)) ||
		(fam == familyLFM2 && strings.Contains(src, "<think>")) || fam == familyCommandR7B
	return c
}

// reasoningWithCalls reports whether tpl renders an assistant message's
// reasoning_content, followed by a marker, only when the message has tool
// calls (the reference's analysis renders the two and calls such
// reasoning "tools only").
func reasoningWithCalls(tpl *jinja.Template) bool {
	const reasoning = "vkllm probe reasoning"
	render := func(calls bool) string {
		a := msg("assistant", "vkllm probe answer")
		a.Set("reasoning_content", reasoning)
		if calls {
			fn := jinja.NewDict()
			fn.Set("name", "vkllm_probe_tool")
			fn.Set("arguments", `{"`+probeArg+`": "x"}`)
			call := jinja.NewDict()
			call.Set("id", "call00001")
			call.Set("type", "function")
			call.Set("function", fn)
			a.Set("content", "")
			a.Set("tool_calls", jinja.NewList(call))
		}
		return probeRender(tpl, map[string]any{"enable_thinking": true}, msg("user", probeUser), a)
	}
	if strings.Contains(render(false), reasoning) {
		return false
	}
	out := render(true)
	i := strings.Index(out, reasoning)
	if i < 0 {
		return false
	}
	loc := markerRE.FindStringIndex(strings.TrimLeft(out[i+len(reasoning):], " \t\r\n"))
	return loc != nil && loc[0] == 0
}

// probeRender renders msgs with tpl (no generation prompt unless vars sets
// it, empty special tokens), "" when the template fails.
func probeRender(tpl *jinja.Template, vars map[string]any, msgs ...*jinja.Dict) string {
	l := jinja.NewList()
	for _, m := range msgs {
		l.Items = append(l.Items, m)
	}
	all := map[string]any{"messages": l, "add_generation_prompt": false, "bos_token": "", "eos_token": ""}
	for k, v := range vars {
		all[k] = v
	}
	out, err := tpl.Render(all, jinja.Options{MaxWork: 1_000_000, MaxOutput: 1 << 20})
	if err != nil {
		return ""
	}
	return out
}

func msg(role string, content any) *jinja.Dict {
	d := jinja.NewDict()
	d.Set("role", role)
	d.Set("content", content)
	return d
}

// markerRE matches a marker as the reference's template analysis reads
// one: text in <...> or [...] (<think>, </think>, <|inner_prefix|>,
// <｜Assistant｜>, [THINK], [BEGIN FINAL RESPONSE]).
var markerRE = regexp.MustCompile(`<[^<>]{1,64}>|\[[^\[\]]{1,64}\]`)

// detectThinking reports whether tpl supports reasoning, as the
// reference's template analysis decides it (and so whether the reference
// sets enable_thinking): Harmony's channels (gpt-oss); the old
// Qwen/DeepSeek form that cuts content at </think>; Granite 3.3's
// <think></think> instructions; a reasoning_content rendered next to a
// marker; or a generation prompt that enable_thinking opens (a marker
// added at the end) or switches between markers. A template that only
// changes plain text with enable_thinking (Apertus's "Deliberation:
// enabled") is not one.
func detectThinking(tpl *jinja.Template, src string) bool {
	if strings.Contains(src, "<|channel|>") || strings.Contains(src, "content.split('</think>')") ||
		strings.Contains(src, "Write your thoughts between <think></think> and write your response between <response></response>") {
		return true
	}
	const reasoning = "vkllm probe reasoning"
	user := msg("user", probeUser)
	with := msg("assistant", "vkllm probe answer")
	with.Set("reasoning_content", reasoning)
	if out := probeRender(tpl, map[string]any{"enable_thinking": true}, user, with); strings.Contains(out, reasoning) {
		i := strings.Index(out, reasoning)
		after := strings.TrimLeft(out[i+len(reasoning):], " \t\r\n")
		if loc := markerRE.FindStringIndex(after); loc != nil && loc[0] == 0 {
			return true
		}
	}
	gen := func(on bool) string {
		return probeRender(tpl, map[string]any{"enable_thinking": on, "add_generation_prompt": true}, msg("user", probeUser))
	}
	off, on := gen(false), gen(true)
	if off == on || on == "" {
		return false
	}
	p := 0
	for p < len(off) && p < len(on) && off[p] == on[p] {
		p++
	}
	q := 0
	for q < len(off)-p && q < len(on)-p && off[len(off)-1-q] == on[len(on)-1-q] {
		q++
	}
	// Align the split to markers, as the reference's diff does: a prefix
	// or suffix may not end or start inside one (<think> against </think>).
	if i := strings.LastIndexByte(off[:p], '<'); i >= 0 && !strings.Contains(off[i:p], ">") {
		p = i
	}
	if q > len(off)-p {
		q = len(off) - p
	}
	if q > len(on)-p {
		q = len(on) - p
	}
	if suf := off[len(off)-q:]; q > 0 {
		if gt := strings.IndexByte(suf, '>'); gt >= 0 && !strings.Contains(suf[:gt], "<") {
			q -= gt + 1
		}
	}
	left, right := off[p:len(off)-q], on[p:len(on)-q]
	if strings.TrimSpace(left) == "" {
		r := strings.TrimSpace(right)
		return r != "" && strings.HasSuffix(on, r) && markerRE.MatchString(r)
	}
	return markerRE.MatchString(left) && markerRE.MatchString(right)
}

// renderInput is what a template renders.
type renderInput struct {
	messages []message
	tools    []tool
	// toolsValue is the request's tools array as the client sent it (key
	// order kept); nil builds it from tools.
	toolsValue any
	// kwargs are the request's chat_template_kwargs: extra template
	// variables, overriding the others.
	kwargs *jinja.Dict
	// reasoningEffort is the request's reasoning_effort: the variable
	// reasoning_effort (gpt-oss reads it), over chat_template_kwargs as
	// in the reference; "none" sets enable_thinking false instead.
	reasoningEffort string
	// noThinking sets enable_thinking false (--reasoning-budget 0) where
	// the kwargs do not set it.
	noThinking bool
	bos, eos   string
	now        time.Time
	// maxOutput bounds the rendered text (0: the engine's default).
	maxOutput int
}

// templateError is a render failure: raised is set when the template
// itself refused the conversation with raise_exception.
type templateError struct {
	msg    string
	raised bool
}

func (e *templateError) Error() string { return e.msg }

// render returns the prompt text with the generation prompt for the
// assistant appended.
func (t *chatTemplate) render(in renderInput) (string, error) {
	msgs := in.messages
	if t.jinja == nil {
		if len(in.tools) > 0 {
			msgs = withToolSystem(msgs, toolSystemPrompt(in.tools, t.format))
		}
		return renderNamed(t.name, msgs, t.format, in.bos, in.eos), nil
	}
	vars, gemma4 := t.templateVars(in)
	out, err := t.jinja.Render(vars, jinja.Options{Now: in.now, MaxOutput: in.maxOutput})
	if err != nil {
		var re *jinja.RaiseError
		if errors.As(err, &re) {
			return "", &templateError{msg: "the chat template raised an error: " + re.Msg, raised: true}
		}
		return "", &templateError{msg: "rendering the chat template: " + err.Error()}
	}
	if gemma4 && strings.HasSuffix(out, "<turn|>\n") {
		// As the reference: a Gemma 4 conversation that ends on a turn the
		// template closed still gets the model's turn opened.
		out += "<|turn>model\n"
	}
	return out, nil
}

// templateVars is the context a Jinja template renders with, as the
// reference builds it, and whether the conversation was rewritten in
// Gemma 4's tool_responses form.
func (t *chatTemplate) templateVars(in renderInput) (map[string]any, bool) {
	msgs := in.messages
	if !t.caps.systemRole && hasSystem(msgs) {
		msgs = foldSystem(msgs, "\n")
	}
	messages := t.messagesValue(msgs)
	gemma4 := isGemma4ToolResponses(t.source)
	if gemma4 {
		messages = gemma4ToolResponses(messages)
	}
	vars := map[string]any{
		"messages":              messages,
		"add_generation_prompt": true,
		"bos_token":             in.bos,
		"eos_token":             in.eos,
		"date_string":           jinja.Strftime(in.now, "%d %b %Y"),
		"datetime":              jinja.Strftime(in.now, "%b %d %Y"),
		// As the reference: true where the template supports reasoning,
		// false (not undefined) elsewhere.
		"enable_thinking": t.caps.thinking && !in.noThinking,
	}
	if len(in.tools) > 0 {
		tv := in.toolsValue
		if tv == nil {
			tv = toolsValue(in.tools)
		} else {
			// A template may change what it is given (MiroThinker marks
			// each tool it has printed); each render starts from the
			// request's own.
			tv = jinja.DeepCopy(tv)
		}
		vars["tools"] = tv
	}
	if in.kwargs != nil {
		for _, k := range in.kwargs.Keys() {
			v, _ := in.kwargs.Get(k)
			vars[k.(string)] = jinja.DeepCopy(v)
		}
	}
	switch in.reasoningEffort {
	case "":
	case "none":
		delete(vars, "reasoning_effort")
		vars["enable_thinking"] = false
	default:
		vars["reasoning_effort"] = in.reasoningEffort
	}
	return vars, gemma4
}

// messagesValue converts the conversation as the reference passes it to
// templates: null content as "", tool-call arguments as JSON text or as
// objects (caps.objectArguments), content as typed parts when required.
func (t *chatTemplate) messagesValue(msgs []message) *jinja.List {
	l := &jinja.List{Items: make([]any, len(msgs))}
	for i, m := range msgs {
		o := jinja.NewDict()
		o.Set("role", m.role)
		if t.caps.typedContent {
			part := jinja.NewDict()
			part.Set("type", "text")
			part.Set("text", m.content)
			o.Set("content", jinja.NewList(part))
		} else {
			o.Set("content", m.content)
		}
		if m.reasoning != "" {
			o.Set("reasoning_content", m.reasoning)
			if t.family == familyHarmony && len(m.toolCalls) > 0 || t.family == familyLFM2 {
				// gpt-oss's template keeps the analysis before a call
				// from its "thinking" field, and LFM2.5's reads its
				// reasoning there, as the reference passes them.
				o.Set("thinking", m.reasoning)
			}
		}
		if len(m.toolCalls) > 0 {
			calls := jinja.NewList()
			for _, c := range m.toolCalls {
				var args any = c.arguments
				if t.caps.objectArguments {
					if v, err := jinja.ParseJSON([]byte(c.arguments)); err == nil {
						args = v
					}
				}
				fn := jinja.NewDict()
				fn.Set("name", c.name)
				fn.Set("arguments", args)
				call := jinja.NewDict()
				if c.id != "" {
					call.Set("id", c.id)
				}
				call.Set("type", "function")
				call.Set("function", fn)
				calls.Items = append(calls.Items, call)
			}
			o.Set("tool_calls", calls)
		}
		if m.toolCallID != "" {
			o.Set("tool_call_id", m.toolCallID)
		}
		if m.name != "" {
			o.Set("name", m.name)
		}
		l.Items[i] = o
	}
	return l
}

// toolsValue builds the tools array from decoded tools (parameter keys in
// the client's order).
func toolsValue(tools []tool) any {
	l := jinja.NewList()
	for _, t := range tools {
		fn := jinja.NewDict()
		fn.Set("name", t.name)
		fn.Set("description", t.description)
		var params any
		if t.parameters != nil {
			params, _ = jinja.ParseJSON(t.parameters)
		}
		if params == nil {
			d := jinja.NewDict()
			d.Set("type", "object")
			d.Set("properties", jinja.NewDict())
			params = d
		}
		fn.Set("parameters", params)
		w := jinja.NewDict()
		w.Set("type", "function")
		w.Set("function", fn)
		l.Items = append(l.Items, w)
	}
	return l
}

func hasSystem(msgs []message) bool {
	for _, m := range msgs {
		if m.role == "system" {
			return true
		}
	}
	return false
}

// foldSystem merges system messages into the first user message, sep
// between them (the reference uses one newline for Jinja templates without
// a system role).
func foldSystem(msgs []message, sep string) []message {
	var sys []string
	var out []message
	for _, m := range msgs {
		if m.role == "system" {
			sys = append(sys, m.content)
			continue
		}
		out = append(out, m)
	}
	for i := range out {
		if out[i].role == "user" {
			if out[i].content == "" {
				out[i].content = strings.Join(sys, sep)
			} else {
				out[i].content = strings.Join(sys, sep) + sep + out[i].content
			}
			return out
		}
	}
	return append([]message{{role: "user", content: strings.Join(sys, sep)}}, out...)
}

func withToolSystem(msgs []message, text string) []message {
	out := make([]message, 0, len(msgs)+1)
	if len(msgs) > 0 && msgs[0].role == "system" {
		m := msgs[0]
		m.content = m.content + "\n\n" + text
		out = append(out, m)
		return append(out, msgs[1:]...)
	}
	out = append(out, message{role: "system", content: text})
	return append(out, msgs...)
}

func toolsJSON(tools []tool) []any {
	out := make([]any, len(tools))
	for i, t := range tools {
		f := map[string]any{"name": t.name, "description": t.description}
		if t.parameters != nil {
			f["parameters"] = plainJSON(t.parameters)
		} else {
			f["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		out[i] = map[string]any{"type": "function", "function": f}
	}
	return out
}

// toolSystemPrompt is the generic presentation of tools for templates
// without their own: the function list as JSON and how to call one in the
// format the parser expects.
func toolSystemPrompt(tools []tool, f grammar.ToolFormat) string {
	var b strings.Builder
	b.WriteString("You can call the following functions. Their signatures, as JSON:\n")
	for _, t := range toolsJSON(tools) {
		b.Write(marshalPlain(t))
		b.WriteByte('\n')
	}
	switch f {
	case grammar.ToolFormatHermes:
		b.WriteString("To call a function, answer with\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
	case grammar.ToolFormatLlama3:
		b.WriteString("To call a function, answer with only a JSON object {\"name\": <function-name>, \"parameters\": <args-json-object>}")
	case grammar.ToolFormatMistral:
		b.WriteString("To call functions, answer with [TOOL_CALLS] followed by a JSON array of {\"name\": <function-name>, \"arguments\": <args-json-object>}")
	default:
		b.WriteString("To call a function, answer with only a JSON object {\"tool_call\": {\"name\": <function-name>, \"arguments\": <args-json-object>}}")
	}
	return b.String()
}

// formatToolCalls writes earlier calls of an assistant message as the model
// would have written them.
func formatToolCalls(calls []toolCall, f grammar.ToolFormat) string {
	var b strings.Builder
	for i, c := range calls {
		args := c.arguments
		if args == "" {
			args = "{}"
		}
		switch f {
		case grammar.ToolFormatHermes:
			if i > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "<tool_call>\n{\"name\": %s, \"arguments\": %s}\n</tool_call>", jsonStr(c.name), args)
		case grammar.ToolFormatLlama3:
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "{\"name\": %s, \"parameters\": %s}", jsonStr(c.name), args)
		case grammar.ToolFormatMistral:
			if i == 0 {
				b.WriteString("[TOOL_CALLS][")
			} else {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{\"name\": %s, \"arguments\": %s}", jsonStr(c.name), args)
			if i == len(calls)-1 {
				b.WriteByte(']')
			}
		default:
			if i > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "{\"tool_call\": {\"name\": %s, \"arguments\": %s}}", jsonStr(c.name), args)
		}
	}
	return b.String()
}

func jsonStr(s string) string { return string(appendJSONString(nil, s)) }

// renderNamed renders one of the built-in templates. Tool calls of
// assistant messages are appended to their content in the template's tool
// format; tool results are rendered with the role "tool".
func renderNamed(name string, msgs []message, f grammar.ToolFormat, bos, eos string) string {
	var b strings.Builder
	text := func(m message) string {
		if len(m.toolCalls) == 0 {
			return m.content
		}
		if m.content == "" {
			return formatToolCalls(m.toolCalls, f)
		}
		return m.content + "\n" + formatToolCalls(m.toolCalls, f)
	}
	switch name {
	case "plain":
		for _, m := range msgs {
			b.WriteString(m.role + ": " + text(m) + "\n")
		}
		b.WriteString("assistant:")
	case "chatml":
		for _, m := range msgs {
			b.WriteString("<|im_start|>" + m.role + "\n" + text(m) + "<|im_end|>\n")
		}
		b.WriteString("<|im_start|>assistant\n")
	case "llama-3":
		b.WriteString("<|begin_of_text|>")
		for _, m := range msgs {
			role := m.role
			if role == "tool" {
				role = "ipython"
			}
			b.WriteString("<|start_header_id|>" + role + "<|end_header_id|>\n\n" + strings.TrimSpace(text(m)) + "<|eot_id|>")
		}
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	case "llama-2":
		sys, rest := splitSystem(msgs)
		first := true
		for _, m := range rest {
			switch m.role {
			case "assistant":
				b.WriteString(" " + text(m) + " </s>")
			default:
				b.WriteString("<s>[INST] ")
				if first && sys != "" {
					b.WriteString("<<SYS>>\n" + sys + "\n<</SYS>>\n\n")
				}
				first = false
				b.WriteString(prefixTool(m) + text(m) + " [/INST]")
			}
		}
	case "mistral-instruct":
		sys, rest := splitSystem(msgs)
		b.WriteString("<s>")
		first := true
		for _, m := range rest {
			switch m.role {
			case "assistant":
				b.WriteString(" " + text(m) + "</s>")
			default:
				b.WriteString("[INST] ")
				if first && sys != "" {
					b.WriteString(sys + "\n\n")
				}
				first = false
				b.WriteString(prefixTool(m) + text(m) + " [/INST]")
			}
		}
	case "gemma":
		b.WriteString("<bos>")
		for _, m := range foldSystemIf(msgs) {
			role := m.role
			if role == "assistant" {
				role = "model"
			}
			b.WriteString("<start_of_turn>" + role + "\n" + prefixTool(m) + strings.TrimSpace(text(m)) + "<end_of_turn>\n")
		}
		b.WriteString("<start_of_turn>model\n")
	case "phi-3":
		for _, m := range msgs {
			b.WriteString("<|" + m.role + "|>\n" + text(m) + "<|end|>\n")
		}
		b.WriteString("<|assistant|>\n")
	case "zephyr":
		for _, m := range msgs {
			b.WriteString("<|" + m.role + "|>\n" + text(m) + "</s>\n")
		}
		b.WriteString("<|assistant|>\n")
	case "vicuna":
		sys, rest := splitSystem(msgs)
		if sys != "" {
			b.WriteString(sys + "\n\n")
		}
		for _, m := range rest {
			switch m.role {
			case "assistant":
				b.WriteString("ASSISTANT: " + text(m) + "</s>\n")
			default:
				b.WriteString("USER: " + prefixTool(m) + text(m) + "\n")
			}
		}
		b.WriteString("ASSISTANT:")
	case "alpaca":
		sys, rest := splitSystem(msgs)
		if sys != "" {
			b.WriteString(sys + "\n\n")
		}
		for _, m := range rest {
			switch m.role {
			case "assistant":
				b.WriteString(text(m) + "</s>\n\n")
			default:
				b.WriteString("### Instruction:\n" + prefixTool(m) + text(m) + "\n\n### Response:\n")
			}
		}
	}
	return b.String()
}

// prefixTool marks tool results in templates without a tool role.
func prefixTool(m message) string {
	if m.role == "tool" {
		if m.toolCallID != "" {
			return "Result of tool call " + m.toolCallID + ": "
		}
		return "Tool result: "
	}
	return ""
}

func splitSystem(msgs []message) (string, []message) {
	var sys []string
	var rest []message
	for _, m := range msgs {
		if m.role == "system" {
			sys = append(sys, m.content)
		} else {
			rest = append(rest, m)
		}
	}
	return strings.Join(sys, "\n\n"), rest
}

func foldSystemIf(msgs []message) []message {
	if hasSystem(msgs) {
		return foldSystem(msgs, "\n\n")
	}
	return msgs
}
