package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/vkllm/vkllm/internal/jinja"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// message is one decoded chat message (API.md 2.2).
type message struct {
	role       string
	content    string
	null       bool // content was null or absent
	toolCalls  []toolCall
	toolCallID string
	name       string
	reasoning  string // reasoning_content of an earlier assistant turn
	images     int    // image_url parts
	// parts are the content parts of an array content, in order: the
	// content is their text joined as the reference joins it, with a
	// marker per image (joinParts, media.go).
	parts []contentPart
}

// toolCall is a function call, in messages and in output.
type toolCall struct {
	id        string
	name      string
	arguments string // JSON text
}

// tool is a callable function of the request.
type tool struct {
	name        string
	description string
	parameters  jsonValue // JSON Schema text, nil for none
}

// Tool choice modes.
const (
	toolChoiceAuto = iota
	toolChoiceNone
	toolChoiceRequired
	toolChoiceNamed
)

// chatRequest is a decoded POST /v1/chat/completions body.
type chatRequest struct {
	*genRequest
	messages     []message
	template     string // "" = the server default
	tools        []tool
	toolChoice   int
	toolName     string // for toolChoiceNamed
	parallelCall bool
	// toolsValue is the tools array as the client sent it (key order
	// kept), for templates; nil when there are no tools.
	toolsValue any
	// kwargs is chat_template_kwargs: extra template variables.
	kwargs *jinja.Dict
	// reasoningEffort is reasoning_effort ("" when absent): the template
	// variable reasoning_effort, or "none" for enable_thinking false.
	reasoningEffort string
	// reasoningFormat is reasoning_format ("" when absent: the server's
	// --reasoning-format); see reasoning.go.
	reasoningFormat string
	// marker stands for each image in the messages' content (media.go);
	// "" when there are none.
	marker string
}

var chatFields = append(append([]string{"messages", "template", "chat_template", "tools", "tool_choice",
	"function_call", "functions", "parallel_tool_calls", "chat_template_kwargs", "reasoning_effort", "reasoning_format"},
	outputNeutralFields...), genFields...)

func decodeChat(b grammar.Budget, body []byte) (*chatRequest, *Error) {
	v, e := parseJSON(body)
	if e != nil {
		return nil, e
	}
	r := &reader{compile: b}
	m := r.object(v, "", chatFields...)
	if r.err != nil {
		return nil, r.err
	}
	req := &chatRequest{parallelCall: true}
	msgs, ok := r.array(m, "", "messages")
	if r.err == nil && !ok {
		r.fail(badRequest("messages", "messages: missing, want an array of messages"))
	}
	if r.err == nil {
		req.messages = make([]message, 0, min(msgs.count(), maxMessages))
		r.each(msgs, "messages", maxMessages, func(i int, mv jsonValue) {
			req.messages = append(req.messages, r.readMessage(mv, indexPath("messages", i)))
		})
	}
	if r.err == nil && len(req.messages) == 0 {
		r.fail(badRequest("messages", "messages: empty array"))
	}
	req.joinMedia()
	req.template = r.str(m, "", "template", "")
	if t, ok := r.optStr(m, "", "chat_template"); ok && req.template == "" {
		req.template = t
	}
	if a, ok := r.array(m, "", "tools"); ok {
		r.each(a, "tools", maxTools, func(i int, tv jsonValue) {
			req.tools = append(req.tools, r.readTool(tv, indexPath("tools", i), true))
		})
	}
	if a, ok := r.array(m, "", "functions"); ok {
		if len(req.tools) > 0 {
			r.fail(badRequest("functions", "functions: give either tools or the legacy functions, not both"))
		}
		r.each(a, "functions", maxTools, func(i int, fv jsonValue) {
			req.tools = append(req.tools, r.readTool(fv, indexPath("functions", i), false))
		})
	}
	req.parallelCall = r.boolean(m, "", "parallel_tool_calls", true)
	if tc, ok := m["tool_choice"]; ok && tc != nil {
		r.readToolChoice(req, tc, "tool_choice")
	} else if fc, ok := m["function_call"]; ok && fc != nil {
		r.readToolChoice(req, fc, "function_call")
	}
	if kw, ok := m["chat_template_kwargs"]; ok && kw != nil {
		if !kw.isObject() {
			r.typeErr("chat_template_kwargs", "object (template variables)", kw)
		}
	}
	r.readOutputNeutral(m)
	req.reasoningEffort = r.readReasoningEffort(m, false)
	if f, ok := r.optStr(m, "", "reasoning_format"); ok {
		if !slices.Contains(ReasoningFormats, f) {
			r.fail(badRequest("reasoning_format", "reasoning_format: %q, want one of %s", f, strings.Join(ReasoningFormats, ", ")))
		}
		req.reasoningFormat = f
	}
	req.genRequest = r.readGen(m, false)
	if r.err != nil {
		return nil, r.err
	}
	if e := req.readOrdered(b.Ctx, m); e != nil {
		return nil, e
	}
	if len(req.tools) == 0 && (req.toolChoice == toolChoiceRequired || req.toolChoice == toolChoiceNamed) {
		if req.toolChoice == toolChoiceNamed {
			return nil, errorf(422, "tool_choice", "tool_choice: function %q is not among the request's tools (none given)", req.toolName)
		}
		return nil, badRequest("tool_choice", "tool_choice: \"required\" needs tools")
	}
	if req.toolChoice == toolChoiceNamed {
		found := false
		for _, t := range req.tools {
			found = found || t.name == req.toolName
		}
		if !found {
			return nil, errorf(422, "tool_choice", "tool_choice: function %q is not among the request's tools", req.toolName)
		}
	}
	if req.grammar != "" && len(req.tools) > 0 && req.toolChoice != toolChoiceNone {
		return nil, badRequest("tools", "tools cannot be combined with grammar, json_schema or response_format")
	}
	return req, nil
}

