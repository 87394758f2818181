// genq's OpenAI-compatible routes through the official openai npm package,
// against a real stack (run.sh starts it: bin/api with embedded NATS and
// bin/worker with the tiny model, TEXT_MAX_NEW_TOKENS=16).
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.GENQ_OPENAI_URL;
const apiKey = process.env.GENQ_API_KEY;
if (!baseURL || !apiKey) {
  throw new Error("GENQ_OPENAI_URL and GENQ_API_KEY are required: run test/openai/run.sh (make test-openai)");
}
// No retries: a 400 must surface as the first answer, not after backoff.
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

test("chat completion, multi-turn", async () => {
  const c = await client.chat.completions.create({
    model: "genq",
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hello!" },
      { role: "assistant", content: "Hi." },
      { role: "user", content: "Tell me more." },
    ],
    max_tokens: 5,
    temperature: 0,
    seed: 1,
  });
  assert.equal(c.object, "chat.completion");
  assert.match(c.id, /^chatcmpl-/);
  assert.ok(c.created > 1e9);
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0].message.role, "assistant");
  assert.equal(typeof c.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(c.choices[0].finish_reason));
  assert.ok(c.usage.prompt_tokens > 10);
  assert.ok(c.usage.completion_tokens >= 1 && c.usage.completion_tokens <= 5);
  assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
});

test("chat completion, max_completion_tokens and greedy replay", async () => {
  const ask = () =>
    client.chat.completions.create({
      model: "genq",
      messages: [{ role: "user", content: "Count." }],
      max_completion_tokens: 4,
      temperature: 0,
    });
  const [a, b] = [await ask(), await ask()];
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.ok(a.usage.completion_tokens <= 4);
});

test("completion", async () => {
  const c = await client.completions.create({ model: "genq", prompt: "Once upon a time", max_tokens: 3, stop: ["\n\n"] });
  assert.equal(c.object, "text_completion");
  assert.match(c.id, /^cmpl-/);
  assert.equal(typeof c.choices[0].text, "string");
  assert.ok(["stop", "length"].includes(c.choices[0].finish_reason));
  assert.ok(c.usage.prompt_tokens >= 2);
});

test("echo with logprobs scores the prompt, as evaluation harnesses ask", async () => {
  const c = await client.completions.create({ model: "genq", prompt: [5, 6, 7, 8], max_tokens: 1, temperature: 0, echo: true, logprobs: 1 });
  const lp = c.choices[0].logprobs;
  assert.equal(lp.token_logprobs[0], null);
  assert.ok(lp.token_logprobs.slice(1).every((x) => typeof x === "number" && x <= 0));
  assert.ok(lp.tokens.length >= c.usage.prompt_tokens);
});

test("a completion of token ids", async () => {
  const c = await client.completions.create({ model: "genq", prompt: [5, 6, 7, 8], max_tokens: 2 });
  assert.equal(c.usage.prompt_tokens, 4);
});

test("models", async () => {
  const page = await client.models.list();
  const models = page.data;
  assert.equal(models.length, 1);
  assert.match(models[0].id, /\.gguf$/);
  assert.equal(models[0].object, "model");
  assert.equal(models[0].owned_by, "genq");
  assert.ok(models[0].created > 1e9);
  const one = await client.models.retrieve(models[0].id);
  assert.equal(one.id, models[0].id);
  await assert.rejects(client.models.retrieve("no-such-model"), (err) => err instanceof OpenAI.NotFoundError);
});

