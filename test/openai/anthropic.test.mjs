// genq's Messages API through Anthropic's own SDK (@anthropic-ai/sdk):
// messages.create, messages.stream, a tool_use → tool_result round trip
// with tool_choice any, messages.countTokens, the SDK's error classes and
// its request ids; structured output (output_config.format) through
// LangChain's ChatAnthropic and the AI SDK's @ai-sdk/anthropic.
// run.sh's stacks serve the tiny random-weight model: what parses here
// parses because decoding was constrained.
import { test } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { z } from "zod";
import { ChatAnthropic } from "@langchain/anthropic";
import { createAnthropic } from "@ai-sdk/anthropic";
import { generateObject } from "ai";

const v1 = process.env.GENQ_OPENAI_URL;
const structured = process.env.GENQ_OPENAI_STRUCTURED_URL;
const apiKey = process.env.GENQ_API_KEY;
if (!v1 || !structured || !apiKey) {
  throw new Error("GENQ_OPENAI_URL, GENQ_OPENAI_STRUCTURED_URL and GENQ_API_KEY are required: run test/openai/run.sh (make test-openai)");
}
// The SDK adds /v1/messages to its base URL; the key goes in x-api-key.
const client = new Anthropic({ baseURL: v1.replace(/\/v1$/, ""), apiKey, maxRetries: 0, timeout: 60_000 });
const tools = new Anthropic({ baseURL: structured.replace(/\/v1$/, ""), apiKey, maxRetries: 0, timeout: 120_000 });

const ask = { model: "claude-sonnet-4-5", max_tokens: 8, temperature: 0, system: "Be brief.", messages: [{ role: "user", content: "Hello?" }] };

test("messages.create answers with a text block, its stop reason and usage", async () => {
  const msg = await client.messages.create(ask);
  assert.equal(msg.type, "message");
  assert.equal(msg.role, "assistant");
  assert.match(msg.id, /^msg_/);
  assert.equal(msg.content.length, 1);
  assert.equal(msg.content[0].type, "text");
  assert.ok(msg.content[0].text.length > 0);
  assert.equal(msg.stop_reason, "max_tokens");
  assert.equal(msg.usage.output_tokens, 8);
  assert.ok(msg.usage.input_tokens + msg.usage.cache_read_input_tokens > 0);
});

test("messages.stream's text joins to the whole answer", async () => {
  const whole = await client.messages.create(ask);
  const stream = client.messages.stream(ask);
  let text = "";
  stream.on("text", (delta) => (text += delta));
  const final = await stream.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.equal(final.content[0].text, whole.content[0].text);
  assert.equal(final.stop_reason, "max_tokens");
  assert.equal(final.usage.output_tokens, 8);
});

test("messages.countTokens counts the prompt the answer reads", async () => {
  const { input_tokens } = await client.messages.countTokens({ model: ask.model, system: ask.system, messages: ask.messages });
  const msg = await client.messages.create(ask);
  assert.equal(input_tokens, msg.usage.input_tokens + msg.usage.cache_read_input_tokens);
});

const weather = {
  name: "get_weather",
  description: "The weather in a city.",
  input_schema: {
    type: "object",
    properties: { city: { type: "string", maxLength: 10 }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
    required: ["city", "unit"],
    additionalProperties: false,
  },
};

test("a tool_use → tool_result round trip with tool_choice any", async () => {
  const messages = [{ role: "user", content: "What is the weather in Oslo?" }];
  // One call (parallel calls off), which the grammar bounds under 400 bytes, within max_tokens: the
  // answer is a call whatever the random model samples (docs/development.md, tests that hold on any CPU).
  const first = await tools.messages.create({ model: "m", max_tokens: 512, tools: [weather], tool_choice: { type: "any", disable_parallel_tool_use: true }, messages });
  assert.equal(first.stop_reason, "tool_use");
  const uses = first.content.filter((b) => b.type === "tool_use");
  assert.ok(uses.length > 0);
  for (const u of uses) {
    assert.equal(u.name, "get_weather");
    assert.equal(typeof u.input, "object");
    // maxLength counts characters (code points), not JavaScript's UTF-16 units
    assert.ok(typeof u.input.city === "string" && [...u.input.city].length <= 10, JSON.stringify(u.input));
    assert.ok(["celsius", "fahrenheit"].includes(u.input.unit), JSON.stringify(u.input));
  }
  messages.push({ role: "assistant", content: first.content });
  messages.push({ role: "user", content: uses.map((u) => ({ type: "tool_result", tool_use_id: u.id, content: "Sunny, 21 degrees." })) });
  const second = await tools.messages.create({ model: "m", max_tokens: 8, tools: [weather], tool_choice: { type: "none" }, messages });
  assert.equal(second.content[0].type, "text");
  assert.notEqual(second.stop_reason, "tool_use");
});

test("a streamed call's input_json deltas join to the input", async () => {
  const stream = tools.messages.stream({ model: "m", max_tokens: 512, tools: [weather], tool_choice: { type: "tool", name: "get_weather" },
    messages: [{ role: "user", content: "Weather in Paris?" }] });
  let json = "";
  stream.on("inputJson", (delta) => (json += delta));
  const final = await stream.finalMessage();
  assert.equal(final.stop_reason, "tool_use");
  const use = final.content.find((b) => b.type === "tool_use");
  assert.deepEqual(JSON.parse(json), use.input);
});

test("what genq cannot do is the SDK's BadRequestError, in Anthropic's shape", async () => {
  await assert.rejects(client.messages.create({ model: "m", messages: ask.messages }), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError, String(err));
    assert.equal(err.error.type, "error");
    assert.equal(err.error.error.type, "invalid_request_error");
    assert.match(err.error.error.message, /max_tokens/);
    return true;
  });
  const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } };
  await assert.rejects(client.messages.create({ ...ask, messages: [{ role: "user", content: [image] }] }), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError, String(err));
    assert.match(err.message, /images are not supported/);
    return true;
  });
  const stranger = new Anthropic({ baseURL: v1.replace(/\/v1$/, ""), apiKey: "not-a-key", maxRetries: 0 });
  await assert.rejects(stranger.messages.create(ask), Anthropic.AuthenticationError);
});

