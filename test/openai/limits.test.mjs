// A tenant's limit through the official SDKs with their default retries:
// a key limited to 10 requests a minute (run.sh's API_KEYS_FILE) sends
// until it is refused; the refusal is a 429 with the rate-limit headers
// each SDK's vendor sends, the SDK waits out its retry-after-ms and
// retries, and every call returns. Each SDK has a key of its own, so
// they run at once. Up to a minute, the window's rest.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const v1 = process.env.GENQ_OPENAI_URL;
const openaiKey = process.env.GENQ_LIMITED_OPENAI_KEY;
const anthropicKey = process.env.GENQ_LIMITED_ANTHROPIC_KEY;
if (!v1 || !openaiKey || !anthropicKey) {
  throw new Error("GENQ_OPENAI_URL, GENQ_LIMITED_OPENAI_KEY and GENQ_LIMITED_ANTHROPIC_KEY are required: run test/openai/run.sh (make test-openai)");
}

// recording is a fetch that keeps each answer's status, headers and time.
function recording() {
  const seen = [];
  const fetch = async (url, init) => {
    const res = await globalThis.fetch(url, init);
    seen.push({ status: res.status, headers: res.headers, at: Date.now() });
    return res;
  };
  return { seen, fetch };
}

// untilLimited calls send until one of its answers was a 429 that the
// SDK retried to an answer, at most 25 calls (the window may roll once).
async function untilLimited(seen, send) {
  let calls = 0;
  for (; calls < 25 && !seen.some((r) => r.status === 429); calls++) {
    await send();
  }
  assert.ok(seen.some((r) => r.status === 429), `no 429 in ${calls} calls of a key limited to 10 a minute`);
  const i = seen.findIndex((r) => r.status === 429);
  assert.equal(seen.at(-1).status, 200, "the SDK's last try was answered");
  return { refused: seen[i], retried: seen[i + 1] };
}

function checkRetryAfter(refused, retried) {
  const h = refused.headers;
  const seconds = Number(h.get("retry-after"));
  const ms = Number(h.get("retry-after-ms"));
  assert.ok(Number.isInteger(seconds) && seconds >= 1 && seconds <= 60, `retry-after ${h.get("retry-after")}`);
  assert.ok(ms >= 1 && ms < 60_000 && Math.ceil(ms / 1000) === seconds, `retry-after-ms ${h.get("retry-after-ms")}`);
  assert.ok(retried.at - refused.at >= ms - 50, `retried after ${retried.at - refused.at} ms, asked to wait ${ms}`);
}

const tiny = { max_tokens: 1, messages: [{ role: "user", content: "Hi" }] };

test("the SDKs back off on 429 and finish, with the vendors' headers", async () => {
  await Promise.all([
    (async () => {
      const { seen, fetch } = recording();
      const client = new OpenAI({ baseURL: v1, apiKey: openaiKey, fetch });
      const { refused, retried } = await untilLimited(seen, () => client.chat.completions.create({ model: "m", ...tiny }));
      const h = refused.headers;
      assert.equal(h.get("x-ratelimit-limit-requests"), "10");
      assert.equal(h.get("x-ratelimit-remaining-requests"), "0");
      assert.match(h.get("x-ratelimit-reset-requests"), /^[0-9.]+m?s$|^[0-9]+m[0-9.]+s$/);
      checkRetryAfter(refused, retried);
      const ok = seen.find((r) => r.status === 200).headers;
      assert.equal(ok.get("x-ratelimit-limit-requests"), "10");
    })(),
    (async () => {
      const { seen, fetch } = recording();
      const client = new Anthropic({ baseURL: v1.replace(/\/v1$/, ""), apiKey: anthropicKey, fetch });
      const { refused, retried } = await untilLimited(seen, () => client.messages.create({ model: "m", ...tiny }));
      const h = refused.headers;
      assert.equal(h.get("anthropic-ratelimit-requests-limit"), "10");
      assert.equal(h.get("anthropic-ratelimit-requests-remaining"), "0");
      const reset = Date.parse(h.get("anthropic-ratelimit-requests-reset"));
      assert.ok(reset >= refused.at - 1000 && reset <= refused.at + 61_000, `reset ${h.get("anthropic-ratelimit-requests-reset")}`);
      checkRetryAfter(refused, retried);
    })(),
  ]);
});
