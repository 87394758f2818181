// POST /v1/embeddings through the official openai npm package, LangChain's
// OpenAIEmbeddings and the AI SDK's embedMany, against run.sh's embeddings
// stack (its catalogue's genq-embedding, the tiny BERT), each vector held to
// llama.cpp's own: llama-server --embedding of the same build on the same
// file, which this test starts. A Batch API batch of /v1/embeddings lines
// runs on the batch lane to the same vectors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import OpenAI, { toFile } from "openai";
import { OpenAIEmbeddings } from "@langchain/openai";
import { createOpenAI } from "@ai-sdk/openai";
import { embedMany } from "ai";

const baseURL = process.env.GENQ_OPENAI_EMBEDDINGS_URL;
const apiKey = process.env.GENQ_API_KEY;
const modelFile = process.env.GENQ_EMBEDDING_MODEL;
const llamaServer = process.env.LLAMA_SERVER;
if (!baseURL || !apiKey || !modelFile || !llamaServer) {
  throw new Error("GENQ_OPENAI_EMBEDDINGS_URL, GENQ_API_KEY, GENQ_EMBEDDING_MODEL and LLAMA_SERVER are required: run test/openai/run.sh (make test-openai)");
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

// The peer: llama-server --embedding on the same file, on a free port.
let peer, peerURL;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

before(async () => {
  const port = await freePort();
  peerURL = `http://127.0.0.1:${port}`;
  peer = spawn(llamaServer, ["-m", modelFile, "--embedding", "--host", "127.0.0.1", "--port", String(port), "-t", "1", "-np", "4"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  peer.stderr.on("data", (d) => (log = (log + d).slice(-4000)));
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${peerURL}/health`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("llama-server --embedding did not come up:\n" + log);
});

after(() => peer?.kill("SIGTERM"));

// reference embeds inputs with the peer, llama.cpp's defaults (unit
// length, its model's pooling).
async function reference(input) {
  const res = await fetch(`${peerURL}/v1/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = await res.json();
  return body.data.sort((a, b) => a.index - b.index).map((d) => d.embedding);
}

function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

// agree holds each vector to the peer's for the same input.
function agree(got, want) {
  assert.equal(got.length, want.length);
  for (let i = 0; i < got.length; i++) {
    assert.equal(got[i].length, want[i].length, `input ${i}: ${got[i].length} dimensions, llama-server gives ${want[i].length}`);
    const c = cosine(got[i], want[i]);
    assert.ok(c >= 0.9999, `input ${i}: cosine ${c} to llama-server's vector`);
  }
}

const hundred = Array.from({ length: 100 }, (_, i) => `document ${i}: the ${i % 2 ? "cat" : "dog"} sat on the mat ${"and the queue waited ".repeat(i % 7)}`);

function decodeBase64(s) {
  const b = Buffer.from(s, "base64");
  return Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
}

test("openai: one input, floats", async () => {
  const r = await client.embeddings.create({ model: "genq-embedding", input: "hello world", encoding_format: "float" });
  assert.equal(r.object, "list");
  assert.equal(r.model, "genq-embedding");
  assert.equal(r.data.length, 1);
  assert.equal(r.data[0].object, "embedding");
  assert.equal(r.data[0].index, 0);
  // [CLS] hello world [SEP]
  assert.deepEqual(r.usage, { prompt_tokens: 4, total_tokens: 4 });
  agree([r.data[0].embedding], await reference(["hello world"]));
});

test("openai: 100 inputs, base64", async () => {
  const r = await client.embeddings.create({ model: "genq-embedding", input: hundred, encoding_format: "base64" });
  assert.equal(r.data.length, 100);
  assert.ok(r.data.every((d, i) => d.index === i && typeof d.embedding === "string"));
  agree(r.data.map((d) => decodeBase64(d.embedding)), await reference(hundred));
});

test("openai: 100 inputs, the SDK's default (base64 on the wire, decoded)", async () => {
  const r = await client.embeddings.create({ model: "genq-embedding", input: hundred });
  agree(r.data.map((d) => d.embedding), await reference(hundred));
  assert.ok(r.usage.prompt_tokens > 100 * 4);
});

test("openai: token ids and lists of them", async () => {
  // The ids of [CLS] hello world [SEP], as llama-server's tokenizer gives them.
  const tok = await (await fetch(`${peerURL}/tokenize`, { method: "POST", body: JSON.stringify({ content: "hello world", add_special: true }) })).json();
  const one = await client.embeddings.create({ model: "genq-embedding", input: tok.tokens, encoding_format: "float" });
  const many = await client.embeddings.create({ model: "genq-embedding", input: [tok.tokens, tok.tokens.slice(0, 2)], encoding_format: "float" });
  const want = await reference(["hello world"]);
  agree([one.data[0].embedding, many.data[0].embedding], [want[0], want[0]]);
  assert.equal(many.usage.prompt_tokens, tok.tokens.length + 2);
});

test("openai: refusals name their param", async () => {
  const cases = [
    [{ input: "word ".repeat(600) }, "input"],
    [{ input: "hello", dimensions: 7 }, "dimensions"],
    [{ input: [] }, "input"],
    [{ input: "hello", encoding_format: "int8" }, "encoding_format"],
  ];
  for (const [body, param] of cases) {
    await assert.rejects(client.embeddings.create({ model: "genq-embedding", ...body }), (err) => {
      assert.equal(err.status, 400, JSON.stringify(body));
      assert.equal(err.param, param);
      assert.equal(err.type, "invalid_request_error");
      return true;
    });
  }
});

test("openai: a model the catalogue does not hold is OpenAI's 404", async () => {
  await assert.rejects(client.embeddings.create({ model: "no-such-model", input: "hello" }), (err) => {
    assert.equal(err.status, 404);
    assert.equal(err.code, "model_not_found");
    return true;
  });
  // The chat model is no embedding model.
  await assert.rejects(client.embeddings.create({ model: "genq-B", input: "hello" }), (err) => err.status === 404);
});

test("LangChain OpenAIEmbeddings", async () => {
  const emb = new OpenAIEmbeddings({ model: "genq-embedding", apiKey, configuration: { baseURL }, maxRetries: 0, batchSize: 64 });
  const docs = await emb.embedDocuments(hundred);
  const query = await emb.embedQuery("where is the cat?");
  agree(docs, await reference(hundred));
  agree([query], await reference(["where is the cat?"]));
});

test("AI SDK embedMany", async () => {
  const openai = createOpenAI({ baseURL, apiKey });
  const { embeddings, usage } = await embedMany({ model: openai.embedding("genq-embedding"), values: hundred, maxRetries: 0 });
  agree(embeddings, await reference(hundred));
  assert.ok(usage.tokens > 100 * 4);
});

test("a batch of /v1/embeddings lines, base64 and floats", async () => {
  const lines = hundred.slice(0, 20).map((text, i) => ({
    custom_id: `e-${i}`,
    method: "POST",
    url: "/v1/embeddings",
    body: { model: "genq-embedding", input: [text, "hello world"], encoding_format: i % 2 ? "base64" : "float" },
  }));
  lines.push({ custom_id: "too-long", method: "POST", url: "/v1/embeddings", body: { input: "word ".repeat(600) } });
  const jsonl = lines.map((l) => JSON.stringify(l)).join("\n") + "\n";
  const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), "embeddings.jsonl"), purpose: "batch" });
  let batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" });
  for (let i = 0; i < 600 && !["completed", "failed", "expired", "cancelled"].includes(batch.status); i++) {
    await new Promise((r) => setTimeout(r, 100));
    batch = await client.batches.retrieve(batch.id);
  }
  assert.equal(batch.status, "completed", JSON.stringify(batch));
  assert.deepEqual(batch.request_counts, { total: 21, completed: 20, failed: 1 });
  const output = (await (await client.files.content(batch.output_file_id)).text()).trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(output.length, 20);
  const want = await reference([...hundred.slice(0, 20), "hello world"]);
  for (const l of output) {
    const i = Number(l.custom_id.slice(2));
    assert.equal(l.response.status_code, 200);
    const got = l.response.body.data.map((d) => (typeof d.embedding === "string" ? decodeBase64(d.embedding) : d.embedding));
    assert.equal(typeof l.response.body.data[0].embedding, i % 2 ? "string" : "object");
    agree(got, [want[i], want[20]]);
  }
  const errors = (await (await client.files.content(batch.error_file_id)).text()).trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(errors.length, 1);
  assert.equal(errors[0].custom_id, "too-long");
  assert.equal(errors[0].response.status_code, 400);
  assert.equal(errors[0].response.body.error.param, "input");
});
