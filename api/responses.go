package api

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/internal/jinja"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// POST /v1/responses: OpenAI's Responses API over the chat path. A request
// is decoded into a chatRequest (input items become messages, instructions
// a system message, function tools the chat tools) and prepared, generated
// and parsed exactly as /v1/chat/completions does; only the shapes of the
// answer and of the stream's events differ.

// responsesFields are the known fields of a Responses request: OpenAI's,
// and the sampling extras the other generation routes take.
var responsesFields = append([]string{
	"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools", "tool_choice",
	"parallel_tool_calls", "stream", "stream_options", "text", "previous_response_id",
	"truncation", "include", "top_logprobs", "background", "reasoning",
	// and those of outputNeutralFields (appended).
	// vkllm extras, as on the other generation routes.
	"seed", "top_k", "min_p", "typical_p", "tfs_z", "min_keep", "repeat_penalty", "frequency_penalty",
	"presence_penalty", "penalty_last_n", "mirostat_mode", "mirostat_tau", "mirostat_eta", "logit_bias",
	"logit_bias_type", "stop", "min_tokens", "template", "chat_template_kwargs",
}, outputNeutralFields...)

// responsesGenFields are the fields readGen reads as they are.
var responsesGenFields = []string{
	"temperature", "top_p", "stream", "seed", "top_k", "min_p", "typical_p", "tfs_z", "min_keep", "repeat_penalty",
	"frequency_penalty", "presence_penalty", "penalty_last_n", "mirostat_mode", "mirostat_tau", "mirostat_eta",
	"logit_bias", "logit_bias_type", "stop", "min_tokens",
}

// includeValues are the values of include OpenAI defines; only the
// logprobs one changes the answer here.
var includeValues = []string{
	"message.output_text.logprobs", "reasoning.encrypted_content", "message.input_image.image_url",
	"file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
	"code_interpreter_call.outputs", "computer_call_output.output.image_url",
}

// responsesRequest is a decoded POST /v1/responses body.
type responsesRequest struct {
	chat *chatRequest
	// items are the input items as sent (item references resolved and the
	// previous response's items first), kept for store.
	items        []jsonValue
	instructions any // string or null, echoed
	maxOutput    any // integer or null, echoed
	metadata     map[string]any
	store        bool
	previousID   string
	user         string
	truncation   string
	textFormat   map[string]any // echoed "text" object
	toolChoice   any            // echoed
	tools        []any          // echoed
}

func (s *Server) decodeResponses(b grammar.Budget, body []byte) (*responsesRequest, *Error) {
	v, e := parseJSON(body)
	if e != nil {
		return nil, e
	}
	r := &reader{compile: b}
	m := r.object(v, "", responsesFields...)
	if r.err != nil {
		return nil, r.err
	}
	req := &responsesRequest{store: true, truncation: "disabled", metadata: map[string]any{}}
	chat := &chatRequest{parallelCall: true}
	req.chat = chat

	// Generation fields: readGen reads the shared ones from gm.
	gm := jsonObject{}
	for _, k := range responsesGenFields {
		if x, ok := m[k]; ok {
			gm[k] = x
		}
	}
	gm["max_tokens"] = nil // up to the context unless max_output_tokens says
	if x, ok := m["max_output_tokens"]; ok && x != nil {
		n := r.intRange(m, "", "max_output_tokens", 0, 1, 1<<31-1)
		gm["max_tokens"] = jsonValue(strconv.FormatInt(n, 10))
		req.maxOutput = n
	}
	if a, ok := r.array(m, "", "include"); ok {
		r.each(a, "include", 64, func(i int, x jsonValue) {
			p := indexPath("include", i)
			if !x.isString() {
				r.typeErr(p, "string", x)
				return
			}
			switch sv := x.str(); {
			case !slices.Contains(includeValues, sv):
				r.fail(badRequest(p, "%s: %q is not one of %s", p, sv, strings.Join(includeValues, ", ")))
			case sv == "message.output_text.logprobs":
				gm["logprobs"] = jsonValue("true")
			}
		})
	}
	if x, ok := m["top_logprobs"]; ok && x != nil {
		gm["top_logprobs"] = x
		gm["logprobs"] = jsonValue("true")
	}
	if so, ok := m["stream_options"]; ok && so != nil {
		if sm := r.object(so, "stream_options", "include_obfuscation"); sm != nil {
			r.boolean(sm, "stream_options", "include_obfuscation", false)
		}
	}
	if r.boolean(m, "", "background", false) && r.err == nil {
		r.fail(badRequest("background", "background: background responses are not supported; send background false"))
	}
	if t, ok := r.optStr(m, "", "truncation"); ok {
		if t != "disabled" && t != "auto" {
			r.fail(badRequest("truncation", "truncation: %q is not one of \"disabled\", \"auto\"", t))
		}
		if t == "auto" && r.err == nil {
			r.fail(badRequest("truncation", "truncation: \"auto\" is not supported: a prompt over the context is an error, never cut"))
		}
	}
	req.metadata = r.readOutputNeutral(m)
	req.user, _ = r.optStr(m, "", "user")
	req.store = r.boolean(m, "", "store", true)
	chat.reasoningEffort = r.readReasoningEffort(m, true)
	chat.genRequest = r.readGen(gm, false)
	if r.err != nil {
		return nil, r.err
	}
	chat.template = r.str(m, "", "template", "")
	if kw, ok := m["chat_template_kwargs"]; ok && kw != nil && !kw.isObject() {
		r.typeErr("chat_template_kwargs", "object (template variables)", kw)
	}

	// Structured output: text.format.
	req.textFormat = map[string]any{"format": map[string]any{"type": "text"}}
	if tv, ok := m["text"]; ok && tv != nil {
		if tm := r.object(tv, "text", "format", "verbosity"); tm != nil {
			if vb, ok := r.optStr(tm, "text", "verbosity"); ok && vb != "low" && vb != "medium" && vb != "high" {
				r.fail(badRequest("text.verbosity", "text.verbosity: %q is not one of \"low\", \"medium\", \"high\"", vb))
			}
			if f, ok := tm["format"]; ok && f != nil {
				chat.grammar = r.textFormat(f)
				chat.grammarRoot = "root"
				req.textFormat = map[string]any{"format": json.RawMessage(bytes.Clone(f))}
			}
		}
	}

	// Tools.
	if a, ok := r.array(m, "", "tools"); ok {
		req.tools = []any{}
		r.each(a, "tools", maxTools, func(i int, tv jsonValue) {
			req.tools = append(req.tools, json.RawMessage(bytes.Clone(tv)))
			chat.tools = append(chat.tools, r.readResponsesTool(tv, indexPath("tools", i)))
		})
	}
	chat.parallelCall = r.boolean(m, "", "parallel_tool_calls", true)
	req.toolChoice = "auto"
	if tc, ok := m["tool_choice"]; ok && tc != nil {
		req.toolChoice = json.RawMessage(bytes.Clone(tc))
		r.readResponsesToolChoice(chat, tc)
	}

	// Input.
	var items []jsonValue
	if id, ok := r.optStr(m, "", "previous_response_id"); ok {
		req.previousID = id
		prev, found := s.respStore.response(id)
		if !found && r.err == nil {
			r.fail(errorf(404, "previous_response_id", "previous_response_id: response %q is not stored on this server (responses are kept in memory, the most recent first, and only with store true)", id))
		}
		items = append(items, prev...)
	}
	if ins, ok := r.optStr(m, "", "instructions"); ok {
		req.instructions = ins
		if ins != "" {
			chat.messages = append(chat.messages, message{role: "system", content: ins})
		}
	}
	switch in := m["input"]; {
	case in == nil:
		if r.err == nil && len(items) == 0 {
			r.fail(badRequest("input", "input: missing, want a string or an array of input items"))
		}
	case in.isString():
		// As the client would have sent it in the array form.
		items = append(items, jsonValue(`{"type":"message","role":"user","content":`+string(in)+`}`))
	case in.isArray():
		n := 0
		r.each(in, "input", maxMessages, func(i int, it jsonValue) {
			n++
			if ref, isRef := r.itemReference(it, indexPath("input", i)); isRef {
				resolved, found := s.respStore.item(ref)
				if !found && r.err == nil {
					p := indexPath("input", i) + ".id"
					r.fail(errorf(404, p, "%s: item %q is not stored on this server (items are kept in memory for recent responses with store true); send the item itself", p, ref))
				}
				it = resolved
			}
			items = append(items, it)
		})
		if n == 0 && len(items) == 0 && r.err == nil {
			r.fail(badRequest("input", "input: empty array"))
		}
	default:
		r.typeErr("input", "string or array of input items", in)
	}
	if r.err != nil {
		return nil, r.err
	}
	req.items = items
	chat.messages = append(chat.messages, r.readItems(items, s.cfg.HasProjector)...)
	chat.joinMedia()
	if r.err != nil {
		return nil, r.err
	}
	if e := chat.readResponsesOrdered(b.Ctx, body); e != nil {
		return nil, e
	}
	if e := chat.checkTools(); e != nil {
		return nil, e
	}
	return req, nil
}

