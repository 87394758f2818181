// genq's Batch API through the openai SDK: files.create of a JSONL of 200
// chat requests (a few with a JSON schema, a few asking for two answers),
// batches.create, polling batches.retrieve to completed, files.content of
// the output, each custom_id once and the schema lines valid under ajv;
// batches.cancel of a second batch ends cancelled with its finished
// requests kept; and bad input refused in OpenAI's shape.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI, { toFile } from "openai";
import Ajv from "ajv";

const baseURL = process.env.GENQ_OPENAI_STRUCTURED_URL;
const slowURL = process.env.GENQ_OPENAI_ONE_SLOT_URL;
const apiKey = process.env.GENQ_API_KEY;
if (!baseURL || !slowURL || !apiKey) {
  throw new Error("GENQ_OPENAI_STRUCTURED_URL, GENQ_OPENAI_ONE_SLOT_URL and GENQ_API_KEY are required: run test/openai/run.sh (make test-openai)");
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const slow = new OpenAI({ baseURL: slowURL, apiKey, maxRetries: 0, timeout: 60_000 });

const schema = {
  type: "object",
  properties: { answer: { type: "string", maxLength: 8 }, sure: { type: "boolean" } },
  required: ["answer", "sure"],
  additionalProperties: false,
};

function jsonl(lines) {
  return lines.map((l) => JSON.stringify(l)).join("\n") + "\n";
}

async function waitFor(c, id, done) {
  for (let i = 0; i < 1200; i++) {
    const b = await c.batches.retrieve(id);
    if (done(b)) return b;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`batch ${id} did not get there`);
}

test("a batch of 200 requests runs to completed, each custom_id once in its output", async () => {
  const lines = [];
  for (let i = 0; i < 200; i++) {
    const body = { model: "genq", messages: [{ role: "user", content: `request ${i}` }], max_tokens: 4 };
    if (i % 25 === 0) {
      body.max_tokens = 200;
      body.response_format = { type: "json_schema", json_schema: { name: "a", strict: true, schema } };
    }
    if (i % 50 === 7) body.n = 2;
    lines.push({ custom_id: `c-${i}`, method: "POST", url: "/v1/chat/completions", body });
  }
  const file = await client.files.create({ file: await toFile(Buffer.from(jsonl(lines)), "requests.jsonl"), purpose: "batch" });
  assert.equal(file.object, "file");
  assert.equal(file.purpose, "batch");
  let batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { job: "nightly" } });
  assert.equal(batch.object, "batch");
  assert.deepEqual(batch.metadata, { job: "nightly" });
  batch = await waitFor(client, batch.id, (b) => ["completed", "failed", "expired", "cancelled"].includes(b.status));
  assert.equal(batch.status, "completed", JSON.stringify(batch));
  assert.deepEqual(batch.request_counts, { total: 200, completed: 200, failed: 0 });
  const output = await (await client.files.content(batch.output_file_id)).text();
  const seen = new Map();
  const validate = new Ajv().compile(schema);
  for (const line of output.trim().split("\n")) {
    const l = JSON.parse(line);
    seen.set(l.custom_id, (seen.get(l.custom_id) ?? 0) + 1);
    assert.equal(l.response.status_code, 200);
    assert.equal(l.response.body.object, "chat.completion");
    const i = Number(l.custom_id.slice(2));
    assert.deepEqual(l.response.body.choices.map((c) => c.index), i % 50 === 7 ? [0, 1] : [0], l.custom_id);
    if (i % 25 === 0) {
      const content = l.response.body.choices[0].message.content;
      assert.ok(validate(JSON.parse(content)), `${l.custom_id}: ${content} ${JSON.stringify(validate.errors)}`);
    }
  }
  assert.equal(seen.size, 200);
  assert.ok([...seen.values()].every((n) => n === 1));
  const page = await client.batches.list({ limit: 100 });
  assert.ok(page.data.some((b) => b.id === batch.id));
});

test("a cancelled batch ends cancelled, its finished requests kept", async () => {
  const lines = [];
  for (let i = 0; i < 40; i++) {
    lines.push({ custom_id: `s-${i}`, method: "POST", url: "/v1/chat/completions", body: { messages: [{ role: "user", content: `slow ${i}` }], max_tokens: 300 } });
  }
  const file = await slow.files.create({ file: await toFile(Buffer.from(jsonl(lines)), "slow.jsonl"), purpose: "batch" });
  let batch = await slow.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  batch = await waitFor(slow, batch.id, (b) => b.request_counts.completed >= 1);
  const cancelling = await slow.batches.cancel(batch.id);
  assert.ok(["cancelling", "cancelled"].includes(cancelling.status));
  batch = await waitFor(slow, batch.id, (b) => b.status === "cancelled");
  assert.ok(batch.request_counts.completed >= 1 && batch.request_counts.completed < 40, JSON.stringify(batch.request_counts));
  const output = await (await slow.files.content(batch.output_file_id)).text();
  const ids = output.trim().split("\n").map((l) => JSON.parse(l).custom_id);
  assert.equal(new Set(ids).size, ids.length);
  assert.equal(ids.length, batch.request_counts.completed);
});

test("bad input is refused in OpenAI's shape", async () => {
  await assert.rejects(client.batches.retrieve("batch_nope"), OpenAI.NotFoundError);
  await assert.rejects(
    client.batches.create({ input_file_id: "file-nope", endpoint: "/v1/chat/completions", completion_window: "24h" }),
    OpenAI.NotFoundError,
  );
  const dup = jsonl([
    { custom_id: "a", method: "POST", url: "/v1/chat/completions", body: { messages: [{ role: "user", content: "x" }] } },
    { custom_id: "a", method: "POST", url: "/v1/chat/completions", body: { messages: [{ role: "user", content: "y" }] } },
    { custom_id: "b", method: "POST", url: "/v1/completions", body: { prompt: "z" } },
  ]);
  const file = await client.files.create({ file: await toFile(Buffer.from(dup), "dup.jsonl"), purpose: "batch" });
  let batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  batch = await waitFor(client, batch.id, (b) => b.status !== "validating");
  assert.equal(batch.status, "failed");
  const codes = batch.errors.data.map((e) => `${e.code}@${e.line}`);
  assert.deepEqual(codes, ["duplicate_custom_id@2", "mismatched_endpoint@3"]);
  await assert.rejects(client.files.create({ file: await toFile(Buffer.from("{}"), "x.jsonl"), purpose: "fine-tune" }), OpenAI.BadRequestError);
});
