package api

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/sampling/grammar"
)

// TestCallsStreamAsWritten: where calls are held to their family's
// grammar, a streamed answer sends each call's header as soon as its name
// is written and its arguments as they come, compact, fed one byte at a
// time: the header before the arguments are done, the fragments adding up
// to the whole answer's arguments, one id throughout.
func TestCallsStreamAsWritten(t *testing.T) {
	for _, c := range []struct {
		family toolFamily
		src    string
		out    string
	}{
		{familyHermes, "<tool_call>", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"},
		{familyMistral, "[TOOL_CALLS]", `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}, {"name": "now", "arguments": {}}]`},
		{familyMistral, "[TOOL_CALLS][ARGS]", `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}[TOOL_CALLS]now[ARGS]{}`},
		{familyDeepSeek, "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", \"days\": 3}<｜tool▁call▁end｜><｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
		{familyKimi, "<|tool_calls_section_begin|>", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 3}<|tool_call_end|><|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"},
		{familyCommandR7B, "<|START_ACTION|>", `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris", "days": 3}}, {"tool_call_id": "1", "tool_name": "now", "parameters": {}}]<|END_ACTION|>`},
		{familyApertus, "<|tools_prefix|>", `<|tools_prefix|>[{"get_weather": {"city": "Paris", "days": 3}}, {"now": {}}]<|tools_suffix|>`},
		{familyGranite, "<|tool_call|>", `<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}, {"name": "now", "arguments": {}}]`},
		{familySolarOpen, "<|tool_call:begin|>", "<|tool_calls|><|tool_call:begin|>0<|tool_call:name|>get_weather<|tool_call:args|>{\"city\": \"Paris\", \"days\": 3}<|tool_call:end|><|tool_call:begin|>1<|tool_call:name|>now<|tool_call:args|>{}<|tool_call:end|>"},
	} {
		t.Run(c.family.String()+"/"+c.src, func(t *testing.T) {
			if detectToolFamily(c.src) != c.family {
				t.Fatalf("%q is %v", c.src, detectToolFamily(c.src))
			}
			tmpl := &chatTemplate{family: c.family, source: c.src, syntax: c.family.callSyntax(c.src), format: c.family.grammarFormat()}
			req := &chatRequest{genRequest: &genRequest{}, tools: syntaxTools, parallelCall: true}
			pc := &preparedChat{tmpl: tmpl, toolsActive: true, callGrammar: true}
			a := newAnswerStream(req, pc)
			if a.inc == nil {
				t.Fatal("no incremental syntax")
			}
			headers := map[int]callDelta{}
			args := map[int]string{}
			headerAt, argsDoneAt := -1, -1
			wantArgs := `{"city":"Paris","days":3}`
			for i := range len(c.out) {
				for _, p := range a.add([]byte(c.out[i:i+1]), nil) {
					if len(p.text) > 0 {
						t.Fatalf("content %q streamed from a call", p.text)
					}
					for _, d := range p.calls {
						if d.header {
							if _, dup := headers[d.index]; dup {
								t.Fatalf("call %d: a second header", d.index)
							}
							headers[d.index] = d
							if d.index == 0 {
								headerAt = i
							}
						}
						args[d.index] += d.args
						if d.index == 0 && args[0] == wantArgs && argsDoneAt < 0 {
							argsDoneAt = i
						}
					}
				}
			}
			end := a.end()
			if headerAt < 0 || argsDoneAt < 0 || headerAt >= strings.Index(c.out, "Paris") {
				t.Errorf("first call's header at byte %d, its arguments done at %d: want the header before the arguments are written", headerAt, argsDoneAt)
			}
			if len(end.calls) != 2 || end.cut || len(end.sent) != 2 {
				t.Fatalf("calls %v (cut %v, %d streamed), want 2", end.calls, end.cut, len(end.sent))
			}
			for k, call := range end.calls {
				h := headers[k]
				rest := strings.TrimPrefix(call.arguments, end.sent[k].args)
				if h.id != call.id || h.name != call.name || args[k]+rest != call.arguments {
					t.Errorf("call %d: streamed %s %s %q (+%q at the end), whole %s %s %q", k, h.id, h.name, args[k], rest, call.id, call.name, call.arguments)
				}
			}
			if end.calls[0].arguments != wantArgs {
				t.Errorf("arguments %s, want %s", end.calls[0].arguments, wantArgs)
			}
		})
	}
}

// TestCallStreamCutShort: an answer that ends inside a call it streamed
// (max_tokens) keeps the call as far as it was written, cut short, as the
// reference keeps a partial call, instead of sending its markup as content.
func TestCallStreamCutShort(t *testing.T) {
	tmpl := &chatTemplate{family: familyHermes, format: familyHermes.grammarFormat()}
	req := &chatRequest{genRequest: &genRequest{}, tools: syntaxTools, parallelCall: true}
	a := newAnswerStream(req, &preparedChat{tmpl: tmpl, toolsActive: true, callGrammar: true})
	var got string
	for _, p := range a.add([]byte("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par"), nil) {
		for _, d := range p.calls {
			got += d.args
		}
	}
	end := a.end()
	if len(end.calls) != 1 || !end.cut || end.calls[0].name != "get_weather" || end.calls[0].arguments != `{"city":"Par` || got != `{"city":"Par` {
		t.Errorf("calls %v cut %v streamed %q, want get_weather {\"city\":\"Par cut short", end.calls, end.cut, got)
	}
	for _, p := range end.parts {
		if len(p.text) > 0 {
			t.Errorf("content %q", p.text)
		}
	}
}

// TestCallCutShortThroughServer: under "auto", a call the grammar held
// that max_tokens cut short comes back as that call as far as it was
// written, finish_reason length, whole and streamed alike (the stream
// having sent its header and arguments as they were written).
func TestCallCutShortThroughServer(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	f.template = qwen3Template + "{# <tool_call> #}"
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	f.reply = func(string) string { return "<think>\nweather\n</think>\n\n" + call }
	ts := newReadyServer(t, f, Config{})
	n := len("<think>\nweather\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa")
	body := `{"messages":[{"role":"user","content":"weather?"}],"temperature":0,"max_tokens":` + strconv.Itoa(n) + `,` + weatherTools
	m := decodeBody(t, ts.post("/v1/chat/completions", body+`}`).body)
	tc := jsonPath(m, "choices", 0, "message", "tool_calls", 0)
	if jsonPath(tc, "function", "name") != "get_weather" || jsonPath(tc, "function", "arguments") != `{"city":"Pa` ||
		jsonPath(m, "choices", 0, "finish_reason") != "length" || jsonPath(m, "choices", 0, "message", "content") != nil {
		t.Errorf("whole: %v", m)
	}
	r, c, k, fin := chatStreamParts(t, ts, body+`,"stream":true}`)
	if r != "weather" || c != "" || k != `get_weather {"city":"Pa` || fin != "length" {
		t.Errorf("stream: reasoning %q, content %q, calls %q, finish %q", r, c, k, fin)
	}
	// Whole, the same call streams in pieces that add up to it.
	r, c, k, fin = chatStreamParts(t, ts, `{"messages":[{"role":"user","content":"weather?"}],"temperature":0,"max_tokens":300,`+weatherTools+`,"stream":true}`)
	if r != "weather" || c != "" || k != `get_weather {"city":"Paris"}` || fin != "tool_calls" {
		t.Errorf("stream: reasoning %q, content %q, calls %q, finish %q", r, c, k, fin)
	}
}

// TestJSONValueEnd: where a JSON value ends in text that goes on, and
// compact prefixes, escapes and nesting included.
func TestJSONValueEnd(t *testing.T) {
	for _, c := range []struct {
		s   string
		end int
		ok  bool
	}{
		{` {"a": "x\"}"}, more`, 14, true},
		{`[1, [2], {"b": []}]]`, 19, true},
		{`"q\\"rest`, 5, true},
		{`12.5e3}`, 6, true},
		{`true, false`, 4, true},
		{`{"a": "}`, 0, false},
		{`  `, 0, false},
		{`123`, 0, false},
	} {
		if end, ok := jsonValueEnd(c.s); end != c.end || ok != c.ok {
			t.Errorf("jsonValueEnd(%q) = %d %v, want %d %v", c.s, end, ok, c.end, c.ok)
		}
	}
	for in, want := range map[string]string{
		`{ "a" : "x y\" z" ,`: `{"a":"x y\" z",`,
		"[1,\n 2]":            `[1,2]`,
		`{"k": "a\\" b`:       `{"k":"a\\"b`,
	} {
		if got := compactJSONPrefix(in); got != want {
			t.Errorf("compactJSONPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzPartialCalls reads arbitrary text as the calls of every family that
// streams them as they are written, a byte at a time as a stream does:
// never a panic, and the arguments sent only ever grow.
func FuzzPartialCalls(f *testing.F) {
	f.Add("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, \"}\"]}}\n</tool_call>")
	f.Add(`[TOOL_CALLS][{"name": "a", "arguments": {"k": "\"\\"}}]`)
	f.Add("<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{\"q\":")
	f.Add(`<|tools_prefix|>[{"a": {}}, {"b`)
	var syns []*grammar.Syntax
	for fam, src := range syntaxSources {
		tmpl := &chatTemplate{family: fam, syntax: fam.callSyntax(src), format: fam.grammarFormat()}
		if s := streamSyntax(tmpl); s != nil {
			syns = append(syns, s)
		}
	}
	syns = append(syns, streamSyntax(&chatTemplate{family: familyHermes, format: grammar.ToolFormatHermes}))
	f.Fuzz(func(t *testing.T, text string) {
		for _, syn := range syns {
			var sent []sentCall
			for i := 1; i <= len(text); i++ {
				calls, _ := partialSyntaxCalls(syn, text[:i])
				before := append([]sentCall(nil), sent...)
				callDeltas(&sent, calls)
				for k, s := range before {
					if !strings.HasPrefix(sent[k].args, s.args) || sent[k].name != s.name {
						t.Fatalf("call %d went from %q %q to %q %q", k, s.name, s.args, sent[k].name, sent[k].args)
					}
				}
			}
		}
	})
}

// TestResponsesCallStreamsAsWritten: /v1/responses streams a call held to
// the grammar as it is written: the message before it closes, the call's
// item opens when its name is written and its arguments go out as they
// come, adding up to the final item's; cut short by max_output_tokens the
// call stays, as far as it was written, and the response is incomplete.
func TestResponsesCallStreamsAsWritten(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris, Île-de-France\"}}\n</tool_call>"
	f.reply = func(string) string { return "Let me check. " + call }
	ts := newReadyServer(t, f, Config{})
	body := `{"input":"weather?","template":"chatml","stream":true,` + responsesWeatherTool
	evs := respEvents(t, ts.post("/v1/responses", body+`}`).body)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.output_item.done", "response.completed"}
	if got := eventTypes(evs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var args strings.Builder
	deltas := 0
	for _, ev := range evs {
		if ev["type"] == "response.function_call_arguments.delta" {
			args.WriteString(ev["delta"].(string))
			deltas++
		}
	}
	final := jsonPath(evs[len(evs)-1], "response", "output", 1)
	if args.String() != `{"city":"Paris, Île-de-France"}` || jsonPath(final, "arguments") != args.String() || deltas < 5 ||
		jsonPath(evs[len(evs)-1], "response", "output", 0, "content", 0, "text") != "Let me check." {
		t.Errorf("arguments %q in %d deltas, final %v", args.String(), deltas, evs[len(evs)-1]["response"])
	}
	n := len("Let me check. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa")
	evs = respEvents(t, ts.post("/v1/responses", body+`,"max_output_tokens":`+strconv.Itoa(n)+`}`).body)
	last := evs[len(evs)-1]
	if last["type"] != "response.incomplete" || jsonPath(last, "response", "output", 1, "name") != "get_weather" ||
		jsonPath(last, "response", "output", 1, "arguments") != `{"city":"Pa` {
		t.Errorf("cut short: %v", last)
	}
}