// maxMetadataKeys bounds metadata, as OpenAI does (16 pairs); a few more
// are taken, and a hostile object with a million keys is refused early.
const maxMetadataKeys = 64

// checkTools checks tool_choice against the tools and the tools against
// a grammar, as decodeChat does.
func (req *chatRequest) checkTools() *Error {
	if len(req.tools) == 0 && req.toolChoice == toolChoiceRequired {
		return badRequest("tool_choice", "tool_choice: \"required\" needs tools")
	}
	if req.toolChoice == toolChoiceNamed && !slices.ContainsFunc(req.tools, func(t tool) bool { return t.name == req.toolName }) {
		return errorf(422, "tool_choice", "tool_choice: function %q is not among the request's tools", req.toolName)
	}
	if req.grammar != "" && len(req.tools) > 0 && req.toolChoice != toolChoiceNone {
		return badRequest("tools", "tools cannot be combined with a text.format schema")
	}
	return nil
}

// member returns object v's member name (nil when absent or null, or when
// v is not an object).
func (v jsonValue) member(name string) jsonValue {
	var out jsonValue
	if v.isObject() {
		v.members(func(k string, x jsonValue) bool {
			if k == name {
				out = x // the last one wins, as in the decoder
			}
			return true
		})
	}
	return out
}

// itemReference returns the id of an item_reference item; isRef is false
// for any other item.
func (r *reader) itemReference(v jsonValue, path string) (id string, isRef bool) {
	if t := v.member("type"); !t.isString() || t.str() != "item_reference" {
		return "", false
	}
	rm := r.object(v, path, "type", "id")
	if rm == nil {
		return "", true
	}
	id, ok := r.optStr(rm, path, "id")
	if !ok && r.err == nil {
		r.fail(badRequest(path+".id", "%s.id: missing", path))
	}
	return id, true
}

// textFormat reads text.format and returns its grammar ("" for text).
func (r *reader) textFormat(f jsonValue) string {
	const path = "text.format"
	fm := r.object(f, path, "type", "name", "schema", "strict", "description")
	if fm == nil {
		return ""
	}
	switch typ := r.str(fm, path, "type", ""); typ {
	case "text":
		return ""
	case "json_object":
		return jsonObjectGrammar()
	case "json_schema":
		r.str(fm, path, "name", "")
		r.str(fm, path, "description", "")
		r.boolean(fm, path, "strict", false)
		sch, ok := fm["schema"]
		if !ok || sch == nil {
			if r.err == nil {
				r.fail(badRequest(path+".schema", "%s.schema: missing, want a JSON Schema", path))
			}
			return ""
		}
		return schemaGrammar(r, path+".schema", sch)
	case "":
		r.fail(badRequest(path+".type", "%s.type: missing", path))
	default:
		r.fail(badRequest(path+".type", "%s.type: %q is not one of \"text\", \"json_object\", \"json_schema\"", path, typ))
	}
	return ""
}

