// Conformance check of a vkllm server with the clients people use: the
// official openai client, the Vercel AI SDK (ai + @ai-sdk/openai) and
// LangChain (@langchain/openai), versions pinned in package.json.
// Usage: node conformance.mjs <base-url> <api-key> <fake|model>
// "fake": the deterministic fake backend of api/conformance_test.go:
// completions answer "Hello, world! This is the fake model.", questions
// about the weather get a get_weather tool call, "Describe Paris" gets a
// JSON object (or a call of LangChain's extract tool when offered),
// embeddings are letter histograms; checks compare exact text.
// "model": a small generated model with random weights: checks hold the
// protocol's shapes, the tool calls' structure and the schema validity of
// grammar-constrained output, not wording. Requests sample greedily
// (temperature 0), so that a run is repeatable.
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, tool, Output, embedMany, stepCountIs } from "ai";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { z } from "zod";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

const [base, apiKey, mode] = process.argv.slice(2);

// Tests reach nothing beyond loopback: a client that fetches anything else
// (telemetry, tokenizer downloads) fails the run.
const offLoopback = [];
const loopbackFetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (!["127.0.0.1", "localhost", "[::1]"].includes(url.hostname)) {
    offLoopback.push(url.href);
    return Promise.reject(new Error(`conformance: no network beyond loopback (${url.href})`));
  }
  return loopbackFetch(input, init);
};
const exact = mode === "fake";
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 });
const reply = "Hello, world! This is the fake model.";
const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const fakeChecks = {
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


// Schemas the clients write with zod: integer fields carry zod's
// ±9007199254740991 bounds, strings are bounded so that a random model
// finishes them.
const weatherArgs = z.object({ city: z.string().max(12) });
const cityInfo = z.object({
  city: z.string().max(12),
  temp: z.number().int(),
  unit: z.enum(["c", "f"]),
});
const modelId = (await client.models.list()).data[0].id;
const weatherQuestion = "What is the weather in Paris?";
const askJSON = "Describe Paris as JSON.";
const chatTools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: z.toJSONSchema(weatherArgs) } }];
const weatherTool = {
  type: "function", name: "get_weather", description: "Weather of a city",
  parameters: z.toJSONSchema(weatherArgs), strict: false,
};

// checkCall asserts a get_weather call with arguments valid for the schema.
function checkCall(name, args) {
  assert.equal(name, "get_weather");
  const parsed = weatherArgs.parse(typeof args === "string" ? JSON.parse(args) : args);
  if (exact) assert.deepEqual(parsed, { city: "Paris" });
}

const aiOpenAI = createOpenAI({ baseURL: `${base}/v1`, apiKey });
const lcChat = (opts = {}) => new ChatOpenAI({ model: modelId, apiKey, configuration: { baseURL: `${base}/v1` }, maxRetries: 0, temperature: 0, ...opts });

