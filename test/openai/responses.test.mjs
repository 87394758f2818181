// POST /v1/responses through the official openai npm package and the AI
// SDK's default OpenAI provider, against run.sh's text stack (the tiny
// model, TEXT_MAX_NEW_TOKENS=16).
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";

const baseURL = process.env.GENQ_OPENAI_URL;
const apiKey = process.env.GENQ_API_KEY;
if (!baseURL || !apiKey) {
  throw new Error("GENQ_OPENAI_URL and GENQ_API_KEY are required: run test/openai/run.sh (make test-openai)");
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

// chatAnswer is what /v1/chat/completions answers the same conversation.
async function chatAnswer(messages, maxTokens) {
  const c = await client.chat.completions.create({ model: "genq", messages, max_tokens: maxTokens, temperature: 0 });
  return c.choices[0].message.content;
}

test("responses.create answers as the chat does, with output_text and usage", async () => {
  const r = await client.responses.create({ model: "genq", instructions: "Be brief.", input: "Hello!", max_output_tokens: 6, temperature: 0 });
  assert.equal(r.object, "response");
  assert.match(r.id, /^resp_/);
  assert.match(r._request_id, /^req_/);
  assert.ok(["completed", "incomplete"].includes(r.status));
  assert.equal(r.output[0].type, "message");
  assert.equal(r.output[0].role, "assistant");
  assert.equal(r.output_text, await chatAnswer([{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }], 6));
  assert.ok(r.usage.input_tokens > 5 && r.usage.output_tokens >= 1 && r.usage.output_tokens <= 6);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);

  const turns = await client.responses.create({
    model: "genq",
    input: [
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello." },
      { role: "user", content: [{ type: "input_text", text: "More." }] },
    ],
    max_output_tokens: 4,
    temperature: 0,
  });
  assert.equal(turns.output_text, await chatAnswer([{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }, { role: "user", content: "More." }], 4));
});

test("responses.create streamed: created, deltas, then completed or incomplete", async () => {
  const whole = await client.responses.create({ model: "genq", input: "Tell a story.", max_output_tokens: 8, temperature: 0 });
  const stream = await client.responses.create({ model: "genq", input: "Tell a story.", max_output_tokens: 8, temperature: 0, stream: true });
  const types = [];
  let text = "";
  let last;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") text += ev.delta;
    if (ev.type === "response.completed" || ev.type === "response.incomplete") last = ev.response;
  }
  assert.equal(types[0], "response.created");
  assert.ok(types.includes("response.output_text.delta"));
  assert.equal(types.at(-1), whole.status === "completed" ? "response.completed" : "response.incomplete");
  assert.equal(text, whole.output_text);
  assert.equal(last.output[0].content[0].text, whole.output_text);
  assert.equal(last.usage.output_tokens, whole.usage.output_tokens);
});

test("what a stateless server cannot do is a BadRequestError that says so", async () => {
  for (const [extra, re] of [
    [{ store: true }, /keeps no conversation state/],
    [{ previous_response_id: "resp_x" }, /keeps no conversation state/],
    [{ text: { format: { type: "json_schema", name: "x", schema: { type: "object", properties: { a: { not: { uniqueItems: true } } } } } } }, /not over "uniqueItems"/],
    [{ tools: [{ type: "web_search" }], tool_choice: "required" }, /this server can run none of these \(web_search\)/],
  ]) {
    await assert.rejects(client.responses.create({ model: "genq", input: "x", ...extra }), (err) => err instanceof OpenAI.BadRequestError && re.test(err.message));
  }
});

// The AI SDK's default provider, openai("…"), calls /v1/responses.
const openai = createOpenAI({ baseURL, apiKey });

test("the AI SDK's generateText with the default openai provider", async () => {
  const res = await generateText({ model: openai("genq"), system: "Be brief.", prompt: "Hello!", maxOutputTokens: 6, temperature: 0, maxRetries: 0 });
  assert.match(res.response.id, /^resp_/);
  assert.equal(res.text, await chatAnswer([{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }], 6));
  assert.ok(["stop", "length"].includes(res.finishReason));
  assert.ok(res.usage.outputTokens >= 1 && res.usage.outputTokens <= 6);
});

test("the AI SDK's streamText with the default openai provider", async () => {
  const res = streamText({ model: openai("genq"), prompt: "Tell a story.", maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
  let text = "";
  for await (const piece of res.textStream) text += piece;
  assert.equal(text, await chatAnswer([{ role: "user", content: "Tell a story." }], 8));
  assert.match((await res.response).id, /^resp_/);
  assert.ok(["stop", "length"].includes(await res.finishReason));
});