// readResponsesTool reads a Responses tool: a function, flat
// ({"type": "function", "name", "description", "parameters", "strict"}).
func (r *reader) readResponsesTool(v jsonValue, path string) tool {
	var t tool
	if !v.isObject() {
		r.typeErr(path, "object (a function tool)", v)
		return t
	}
	if typ := v.member("type"); (!typ.isString() || typ.str() != "function") && r.err == nil {
		r.fail(badRequest(path+".type", "%s.type: %s is not supported: this server runs function tools only", path, rawJSON(typ)))
		return t
	}
	m := r.object(v, path, "type", "name", "description", "parameters", "strict")
	if m == nil {
		return t
	}
	return r.readFunction(m, path)
}

// readResponsesToolChoice reads tool_choice: "auto", "none", "required" or
// {"type": "function", "name"}.
func (r *reader) readResponsesToolChoice(req *chatRequest, v jsonValue) {
	const path = "tool_choice"
	switch {
	case v.isString():
		switch x := v.str(); x {
		case "auto":
			req.toolChoice = toolChoiceAuto
		case "none":
			req.toolChoice = toolChoiceNone
		case "required":
			req.toolChoice = toolChoiceRequired
		default:
			r.fail(badRequest(path, "%s: %q is not one of \"none\", \"auto\", \"required\", or {\"type\": \"function\", \"name\"}", path, x))
		}
	case v.isObject():
		m := r.object(v, path, "type", "name")
		if m == nil {
			return
		}
		if t := r.str(m, path, "type", ""); t != "function" && r.err == nil {
			r.fail(badRequest(path+".type", "%s.type: %q is not supported, want \"function\"", path, t))
		}
		req.toolName = r.str(m, path, "name", "")
		if req.toolName == "" && r.err == nil {
			r.fail(badRequest(path+".name", "%s.name: missing", path))
		}
		req.toolChoice = toolChoiceNamed
	default:
		r.typeErr(path, "string or object", v)
	}
}

// readItems turns input items into chat messages: message items as they
// are, function_call items as the tool calls of an assistant turn (joined
// to the assistant message before them), function_call_output items as
// tool messages. images says the server takes image parts.
func (r *reader) readItems(items []jsonValue, images bool) []message {
	var out []message
	callNames := map[string]string{}
	for i, it := range items {
		if r.err != nil {
			return nil
		}
		path := indexPath("input", i)
		if !it.isObject() {
			r.typeErr(path, "object (an input item)", it)
			return nil
		}
		typ := "message"
		if t := it.member("type"); t != nil {
			if !t.isString() {
				r.typeErr(path+".type", "string", t)
				return nil
			}
			typ = t.str()
		}
		switch typ {
		case "message":
			msg := r.readItemMessage(it, path, images)
			if n := len(out); n > 0 && msg.role == "assistant" && reasoningOnly(out[n-1]) {
				// The reasoning before this answer (a reasoning item).
				msg.reasoning, out = out[n-1].reasoning, out[:n-1]
			}
			out = append(out, msg)
		case "reasoning":
			// An earlier answer's reasoning: it goes to the template with
			// the assistant message or calls that follow it.
			if text := r.readReasoningItem(it, path); r.err == nil {
				out = append(out, message{role: "assistant", null: true, reasoning: text})
			}
		case "function_call":
			fm := r.object(it, path, "type", "id", "call_id", "name", "arguments", "status")
			if fm == nil {
				return nil
			}
			tc := toolCall{id: r.str(fm, path, "call_id", ""), name: r.str(fm, path, "name", ""), arguments: r.str(fm, path, "arguments", "{}")}
			r.optStr(fm, path, "id")
			r.optStr(fm, path, "status")
			if tc.name == "" && r.err == nil {
				r.fail(badRequest(path+".name", "%s.name: missing", path))
			}
			if tc.id == "" && r.err == nil {
				r.fail(badRequest(path+".call_id", "%s.call_id: missing", path))
			}
			callNames[tc.id] = tc.name
			if n := len(out); n > 0 && out[n-1].role == "assistant" {
				out[n-1].toolCalls = append(out[n-1].toolCalls, tc)
			} else {
				out = append(out, message{role: "assistant", null: true, toolCalls: []toolCall{tc}})
			}
		case "function_call_output":
			fm := r.object(it, path, "type", "id", "call_id", "output", "status")
			if fm == nil {
				return nil
			}
			msg := message{role: "tool", toolCallID: r.str(fm, path, "call_id", "")}
			r.optStr(fm, path, "id")
			r.optStr(fm, path, "status")
			if msg.toolCallID == "" && r.err == nil {
				r.fail(badRequest(path+".call_id", "%s.call_id: missing", path))
			}
			msg.name = callNames[msg.toolCallID]
			switch o := fm["output"]; {
			case o.isString():
				msg.content = o.str()
			case o.isArray():
				msg.content = r.readParts(&msg, o, path+".output", images)
			default:
				r.typeErr(path+".output", "string or array of content parts", o)
			}
			out = append(out, msg)
		default:
			r.fail(badRequest(path+".type", "%s.type: %q is not supported: input items are messages, reasoning, function_call, function_call_output and item_reference", path, typ))
		}
	}
	// Reasoning that no answer followed has nothing to go with.
	return slices.DeleteFunc(out, reasoningOnly)
}

// reasoningOnly reports whether m is a reasoning item's message not yet
// joined to an answer.
func reasoningOnly(m message) bool {
	return m.role == "assistant" && m.null && len(m.toolCalls) == 0 && m.reasoning != "" && len(m.parts) == 0
}