const clientChecks = {
  async modelsRetrieve() {
    const m = await client.models.retrieve(modelId);
    assert.equal(m.id, modelId);
    assert.ok(m.meta.n_ctx > 0 && m.meta.n_vocab > 0);
    await assert.rejects(client.models.retrieve("no-such-model"), (e) => e instanceof OpenAI.NotFoundError);
  },
  async chatMaxCompletionTokens() {
    const r = await client.chat.completions.create({ model: modelId, temperature: 0, max_completion_tokens: 5, messages: [{ role: "user", content: "Say hi" }] });
    assert.ok(r.usage.completion_tokens <= 5);
    if (exact) assert.equal(r.choices[0].message.content, reply.slice(0, 5));
  },
  async chatToolChoices() {
    for (const tool_choice of ["auto", "required", { type: "function", function: { name: "get_weather" } }]) {
      const r = await client.chat.completions.create({ model: modelId, temperature: 0, max_tokens: 200, tools: chatTools, tool_choice, parallel_tool_calls: false,
        messages: [{ role: "user", content: weatherQuestion }] });
      const msg = r.choices[0].message;
      if (tool_choice === "auto" && !exact && !msg.tool_calls) { assert.equal(typeof msg.content, "string"); continue; }
      assert.equal(r.choices[0].finish_reason, "tool_calls");
      assert.equal(msg.tool_calls.length, 1);
      checkCall(msg.tool_calls[0].function.name, msg.tool_calls[0].function.arguments);
    }
  },
  async chatParse() {
    const r = await client.chat.completions.parse({ model: modelId, temperature: 0, max_tokens: 300, messages: [{ role: "user", content: askJSON }],
      response_format: zodResponseFormat(cityInfo, "city_info") });
    const parsed = cityInfo.parse(r.choices[0].message.parsed);
    if (exact) assert.deepEqual(parsed, { city: "Paris", temp: 21, unit: "c" });
  },
  // Second turns built from the client's own returned messages, as apps
  // keep a conversation: parse()'s message (parsed, refusal, annotations),
  // stream()'s final message with its tool calls, and the pass-through
  // fields the SDK's types offer.
  async chatSecondTurnParse() {
    const messages = [{ role: "user", content: askJSON }];
    const r = await client.chat.completions.parse({ model: modelId, temperature: 0, max_tokens: 300, messages,
      response_format: zodResponseFormat(cityInfo, "city_info") });
    assert.ok("parsed" in r.choices[0].message);
    messages.push(r.choices[0].message, { role: "user", content: "And Rome?" });
    const r2 = await client.chat.completions.create({ model: modelId, temperature: 0, max_tokens: 8, messages,
      store: false, metadata: { app: "test" }, reasoning_effort: "low", service_tier: "auto", prompt_cache_key: "k1",
      user: "u1", modalities: ["text"], verbosity: "low" });
    assert.equal(r2.object, "chat.completion");
  },
  async chatSecondTurnTools() {
    const messages = [{ role: "user", content: weatherQuestion }];
    const runner = client.chat.completions.stream({ model: modelId, temperature: 0, max_tokens: 200, messages, tools: chatTools, tool_choice: "required" });
    const msg = (await runner.finalChatCompletion()).choices[0].message;
    assert.ok(msg.tool_calls.length >= 1);
    messages.push(msg, ...msg.tool_calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: "sunny" })));
    const r2 = await client.chat.completions.create({ model: modelId, temperature: 0, max_tokens: 8, messages, tools: chatTools });
    assert.equal(r2.object, "chat.completion");
  },
  async responsesSecondTurn() {
    const input = [{ role: "user", content: "Say hi" }];
    const r = await client.responses.create({ model: modelId, temperature: 0, input, max_output_tokens: 8, store: false });
    input.push(...r.output, { role: "user", content: "Again" });
    const r2 = await client.responses.create({ model: modelId, temperature: 0, input, max_output_tokens: 8,
      reasoning: { effort: "low" }, metadata: { app: "test" }, prompt_cache_key: "k1", store: false });
    assert.equal(r2.object, "response");
  },
  async responsesCreate() {
    const r = await client.responses.create({ model: modelId, temperature: 0, input: "Say hi", instructions: "Be brief.", max_output_tokens: 60 });
    assert.equal(r.object, "response");
    assert.ok(["completed", "incomplete"].includes(r.status));
    assert.equal(r.output[0].type, "message");
    assert.equal(typeof r.output_text, "string");
    assert.ok(r.usage.input_tokens > 0 && r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens);
    if (exact) assert.equal(r.output_text, reply);
  },
  async responsesMessages() {
    const r = await client.responses.create({ model: modelId, temperature: 0, max_output_tokens: 8, input: [
      { role: "developer", content: "Be brief." },
      { role: "user", content: [{ type: "input_text", text: "Say hi" }] },
      { role: "assistant", content: [{ type: "output_text", text: "Hi!", annotations: [] }] },
      { role: "user", content: "Again" },
    ] });
    assert.ok(r.usage.output_tokens <= 8);
    if (exact) { assert.equal(r.status, "incomplete"); assert.equal(r.output_text, reply.slice(0, 8)); }
  },
  async responsesStream() {
    const stream = client.responses.stream({ model: modelId, temperature: 0, input: "Say hi", max_output_tokens: 60 });
    let text = "", types = new Set(), last = -1;
    for await (const ev of stream) {
      assert.equal(ev.sequence_number, last + 1);
      last = ev.sequence_number;
      types.add(ev.type);
      if (ev.type === "response.output_text.delta") text += ev.delta;
    }
    const final = await stream.finalResponse();
    assert.equal(final.output_text, text);
    for (const t of ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.done", "response.output_item.done"]) assert.ok(types.has(t), `no ${t} event`);
    assert.ok(types.has("response.completed") || types.has("response.incomplete"));
    if (exact) assert.equal(text, reply);
  },
  async responsesTools() {
    for (const tool_choice of ["required", { type: "function", name: "get_weather" }]) {
      const r = await client.responses.create({ model: modelId, temperature: 0, input: weatherQuestion, tools: [weatherTool], tool_choice, max_output_tokens: 200 });
      const call = r.output.find((o) => o.type === "function_call");
      assert.ok(call, `no function_call in ${JSON.stringify(r.output)}`);
      checkCall(call.name, call.arguments);
      // The result goes back as a function_call_output item.
      const r2 = await client.responses.create({ model: modelId, temperature: 0, tools: [weatherTool], max_output_tokens: 40, input: [
        { role: "user", content: weatherQuestion }, call, { type: "function_call_output", call_id: call.call_id, output: "sunny" }] });
      assert.equal(r2.output[0].type, "message");
      if (exact) assert.equal(r2.output_text, "It is sunny.");
    }
  },
  async responsesStreamTool() {
    const stream = client.responses.stream({ model: modelId, temperature: 0, input: weatherQuestion, tools: [weatherTool], tool_choice: "required", max_output_tokens: 200 });
    let args = "";
    for await (const ev of stream) if (ev.type === "response.function_call_arguments.delta") args += ev.delta;
    const call = (await stream.finalResponse()).output.find((o) => o.type === "function_call");
    assert.equal(call.arguments, args);
    checkCall(call.name, args);
  },
  async responsesParse() {
    const r = await client.responses.parse({ model: modelId, temperature: 0, input: askJSON, max_output_tokens: 300, text: { format: zodTextFormat(cityInfo, "city_info") } });
    const parsed = cityInfo.parse(r.output_parsed);
    if (exact) assert.deepEqual(parsed, { city: "Paris", temp: 21, unit: "c" });
  },
  async responsesPrevious() {
    const first = await client.responses.create({ model: modelId, temperature: 0, input: "Say hi", max_output_tokens: 10 });
    const next = await client.responses.create({ model: modelId, temperature: 0, input: "Again", previous_response_id: first.id, max_output_tokens: 10 });
    assert.equal(next.previous_response_id, first.id);
    assert.ok(next.usage.input_tokens > first.usage.input_tokens);
  },
  async responsesUnknownField() {
    await assert.rejects(client.responses.create({ model: modelId, temperature: 0, input: "hi", temprature: 1 }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === "temprature");
  },
  async embeddingsTokens() {
    const r = await client.embeddings.create({ model: modelId, input: [[72, 73, 74], [75, 76]], encoding_format: "float" });
    assert.equal(r.data.length, 2);
    assert.ok(r.data.every((d) => d.embedding.length > 0));
  },

  // The AI SDK: openai(model) calls /v1/responses, openai.chat(model) chat.
  async aiSdkGenerateText() {
    for (const model of [aiOpenAI(modelId), aiOpenAI.chat(modelId)]) {
      const r = await generateText({ model, temperature: 0, prompt: "Say hi", system: "Be brief.", maxOutputTokens: 60, maxRetries: 0 });
      assert.equal(typeof r.text, "string");
      assert.ok(["stop", "length"].includes(r.finishReason), r.finishReason);
      assert.ok(r.usage.inputTokens > 0);
      if (exact) assert.equal(r.text, reply);
    }
  },
  async aiSdkStreamText() {
    for (const model of [aiOpenAI(modelId), aiOpenAI.chat(modelId)]) {
      const errors = [];
      const r = streamText({ model, temperature: 0, prompt: "Say hi", maxOutputTokens: 60, maxRetries: 0, onError: ({ error }) => errors.push(error) });
      let text = "";
      for await (const t of r.textStream) text += t;
      assert.deepEqual(errors, []);
      assert.equal(text, await r.text);
      if (exact) assert.equal(text, reply);
    }
  },
  async aiSdkTools() {
    for (const model of [aiOpenAI(modelId), aiOpenAI.chat(modelId)]) {
      for (const toolChoice of ["auto", "required", { type: "tool", toolName: "get_weather" }]) {
        let executed = null;
        const r = await generateText({
          model, prompt: weatherQuestion, maxOutputTokens: 200, maxRetries: 0, toolChoice,
          tools: { get_weather: tool({ description: "Weather of a city", inputSchema: weatherArgs, execute: async (a) => { executed = a; return "sunny"; } }) },
          // A second step sends the call and its result back.
          stopWhen: stepCountIs(2), prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: "none" } : {}),
        });
        if (toolChoice === "auto" && !exact && executed === null) continue;
        const calls = r.steps[0].toolCalls;
        assert.equal(calls.length, 1, `toolChoice ${JSON.stringify(toolChoice)}: ${calls.length} calls`);
        checkCall(calls[0].toolName, calls[0].input);
        assert.deepEqual(executed, calls[0].input);
        assert.equal(r.steps.length, 2);
        if (exact) assert.equal(r.text, "It is sunny.");
      }
    }
  },
  async aiSdkStructured() {
    for (const model of [aiOpenAI(modelId), aiOpenAI.chat(modelId)]) {
      const r = await generateText({ model, temperature: 0, prompt: askJSON, maxOutputTokens: 300, maxRetries: 0, output: Output.object({ schema: cityInfo }) });
      const parsed = cityInfo.parse(r.output);
      if (exact) assert.deepEqual(parsed, { city: "Paris", temp: 21, unit: "c" });
    }
  },
  async aiSdkEmbed() {
    const r = await embedMany({ model: aiOpenAI.embedding(modelId), values: ["aaaa", "ab"], maxRetries: 0 });
    assert.equal(r.embeddings.length, 2);
    if (exact) assert.deepEqual(r.embeddings[0], [0, 1, 0, 0, 0, 0, 0, 0]);
  },

  // LangChain.
  async langchainInvokeStream() {
    const llm = lcChat({ maxTokens: 60 });
    const r = await llm.invoke([["system", "Be brief."], ["human", "Say hi"]]);
    assert.equal(typeof r.content, "string");
    let text = "";
    for await (const c of await llm.stream("Say hi")) text += c.content;
    if (exact) { assert.equal(r.content, reply); assert.equal(text, reply); }
  },
  async langchainTools() {
    const getWeather = { type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: z.toJSONSchema(weatherArgs) } };
    for (const tool_choice of ["auto", "required", "get_weather"]) {
      const r = await lcChat({ maxTokens: 200 }).bindTools([getWeather], { tool_choice }).invoke(weatherQuestion);
      if (tool_choice === "auto" && !exact && r.tool_calls.length === 0) continue;
      assert.equal(r.tool_calls.length, 1, `tool_choice ${tool_choice}`);
      checkCall(r.tool_calls[0].name, r.tool_calls[0].args);
    }
  },
  async langchainStructured() {
    for (const method of ["jsonSchema", "functionCalling"]) {
      const out = await lcChat({ maxTokens: 300 }).withStructuredOutput(cityInfo, { method, includeRaw: true }).invoke(askJSON);
      assert.ok(out.parsed, `${method}: nothing parsed from ${JSON.stringify(out.raw)}`);
      const parsed = cityInfo.parse(out.parsed);
      if (exact) assert.deepEqual(parsed, { city: "Paris", temp: 21, unit: "c" });
    }
  },
  async langchainResponses() {
    const r = await lcChat({ maxTokens: 60, useResponsesApi: true }).invoke("Say hi");
    assert.equal(typeof r.text, "string");
    if (exact) assert.equal(r.text, reply);
  },
  async langchainEmbeddings() {
    const emb = new OpenAIEmbeddings({ model: modelId, temperature: 0, apiKey, configuration: { baseURL: `${base}/v1` }, maxRetries: 0 });
    const docs = await emb.embedDocuments(["aaaa", "ab"]);
    const q = await emb.embedQuery("aaaa");
    assert.equal(docs.length, 2);
    assert.deepEqual(q, docs[0]);
  },
};

