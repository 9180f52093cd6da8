package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// respEvents parses a Responses stream: every frame names its event, the
// name equals the data's type, and sequence numbers count from 0. It
// returns the decoded data of each event.
func respEvents(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for i, ev := range parseSSE(t, body) {
		m := decodeBody(t, []byte(ev.data))
		if ev.event == "" || m["type"] != ev.event {
			t.Errorf("event %d named %q has type %v, want the same", i, ev.event, m["type"])
		}
		if m["sequence_number"] != float64(i) {
			t.Errorf("event %d (%s) has sequence_number %v, want %d", i, ev.event, m["sequence_number"], i)
		}
		out = append(out, m)
	}
	return out
}

func eventTypes(evs []map[string]any) []string {
	var out []string
	for i, ev := range evs {
		if i > 0 && ev["type"] == evs[i-1]["type"] && strings.HasSuffix(ev["type"].(string), ".delta") {
			continue // a run of deltas counts once
		}
		out = append(out, ev["type"].(string))
	}
	return out
}

func TestResponsesText(t *testing.T) {
	f := newFake()
	var prompt string
	f.reply = func(p string) string { prompt = p; return "Hello, world! This is the fake model." }
	ts := newReadyServer(t, f, Config{})
	reply := "Hello, world! This is the fake model."

	r := ts.post("/v1/responses", `{"model":"x","input":"hi","instructions":"Be brief.","temperature":0.5,"top_p":0.9,"metadata":{"k":"v"}}`)
	m := decodeBody(t, r.body)
	if r.status != 200 {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	if want := "<s>system: Be brief.\nuser: hi\nassistant:"; prompt != want {
		t.Errorf("prompt = %q, want %q", prompt, want)
	}
	if m["object"] != "response" || m["status"] != "completed" || !strings.HasPrefix(m["id"].(string), "resp_") ||
		m["model"] != "fake-model" || m["instructions"] != "Be brief." || m["temperature"] != 0.5 || m["top_p"] != 0.9 ||
		jsonPath(m, "metadata", "k") != "v" || m["incomplete_details"] != nil || m["error"] != nil {
		t.Errorf("response = %s, want a completed response echoing the request", r.body)
	}
	out := jsonPath(m, "output").([]any)
	if len(out) != 1 || jsonPath(out, 0, "type") != "message" || jsonPath(out, 0, "role") != "assistant" ||
		jsonPath(out, 0, "content", 0, "type") != "output_text" || jsonPath(out, 0, "content", 0, "text") != reply ||
		!strings.HasPrefix(jsonPath(out, 0, "id").(string), "msg_") {
		t.Errorf("output = %v, want one assistant message with %q", out, reply)
	}
	if u := jsonPath(m, "usage").(map[string]any); u["input_tokens"] != float64(len(prompt)-2) || u["output_tokens"] != float64(len(reply)) ||
		u["total_tokens"] != u["input_tokens"].(float64)+u["output_tokens"].(float64) {
		// The fake's tokens: BOS and one per byte of the prompt ("<s>" is
		// one token), one per byte of the reply (EOS is not counted).
		t.Errorf("usage = %v, want %d input and %d output tokens", u, len(prompt)-2, len(reply))
	}

	r = ts.post("/v1/responses", `{"input":[{"role":"developer","content":"D"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
		{"role":"assistant","content":[{"type":"output_text","text":"c","annotations":[]}]},{"role":"user","content":"d"}],"max_output_tokens":5}`)
	m = decodeBody(t, r.body)
	if want := "<s>system: D\nuser: ab\nassistant: c\nuser: d\nassistant:"; prompt != want {
		t.Errorf("message-list prompt = %q, want %q", prompt, want)
	}
	if m["status"] != "incomplete" || jsonPath(m, "incomplete_details", "reason") != "max_output_tokens" ||
		jsonPath(m, "output", 0, "content", 0, "text") != reply[:5] || m["max_output_tokens"] != 5.0 {
		t.Errorf("max_output_tokens 5: %s, want an incomplete response with %q", r.body, reply[:5])
	}

	t.Run("stream", func(t *testing.T) {
		r := ts.post("/v1/responses", `{"input":"hi","stream":true}`)
		evs := respEvents(t, r.body)
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
		if got := eventTypes(evs); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		var text strings.Builder
		itemID := jsonPath(evs[2], "item", "id")
		var done map[string]any
		for _, ev := range evs {
			if ev["type"] == "response.output_text.done" {
				done = ev
			}
			if ev["type"] == "response.output_text.delta" {
				text.WriteString(ev["delta"].(string))
				if ev["item_id"] != itemID || ev["output_index"] != 0.0 || ev["content_index"] != 0.0 {
					t.Errorf("delta %v does not name item %v at output 0, content 0", ev, itemID)
				}
			}
		}
		last := evs[len(evs)-1]
		if text.String() != reply || jsonPath(done, "text") != reply || jsonPath(last, "response", "status") != "completed" ||
			jsonPath(last, "response", "output", 0, "content", 0, "text") != reply || jsonPath(last, "response", "output", 0, "id") != itemID ||
			jsonPath(evs[0], "response", "status") != "in_progress" {
			t.Errorf("streamed text %q, final %v; want %q everywhere", text.String(), last, reply)
		}
	})
}

const responsesWeatherTool = `"tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}]`

func TestResponsesTools(t *testing.T) {
	f := newFake()
	f.ctxSize = 4096
	var prompt string
	// Compact JSON: a forced call is constrained to it (issue 17 item 22).
	call := "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>"
	f.reply = func(p string) string { prompt = p; return call }
	ts := newReadyServer(t, f, Config{})
	for _, choice := range []string{`"auto"`, `"required"`, `{"type":"function","name":"get_weather"}`} {
		r := ts.post("/v1/responses", `{"input":"weather?","template":"chatml",`+responsesWeatherTool+`,"tool_choice":`+choice+`}`)
		m := decodeBody(t, r.body)
		out, _ := jsonPath(m, "output").([]any)
		if r.status != 200 || len(out) != 1 || jsonPath(out, 0, "type") != "function_call" || jsonPath(out, 0, "name") != "get_weather" ||
			jsonPath(out, 0, "arguments") != `{"city":"Paris"}` || jsonPath(out, 0, "call_id") == "" || jsonPath(out, 0, "status") != "completed" ||
			!strings.HasPrefix(jsonPath(out, 0, "id").(string), "fc_") {
			t.Errorf("tool_choice %s: %d %s, want one get_weather call for Paris", choice, r.status, r.body)
		}
		if !strings.Contains(prompt, `"name": "get_weather"`) && !strings.Contains(prompt, `"name":"get_weather"`) {
			t.Errorf("tool_choice %s: the prompt does not present the tool:\n%s", choice, prompt)
		}
	}

	r := ts.post("/v1/responses", `{"input":"weather?","template":"chatml","stream":true,`+responsesWeatherTool+`}`)
	evs := respEvents(t, r.body)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if got := eventTypes(evs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var args strings.Builder
	for _, ev := range evs {
		if ev["type"] == "response.function_call_arguments.delta" {
			args.WriteString(ev["delta"].(string))
		}
	}
	final := jsonPath(evs[len(evs)-1], "response", "output", 0)
	if args.String() != `{"city":"Paris"}` || jsonPath(evs[2], "item", "arguments") != "" || jsonPath(evs[2], "item", "name") != "get_weather" ||
		jsonPath(final, "arguments") != `{"city":"Paris"}` || jsonPath(final, "call_id") != jsonPath(evs[2], "item", "call_id") {
		t.Errorf("streamed arguments %q, added %v, final %v; want get_weather {\"city\":\"Paris\"}", args.String(), evs[2]["item"], final)
	}

	// The result goes back as function_call_output items.
	f.reply = func(p string) string { prompt = p; return "It is sunny." }
	r = ts.post("/v1/responses", `{"template":"chatml",`+responsesWeatherTool+`,"input":[{"role":"user","content":"weather?"},
		{"type":"function_call","call_id":"abc123def","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"abc123def","output":"SUNNY"}]}`)
	if m := decodeBody(t, r.body); r.status != 200 || jsonPath(m, "output", 0, "content", 0, "text") != "It is sunny." {
		t.Fatalf("tool result: %d %s", r.status, r.body)
	}
	callAt, resultAt := strings.LastIndex(prompt, `"get_weather", "arguments"`), strings.Index(prompt, "SUNNY")
	if callAt < 0 || resultAt < callAt {
		t.Errorf("prompt does not hold the call and then its result:\n%s", prompt)
	}
}

func TestResponsesStore(t *testing.T) {
	f := newFake()
	var prompt string
	f.reply = func(p string) string { prompt = p; return "first answer" }
	ts := newReadyServer(t, f, Config{})
	first := decodeBody(t, ts.post("/v1/responses", `{"input":"q1"}`).body)
	f.reply = func(p string) string { prompt = p; return "second answer" }

	r := ts.post("/v1/responses", `{"input":"q2","previous_response_id":"`+first["id"].(string)+`"}`)
	if want := "<s>user: q1\nassistant: first answer\nuser: q2\nassistant:"; r.status != 200 || prompt != want {
		t.Errorf("previous_response_id: %d, prompt %q, want %q", r.status, prompt, want)
	}
	msgID := jsonPath(first, "output", 0, "id").(string)
	r = ts.post("/v1/responses", `{"input":[{"role":"user","content":"q1"},{"type":"item_reference","id":"`+msgID+`"},{"role":"user","content":"q3"}]}`)
	if want := "<s>user: q1\nassistant: first answer\nuser: q3\nassistant:"; r.status != 200 || prompt != want {
		t.Errorf("item_reference: %d, prompt %q, want %q", r.status, prompt, want)
	}
	unstored := decodeBody(t, ts.post("/v1/responses", `{"input":"q4","store":false}`).body)
	for _, tt := range []struct{ body, param string }{
		{`{"input":"x","previous_response_id":"resp_nope"}`, "previous_response_id"},
		{`{"input":"x","previous_response_id":"` + unstored["id"].(string) + `"}`, "previous_response_id"},
		{`{"input":[{"type":"item_reference","id":"msg_nope"}]}`, "input[0].id"},
	} {
		r := ts.post("/v1/responses", tt.body)
		if m := decodeBody(t, r.body); r.status != 404 || jsonPath(m, "error", "param") != tt.param {
			t.Errorf("POST %s = %d %s, want 404 naming %s", tt.body, r.status, r.body, tt.param)
		}
	}
}

func TestResponsesStructuredOutput(t *testing.T) {
	f := newFake()
	f.reply = func(string) string { return `{"n": 9007199254740991, "name": "x"}` }
	ts := newReadyServer(t, f, Config{})
	// The schema zod writes for z.object({n: z.number().int(), name: z.string()}).
	schema := `{"type":"object","properties":{"n":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},"name":{"type":"string"}},"required":["n","name"],"additionalProperties":false}`
	r := ts.post("/v1/responses", `{"input":"give","text":{"format":{"type":"json_schema","name":"out","strict":true,"schema":`+schema+`}}}`)
	m := decodeBody(t, r.body)
	var got struct {
		N    json.Number `json:"n"`
		Name string      `json:"name"`
	}
	text, _ := jsonPath(m, "output", 0, "content", 0, "text").(string)
	if r.status != 200 || json.Unmarshal([]byte(text), &got) != nil || got.N != "9007199254740991" || got.Name != "x" {
		t.Errorf("structured output = %d %s, want {n: 9007199254740991, name: x}", r.status, r.body)
	}
	if jsonPath(m, "text", "format", "type") != "json_schema" {
		t.Errorf("text = %v, want the request's format echoed", m["text"])
	}
	// The grammar holds even when the model wants otherwise. Where it
	// refuses a token the fake draws among the allowed ones at random, so
	// the wanted text goes on with closing quotes and braces: without them
	// a string opened by a random draw could run to max_output_tokens.
	f.reply = func(string) string { return `{"n": 1e400, "name": 5}` + strings.Repeat(`"}`, 40) }
	r = ts.post("/v1/responses", `{"input":"give","max_output_tokens":200,"text":{"format":{"type":"json_schema","name":"out","schema":`+schema+`}}}`)
	text, _ = jsonPath(decodeBody(t, r.body), "output", 0, "content", 0, "text").(string)
	if err := json.Unmarshal([]byte(text), &got); err != nil || got.Name == "" && !strings.Contains(text, `"name"`) {
		t.Errorf("constrained output %q (%v), want JSON of the schema", text, err)
	}
}

func TestResponsesValidation(t *testing.T) {
	f := newFake()
	ts := newReadyServer(t, f, Config{})
	for _, tt := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"input":"x","temprature":1}`, 400, "temprature"},
		{`{"input":"x","stream":true,"temprature":1}`, 400, "temprature"},
		{`{}`, 400, "input"},
		{`{"input":[]}`, 400, "input"},
		{`{"input":5}`, 400, "input"},
		{`{"input":[{"role":"robot","content":"x"}]}`, 400, "input[0].role"},
		{`{"input":[{"type":"computer_call","summary":[]}]}`, 400, "input[0].type"},
		{`{"input":[{"type":"reasoning","content":[{"type":"output_text","text":"x"}]},{"role":"user","content":"hi"}]}`, 400, "input[0].content[0].type"},
		{`{"input":[{"type":"reasoning","summary":[],"bogus":1},{"role":"user","content":"hi"}]}`, 400, "input[0].bogus"},
		{`{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, 400, "input[0].content[0].type"},
		{`{"input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, 400, "input[0].content[0].type"},
		{`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}]}`, 400, "input[0].content[0]"},
		{`{"input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, 400, "input[0].call_id"},
		{`{"input":[{"type":"function_call_output","call_id":"c","output":5}]}`, 400, "input[0].output"},
		{`{"input":"x","max_output_tokens":0}`, 400, "max_output_tokens"},
		{`{"input":"x","tools":[{"type":"web_search"}]}`, 400, "tools[0].type"},
		{`{"input":"x","tools":[{"type":"function"}]}`, 400, "tools[0].name"},
		{`{"input":"x","tools":[{"type":"function","name":"f","function":{}}]}`, 400, "tools[0].function"},
		{`{"input":"x","tool_choice":"required"}`, 400, "tool_choice"},
		{`{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, 422, "tool_choice"},
		{`{"input":"x","tool_choice":{"type":"file_search"}}`, 400, "tool_choice.type"},
		{`{"input":"x","text":{"format":{"type":"json_schema"}}}`, 400, "text.format.schema"},
		{`{"input":"x","text":{"format":{"type":"json_schema","schema":{"type":"integer","minimum":1e30}}}}`, 400, "text.format.schema"},
		{`{"input":"x","text":{"format":{"type":"xml"}}}`, 400, "text.format.type"},
		{`{"input":"x","include":["nope"]}`, 400, "include[0]"},
		{`{"input":"x","metadata":{"k":1}}`, 400, "metadata.k"},
		{`{"input":"x","truncation":"auto"}`, 400, "truncation"},
		{`{"input":"x","background":true}`, 400, "background"},
		{`{"input":"x","top_logprobs":21}`, 400, "top_logprobs"},
		{`{"input":"` + strings.Repeat("a", 600) + `"}`, 400, "input"},
		// logit_bias is checked against the vocabulary before the first
		// byte: a streamed request gets a 400, not a 200 and an error
		// event (issue 34 item 10).
		{`{"input":"x","logit_bias":{"abc":1}}`, 400, "logit_bias.abc"},
		{`{"input":"x","stream":true,"logit_bias":{"abc":1}}`, 400, "logit_bias.abc"},
		{`{"input":"x","stream":true,"logit_bias":{"260":1}}`, 400, "logit_bias.260"},
		{`{"input":"x","stream":true,"logit_bias":{"":1},"logit_bias_type":"tokens"}`, 400, "logit_bias."},
	} {
		r := ts.post("/v1/responses", tt.body)
		m := decodeBody(t, r.body)
		if r.status != tt.status || jsonPath(m, "error", "param") != tt.param {
			t.Errorf("POST /v1/responses %.80s = %d %s, want %d naming %s", tt.body, r.status, r.body, tt.status, tt.param)
		}
	}
	for _, body := range []string{`{"input":"x","max_output_tokens":2,"logit_bias":{"5":-1}}`,
		`{"input":"x","max_output_tokens":2,"stream":true,"logit_bias":{"H":false},"logit_bias_type":"tokens"}`} {
		if r := ts.post("/v1/responses", body); r.status != 200 || strings.Contains(string(r.body), "event: error") || strings.Contains(string(r.body), `"error":{`) {
			t.Errorf("POST /v1/responses %s = %d %s, want 200 without an error", body, r.status, r.body)
		}
	}
	// The fields the AI SDK and the openai client send are known.
	r := ts.post("/v1/responses", `{"model":"m","input":"x","store":false,"user":"u","service_tier":"auto","include":["message.output_text.logprobs"],
		"prompt_cache_key":"k","safety_identifier":"s","truncation":"disabled","parallel_tool_calls":false,"top_logprobs":2,"stream_options":{"include_obfuscation":false}}`)
	m := decodeBody(t, r.body)
	if r.status != 200 || len(jsonPath(m, "output", 0, "content", 0, "logprobs").([]any)) == 0 ||
		len(jsonPath(m, "output", 0, "content", 0, "logprobs", 0, "top_logprobs").([]any)) != 2 {
		t.Errorf("known fields: %d %s, want 200 with logprobs and 2 alternatives each", r.status, r.body)
	}
}

func TestModelByID(t *testing.T) {
	f := newFake()
	ts := newReadyServer(t, f, Config{})
	r := ts.do("GET", "/v1/models/fake-model", "")
	m := decodeBody(t, r.body)
	if r.status != 200 || m["id"] != "fake-model" || m["object"] != "model" ||
		jsonPath(m, "meta", "n_ctx") != float64(f.ctxSize) || jsonPath(m, "meta", "n_vocab") != float64(fakeVocab) {
		t.Errorf("GET /v1/models/fake-model = %d %s, want the model with meta n_ctx %d, n_vocab %d", r.status, r.body, f.ctxSize, fakeVocab)
	}
	list := decodeBody(t, ts.do("GET", "/v1/models", "").body)
	if fmt.Sprint(jsonPath(list, "data", 0, "meta")) != fmt.Sprint(m["meta"]) {
		t.Errorf("/v1/models meta %v, want the same as /v1/models/{id}: %v", jsonPath(list, "data", 0, "meta"), m["meta"])
	}
	for _, p := range []string{"/v1/models/other", "/v1/models/org/fake-model"} {
		r = ts.do("GET", p, "")
		if m := decodeBody(t, r.body); r.status != 404 || jsonPath(m, "error", "type") != "not_found_error" || jsonPath(m, "error", "param") != "model" {
			t.Errorf("GET %s = %d %s, want 404 not_found_error naming model", p, r.status, r.body)
		}
	}
}