// readReasoningItem reads a reasoning item ({"type": "reasoning", "id",
// "summary", "content": [{"type": "reasoning_text", "text"}],
// "encrypted_content", "status"}) and returns its text: the content's
// texts, else the summary's.
func (r *reader) readReasoningItem(v jsonValue, path string) string {
	m := r.object(v, path, "type", "id", "summary", "content", "encrypted_content", "status")
	if m == nil {
		return ""
	}
	r.optStr(m, path, "id")
	r.optStr(m, path, "status")
	if e, ok := m["encrypted_content"]; ok && e != nil && !e.isString() {
		r.typeErr(path+".encrypted_content", "string or null", e)
	}
	texts := func(key, typ string) []string {
		var out []string
		a, ok := r.array(m, path, key)
		if !ok {
			return nil
		}
		r.each(a, path+"."+key, maxMessages, func(i int, pv jsonValue) {
			pp := indexPath(path+"."+key, i)
			pm := r.object(pv, pp, "type", "text")
			if pm == nil {
				return
			}
			if t := r.str(pm, pp, "type", ""); t != typ && r.err == nil {
				r.fail(badRequest(pp+".type", "%s.type: %q, want %q", pp, t, typ))
			}
			out = append(out, r.str(pm, pp, "text", ""))
		})
		return out
	}
	summary, content := texts("summary", "summary_text"), texts("content", "reasoning_text")
	if len(content) > 0 {
		return strings.Join(content, "\n")
	}
	return strings.Join(summary, "\n")
}

// readItemMessage reads a message item.
func (r *reader) readItemMessage(m jsonValue, path string, images bool) message {
	var msg message
	mm := r.object(m, path, "type", "role", "content", "id", "status", "phase")
	if mm == nil {
		return msg
	}
	r.optStr(mm, path, "id")
	r.optStr(mm, path, "status")
	r.optStr(mm, path, "phase")
	switch msg.role = r.str(mm, path, "role", ""); msg.role {
	case "user", "system", "assistant":
	case "developer":
		msg.role = "system"
	case "":
		r.fail(badRequest(path+".role", "%s.role: missing", path))
	default:
		r.fail(badRequest(path+".role", "%s.role: %q is not one of \"user\", \"system\", \"developer\", \"assistant\"", path, msg.role))
	}
	switch c := mm["content"]; {
	case c.isString():
		msg.content = c.str()
	case c.isArray():
		msg.content = r.readParts(&msg, c, path+".content", images)
	default:
		r.typeErr(path+".content", "string or array of content parts", c)
	}
	return msg
}

// readParts reads the content parts of a message or tool output and
// returns their text; image parts are counted in msg.images, and refused
// unless images says the server takes them.
func (r *reader) readParts(msg *message, parts jsonValue, path string, images bool) string {
	var sb strings.Builder
	r.each(parts, path, maxArrayStrings, func(i int, pv jsonValue) {
		pp := indexPath(path, i)
		pm := r.object(pv, pp, "type", "text", "annotations", "logprobs", "refusal", "image_url", "file_id", "detail", "prompt_cache_breakpoint",
			"cache_control")
		if pm == nil {
			return
		}
		r.cacheControl(pm, pp)
		switch typ := r.str(pm, pp, "type", ""); typ {
		case "input_text", "output_text", "text":
			t, ok := r.optStr(pm, pp, "text")
			if !ok && r.err == nil {
				r.fail(badRequest(pp+".text", "%s.text: missing", pp))
			}
			sb.WriteString(t)
			msg.parts = append(msg.parts, contentPart{text: t})
		case "refusal":
			t, _ := r.optStr(pm, pp, "refusal")
			sb.WriteString(t)
			msg.parts = append(msg.parts, contentPart{text: t})
		case "input_image":
			if !images && r.err == nil {
				r.fail(badRequest(pp, "%s: image input needs a server started with --mmproj (multimodal support); this server has no projector", pp))
			}
			msg.images++
			url, ok := r.optStr(pm, pp, "image_url")
			if !ok && r.err == nil {
				r.fail(badRequest(pp+".image_url", "%s.image_url: missing (file ids are not supported: send the image as a URL or a data URL)", pp))
			}
			msg.parts = append(msg.parts, contentPart{image: true, url: url, field: pp + ".image_url"})
			r.optStr(pm, pp, "detail")
		case "":
			r.fail(badRequest(pp+".type", "%s.type: missing", pp))
		default:
			r.fail(badRequest(pp+".type", "%s.type: %q is not supported: parts are input_text, output_text, refusal and input_image", pp, typ))
		}
	})
	return sb.String()
}