test("a message's _request_id is the request-id header, on an answer, a stream and an error", async () => {
  const msg = await client.messages.create(ask);
  assert.match(msg._request_id ?? "", /^req_\w+$/);
  const { data, response, request_id } = await client.messages.create(ask).withResponse();
  assert.match(request_id ?? "", /^req_\w+$/);
  assert.equal(request_id, response.headers.get("request-id"));
  assert.equal(request_id, response.headers.get("x-request-id"));
  assert.equal(data._request_id, request_id);
  assert.notEqual(request_id, msg._request_id, "each request has an id of its own");

  const stream = client.messages.stream(ask);
  await stream.finalMessage();
  assert.match(stream.request_id ?? "", /^req_\w+$/);

  await assert.rejects(client.messages.create({ model: "m", messages: ask.messages }), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError, String(err));
    assert.match(err.requestID ?? "", /^req_\w+$/);
    assert.equal(err.requestID, err.headers.get("request-id"));
    return true;
  });
});

// Structured output: both clients send output_config.format, but each first
// rewrites the schema into what Anthropic's API accepts and moves the rest
// into descriptions: LangChain (the SDK's transformJSONSchema) keeps types,
// anyOf, required and a few formats, and drops enum, maxLength, minimum and
// the like; the AI SDK keeps enum and const as well. A random model's answer
// is bounded only by what genq receives, so these schemas use nothing else:
// no strings but formatted ones or enums, no numbers (a 16-digit integer is
// past Number.MAX_SAFE_INTEGER, 9e999 is Infinity, and zod refuses both).
// Each one's longest answer fits the structured stack's 512 tokens (a token a
// byte, at worst, in the tiny vocabulary): 14 runs of whitespace of at most
// 17 bytes (a newline and 16 spaces) around its 13 JSON tokens, 238 bytes;
// the keys and punctuation, 24 (Day) or 25 (Colored); a date and its quotes,
// 12; two "false", 10 (Day), or "false" and "green", 12 (Colored): 284 and
// 287 in all.
const Day = z.object({ done: z.boolean(), day: z.iso.date(), rain: z.boolean().nullable() });
const Colored = z.object({ done: z.boolean(), day: z.iso.date(), color: z.enum(["red", "green", "blue"]) });

// sent records each /v1/messages body a client sends, to check that the
// answer came by genq's output_config.format path, not by a forced tool.
const recorder = () => {
  const sent = [];
  const fetchAndRecord = async (url, init) => {
    if (String(url).endsWith("/v1/messages")) sent.push(JSON.parse(init.body));
    return fetch(url, init);
  };
  return { sent, fetch: fetchAndRecord };
};
const assertOutputFormat = (body) => {
  assert.equal(body.output_config?.format?.type, "json_schema", JSON.stringify(body));
  assert.equal(body.output_config.format.schema.type, "object");
  assert.equal(body.tools, undefined);
  assert.equal(body.output_format, undefined);
};

test("LangChain ChatAnthropic withStructuredOutput(zod, {method: \"jsonSchema\"}) parses", async () => {
  const rec = recorder();
  const model = new ChatAnthropic({
    model: "genq",
    anthropicApiUrl: structured.replace(/\/v1$/, ""),
    apiKey,
    maxRetries: 0,
    maxTokens: 512, // above Day's longest answer: it always ends
    temperature: 1,
    clientOptions: { fetch: rec.fetch, timeout: 120_000 },
  });
  const extract = model.withStructuredOutput(Day, { method: "jsonSchema" });
  for (let i = 0; i < 3; i++) {
    const day = await extract.invoke("Describe a day.");
    assert.deepEqual(Day.parse(day), day);
  }
  assert.equal(rec.sent.length, 3);
  for (const body of rec.sent) assertOutputFormat(body);
});

test("the AI SDK: generateObject with @ai-sdk/anthropic parses, by output_config.format", async () => {
  const rec = recorder();
  const anthropic = createAnthropic({ baseURL: structured, apiKey, fetch: rec.fetch });
  for (let i = 0; i < 3; i++) {
    const { object, finishReason } = await generateObject({
      model: anthropic("genq"),
      schema: Colored,
      prompt: "Describe a day.",
      // "auto" chooses by the model's name, and for one it does not know
      // falls back to a forced tool named json: ask for output_config.format.
      providerOptions: { anthropic: { structuredOutputMode: "outputFormat" } },
      temperature: 1,
      maxOutputTokens: 512, // above Colored's longest answer: it always ends
      maxRetries: 0,
    });
    assert.equal(finishReason, "stop");
    assert.deepEqual(Colored.parse(object), object);
  }
  assert.equal(rec.sent.length, 3);
  for (const body of rec.sent) assertOutputFormat(body);
});
