// genq's Messages API through Anthropic's own SDK (@anthropic-ai/sdk):
// messages.create, messages.stream, a tool_use → tool_result round trip
// with tool_choice any, messages.countTokens and the SDK's error classes.
// run.sh's stacks serve the tiny random-weight model: what parses here
// parses because decoding was constrained.
import { test } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";

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