// readResponsesOrdered keeps the tools' key order for templates, in the
// chat shape ({"type": "function", "function": {...}}) that templates
// read, and chat_template_kwargs. Their parsed form is charged to the
// request first, as chat's (readOrdered).
func (req *chatRequest) readResponsesOrdered(ctx context.Context, body []byte) *Error {
	var raw struct {
		Tools  json.RawMessage `json:"tools"`
		Kwargs json.RawMessage `json:"chat_template_kwargs"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return badRequest("", "malformed JSON: %v", err)
	}
	if len(req.tools) > 0 {
		if e := chargeDecoded(ctx, "tools", len(raw.Tools)); e != nil {
			return e
		}
	}
	if len(raw.Kwargs) > 0 && string(raw.Kwargs) != "null" {
		if e := chargeDecoded(ctx, "chat_template_kwargs", len(raw.Kwargs)); e != nil {
			return e
		}
	}
	if len(req.tools) > 0 {
		v, err := jinja.ParseJSON(raw.Tools)
		if err != nil {
			return badRequest("tools", "tools: %v", err)
		}
		if l, ok := v.(*jinja.List); ok {
			for i, t := range l.Items {
				d, ok := t.(*jinja.Dict)
				if !ok {
					continue
				}
				fn := jinja.NewDict()
				for _, k := range d.Keys() {
					if k != "type" && k != "strict" {
						x, _ := d.Get(k)
						fn.Set(k, x)
					}
				}
				l.Items[i] = functionTool(fn)
			}
		}
		req.toolsValue = v
	}
	if len(raw.Kwargs) > 0 && string(raw.Kwargs) != "null" {
		d, e := templateKwargs(raw.Kwargs)
		if e != nil {
			return e
		}
		req.kwargs = d
	}
	return nil
}

// Response shapes.

type respLogprobTop struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type respLogprob struct {
	Token       string           `json:"token"`
	Logprob     float32          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []respLogprobTop `json:"top_logprobs"`
}

type respOutputText struct {
	Type        string        `json:"type"`
	Text        string        `json:"text"`
	Annotations []any         `json:"annotations"`
	Logprobs    []respLogprob `json:"logprobs"`
}

type respMessage struct {
	Type    string           `json:"type"`
	ID      string           `json:"id"`
	Status  string           `json:"status"`
	Role    string           `json:"role"`
	Content []respOutputText `json:"content"`
}

type respFunctionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type respUsage struct {
	InputTokens        int            `json:"input_tokens"`
	InputTokensDetails map[string]int `json:"input_tokens_details"`
	OutputTokens       int            `json:"output_tokens"`
	OutputDetails      map[string]int `json:"output_tokens_details"`
	TotalTokens        int            `json:"total_tokens"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respReasoning struct {
	Effort  any `json:"effort"`
	Summary any `json:"summary"`
}

// responseBody is a Response object.
type responseBody struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Error              any             `json:"error"`
	IncompleteDetails  *respIncomplete `json:"incomplete_details"`
	Instructions       any             `json:"instructions"`
	MaxOutputTokens    any             `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID any             `json:"previous_response_id"`
	Reasoning          respReasoning   `json:"reasoning"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               map[string]any  `json:"text"`
	ToolChoice         any             `json:"tool_choice"`
	Tools              []any           `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *respUsage      `json:"usage"`
	User               any             `json:"user"`
	Metadata           map[string]any  `json:"metadata"`
}

// newResponseBody returns the response object of req with no output yet.
func (s *Server) newResponseBody(req *responsesRequest, id string, created int64, status string) *responseBody {
	b := &responseBody{ID: id, Object: "response", CreatedAt: created, Status: status, Instructions: req.instructions,
		MaxOutputTokens: req.maxOutput, Model: s.info.Name, Output: []any{}, ParallelToolCalls: req.chat.parallelCall,
		Store: req.store, Temperature: req.chat.params.Temperature, Text: req.textFormat, ToolChoice: req.toolChoice,
		Tools: req.tools, TopP: req.chat.params.TopP, Truncation: req.truncation, Metadata: req.metadata}
	if req.previousID != "" {
		b.PreviousResponseID = req.previousID
	}
	if req.user != "" {
		b.User = req.user
	}
	if req.chat.reasoningEffort != "" {
		b.Reasoning.Effort = req.chat.reasoningEffort
	}
	if b.Tools == nil {
		b.Tools = []any{}
	}
	return b
}

func newRespUsage(prompt, completion int) *respUsage {
	return &respUsage{InputTokens: prompt, InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokens: completion,
		OutputDetails: map[string]int{"reasoning_tokens": 0}, TotalTokens: prompt + completion}
}

func toRespLogprobs(lps []tokenLogprob) []respLogprob {
	out := []respLogprob{}
	for _, lp := range lps {
		e := respLogprob{Token: lp.text, Logprob: lp.logprob, Bytes: bytesOf(lp.text), TopLogprobs: []respLogprobTop{}}
		for _, t := range lp.top {
			e.TopLogprobs = append(e.TopLogprobs, respLogprobTop{Token: t.text, Logprob: t.logprob, Bytes: bytesOf(t.text)})
		}
		out = append(out, e)
	}
	return out
}

func newMessageItem(text string, lps []respLogprob) *respMessage {
	if lps == nil {
		lps = []respLogprob{}
	}
	return &respMessage{Type: "message", ID: newID("msg_"), Status: "completed", Role: "assistant",
		Content: []respOutputText{{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: lps}}}
}

// respReasoningItem is a reasoning output item: the model's reasoning as
// reasoning_text content (as OpenAI returns it for open-weight models),
// with an empty summary.
type respReasoningItem struct {
	Type    string              `json:"type"`
	ID      string              `json:"id"`
	Summary []any               `json:"summary"`
	Content []respReasoningText `json:"content"`
	Status  string              `json:"status"`
}

type respReasoningText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newReasoningItem(text string) *respReasoningItem {
	return &respReasoningItem{Type: "reasoning", ID: newID("rs_"), Summary: []any{}, Status: "completed",
		Content: []respReasoningText{{Type: "reasoning_text", Text: text}}}
}

func newCallItem(tc toolCall) *respFunctionCall {
	return &respFunctionCall{Type: "function_call", ID: newID("fc_"), CallID: tc.id, Name: tc.name, Arguments: tc.arguments, Status: "completed"}
}

// finishStatus maps a candidate's finish reason to the response status.
func finishStatus(finish string) (string, *respIncomplete) {
	if finish == "length" {
		return "incomplete", &respIncomplete{Reason: "max_output_tokens"}
	}
	return "completed", nil
}

func (s *Server) handleResponses(ctx *fasthttp.RequestCtx) handlerResult {
	body := ctx.PostBody()
	vb, stop := s.validationBudget(ctx)
	defer stop()
	req, e := s.decodeResponses(vb, body)
	if e == nil {
		// Before the first byte, as chat does: a streamed request
		// with a bad key gets a 400, not a 200 and an error event; and
		// before prepareChat, which decodes images.
		e = s.resolveLogitBias(&req.chat.params)
	}
	var pc *preparedChat
	if e == nil {
		pc, e = s.prepareChat(req.chat)
		if e != nil && e.Param == "messages" {
			e.Param = "input"
			e.Message = strings.Replace(e.Message, "messages", "input", 1)
		}
	}
	if e == nil {
		e = s.checkWork(req.chat.genRequest, []int{len(pc.prompt)}, "max_output_tokens")
	}
	// A request the server refuses is an HTTP error, as OpenAI answers
	// it, streamed or not.
	stream := e == nil && req.chat.stream
	id := newID("resp_")
	created := s.cfg.Now().Unix()
	stop() // validation is over: serve watches the connection from here
	return s.serve(ctx, "responses", stream, e, 1,
		func(gctx contextT, cancel func(), sse *sseWriter) (int, int) {
			return s.streamResponse(gctx, cancel, sse, req, pc, id, created)
		},
		func(gctx contextT) handlerResult { return s.responseWhole(ctx, gctx, req, pc, id, created) })
}

// outputItems turns a finished candidate into output items: a thinking
// model's reasoning, a message with the text (unless the answer is only
// tool calls), then the calls.
func (s *Server) outputItems(req *responsesRequest, pc *preparedChat, c *candidate) []any {
	var reasoning, text string
	var calls []toolCall
	if pc.tmpl.family.messages() {
		// The message is gpt-oss's final channel (Muse Glimmer's to=user).
		reasoning, text, calls, _ = req.chat.splitAnswer(pc, c.text)
	} else {
		split := pc.reasoning
		split.legacy = false // a chat completions format: deepseek here
		reasoning, text = split.split(c.text)
		text = pc.tmpl.family.unwrap(text)
		if pc.toolsActive {
			text, calls, _ = req.chat.splitCalls(pc, text, false)
		}
	}
	var out []any
	if reasoning != "" {
		out = append(out, newReasoningItem(reasoning))
	}
	if text != "" || len(calls) == 0 {
		var lps []respLogprob
		if req.chat.logprobs {
			lps = toRespLogprobs(c.logprobs)
		}
		out = append(out, newMessageItem(text, lps))
	}
	for _, tc := range calls {
		out = append(out, newCallItem(tc))
	}
	return out
}

func (s *Server) responseWhole(ctx *fasthttp.RequestCtx, gctx contextT, req *responsesRequest, pc *preparedChat, id string, created int64) handlerResult {
	specs := s.candidateSpecs(1, genSpec{prompt: pc.prompt, media: pc.media, g: req.chat.genRequest, constraint: pc.factory, wantLogprob: req.chat.logprobs, tools: pc.toolsActive, think: pc.thinkMarks})
	cands, err := s.generateAll(gctx, specs, nil)
	if err != nil {
		s.writeError(ctx, modelError(err))
		return handlerResult{}
	}
	c := cands[0]
	status, incomplete := finishStatus(c.finish)
	resp := s.newResponseBody(req, id, created, status)
	resp.IncompleteDetails = incomplete
	resp.Output = s.outputItems(req, pc, c)
	resp.Usage = newRespUsage(len(pc.prompt), c.tokens)
	s.storeResponse(req, resp)
	writeJSON(ctx, resp)
	return handlerResult{tokens: resp.Usage.TotalTokens}
}

// storeResponse keeps the response's items for previous_response_id and
// item_reference when the request asked to store it.
func (s *Server) storeResponse(req *responsesRequest, resp *responseBody) {
	if !req.store {
		return
	}
	out := make([]jsonValue, len(resp.Output))
	for i, it := range resp.Output {
		// Stored as the client would send the item back: its JSON.
		b, err := json.Marshal(it)
		if err != nil {
			panic("BUG: an output item does not encode: " + err.Error())
		}
		out[i] = b
	}
	s.respStore.put(resp.ID, req.items, out)
}

// respStream writes the typed events of a streamed response.
type respStream struct {
	sse    *sseWriter
	cancel func()
	seq    int
	buf    []byte
	err    error
}

// event writes one event: its type as the SSE event name, and a data
// object holding type, sequence_number and fields (a struct or map whose
// JSON object is spliced in).
func (rs *respStream) event(typ string, fields any) error {
	if rs.err != nil {
		return rs.err
	}
	b := rs.buf[:0]
	b = append(b, `{"type":`...)
	b = appendJSONString(b, typ)
	b = append(b, `,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(rs.seq), 10)
	rs.seq++
	if fields != nil {
		f, err := json.Marshal(fields)
		if err != nil {
			rs.err = rs.sse.fail(err)
			return rs.err
		}
		if len(f) > 2 {
			b = append(b, ',')
			b = append(b, f[1:len(f)-1]...)
		}
	}
	b = append(b, '}')
	rs.buf = b
	if err := rs.sse.named(typ, b); err != nil {
		rs.err = err
		rs.cancel()
	}
	return rs.err
}

// textDelta writes a response.output_text.delta event without going
// through encoding/json: it is the stream's hot path.
func (rs *respStream) textDelta(itemID string, index int, delta []byte) error {
	if rs.err != nil {
		return rs.err
	}
	b := append(rs.buf[:0], `{"type":"response.output_text.delta","sequence_number":`...)
	b = strconv.AppendInt(b, int64(rs.seq), 10)
	rs.seq++
	b = append(b, `,"item_id":"`...)
	b = append(b, itemID...)
	b = append(b, `","output_index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"content_index":0,"delta":`...)
	b = appendJSONString(b, string(delta))
	b = append(b, `,"logprobs":[]}`...)
	rs.buf = b
	if err := rs.sse.named("response.output_text.delta", b); err != nil {
		rs.err = err
		rs.cancel()
	}
	return rs.err
}

// named writes an SSE frame with an event name.
func (s *sseWriter) named(event string, payload []byte) error {
	if s.err != nil {
		return s.err
	}
	s.buf = append(s.buf[:0], "event: "...)
	s.buf = append(s.buf, event...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, '\n', '\n')
	return s.write()
}

// fail ends the stream with an error event carrying both shapes clients
// read: the Responses API's (type "error", code, message, param) and the
// API's error body ("error"), which the openai client raises.
func (rs *respStream) fail(e *Error) {
	if rs.sse.err != nil {
		return
	}
	b := append(rs.buf[:0], `{"type":"error","sequence_number":`...)
	b = strconv.AppendInt(b, int64(rs.seq), 10)
	b = append(b, `,"code":`...)
	b = appendJSONString(b, errorType(e.Status))
	b = append(b, `,"message":`...)
	b = appendJSONString(b, e.Error())
	b = append(b, `,"param":`...)
	if e.Param == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, e.Param)
	}
	b = append(b, ',')
	b = append(b, appendErrorBody(nil, e)[1:]...)
	rs.sse.named("error", b)
}

