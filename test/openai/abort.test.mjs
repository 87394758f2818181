// A streaming client that goes away mid-answer frees its worker's slot at
// once: run.sh's one-slot stack (GENQ_OPENAI_ONE_SLOT_URL) generates 8000
// tokens whatever the model says (TEXT_IGNORE_EOS), several seconds of work,
// so a short request sent right after the abort can only finish quickly if
// the aborted job stopped and gave the slot back.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.GENQ_OPENAI_ONE_SLOT_URL;
const apiKey = process.env.GENQ_API_KEY;
if (!baseURL || !apiKey) {
  throw new Error("GENQ_OPENAI_ONE_SLOT_URL and GENQ_API_KEY are required: run test/openai/run.sh (make test-openai)");
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

test("an aborted stream frees the slot within a second", async () => {
  // Measure the short request alone first, so the bound below is its own
  // run plus the one second the abort may take, on any machine.
  const short = () => client.completions.create({ model: "genq", prompt: "Hi", max_tokens: 2 });
  let t = performance.now();
  await short();
  const alone = performance.now() - t;

  const stream = await client.completions.create({ model: "genq", prompt: "Once upon a time", stream: true });
  // Read by hand: leaving a for-await loop would abort the stream itself,
  // and this test means the abort to be the one explicit call below.
  const chunks = stream[Symbol.asyncIterator]();
  let first = "";
  while (!first) {
    const { value, done } = await chunks.next();
    assert.ok(!done, "the stream ended before its first text");
    first = value.choices[0]?.text ?? "";
  }
  // The answer has started: the job holds the only slot.
  stream.controller.abort();

  t = performance.now();
  const c = await short();
  const took = performance.now() - t;
  assert.equal(c.usage.completion_tokens, 2);
  // The long answer would hold the slot for seconds more had it not stopped.
  assert.ok(took < 1000 + alone, `the short request took ${took.toFixed(0)} ms (${alone.toFixed(0)} ms alone)`);
});
