// The request shapes of lm-evaluation-harness's local-completions model and
// LangChain's legacy OpenAI LLM, both batches of prompts on /v1/completions,
// against run.sh's text stack (the tiny model, TEXT_MAX_NEW_TOKENS=16,
// QUEUE_CAPACITY=32).
import { test } from "node:test";
import assert from "node:assert/strict";
import { OpenAI as LangChainOpenAI } from "@langchain/openai";

const baseURL = process.env.GENQ_OPENAI_URL;
const apiKey = process.env.GENQ_API_KEY;
if (!baseURL || !apiKey) {
  throw new Error("GENQ_OPENAI_URL and GENQ_API_KEY are required: run test/openai/run.sh (make test-openai)");
}

// complete posts a completion as the harness does: JSON over plain HTTP.
async function complete(body) {
  const res = await fetch(`${baseURL}/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model: "genq", ...body }),
  });
  const out = await res.json();
  assert.equal(res.status, 200, JSON.stringify(out));
  return out;
}

// parseLogprobs reads a scoring batch as the harness's parse_logprobs
// does: choices in index order, the continuation's log-probabilities from
// ctxlen on, the last entry dropped when the request asked for an answer
// token (max_tokens 1), and whether each continuation token was the most
// likely one.
function parseLogprobs(out, ctxlens, answered) {
  const choices = [...out.choices].sort((a, b) => a.index - b.index);
  assert.equal(choices.length, ctxlens.length);
  return choices.map((choice, i) => {
    const end = answered ? -1 : undefined;
    const logprobs = choice.logprobs.token_logprobs.slice(ctxlens[i], end);
    const tops = choice.logprobs.top_logprobs.slice(ctxlens[i], end);
    const isGreedy = logprobs.every((lp, k) => lp === Math.max(...Object.values(tops[k])));
    return { sum: logprobs.reduce((a, b) => a + b, 0), isGreedy, n: logprobs.length };
  });
}

// Three requests of a context and a continuation, in token ids, as the
// harness sends them (tokenized_requests).
const contexts = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]];
const continuations = [[20, 21], [22], [23, 24, 25]];
const prompts = contexts.map((c, i) => [...c, ...continuations[i]]);

test("lm-evaluation-harness: a scoring batch, max_tokens 0 with echo", async () => {
  const out = await complete({ prompt: prompts, echo: true, logprobs: 1, max_tokens: 0, temperature: 0, seed: 1234 });
  assert.equal(out.usage.completion_tokens, 0);
  for (const c of out.choices) assert.equal(c.finish_reason, "length");
  const ctxlens = contexts.map((c) => c.length);
  const scored = parseLogprobs(out, ctxlens, false);
  // The same batch as the harness's local-completions sends it, with one
  // answer token that it drops, scores the same, even where that token
  // ends the turn.
  const older = parseLogprobs(
    await complete({ prompt: prompts, echo: true, logprobs: 1, max_tokens: 1, temperature: 0, seed: 1234 }),
    ctxlens,
    true,
  );
  scored.forEach((s, i) => {
    assert.equal(s.n, continuations[i].length);
    assert.ok(Number.isFinite(s.sum) && s.sum < 0, `sum ${s.sum}`);
    assert.ok(Math.abs(s.sum - older[i].sum) < 1e-3, `prompt ${i}: ${s.sum} and ${older[i].sum}`);
    assert.equal(s.isGreedy, older[i].isGreedy);
  });
});

test("lm-evaluation-harness: a generate_until batch", async () => {
  const texts = ["Once upon a time", "The queue was", "A worker pulled", "In the end"];
  const out = await complete({ prompt: texts, max_tokens: 6, temperature: 0, stop: ["\n\n"], seed: 1234 });
  const choices = [...out.choices].sort((a, b) => a.index - b.index);
  assert.deepEqual(choices.map((c) => c.index), [0, 1, 2, 3]);
  for (const [i, text] of texts.entries()) {
    const alone = await complete({ prompt: text, max_tokens: 6, temperature: 0, stop: ["\n\n"], seed: 1234 });
    assert.equal(choices[i].text, alone.choices[0].text, `prompt ${i}`);
  }
});

test("LangChain's OpenAI.generate with 4 prompts", async () => {
  const llm = new LangChainOpenAI({ model: "genq", apiKey, configuration: { baseURL }, temperature: 0, maxTokens: 5, maxRetries: 0 });
  const texts = ["Once upon a time", "The queue was", "A worker pulled", "In the end"];
  const res = await llm.generate(texts);
  assert.equal(res.generations.length, 4);
  for (const [i, text] of texts.entries()) {
    const alone = await complete({ prompt: text, max_tokens: 5, temperature: 0 });
    assert.equal(res.generations[i][0].text, alone.choices[0].text, `prompt ${i}`);
  }
  assert.ok(res.llmOutput.tokenUsage.promptTokens > 4);
});
