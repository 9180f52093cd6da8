package api

import (
	"encoding/json"
	"testing"
)

// More of the parser cases of llama.cpp's tests/test-chat.cpp (its
// test_template_output_peg_parsers at 0042e20): GigaChat 3 and 3.1,
// Command R+, MiniCPM5 and Cohere2 MoE (whose template writes Command
// R7B's markers), compared as refCases are.
//
// Not ported here, beside the continuation cases (vkllm has no
// continue_final_message) and the partial ones: Cohere2 MoE's answer with
// reasoning_format none, which the reference gives back with the
// <|START_THINKING|> of its prompt in front (vkllm gives back the answer
// the model wrote), and MiniCPM5's plain answer to a prompt that opened
// <think>: the reference takes an answer that never closes the reasoning
// as content there, vkllm streams it as reasoning as it comes (as the
// reference does for DeepSeek R1 and the other templates that open it).

func init() {
	const giga3Call = "<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}"
	const giga31Call = "<|function_call|>{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}"
	const cohereCall = "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}\n]<|END_ACTION|>"
	py := func(code string) refCall { return refCall{"python", `{"code": ` + quoteJSON(code) + `}`} }
	refCases = append(refCases, []refCase{
		// GigaChat3-10B-A1.8B: the call is a "function call" turn after the answer's.
		{from: "GigaChat3", family: familyGigaChat3, in: refHello, content: refHello},
		{from: "GigaChat3", family: familyGigaChat3, in: giga3Call, calls: []refCall{sf1}},
		{from: "GigaChat3", family: familyGigaChat3, in: refHello + giga3Call, content: refHello, calls: []refCall{sf1}},
		// GigaChat3.1-10B-A1.8B
		{from: "GigaChat3.1", family: familyGigaChat31, in: refHello, content: refHello},
		{from: "GigaChat3.1", family: familyGigaChat31, in: giga31Call, calls: []refCall{sf1}},
		{from: "GigaChat3.1", family: familyGigaChat31, in: refHello + giga31Call, content: refHello, calls: []refCall{sf1}},
		// GigaChat 3.5 (no case in the reference's tests): its template's own
		// rendering of calls, a string and a JSON parameter.
		{from: "GigaChat3.5", family: familyGCML, think: thinkTags, in: "Checking.<｜GCML｜tool_calls>\n<｜GCML｜invoke name=\"get_weather\">\n<｜GCML｜parameter name=\"city\" string=\"true\">Paris</｜GCML｜parameter>\n</｜GCML｜invoke>\n<｜GCML｜invoke name=\"special_function\">\n<｜GCML｜parameter name=\"arg1\" string=\"false\">1</｜GCML｜parameter>\n</｜GCML｜invoke>\n</｜GCML｜tool_calls>",
			content: "Checking.", calls: []refCall{{"get_weather", `{"city": "Paris"}`}, sf1}},
		// llm-jp-llm-jp-4.1-8b-thinking: Harmony with a space after each
		// marker (and "to=" in the role header or the channel's).
		{from: "llm-jp-4.1", family: familyHarmony, in: "<|channel|> final<|message|> Hello, world!\nWhat's up?", content: refHello},
		{from: "llm-jp-4.1", family: familyHarmony, in: "<|channel|> final<|message|>  padded", content: " padded"},
		{from: "llm-jp-4.1", family: familyHarmony, in: "<|channel|> analysis<|message|> I'm\nthinking<|end|><|start|> assistant<|channel|> final<|message|> Hello, world!\nWhat's up?",
			reasoning: refThinking, content: refHello},
		{from: "llm-jp-4.1", family: familyHarmony, in: "<|channel|> analysis<|message|> I'm\nthinking", reasoning: refThinking},
		{from: "llm-jp-4.1", family: familyHarmony, in: "<|channel|> analysis<|message|> I'm\nthinking<|end|><|start|> assistant to=functions.special_function<|channel|> commentary <|constrain|>  json<|message|> {\"arg1\": 1}",
			reasoning: refThinking, calls: []refCall{sf1}},
		{from: "llm-jp-4.1", family: familyHarmony, in: "<|channel|> commentary to=functions.special_function<|message|> {\"arg1\": 1}", calls: []refCall{sf1}},
		{from: "llm-jp-4.1", family: familyHarmony, in: "<|channel|> analysis<|message|> I'm\nthinking<|end|><|start|> assistant to=functions.special_function<|channel|> commentary <|constrain|>  json<|message|> {\"arg1\": 1}<|end|><|start|> assistant to=functions.special_function<|channel|> commentary <|constrain|>  json<|message|> {\"arg1\": 2}",
			reasoning: refThinking, calls: []refCall{sf1, {"special_function", `{"arg1": 2}`}}},
		{from: "llm-jp-4.1", family: familyHarmony, in: "<|channel|> analysis<|message|> I need to output the invoice details in JSON<|end|><|start|> assistant<|channel|> final <|constrain|>  json<|message|> {\"amount\": 123.45, \"date\": \"2025-12-03\"}",
			reasoning: "I need to output the invoice details in JSON", content: `{"amount": 123.45, "date": "2025-12-03"}`},
		// Apriel-1.6-15b-Thinker-fixed: the prompt ends with
		// "<|begin_assistant|>\nHere are my reasoning steps:\n".
		{from: "Apriel-1.6", family: familyApriel, think: thinkApriel, open: true, preamble: aprielPreamble, in: "I'm\nthinking\n[BEGIN FINAL RESPONSE]\nHello, world!\nWhat's up?",
			reasoning: aprielPreamble + refThinking, content: refHello},
		{from: "Apriel-1.6", family: familyApriel, think: thinkApriel, open: true, preamble: aprielPreamble,
			in:        "I'm\nthinking\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]</tool_calls>",
			reasoning: aprielPreamble + refThinking, calls: []refCall{sf1}},
		// Hunyuan Hy3 (no case in the reference's tests): its template's own
		// rendering of a call, after reasoning, and of two.
		{from: "Hy3", family: familyHunyuan, think: [2]string{"<think:opensource>", "</think:opensource>"}, in: "<think:opensource>I'm\nthinking</think:opensource>" + hyCall("get_weather", "city", "Paris"),
			reasoning: refThinking, calls: []refCall{{"get_weather", `{"city": "Paris"}`}}},
		{from: "Hy3", family: familyHunyuan, think: [2]string{"<think:opensource>", "</think:opensource>"}, in: "Both.<tool_calls:opensource>\n<tool_call:opensource>special_function<tool_sep:opensource>\n<arg_key:opensource>arg1</arg_key:opensource>\n<arg_value:opensource>1</arg_value:opensource>\n</tool_call:opensource>\n<tool_call:opensource>python<tool_sep:opensource>\n<arg_key:opensource>code</arg_key:opensource>\n<arg_value:opensource>print(1)</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>",
			content: "Both.", calls: []refCall{sf1, {"python", `{"code": "print(1)"}`}}},
		// CohereForAI-c4ai-command-r-plus-tool_use
		{from: "command-r-plus", family: familyCommandRPlus, in: "<|CHATBOT_TOKEN|>Hello, world!\nWhat's up?<|END_OF_TURN_TOKEN|>", content: refHello},
		{from: "command-r-plus", family: familyCommandRPlus, in: "Action:\n```json\n[{\"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}]\n```", calls: []refCall{sf1}},
		// openbmb-MiniCPM5-1B (reasoning_format auto; the prompt opens <think> when thinking)
		{from: "MiniCPM5", family: familyMiniCPM5, think: thinkTags, in: `<function name="python"><param name="code">print('Hello, World!')</param></function>`, calls: []refCall{py("print('Hello, World!')")}},
		{from: "MiniCPM5", family: familyMiniCPM5, think: thinkTags, in: `<function name="empty_args"></function>`, calls: []refCall{{"empty_args", "{}"}}},
		{from: "MiniCPM5", family: familyMiniCPM5, think: thinkTags, in: `<function name="python"><param name="code">print('x')</param></function>`, calls: []refCall{py("print('x')")}},
		{from: "MiniCPM5", family: familyMiniCPM5, think: thinkTags, in: `<function name="html"><param name="markup"><![CDATA[<a href="/x">hi</a> </param>]]></param></function>`,
			calls: []refCall{{"html", `{"markup": "<a href=\"/x\">hi</a> </param>"}`}}},
		{from: "MiniCPM5", family: familyMiniCPM5, think: thinkTags, open: true, in: `I'm thinking</think><function name="python"><param name="code">print('hey')</param></function>`,
			reasoning: "I'm thinking", calls: []refCall{py("print('hey')")}},
		{from: "MiniCPM5", family: familyMiniCPM5, think: thinkTags, in: "<function name=\"python\"><param name=\"code\">print('x')</param></function>\n<function name=\"python\"><param name=\"code\">print('y')</param></function>",
			calls: []refCall{py("print('x')"), py("print('y')")}},
		// Cohere2MoE (reasoning_format deepseek; the prompt opens <|START_THINKING|>)
		{from: "Cohere2MoE", family: familyCommandR7B, think: thinkR7B, open: true, in: "I'm\nthinking<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>", reasoning: refThinking, content: refHello},
		{from: "Cohere2MoE", family: familyCommandR7B, think: thinkR7B, open: true, in: "<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>", content: refHello},
		{from: "Cohere2MoE", family: familyCommandR7B, think: thinkR7B, open: true, in: "I need to output the invoice details in JSON<|END_THINKING|><|START_TEXT|>{\"amount\": 123.45, \"date\": \"2025-12-03\"}<|END_TEXT|>",
			reasoning: "I need to output the invoice details in JSON", content: `{"amount": 123.45, "date": "2025-12-03"}`},
		{from: "Cohere2MoE", family: familyCommandR7B, think: thinkR7B, open: true, in: "I'm\nthinking<|END_THINKING|>" + cohereCall, reasoning: refThinking, calls: []refCall{sf1}},
		{from: "Cohere2MoE", family: familyCommandR7B, think: thinkR7B, open: true, in: "<|END_THINKING|>" + cohereCall, calls: []refCall{sf1}},
		{from: "Cohere2MoE", family: familyCommandR7B, think: thinkR7B, open: true,
			in:    "<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"todo_list\", \"parameters\": {\"todos\": [\"buy milk\", \"walk dog\"]}}\n]<|END_ACTION|>",
			calls: []refCall{{"todo_list", `{"todos": ["buy milk", "walk dog"]}`}}},
		{from: "Cohere2MoE", family: familyCommandR7B, think: thinkR7B, open: true,
			in:        "I'm\nthinking<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"python\", \"parameters\": {\"code\": \"print('hey')\"}}\n]<|END_ACTION|>",
			reasoning: refThinking, calls: []refCall{sf1, py("print('hey')")}},
	}...)
}

