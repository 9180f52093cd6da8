// Conformance check of a vkllm server with the official openai client.
// Usage: node conformance.mjs <base-url> <api-key>
// The server runs the deterministic fake backend of api/conformance_test.go:
// completions answer "Hello, world! This is the fake model.", questions about
// the weather get a get_weather tool call, embeddings are letter histograms.
import OpenAI from "openai";
import assert from "node:assert/strict";

const [base, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 });
const reply = "Hello, world! This is the fake model.";
const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];

const checks = {
  async modelsList() {
    const page = await client.models.list();
    assert.deepEqual(page.data.map((m) => m.id), ["fake-model"]);
  },
  async completion() {
    const r = await client.completions.create({ model: "x", prompt: "Say hi", max_tokens: 100, temperature: 0 });
    assert.equal(r.object, "text_completion");
    assert.equal(r.choices[0].text, reply);
    assert.equal(r.choices[0].finish_reason, "stop");
    assert.ok(r.usage.completion_tokens > 0);
  },
  async completionStream() {
    const s = await client.completions.create({ model: "x", prompt: "Say hi", max_tokens: 5, stream: true });
    let text = "", finish = null;
    for await (const c of s) { text += c.choices[0].text; finish = c.choices[0].finish_reason ?? finish; }
    assert.equal(text, reply.slice(0, 5));
    assert.equal(finish, "length");
  },
  async chat() {
    const r = await client.chat.completions.create({ model: "x", max_tokens: 100, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hi" }] });
    assert.equal(r.object, "chat.completion");
    assert.equal(r.choices[0].message.role, "assistant");
    assert.equal(r.choices[0].message.content, reply);
  },
  async chatStream() {
    const s = await client.chat.completions.create({ model: "x", max_tokens: 100, messages: [{ role: "user", content: "Say hi" }], stream: true, stream_options: { include_usage: true } });
    let text = "", first = null, finish = null, usage = null;
    for await (const c of s) {
      if (c.usage) { usage = c.usage; continue; }
      first ??= c.choices[0].delta;
      text += c.choices[0].delta.content ?? "";
      finish = c.choices[0].finish_reason ?? finish;
    }
    assert.deepEqual(first, { role: "assistant" });
    assert.equal(text, reply);
    assert.equal(finish, "stop");
    assert.ok(usage.total_tokens > 0);
  },
  async chatStreamToolCall() {
    const runner = client.chat.completions.stream({ model: "x", max_tokens: 200, messages: [{ role: "user", content: "What is the weather in Paris?" }], tools });
    const final = await runner.finalChatCompletion();
    const choice = final.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, "function");
    assert.equal(call.function.name, "get_weather");
    assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
    assert.match(call.id, /^[A-Za-z0-9]{9}$/);
  },
  async chatToolRoundTrip() {
    const r = await client.chat.completions.create({
      model: "x", tools, messages: [
        { role: "user", content: "What is the weather in Paris?" },
        { role: "assistant", content: null, tool_calls: [{ id: "abc123def", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
        { role: "tool", tool_call_id: "abc123def", content: "sunny" },
      ],
    });
    assert.equal(r.choices[0].message.content, "It is sunny.");
  },
  async embeddingsBase64() {
    // The client asks for base64 by default and decodes it.
    const r = await client.embeddings.create({ model: "x", input: ["aaaa", "ab"] });
    assert.equal(r.data.length, 2);
    assert.deepEqual(Array.from(r.data[0].embedding), [0, 1, 0, 0, 0, 0, 0, 0]);
    const n = Math.SQRT1_2;
    assert.ok(Math.abs(r.data[1].embedding[1] - n) < 1e-6 && Math.abs(r.data[1].embedding[2] - n) < 1e-6);
  },
  async embeddingsFloat() {
    const r = await client.embeddings.create({ model: "x", input: "aaaa", encoding_format: "float" });
    assert.deepEqual(r.data[0].embedding, [0, 1, 0, 0, 0, 0, 0, 0]);
  },
  async errorUnknownField() {
    await assert.rejects(client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "hi" }], temprature: 1 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temprature" && /unknown field/.test(e.message));
  },
  async errorUnknownTool() {
    await assert.rejects(client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "hi" }], tools,
      tool_choice: { type: "function", function: { name: "nope" } } }),
    (e) => e instanceof OpenAI.UnprocessableEntityError && e.status === 422);
  },
  async errorAuth() {
    const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong", maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  },
  async errorStreamEvent() {
    const s = await client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "hi" }], template: "nope", stream: true });
    await assert.rejects(async () => { for await (const _ of s) { /* no chunk expected */ } },
      (e) => e instanceof OpenAI.APIError && /unknown template/.test(e.message));
  },
};

let failed = 0;
for (const [name, fn] of Object.entries(checks)) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
process.exit(failed ? 1 : 0);