test("an invalid parameter is a BadRequestError", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "genq", messages: [{ role: "user", content: "x" }], temperature: 5 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err}`);
      assert.equal(err.status, 400);
      assert.equal(err.type, "invalid_request_error");
      assert.match(err.message, /temperature must be between 0 and 2/);
      return true;
    },
  );
});

// Agents send their whole output budget: over the worker's cap (16 here)
// max_tokens is capped, never refused. ignore_eos makes the answer run to
// the cap whatever the random model draws.
test("max_tokens over the worker's cap is capped: finish_reason length at the cap", async () => {
  const c = await client.completions.create({ model: "genq", prompt: "x", max_tokens: 100000, ignore_eos: true });
  assert.equal(c.choices[0].finish_reason, "length");
  assert.equal(c.usage.completion_tokens, 16);
});

test("n choices, each from its own seed; n over 8 is refused clearly", async () => {
  const ask = (extra) =>
    client.chat.completions.create({
      model: "genq",
      messages: [{ role: "user", content: "x" }],
      max_tokens: 5,
      temperature: 1.5,
      ignore_eos: true, // vLLM's extension: every choice 5 tokens long
      ...extra,
    });
  const two = await ask({ n: 2, seed: 21 });
  assert.deepEqual(
    two.choices.map((c) => c.index),
    [0, 1],
  );
  assert.equal(two.usage.completion_tokens, two.choices.length * 5);
  const second = await ask({ seed: 22 });
  assert.equal(two.choices[1].message.content, second.choices[0].message.content);
  await assert.rejects(
    ask({ n: 9 }),
    (err) => err instanceof OpenAI.BadRequestError && /n must be between 1 and 8/.test(err.message),
  );
});

test("logprobs in the chat and completion shapes", async () => {
  const chat = await client.chat.completions.create({
    model: "genq",
    messages: [{ role: "user", content: "x" }],
    max_tokens: 6,
    temperature: 0,
    logprobs: true,
    top_logprobs: 2,
  });
  const content = chat.choices[0].logprobs.content;
  assert.ok(content.length >= 1 && content.length <= chat.usage.completion_tokens);
  for (const e of content) {
    assert.equal(typeof e.token, "string");
    assert.ok(e.logprob <= 0 && Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 2);
    assert.equal(e.top_logprobs[0].logprob, e.logprob); // greedy took the most likely
  }
  const comp = await client.completions.create({ model: "genq", prompt: "Once", max_tokens: 4, logprobs: 1 });
  const lp = comp.choices[0].logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  assert.equal(lp.tokens.length, lp.text_offset.length);
  assert.equal(lp.tokens.length, lp.top_logprobs.length);
  const plain = await client.completions.create({ model: "genq", prompt: "Once", max_tokens: 2 });
  assert.equal(plain.choices[0].logprobs, null);
});

test("a schema or tool no answer could be held to is a BadRequestError that says why", async () => {
  const chat = { model: "genq", messages: [{ role: "user", content: "x" }] };
  const schema = (s) => ({ response_format: { type: "json_schema", json_schema: { name: "x", schema: s, strict: true } } });
  for (const [extra, message] of [
    [schema({ type: "array", not: { uniqueItems: true } }), /not over "uniqueItems"/],
    [schema({ enum: [] }), /enum must be a non-empty array/],
    [schema({ $ref: "#/$defs/nowhere" }), /points to nothing/],
    [{ tools: [{ type: "function", function: { parameters: {} } }] }, /tools\[0\]\.function\.name is required/],
    [{ tools: [{ type: "function", function: { name: "f" } }], tool_choice: { type: "function", function: { name: "g" } } }, /tool_choice names function "g"/],
  ]) {
    await assert.rejects(
      client.chat.completions.create({ ...chat, ...extra }),
      (err) => err instanceof OpenAI.BadRequestError && message.test(err.message),
    );
  }
});

test("logit_bias and frequency_penalty shape the answer", async () => {
  // The tiny model's vocabulary is byte-level: ids 65 and 66 are "A" and "B".
  const c = await client.completions.create({
    model: "genq",
    prompt: "x",
    max_tokens: 16,
    temperature: 0,
    logit_bias: { 65: 100, 66: 100 },
    frequency_penalty: 2,
  });
  const text = c.choices[0].text;
  assert.match(text, /^[AB]{16}$/);
  assert.match(text, /A/);
  assert.match(text, /B/);
});

test("streaming chat and completion equal the whole answers, with usage", async () => {
  const messages = [{ role: "user", content: "Tell me a story." }];
  const whole = await client.chat.completions.create({ model: "genq", messages, max_tokens: 16, temperature: 0, seed: 3 });
  const stream = await client.chat.completions.create({
    model: "genq", messages, max_tokens: 16, temperature: 0, seed: 3, stream: true, stream_options: { include_usage: true },
  });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? "";
      finish = c.finish_reason ?? finish;
      chunks++;
    }
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  // The same counts; how much of the prompt was reused from the prefix
  // cache differs, since the first request left its cells for the second.
  const counts = ({ prompt_tokens, completion_tokens, total_tokens }) => ({ prompt_tokens, completion_tokens, total_tokens });
  assert.deepEqual(counts(usage), counts(whole.usage));
  assert.ok(usage.prompt_tokens_details.cached_tokens >= (whole.usage.prompt_tokens_details?.cached_tokens ?? 0));
  assert.ok(chunks > 2, `${chunks} chunks`);

  const wholeCompletion = await client.completions.create({ model: "genq", prompt: "Once upon a time", max_tokens: 8, temperature: 0 });
  let completion = "";
  for await (const chunk of await client.completions.create({ model: "genq", prompt: "Once upon a time", max_tokens: 8, temperature: 0, stream: true })) {
    assert.equal(chunk.object, "text_completion");
    completion += chunk.choices[0]?.text ?? "";
  }
  assert.equal(completion, wholeCompletion.choices[0].text);
});

test("a missing or wrong key is an AuthenticationError", async () => {
  for (const key of ["sk-wrong", ""]) {
    const other = new OpenAI({ baseURL, apiKey: key || "unused", maxRetries: 0, defaultHeaders: key ? {} : { Authorization: null } });
    await assert.rejects(
      other.chat.completions.create({ model: "genq", messages: [{ role: "user", content: "x" }] }),
      (err) => {
        assert.ok(err instanceof OpenAI.AuthenticationError, `got ${err?.constructor?.name}: ${err}`);
        assert.equal(err.status, 401);
        assert.match(err.message, /API key/);
        return true;
      },
    );
  }
});

test("every answer carries x-request-id, which the SDK reads into _request_id", async () => {
  const c = await client.completions.create({ model: "genq", prompt: "x", max_tokens: 1 });
  assert.match(c._request_id, /^req_/);
  const err = await client.completions.create({ model: "genq", prompt: "x", max_tokens: 1, temperature: 5 }).catch((e) => e);
  assert.ok(err instanceof OpenAI.BadRequestError);
  assert.match(err.requestID, /^req_/);
});

test("max_completion_tokens over the cap is capped as max_tokens is", async () => {
  const c = await client.chat.completions.create({
    model: "genq",
    messages: [{ role: "user", content: "x" }],
    max_completion_tokens: 100000,
    ignore_eos: true,
  });
  assert.equal(c.choices[0].finish_reason, "length");
  assert.equal(c.usage.completion_tokens, 16);
});

test("prompts × n past QUEUE_CAPACITY is a BadRequestError naming it, not a 429 to retry", async () => {
  let calls = 0;
  const counting = new OpenAI({
    baseURL,
    apiKey,
    maxRetries: 2,
    fetch: (...args) => {
      calls++;
      return fetch(...args);
    },
  });
  await assert.rejects(
    counting.completions.create({ model: "genq", prompt: ["a", "b", "c", "d", "e"], n: 8, max_tokens: 1 }),
    (err) => err instanceof OpenAI.BadRequestError && /40 answers .*QUEUE_CAPACITY/.test(err.message),
  );
  assert.equal(calls, 1);
});

test("a list of prompts: one choice per prompt, n per prompt, indexed prompt by prompt", async () => {
  const c = await client.completions.create({ model: "genq", prompt: ["Once upon", "The queue"], n: 2, max_tokens: 3, temperature: 0 });
  assert.deepEqual(c.choices.map((ch) => ch.index), [0, 1, 2, 3]);
  const second = await client.completions.create({ model: "genq", prompt: "The queue", max_tokens: 3, temperature: 0 });
  assert.equal(c.choices[2].text, second.choices[0].text);
  assert.equal(c.choices[3].text, second.choices[0].text);
  const stream = await client.completions.create({ model: "genq", prompt: ["Once upon", "The queue"], max_tokens: 3, temperature: 0, stream: true });
  const texts = ["", ""];
  for await (const chunk of stream) for (const ch of chunk.choices) texts[ch.index] += ch.text;
  assert.equal(texts[1], second.choices[0].text);
});