// Apriel 1.6's reasoning markers, and the text its prompt writes after
// opening the reasoning.
var thinkApriel = [2]string{"<|begin_assistant|>", "[BEGIN FINAL RESPONSE]"}

const aprielPreamble = "Here are my reasoning steps:\n"

// TestReasoningPreamble: a prompt that opens the reasoning and writes a
// line after the marker (Apriel 1.6) leaves it open with that line as the
// reasoning's start; one that closed it, or wrote markup after it, does not.
func TestReasoningPreamble(t *testing.T) {
	tmpl := &chatTemplate{family: familyApriel, source: "{{ '[BEGIN FINAL RESPONSE]' }}", caps: templateCaps{reasoning: true}}
	for _, c := range []struct {
		prompt, preamble string
		open             bool
	}{
		{"<|begin_user|>\nHi\n<|begin_assistant|>\nHere are my reasoning steps:\n", aprielPreamble, true},
		{"<|begin_user|>\nHi\n<|begin_assistant|>\n", "", true},
		{"<|begin_assistant|>\nold\n[BEGIN FINAL RESPONSE]\nanswer<|end|>\n<|begin_user|>\nHi\n", "", false},
		{"<|begin_user|>\nHi\n", "", false},
	} {
		r := newReasoningSplit(tmpl, c.prompt, reasoningAuto)
		if r.forcedOpen != c.open || r.preamble != c.preamble {
			t.Errorf("prompt %q: open %v preamble %q, want %v %q", c.prompt, r.forcedOpen, r.preamble, c.open, c.preamble)
		}
	}
}

// hyCall writes a Hunyuan Hy3 call block as its template does.
func hyCall(name string, kv ...string) string {
	s := "<tool_calls:opensource>\n<tool_call:opensource>" + name + "<tool_sep:opensource>\n"
	for i := 0; i+1 < len(kv); i += 2 {
		s += "<arg_key:opensource>" + kv[i] + "</arg_key:opensource>\n<arg_value:opensource>" + kv[i+1] + "</arg_value:opensource>\n"
	}
	return s + "</tool_call:opensource>\n</tool_calls:opensource>"
}

// quoteJSON is s as a JSON string.
func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