type itemEvent struct {
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

// reasoningDeltaEvent is a response.reasoning_text.delta (Delta) or
// .done (Text) event of the reasoning item, output 0.
type reasoningDeltaEvent struct {
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta,omitempty"`
	Text         string `json:"text,omitempty"`
}

type partEvent struct {
	ItemID       string         `json:"item_id"`
	OutputIndex  int            `json:"output_index"`
	ContentIndex int            `json:"content_index"`
	Part         respOutputText `json:"part"`
}

type textDoneEvent struct {
	ItemID       string        `json:"item_id"`
	OutputIndex  int           `json:"output_index"`
	ContentIndex int           `json:"content_index"`
	Text         string        `json:"text"`
	Logprobs     []respLogprob `json:"logprobs"`
}

type argsEvent struct {
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta,omitempty"`
	Arguments   string `json:"arguments,omitempty"`
	Name        string `json:"name,omitempty"`
}

type responseEvent struct {
	Response *responseBody `json:"response"`
}

func (s *Server) streamResponse(gctx contextT, cancel func(), sse *sseWriter, req *responsesRequest, pc *preparedChat, id string, created int64) (int, int) {
	rs := &respStream{sse: sse, cancel: cancel, buf: make([]byte, 0, 512)}
	resp := s.newResponseBody(req, id, created, "in_progress")
	if rs.event("response.created", responseEvent{resp}) != nil || rs.event("response.in_progress", responseEvent{resp}) != nil {
		return 0, 499
	}
	// A thinking model's reasoning streams first, as a reasoning item
	// (output 0) that closes when the answer's text or calls begin.
	var rsn *respReasoningItem
	var rtext strings.Builder
	sendReasoning := func(t []byte) error {
		if len(t) == 0 {
			return nil
		}
		if rsn == nil {
			rsn = newReasoningItem("")
			rsn.Status = "in_progress"
			if err := rs.event("response.output_item.added", itemEvent{0, rsn}); err != nil {
				return err
			}
		}
		rtext.Write(t)
		return rs.event("response.reasoning_text.delta", reasoningDeltaEvent{ItemID: rsn.ID, Delta: string(t)})
	}
	rsnDone := false
	closeReasoning := func() error {
		if rsn == nil || rsnDone {
			return nil
		}
		rsnDone = true
		done := newReasoningItem(rtext.String())
		done.ID = rsn.ID
		if err := rs.event("response.reasoning_text.done", reasoningDeltaEvent{ItemID: rsn.ID, Text: done.Content[0].Text}); err != nil {
			return err
		}
		if err := rs.event("response.output_item.done", itemEvent{0, done}); err != nil {
			return err
		}
		resp.Output = append(resp.Output, done)
		return nil
	}
	// The message item opens with the first text; text that may be a
	// tool call is held back until it is clearly not one.
	var msg *respMessage
	var text strings.Builder
	msgIndex := 0
	openMessage := func() error {
		if msg != nil {
			return nil
		}
		if err := closeReasoning(); err != nil {
			return err
		}
		msgIndex = len(resp.Output)
		msg = newMessageItem("", nil)
		msg.Status, msg.Content = "in_progress", []respOutputText{}
		if err := rs.event("response.output_item.added", itemEvent{msgIndex, msg}); err != nil {
			return err
		}
		return rs.event("response.content_part.added", partEvent{msg.ID, msgIndex, 0, respOutputText{Type: "output_text", Annotations: []any{}, Logprobs: []respLogprob{}}})
	}
	sendText := func(t []byte) error {
		if len(t) == 0 {
			return nil
		}
		if err := openMessage(); err != nil {
			return err
		}
		text.Write(t)
		return rs.textDelta(msg.ID, msgIndex, t)
	}
	var lps []tokenLogprob
	msgDone := false
	closeMessage := func() error {
		if msg == nil || msgDone {
			return nil
		}
		msgDone = true
		done := newMessageItem(text.String(), nil)
		done.ID = msg.ID
		if req.chat.logprobs {
			done.Content[0].Logprobs = toRespLogprobs(lps)
		}
		if err := rs.event("response.output_text.done", textDoneEvent{msg.ID, msgIndex, 0, done.Content[0].Text, done.Content[0].Logprobs}); err != nil {
			return err
		}
		if err := rs.event("response.content_part.done", partEvent{msg.ID, msgIndex, 0, done.Content[0]}); err != nil {
			return err
		}
		if err := rs.event("response.output_item.done", itemEvent{msgIndex, done}); err != nil {
			return err
		}
		resp.Output = append(resp.Output, done)
		return nil
	}
	hold := newToolHold(pc, false)
	// A call held to the tool grammar streams as it is written
	// (toolstream.go): its item opens when its name is written and its
	// arguments go out as they come.
	var inc *grammar.Syntax
	if pc.toolsActive && pc.callGrammar && !req.chat.logprobs && !pc.tmpl.family.messages() {
		inc = streamSyntax(pc.tmpl)
	}
	var sent []sentCall
	var callItems []*respFunctionCall // the items of the calls sent
	sendCallDeltas := func() error {
		calls, _ := partialSyntaxCalls(inc, hold.text.String())
		for _, d := range callDeltas(&sent, calls) {
			if d.header {
				if err := closeReasoning(); err != nil {
					return err
				}
				if err := closeMessage(); err != nil {
					return err
				}
				item := newCallItem(toolCall{id: d.id, name: d.name})
				item.Status = "in_progress"
				callItems = append(callItems, item)
				if err := rs.event("response.output_item.added", itemEvent{len(resp.Output) + d.index, item}); err != nil {
					return err
				}
			}
			if d.args != "" {
				item := callItems[d.index]
				if err := rs.event("response.function_call_arguments.delta", argsEvent{ItemID: item.ID, OutputIndex: len(resp.Output) + d.index, Delta: d.args}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// A Harmony answer (gpt-oss) streams its reasoning and content as the
	// parser separates them.
	var harmony *harmonyStream
	if pc.tmpl.family.messages() {
		harmony = newHarmonyStream(req.chat, pc)
	}
	// So does a thinking model's (reasoning.go; deepseek-legacy, a chat
	// completions format, splits as deepseek here); its content goes on
	// through the tool hold.
	var think *thinkParser
	var thinkR, thinkC []byte
	if harmony == nil && pc.reasoning.on() {
		think = pc.reasoning.parser()
	}
	onText := func(_ int, t []byte, l []tokenLogprob) error {
		if think != nil {
			thinkR, thinkC = think.add(t, thinkR[:0], thinkC[:0])
			if err := sendReasoning(thinkR); err != nil {
				return err
			}
			t = thinkC
		}
		if harmony != nil {
			if req.chat.logprobs {
				lps = append(lps, l...)
			}
			harmony.reasoning, harmony.content = harmony.p.add(t, harmony.reasoning[:0], harmony.content[:0])
			if err := sendReasoning(harmony.reasoning); err != nil {
				return err
			}
			return sendText(harmony.content)
		}
		t, l, send := hold.add(t, l)
		if req.chat.logprobs {
			lps = append(lps, l...)
		}
		if send {
			if err := sendText(t); err != nil {
				return err
			}
		}
		if inc != nil && hold.text.Len() > 0 {
			return sendCallDeltas()
		}
		return nil
	}
	specs := s.candidateSpecs(1, genSpec{prompt: pc.prompt, media: pc.media, g: req.chat.genRequest, constraint: pc.factory, wantLogprob: req.chat.logprobs, tools: pc.toolsActive, think: pc.thinkMarks})
	cands, err := s.generateAll(gctx, specs, onText)
	if err != nil {
		if sse.err != nil {
			return 0, 499
		}
		e := modelError(err)
		rs.fail(e)
		return 0, e.Status
	}
	c := cands[0]
	var calls []toolCall
	if think != nil {
		thinkR, thinkC = think.finish(thinkR[:0], thinkC[:0])
		if sendReasoning(thinkR) != nil {
			return c.tokens, 499
		}
		if len(thinkC) > 0 {
			if t, _, send := hold.add(thinkC, nil); send && sendText(t) != nil {
				return c.tokens, 499
			}
			if inc != nil && hold.text.Len() > 0 && sendCallDeltas() != nil {
				return c.tokens, 499
			}
		}
	}
	held, heldLPs, ok := hold.rest()
	if req.chat.logprobs {
		lps = append(lps, heldLPs...)
	}
	if harmony != nil {
		harmony.reasoning, harmony.content, calls = harmony.p.finish(harmony.reasoning[:0], harmony.content[:0])
		if len(calls) > 0 && !req.chat.parallelCall {
			calls = calls[:1]
		}
		if sendReasoning(harmony.reasoning) != nil || sendText(harmony.content) != nil {
			return c.tokens, 499
		}
	} else if ok {
		var prefix string
		var cut bool
		prefix, calls, cut = req.chat.splitCalls(pc, held, false)
		if len(sent) > 0 {
			if len(calls) == 0 || cut {
				prefix = "" // the held text was the calls that went out
			}
			calls, _ = withSent(sent, calls, cut)
		}
		if prefix != "" && sendText([]byte(prefix)) != nil {
			return c.tokens, 499
		}
	} else if held != "" {
		if sendText([]byte(held)) != nil {
			return c.tokens, 499
		}
	}
	if msg == nil && len(calls) == 0 {
		if openMessage() != nil {
			return c.tokens, 499
		}
	}
	if closeReasoning() != nil {
		return c.tokens, 499
	}
	if closeMessage() != nil {
		return c.tokens, 499
	}
	for k, tc := range calls {
		idx := len(resp.Output)
		item := newCallItem(tc)
		args := tc.arguments
		if k < len(callItems) {
			// Opened, with the start of its arguments, as it was written.
			item.ID = callItems[k].ID
			args = strings.TrimPrefix(args, sent[k].args)
			if len(args) == len(tc.arguments) && sent[k].args != "" {
				args = ""
			}
		} else {
			started := *item
			started.Arguments, started.Status = "", "in_progress"
			if rs.event("response.output_item.added", itemEvent{idx, &started}) != nil {
				return c.tokens, 499
			}
		}
		for _, frag := range fragments(args, 16) {
			if frag == "" && k < len(callItems) {
				break // all of it went out as it was written
			}
			if rs.event("response.function_call_arguments.delta", argsEvent{ItemID: item.ID, OutputIndex: idx, Delta: frag}) != nil {
				return c.tokens, 499
			}
		}
		if rs.event("response.function_call_arguments.done", argsEvent{ItemID: item.ID, OutputIndex: idx, Arguments: tc.arguments, Name: tc.name}) != nil ||
			rs.event("response.output_item.done", itemEvent{idx, item}) != nil {
			return c.tokens, 499
		}
		resp.Output = append(resp.Output, item)
	}
	resp.Status, resp.IncompleteDetails = finishStatus(c.finish)
	resp.Usage = newRespUsage(len(pc.prompt), c.tokens)
	s.storeResponse(req, resp)
	final := "response.completed"
	if resp.Status == "incomplete" {
		final = "response.incomplete"
	}
	if rs.event(final, responseEvent{resp}) != nil {
		return c.tokens, 499
	}
	return c.tokens, 200
}