// readOrdered decodes the parts of the body that templates print with
// their key order kept: the tools (as the client wrote them) and
// chat_template_kwargs.
// Their parsed form costs up to decodedJSONCost times their JSON, which
// is charged to the request (chargeDecoded) before they are parsed.
func (req *chatRequest) readOrdered(ctx context.Context, m jsonObject) *Error {
	var raw struct{ Tools, Functions, Kwargs jsonValue }
	raw.Tools, raw.Functions, raw.Kwargs = m["tools"], m["functions"], m["chat_template_kwargs"]
	if len(req.tools) > 0 {
		if e := chargeDecoded(ctx, "tools", len(raw.Tools)+len(raw.Functions)); e != nil {
			return e
		}
	}
	if raw.Kwargs != nil {
		if e := chargeDecoded(ctx, "chat_template_kwargs", len(raw.Kwargs)); e != nil {
			return e
		}
	}
	if len(req.tools) > 0 {
		src, param := raw.Tools, "tools"
		if raw.Functions != nil && raw.Tools == nil {
			src, param = raw.Functions, "functions"
		}
		v, err := jinja.ParseJSON(src)
		if err != nil {
			return badRequest(param, "%s: %v", param, err)
		}
		if l, ok := v.(*jinja.List); ok && param == "functions" {
			// Legacy functions are tools without the wrapper.
			for i, f := range l.Items {
				l.Items[i] = functionTool(f)
			}
		}
		req.toolsValue = v
	}
	if raw.Kwargs != nil {
		d, e := templateKwargs(raw.Kwargs)
		if e != nil {
			return e
		}
		req.kwargs = d
	}
	return nil
}

// functionTool returns the tool of function fn as chat templates read
// tools: {"type": "function", "function": fn}.
func functionTool(fn any) *jinja.Dict {
	w := jinja.NewDict()
	w.Set("type", "function")
	w.Set("function", fn)
	return w
}

