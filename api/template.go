package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// TemplateNames lists the named chat templates; "jinja" is the model's own.
var TemplateNames = []string{"plain", "chatml", "llama-2", "llama-3", "mistral-instruct", "gemma",
	"phi-3", "zephyr", "vicuna", "alpaca", "jinja"}

// chatTemplate renders a conversation into a prompt.
type chatTemplate struct {
	name   string
	jinja  *exec.Template // for "jinja"
	source string
	format grammar.ToolFormat // how the model writes tool calls
	// nativeTools: the Jinja source presents tools itself.
	nativeTools bool
}

// newChatTemplate returns the template called name; src is the model's
// tokenizer.chat_template for "jinja".
func newChatTemplate(name, src string) (*chatTemplate, error) {
	t := &chatTemplate{name: name}
	switch name {
	case "chatml":
		t.format = grammar.ToolFormatHermes
	case "llama-3":
		t.format = grammar.ToolFormatLlama3
	case "mistral-instruct":
		t.format = grammar.ToolFormatMistral
	case "plain", "llama-2", "gemma", "phi-3", "zephyr", "vicuna", "alpaca":
		t.format = grammar.ToolFormatGeneric
	case "jinja":
		if src == "" {
			return nil, errors.New("the model has no tokenizer.chat_template")
		}
		tpl, err := compileJinja(src)
		if err != nil {
			return nil, fmt.Errorf("the model's chat template does not parse: %v", err)
		}
		t.jinja, t.source = tpl, src
		t.format = detectToolFormat(src)
		t.nativeTools = strings.Contains(src, "tools")
	default:
		return nil, fmt.Errorf("unknown template %q, want one of %s", name, strings.Join(TemplateNames, ", "))
	}
	return t, nil
}

func detectToolFormat(src string) grammar.ToolFormat {
	switch {
	case strings.Contains(src, "<tool_call>"):
		return grammar.ToolFormatHermes
	case strings.Contains(src, "[TOOL_CALLS]"):
		return grammar.ToolFormatMistral
	case strings.Contains(src, "<|python_tag|>") || strings.Contains(src, "ipython"):
		return grammar.ToolFormatLlama3
	}
	return grammar.ToolFormatGeneric
}

// compileJinja parses src with gonja in an environment of our own (no
// global registries touched): Jinja2's undefined-tolerant trim, plus
// raise_exception and strftime_now given per render.
func compileJinja(src string) (*exec.Template, error) {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	trim, _ := builtins.Filters.Get("trim")
	_ = filters.Replace("trim", func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if !in.IsString() && (in.IsNil() || in.String() == "") {
			return exec.AsValue("")
		}
		return trim(e, in, params)
	})
	tojson, _ := builtins.Filters.Get("tojson")
	_ = filters.Replace("tojson", func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		out := tojson(e, in, params)
		if !out.IsString() {
			return out
		}
		return exec.AsValue(pythonJSON(out.String()))
	})
	env := &exec.Environment{
		Context:           exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables),
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
	}
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, err
	}
	sl, err := loaders.NewShiftedLoader("chat_template", bytes.NewReader([]byte(src)), loader)
	if err != nil {
		return nil, err
	}
	return exec.NewTemplate("chat_template", gonja.DefaultConfig, sl, env)
}

// pythonJSON rewrites Go's JSON as Python's json.dumps (which Hugging Face's
// tojson uses) writes it: no HTML escapes, and ", " and ": " separators in
// the compact form. Map keys stay sorted (Go maps have no order).
func pythonJSON(s string) string {
	s = strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&", `\u0027`, "'").Replace(s)
	if strings.Contains(s, "\n") {
		return s // indented: Go's form already matches
	}
	var b strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// renderInput is what a template renders.
type renderInput struct {
	messages []message
	tools    []tool
	bos, eos string
	now      time.Time
}

// render returns the prompt text with the generation prompt for the
// assistant appended.
func (t *chatTemplate) render(in renderInput) (string, error) {
	msgs := in.messages
	if len(in.tools) > 0 && !t.nativeTools {
		msgs = withToolSystem(msgs, toolSystemPrompt(in.tools, t.format))
	}
	if t.jinja != nil {
		if !strings.Contains(t.source, "tool_calls") && hasToolUse(msgs) {
			// The template cannot show earlier calls: write them as text.
			msgs = polyfillTools(msgs, t.format)
		}
		out, err := t.renderJinja(in, msgs)
		if err == nil {
			return out, nil
		}
		// Templates without a system role (Gemma) or without tool messages
		// raise; retry as llama.cpp's polyfills do: the system text folded
		// into the first user message, then also tool calls written into
		// the assistant's content and tool results sent as user messages.
		if hasSystem(msgs) {
			if out2, err2 := t.renderJinja(in, foldSystem(msgs)); err2 == nil {
				return out2, nil
			}
		}
		if hasToolUse(msgs) {
			if out2, err2 := t.renderJinja(in, foldSystemIf(polyfillTools(msgs, t.format))); err2 == nil {
				return out2, nil
			}
		}
		return out, err
	}
	return renderNamed(t.name, msgs, t.format, in.bos, in.eos), nil
}

func hasToolUse(msgs []message) bool {
	for _, m := range msgs {
		if m.role == "tool" || len(m.toolCalls) > 0 {
			return true
		}
	}
	return false
}

// polyfillTools rewrites tool use for templates that know only user and
// assistant: calls become assistant text, results become user messages.
func polyfillTools(msgs []message, f grammar.ToolFormat) []message {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.role == "tool":
			text := prefixTool(m) + m.content
			if n := len(out); n > 0 && out[n-1].role == "user" {
				out[n-1].content += "\n" + text
				continue
			}
			out = append(out, message{role: "user", content: text})
		case len(m.toolCalls) > 0:
			c := formatToolCalls(m.toolCalls, f)
			if m.content != "" {
				c = m.content + "\n" + c
			}
			out = append(out, message{role: m.role, content: c})
		default:
			out = append(out, m)
		}
	}
	return out
}

