package api

import (
	"strings"

	"github.com/vkllm/vkllm/internal/jinja"
)

// isGemma4ToolResponses reports whether src is one of the earlier Gemma 4
// templates that read tool results from an assistant message's
// tool_responses field instead of role "tool" messages (the reference
// recognises Gemma 4 by its '<|tool_call>call:' literal and converts the
// conversation for templates without the official "OpenAI Chat
// Completions" handling).
func isGemma4ToolResponses(src string) bool {
	return strings.Contains(src, "'<|tool_call>call:'") && !strings.Contains(src, "{#- OpenAI Chat Completions:")
}

// gemma4ToolResponses rewrites each assistant message with tool calls,
// the tool results after it and a final assistant answer after those into
// one assistant message {role, tool_calls, tool_responses, content,
// reasoning_content}, as the reference does for Gemma 4: a result is
// {name: the matching call's name (or its tool_call_id), response: its
// content parsed as JSON, or the text when it is not JSON}.
func gemma4ToolResponses(msgs *jinja.List) *jinja.List {
	get := func(m any, k string) any {
		if d, ok := m.(*jinja.Dict); ok {
			v, _ := d.Get(k)
			return v
		}
		return nil
	}
	nonEmptyList := func(v any) (*jinja.List, bool) {
		l, ok := v.(*jinja.List)
		return l, ok && len(l.Items) > 0
	}
	hasContent := func(m any) bool {
		switch c := get(m, "content").(type) {
		case string:
			return c != ""
		case *jinja.List:
			return len(c.Items) > 0
		}
		return false
	}
	out := jinja.NewList()
	for i := 0; i < len(msgs.Items); {
		m := msgs.Items[i]
		calls, ok := nonEmptyList(get(m, "tool_calls"))
		if get(m, "role") != "assistant" || !ok {
			out.Items = append(out.Items, m)
			i++
			continue
		}
		reasoning, hasReasoning := get(m, "reasoning_content").(string)
		toolCalls := jinja.NewList(calls.Items...)
		responses := jinja.NewList()
		i++
		for ; i < len(msgs.Items) && get(msgs.Items[i], "role") == "tool"; i++ {
			r := msgs.Items[i]
			var response any
			if c, ok := get(r, "content").(string); ok {
				if v, err := jinja.ParseJSON([]byte(c)); err == nil {
					response = v
				} else {
					response = c
				}
			} else {
				response = get(r, "content")
			}
			name := ""
			if n := len(responses.Items); n < len(toolCalls.Items) {
				name, _ = get(get(toolCalls.Items[n], "function"), "name").(string)
			}
			if name == "" {
				name, _ = get(r, "tool_call_id").(string)
			}
			resp := jinja.NewDict()
			resp.Set("name", name)
			resp.Set("response", response)
			responses.Items = append(responses.Items, resp)
		}
		var content any
		if i < len(msgs.Items) && get(msgs.Items[i], "role") == "assistant" {
			if _, calls := nonEmptyList(get(msgs.Items[i], "tool_calls")); !calls && hasContent(msgs.Items[i]) {
				content = get(msgs.Items[i], "content")
				i++
			}
		}
		merged := jinja.NewDict()
		merged.Set("role", "assistant")
		merged.Set("tool_calls", toolCalls)
		if len(responses.Items) > 0 {
			merged.Set("tool_responses", responses)
		}
		if content != nil {
			merged.Set("content", content)
		}
		if hasReasoning {
			merged.Set("reasoning_content", reasoning)
		}
		out.Items = append(out.Items, merged)
	}
	return out
}