// Mode "image" (a server with a vision projector): the official client
// sends an image as a data URL, as its docs show; argv after the mode: the
// image file, its MIME type, and the expected prompt tokens and content.
const imageChecks = {
  async openaiImageDataURL() {
    const [file, mime, wantPrompt, wantContent] = process.argv.slice(5);
    const url = `data:${mime};base64,${(await readFile(file)).toString("base64")}`;
    const messages = [{ role: "user", content: [
      { type: "image_url", image_url: { url } },
      { type: "text", text: "What is in this picture?" },
    ] }];
    const r = await client.chat.completions.create({ model: modelId, messages, max_tokens: 16, temperature: 0, seed: 1 });
    assert.equal(r.usage.prompt_tokens, Number(wantPrompt));
    assert.equal(r.choices[0].message.content, wantContent);
    const stream = await client.chat.completions.create({ model: modelId, messages, max_tokens: 16, temperature: 0, seed: 1, stream: true, stream_options: { include_usage: true } });
    let text = "", usage;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      usage = chunk.usage ?? usage;
    }
    assert.equal(text, wantContent);
    assert.equal(usage.prompt_tokens, Number(wantPrompt));
  },
};

let checks = mode === "image" ? imageChecks : exact ? { ...fakeChecks, ...clientChecks } : clientChecks;
// CONFORMANCE_ONLY=name,name runs those checks only (for debugging).
if (process.env.CONFORMANCE_ONLY) {
  const only = process.env.CONFORMANCE_ONLY.split(",");
  checks = Object.fromEntries(Object.entries(checks).filter(([name]) => only.includes(name)));
}

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
if (offLoopback.length) {
  failed++;
  console.log(`FAIL network: fetched beyond loopback: ${offLoopback.join(", ")}`);
}
process.exit(failed ? 1 : 0);