func hasSystem(msgs []message) bool {
	for _, m := range msgs {
		if m.role == "system" {
			return true
		}
	}
	return false
}

// foldSystem merges system messages into the first user message.
func foldSystem(msgs []message) []message {
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
			out[i].content = strings.Join(sys, "\n\n") + "\n\n" + out[i].content
			return out
		}
	}
	return append([]message{{role: "user", content: strings.Join(sys, "\n\n")}}, out...)
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

func (t *chatTemplate) renderJinja(in renderInput, msgs []message) (string, error) {
	jm := make([]any, len(msgs))
	for i, m := range msgs {
		o := map[string]any{"role": m.role}
		if m.null {
			o["content"] = nil
		} else {
			o["content"] = m.content
		}
		if m.name != "" {
			o["name"] = m.name
		}
		if m.toolCallID != "" {
			o["tool_call_id"] = m.toolCallID
		}
		if len(m.toolCalls) > 0 {
			calls := make([]any, len(m.toolCalls))
			for j, c := range m.toolCalls {
				var args any = c.arguments
				var parsed map[string]any
				if json.Unmarshal([]byte(c.arguments), &parsed) == nil {
					args = parsed
				}
				calls[j] = map[string]any{"id": c.id, "type": "function",
					"function": map[string]any{"name": c.name, "arguments": args}}
			}
			o["tool_calls"] = calls
		}
		jm[i] = o
	}
	data := map[string]any{
		"messages":              jm,
		"add_generation_prompt": true,
		"bos_token":             in.bos,
		"eos_token":             in.eos,
		"raise_exception": func(msg string) (string, error) {
			return "", fmt.Errorf("template raised: %s", msg)
		},
		"strftime_now": func(f string) string { return strftime(in.now, f) },
	}
	if len(in.tools) > 0 {
		data["tools"] = toolsJSON(in.tools)
	}
	out, err := t.jinja.ExecuteToString(exec.NewContext(data))
	if err != nil {
		return "", fmt.Errorf("rendering the chat template: %v", lastLine(err.Error()))
	}
	return out, nil
}

func lastLine(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "raised") {
		if j := strings.Index(s, "template raised"); j >= 0 {
			return s[j:]
		}
	}
	return s
}

func toolsJSON(tools []tool) []any {
	out := make([]any, len(tools))
	for i, t := range tools {
		f := map[string]any{"name": t.name, "description": t.description}
		if t.parameters != nil {
			f["parameters"] = toPlain(t.parameters)
		} else {
			f["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		out[i] = map[string]any{"type": "function", "function": f}
	}
	return out
}

// strftime implements the directives chat templates use.
func strftime(t time.Time, f string) string {
	r := strings.NewReplacer("%d", t.Format("02"), "%b", t.Format("Jan"), "%B", t.Format("January"),
		"%Y", t.Format("2006"), "%m", t.Format("01"), "%H", t.Format("15"), "%M", t.Format("04"),
		"%S", t.Format("05"), "%y", t.Format("06"), "%a", t.Format("Mon"), "%A", t.Format("Monday"), "%%", "%")
	return r.Replace(f)
}

// toolSystemPrompt is the generic presentation of tools for templates
// without their own: the function list as JSON and how to call one in the
// format the parser expects.
func toolSystemPrompt(tools []tool, f grammar.ToolFormat) string {
	var b strings.Builder
	b.WriteString("You can call the following functions. Their signatures, as JSON:\n")
	for _, t := range toolsJSON(tools) {
		b.Write(rawJSON(t))
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
		return foldSystem(msgs)
	}
	return msgs
}