// reservedTemplateVars are the template variables the server sets from
// the request's validated fields: chat_template_kwargs may not replace
// them (its other keys override the server's defaults, as
// enable_thinking).
var reservedTemplateVars = []string{"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}

// templateKwargs parses chat_template_kwargs (JSON, not null) into the
// template variables it gives, their key order kept.
func templateKwargs(raw []byte) (*jinja.Dict, *Error) {
	v, err := jinja.ParseJSON(raw)
	if err != nil {
		return nil, badRequest("chat_template_kwargs", "chat_template_kwargs: %v", err)
	}
	d, ok := v.(*jinja.Dict)
	if !ok {
		return nil, badRequest("chat_template_kwargs", "chat_template_kwargs: want an object")
	}
	for _, k := range d.Keys() {
		if name, _ := k.(string); slices.Contains(reservedTemplateVars, name) {
			return nil, badRequest("chat_template_kwargs", "chat_template_kwargs: %q is set by the server from the request's validated fields; it cannot be given here", name)
		}
	}
	if v, ok := d.Get("enable_thinking"); ok {
		if _, isStr := v.(string); isStr {
			// As the reference: "false" would be true to a template.
			return nil, badRequest("chat_template_kwargs.enable_thinking", "chat_template_kwargs.enable_thinking: invalid type (expected boolean, got string)")
		}
	}
	return d, nil
}

func (r *reader) readToolChoice(req *chatRequest, v jsonValue, path string) {
	switch {
	case v.isString():
		switch x := v.str(); x {
		case "auto":
			req.toolChoice = toolChoiceAuto
		case "none":
			req.toolChoice = toolChoiceNone
		case "required", "any":
			req.toolChoice = toolChoiceRequired
		default:
			r.fail(badRequest(path, "%s: %q is not one of \"none\", \"auto\", \"required\", or an object naming a function", path, x))
		}
	case v.isObject():
		if path == "function_call" { // legacy {"name": ...}
			m := r.object(v, path, "name")
			if m != nil {
				req.toolName = r.str(m, path, "name", "")
				req.toolChoice = toolChoiceNamed
			}
			return
		}
		m := r.object(v, path, "type", "function")
		if m == nil {
			return
		}
		if t := r.str(m, path, "type", "function"); t != "function" && r.err == nil {
			r.fail(badRequest(path+".type", "%s.type: %q, want \"function\"", path, t))
		}
		f, ok := m["function"]
		if !ok {
			r.fail(badRequest(path+".function", "%s.function: missing", path))
			return
		}
		fm := r.object(f, path+".function", "name")
		if fm != nil {
			req.toolName = r.str(fm, path+".function", "name", "")
			req.toolChoice = toolChoiceNamed
		}
	default:
		r.typeErr(path, "string or object", v)
	}
}

func (r *reader) readTool(v jsonValue, path string, wrapped bool) tool {
	var t tool
	fm := jsonObject(nil)
	fpath := path
	if wrapped {
		m := r.object(v, path, "type", "function")
		if m == nil {
			return t
		}
		if typ := r.str(m, path, "type", "function"); typ != "function" && r.err == nil {
			r.fail(badRequest(path+".type", "%s.type: %q, want \"function\"", path, typ))
		}
		fv, ok := m["function"]
		if !ok {
			r.fail(badRequest(path+".function", "%s.function: missing", path))
			return t
		}
		fpath = path + ".function"
		fm = r.object(fv, fpath, "name", "description", "parameters", "strict")
	} else {
		fm = r.object(v, path, "name", "description", "parameters")
	}
	if fm == nil {
		return t
	}
	return r.readFunction(fm, fpath)
}

// readFunction reads the function of a tool at path, in any of the shapes
// the routes take (chat's tools and legacy functions, Responses' tools):
// its name, description, strict flag and parameters schema.
func (r *reader) readFunction(fm jsonObject, path string) tool {
	var t tool
	t.name = r.str(fm, path, "name", "")
	if t.name == "" && r.err == nil {
		r.fail(badRequest(path+".name", "%s.name: missing or empty", path))
	}
	t.description = r.str(fm, path, "description", "")
	r.boolean(fm, path, "strict", false)
	if p, ok := fm["parameters"]; ok && p != nil {
		if !p.isObject() {
			r.typeErr(path+".parameters", "object (a JSON Schema)", p)
		}
		t.parameters = p
	}
	return t
}

func (r *reader) readMessage(v jsonValue, path string) message {
	var msg message
	m := r.object(v, path, "role", "content", "tool_calls", "tool_call_id", "name", "function_call", "reasoning_content", "refusal",
		"annotations", "audio", "parsed")
	if m == nil {
		return msg
	}
	msg.role = r.str(m, path, "role", "")
	switch msg.role {
	case "system", "user", "assistant", "tool", "developer", "function":
	case "":
		r.fail(badRequest(path+".role", "%s.role: missing", path))
	default:
		r.fail(badRequest(path+".role", "%s.role: %q is not one of \"system\", \"user\", \"assistant\", \"tool\"", path, msg.role))
	}
	r.checkAssistantOnly(m, path, msg.role)
	if msg.role == "developer" {
		msg.role = "system"
	}
	msg.name = r.str(m, path, "name", "")
	msg.toolCallID = r.str(m, path, "tool_call_id", "")
	msg.reasoning = r.str(m, path, "reasoning_content", "")
	cpath := path + ".content"
	switch c := m["content"]; {
	case c == nil:
		msg.null = true
	case c.isString():
		msg.content = c.str()
	case c.isArray():
		r.each(c, cpath, maxContentParts, func(i int, pv jsonValue) {
			ppath := indexPath(cpath, i)
			pm := r.object(pv, ppath, "type", "text", "image_url", "audio_url", "video_url", "input_audio", "cache_control")
			if pm == nil {
				return
			}
			r.cacheControl(pm, ppath)
			switch typ := r.str(pm, ppath, "type", ""); typ {
			case "text":
				t, ok := r.optStr(pm, ppath, "text")
				if !ok && r.err == nil {
					r.fail(badRequest(ppath+".text", "%s.text: missing", ppath))
				}
				msg.parts = append(msg.parts, contentPart{text: t})
			case "image_url":
				msg.images++
				url := r.urlPart(pm, ppath, "image_url")
				msg.parts = append(msg.parts, contentPart{image: true, url: url, field: ppath + ".image_url"})
			case "audio_url", "video_url", "input_audio":
				// Parsed for compatibility and not evaluated (API.md 2.2).
			case "":
				r.fail(badRequest(ppath+".type", "%s.type: missing", ppath))
			default:
				r.fail(badRequest(ppath+".type", "%s.type: %q is not one of \"text\", \"image_url\", \"audio_url\", \"video_url\"", ppath, typ))
			}
		})
		// Text parts joined as the reference joins them (joinParts); with
		// images joinMedia puts its marker in (media.go).
		msg.content = joinParts(msg.parts, "")
	default:
		r.typeErr(cpath, "string, null or array of content parts", c)
	}
	if a, ok := r.array(m, path, "tool_calls"); ok {
		r.each(a, path+".tool_calls", maxTools, func(i int, tv jsonValue) {
			msg.toolCalls = append(msg.toolCalls, r.readToolCall(tv, indexPath(path+".tool_calls", i)))
		})
	}
	if fc, ok := m["function_call"]; ok && fc != nil {
		fm := r.object(fc, path+".function_call", "name", "arguments")
		if fm != nil {
			msg.toolCalls = append(msg.toolCalls, toolCall{
				name:      r.str(fm, path+".function_call", "name", ""),
				arguments: r.str(fm, path+".function_call", "arguments", "{}"),
			})
		}
	}
	if msg.role == "function" {
		msg.role = "tool"
	}
	// An assistant turn that refused (OpenAI's refusal field) said its
	// refusal: it is the turn's text when the content is empty.
	if ref, ok := r.optStr(m, path, "refusal"); ok && ref != "" {
		if msg.role != "assistant" && r.err == nil {
			r.fail(badRequest(path+".refusal", "%s.refusal: only assistant messages carry a refusal", path))
		}
		if msg.content == "" {
			msg.content, msg.null = ref, false
		}
	}
	if msg.null && msg.role != "assistant" && r.err == nil {
		r.fail(badRequest(cpath, "%s: null content is only allowed on assistant messages", cpath))
	}
	return msg
}

func (r *reader) urlPart(pm jsonObject, ppath, key string) string {
	u, ok := pm[key]
	if !ok {
		r.fail(badRequest(ppath+"."+key, "%s.%s: missing", ppath, key))
		return ""
	}
	switch {
	case u.isString():
		return u.str()
	case u.isObject():
		um := r.object(u, ppath+"."+key, "url", "detail")
		if um != nil {
			r.str(um, ppath+"."+key, "detail", "")
			return r.str(um, ppath+"."+key, "url", "")
		}
	default:
		r.typeErr(ppath+"."+key, "object {url}", u)
	}
	return ""
}

func (r *reader) readToolCall(v jsonValue, path string) toolCall {
	var tc toolCall
	m := r.object(v, path, "id", "type", "function", "index")
	if m == nil {
		return tc
	}
	tc.id = r.str(m, path, "id", "")
	if t := r.str(m, path, "type", "function"); t != "function" && r.err == nil {
		r.fail(badRequest(path+".type", "%s.type: %q, want \"function\"", path, t))
	}
	r.integer(m, path, "index", 0)
	fv, ok := m["function"]
	if !ok {
		r.fail(badRequest(path+".function", "%s.function: missing", path))
		return tc
	}
	// parsed_arguments: Node's parse() adds the arguments decoded.
	fm := r.object(fv, path+".function", "name", "arguments", "parsed_arguments")
	if fm == nil {
		return tc
	}
	tc.name = r.str(fm, path+".function", "name", "")
	switch a := fm["arguments"]; {
	case a == nil:
		tc.arguments = "{}"
	case a.isString():
		tc.arguments = a.str()
	case a.isObject():
		tc.arguments = compactJSON(a)
	default:
		r.typeErr(path+".function.arguments", "string (JSON-encoded arguments)", a)
	}
	return tc
}

// toolFunctions converts the request tools for the grammar builder.
func toolFunctions(tools []tool) []grammar.ToolFunction {
	out := make([]grammar.ToolFunction, len(tools))
	for i, t := range tools {
		out[i].Name = t.name
		if t.parameters != nil {
			out[i].Parameters = json.RawMessage(rawJSON(t.parameters))
		}
	}
	return out
}
