// POST /v1/images/generations through the official openai npm package,
// against a variant C stack (run.sh starts it: bin/api and bin/worker with
// the tiny SD3 export at 64×64, and the worker's IMAGE_MAX_SIZE=128 and
// IMAGE_MAX_STEPS=4, which the api takes from its heartbeats).
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.GENQ_OPENAI_IMAGE_URL;
const apiKey = process.env.GENQ_API_KEY;
if (!baseURL || !apiKey) {
  throw new Error("GENQ_OPENAI_IMAGE_URL and GENQ_API_KEY are required: run test/openai/run.sh (make test-openai)");
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

// pngSize reads a PNG's signature and IHDR: width and height.
function pngSize(buf) {
  assert.deepEqual([...buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "not a PNG");
  assert.equal(buf.subarray(12, 16).toString("latin1"), "IHDR");
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)];
}

test("images.generate with b64_json gives a PNG of the asked size", async () => {
  const img = await client.images.generate({ model: "genq", prompt: "a lighthouse at dusk", size: "96x64", response_format: "b64_json" });
  assert.ok(img.created > 1e9);
  assert.equal(img.data.length, 1);
  assert.deepEqual(pngSize(Buffer.from(img.data[0].b64_json, "base64")), [96, 64]);
});

test("genq's extras: the same seed gives the same bytes", async () => {
  const ask = () =>
    client.images.generate({ prompt: "a cat", response_format: "b64_json", n: 2, seed: 5, num_inference_steps: 3, guidance_scale: 4 });
  const [a, b] = [await ask(), await ask()];
  assert.equal(a.data.length, 2);
  assert.equal(a.data[0].b64_json, b.data[0].b64_json);
  assert.notEqual(a.data[0].b64_json, a.data[1].b64_json);
  assert.deepEqual(pngSize(Buffer.from(a.data[1].b64_json, "base64")), [64, 64]);
});

test("output_format jpeg with output_compression gives a JPEG of that quality", async () => {
  const ask = (extra) => client.images.generate({ prompt: "a cat", size: "96x64", seed: 3, output_format: "jpeg", ...extra });
  const [best, small] = [await ask({}), await ask({ output_compression: 10 })];
  assert.equal(best.output_format, "jpeg");
  const [a, b] = [Buffer.from(best.data[0].b64_json, "base64"), Buffer.from(small.data[0].b64_json, "base64")];
  assert.deepEqual([...a.subarray(0, 3)], [0xff, 0xd8, 0xff], "not a JPEG");
  assert.ok(b.length < a.length, `quality 10 gave ${b.length} bytes, the default ${a.length}`);
  await assert.rejects(
    client.images.generate({ prompt: "x", output_format: "webp" }),
    (err) => err instanceof OpenAI.BadRequestError && /output_format webp is not supported/.test(err.message),
  );
});

test("images.generate with stream and partial_images 2: two partial images, then the image", async () => {
  const stream = await client.images.generate({
    prompt: "a lighthouse at dusk", size: "96x64", seed: 9, stream: true, partial_images: 2, num_inference_steps: 3,
  });
  const events = [];
  for await (const event of stream) events.push(event);
  assert.deepEqual(events.map((e) => [e.type, e.partial_image_index]), [
    ["image_generation.partial_image", 0],
    ["image_generation.partial_image", 1],
    ["image_generation.completed", undefined],
  ]);
  for (const e of events.slice(0, 2)) {
    assert.deepEqual([...Buffer.from(e.b64_json, "base64").subarray(0, 3)], [0xff, 0xd8, 0xff], "a partial image is a JPEG");
    assert.equal(e.size, "96x64");
  }
  assert.deepEqual(pngSize(Buffer.from(events[2].b64_json, "base64")), [96, 64]);
});

test("an unsupported size is a BadRequestError", async () => {
  await assert.rejects(
    client.images.generate({ prompt: "x", size: "1024x1024", response_format: "b64_json" }),
    (err) => err instanceof OpenAI.BadRequestError && err.type === "invalid_request_error" && /from 64 to 128/.test(err.message),
  );
});

test("response_format url is refused clearly", async () => {
  await assert.rejects(
    client.images.generate({ prompt: "x", response_format: "url" }),
    (err) => err instanceof OpenAI.BadRequestError && /response_format url is not supported/.test(err.message),
  );
});

test("the text routes are a BadRequestError on variant C", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "genq", messages: [{ role: "user", content: "x" }] }),
    (err) => err instanceof OpenAI.BadRequestError && /makes images/.test(err.message),
  );
});

test("a text route on the image variant points at /v1/images/generations", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "genq", messages: [{ role: "user", content: "x" }] }),
    (err) => err instanceof OpenAI.BadRequestError && /use POST \/v1\/images\/generations/.test(err.message),
  );
});
