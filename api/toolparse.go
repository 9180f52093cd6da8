package api

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strings"
)

// newCallID returns a tool call id: 9 alphanumeric characters (the form
// Mistral templates insist on).
func newCallID() string { return rand.Text()[:9] }

// parseToolCalls extracts tool calls from generated text in any of the
// formats vkllm presents: Hermes/Qwen <tool_call>{...}</tool_call> blocks,
// Mistral [TOOL_CALLS][...], Llama 3.x JSON ({"name", "parameters"},
// optionally after <|python_tag|>, several separated by ";"), and the
// generic {"tool_call": ...} / {"tool_calls": [...]}. Only calls to known
// function names count. It returns the text before the calls and the calls;
// no calls means the whole text is content.
func parseToolCalls(text string, known []tool) (string, []toolCall) {
	isKnown := func(name string) bool {
		for _, t := range known {
			if t.name == name {
				return true
			}
		}
		return false
	}
	if i := strings.Index(text, "<tool_call>"); i >= 0 {
		var calls []toolCall
		rest := text[i:]
		for {
			j := strings.Index(rest, "<tool_call>")
			if j < 0 {
				break
			}
			rest = rest[j+len("<tool_call>"):]
			body := rest
			if k := strings.Index(rest, "</tool_call>"); k >= 0 {
				body, rest = rest[:k], rest[k+len("</tool_call>"):]
			} else {
				rest = ""
			}
			c, ok := callFromJSON([]byte(strings.TrimSpace(body)))
			if !ok || !isKnown(c.name) {
				return text, nil
			}
			calls = append(calls, c)
		}
		return strings.TrimSpace(text[:i]), calls
	}
	if i := strings.Index(text, "[TOOL_CALLS]"); i >= 0 {
		body := strings.TrimSpace(text[i+len("[TOOL_CALLS]"):])
		var arr []json.RawMessage
		dec := json.NewDecoder(strings.NewReader(body))
		if dec.Decode(&arr) != nil {
			return text, nil
		}
		var calls []toolCall
		for _, raw := range arr {
			c, ok := callFromJSON(raw)
			if !ok || !isKnown(c.name) {
				return text, nil
			}
			calls = append(calls, c)
		}
		return strings.TrimSpace(text[:i]), calls
	}
	body, prefix := text, ""
	if i := strings.Index(text, "<|python_tag|>"); i >= 0 {
		prefix, body = text[:i], text[i+len("<|python_tag|>"):]
	}
	trimmed := strings.TrimSpace(body)
	if !strings.HasPrefix(trimmed, "{") {
		return text, nil
	}
	var calls []toolCall
	dec := json.NewDecoder(strings.NewReader(trimmed))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if len(calls) == 0 || strings.TrimSpace(trimmed[dec.InputOffset():]) != "" {
				return text, nil
			}
			break
		}
		var wrap struct {
			ToolCall  json.RawMessage   `json:"tool_call"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		}
		_ = json.Unmarshal(raw, &wrap)
		items := wrap.ToolCalls
		if wrap.ToolCall != nil {
			items = append(items, wrap.ToolCall)
		}
		if len(items) == 0 {
			items = []json.RawMessage{raw}
		}
		for _, it := range items {
			c, ok := callFromJSON(it)
			if !ok || !isKnown(c.name) {
				return text, nil
			}
			calls = append(calls, c)
		}
		// Skip the ";" separator of Llama 3 parallel calls.
		rest := strings.TrimLeft(trimmed[dec.InputOffset():], " \t\r\n;")
		if rest == "" {
			break
		}
		trimmed = rest
		dec = json.NewDecoder(strings.NewReader(trimmed))
	}
	return strings.TrimSpace(prefix), calls
}

func callFromJSON(b []byte) (toolCall, bool) {
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(b, &c) != nil || c.Name == "" {
		return toolCall{}, false
	}
	args := c.Arguments
	if args == nil {
		args = c.Parameters
	}
	if args == nil {
		args = json.RawMessage("{}")
	}
	// Arguments given as a JSON string holding JSON are unwrapped.
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = json.RawMessage(s)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, args) != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return toolCall{}, false // arguments are a JSON object
	}
	return toolCall{id: newCallID(), name: c.Name, arguments: buf.String()}, true
}

// mayStartToolCall reports whether text (the output so far, leading space
// trimmed) is or may become the start of a tool call, so streaming holds
// it back instead of sending it as content.
func mayStartToolCall(text string) bool {
	t := strings.TrimLeft(text, " \t\r\n")
	if t == "" {
		return true
	}
	for _, p := range []string{"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "{"} {
		if strings.HasPrefix(t, p) || strings.HasPrefix(p, t) {
			return true
		}
	}
	return false
}

// partialCall recovers the call a forced tool call (tool_choice "required"
// or a named function) was writing when it was cut short: the function (the
// named one, the only tool, or the "name" the text got to) and the
// arguments text written so far, which may be incomplete JSON.
func partialCall(text string, req *chatRequest) toolCall {
	c := toolCall{id: newCallID(), name: req.toolName}
	if c.name == "" && len(req.tools) == 1 {
		c.name = req.tools[0].name
	}
	if c.name == "" {
		if i := strings.Index(text, `"name"`); i >= 0 {
			rest := strings.TrimLeft(text[i+len(`"name"`):], " \t\n")
			rest = strings.TrimLeft(strings.TrimPrefix(rest, ":"), " \t\n")
			var name string
			if json.NewDecoder(strings.NewReader(rest)).Decode(&name) == nil {
				c.name = name
			}
		}
	}
	at := -1 // where the name was written, in a family's own syntax
	if c.name == "" {
		// A family's own syntax writes the name bare (<function=NAME>,
		// functions.NAME:0, invoke name="NAME"): the earliest known name,
		// the longest where several start there.
		for _, t := range req.tools {
			if i := strings.Index(text, t.name); i >= 0 && (at < 0 || i < at || i == at && len(t.name) > len(c.name)) {
				at, c.name = i, t.name
			}
		}
	} else {
		at = strings.Index(text, c.name)
	}
	for _, key := range []string{`"arguments"`, `"parameters"`} {
		if i := strings.Index(text, key); i >= 0 {
			rest := strings.TrimLeft(text[i+len(key):], " \t\n")
			c.arguments = compactJSONPrefix(strings.TrimLeft(strings.TrimPrefix(rest, ":"), " \t\n"))
			return c
		}
	}
	if at >= 0 {
		// A JSON arguments object after the bare name.
		if j := strings.IndexByte(text[at:], '{'); j >= 0 {
			c.arguments = compactJSONPrefix(text[at+j:])
		}
	}
	return c
}
