// genq's web UI in Debian's chromium, headless, driven by puppeteer-core:
// a chat streams and stops, a JSON schema yields JSON, an image forms with
// its progress, the queue view shows its workers (a second one started
// here appears), and with API_KEYS the page asks for a key. run.sh starts
// the stacks; screenshots of the three views go into docs/.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import puppeteer from "puppeteer-core";

const { GENQ_CHROMIUM, GENQ_UI_TEXT, GENQ_UI_IMAGE, GENQ_UI_KEYED, GENQ_UI_KEY, GENQ_UI_SECOND_WORKER, GENQ_UI_SHOTS } = process.env;
if (!GENQ_CHROMIUM || !GENQ_UI_TEXT || !GENQ_UI_IMAGE || !GENQ_UI_KEYED) {
  throw new Error("run test/ui/run.sh (make test-ui): it starts the stacks and names chromium");
}
const browser = await puppeteer.launch({ executablePath: GENQ_CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
const children = [];
after(async () => {
  await browser.close();
  for (const c of children) c.kill("SIGTERM");
});

async function open(base, pathname = "/ui/") {
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 800 });
  const external = [];
  page.on("request", (r) => { if (!r.url().startsWith(base) && !r.url().startsWith("data:")) external.push(r.url()); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error" && !/401/.test(m.text())) errors.push(m.text()); });
  await page.goto(base + pathname, { waitUntil: "load" });
  page.checks = { external, errors };
  return page;
}

async function status(base, key) {
  const res = await fetch(base + "/ui/api/status", { headers: key ? { Authorization: "Bearer " + key } : {} });
  return { code: res.status, body: res.ok ? await res.json() : null };
}

async function until(what, fn, ms = 30000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("the page paints fast, weighs little, and asks for nothing outside the api", async () => {
  const page = await open(GENQ_UI_TEXT);
  const paint = await page.evaluate(() => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? performance.now());
  assert.ok(paint < 1000, `first paint after ${paint} ms`);
  const res = await fetch(GENQ_UI_TEXT + "/ui/");
  const csp = res.headers.get("content-security-policy");
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline/);
  const html = await res.text();
  assert.doesNotMatch(html, /<script>(?!<)/, "no inline script");
  assert.deepEqual(page.checks.external, []);
  await page.close();
});

test("a chat message streams an answer, and stop cancels it and frees the slot", async () => {
  const page = await open(GENQ_UI_TEXT);
  await page.waitForSelector("#chat:not([hidden])");
  await page.click("#chat-settings summary");
  await page.$eval("#max-tokens", (el) => (el.value = "30000"));
  await page.type("#prompt", "Tell me about queues.");
  await page.click("#send");
  // Text arrives while the answer streams.
  await page.waitForFunction(() => {
    const m = document.querySelector(".msg.assistant");
    return m && m.dataset.state === "streaming" && m.querySelector(".text").textContent.length > 20;
  }, { timeout: 30000 });
  // The worker says, in its next heartbeat, that a slot is busy.
  await until("a busy slot", async () => (await status(GENQ_UI_TEXT)).body.in_flight >= 1, 5000);
  assert.equal(await page.$eval(".msg.assistant", (el) => el.dataset.state), "streaming");
  await page.click("#stop");
  await page.waitForFunction(() => document.querySelector(".msg.assistant").dataset.state === "stopped");
  // The worker's slot frees: its heartbeat (every second here) says so.
  await until("the slot to free", async () => {
    const s = await status(GENQ_UI_TEXT);
    return s.body.workers.length > 0 && s.body.workers.every((w) => w.free_slots === w.slots);
  }, 10000);
  assert.deepEqual(page.checks.errors, []);
  await page.close();
});

test("a JSON schema yields an answer that parses", async () => {
  const page = await open(GENQ_UI_TEXT);
  await page.waitForSelector("#chat:not([hidden])");
  await page.click("#chat-settings summary");
  await page.$eval("#max-tokens", (el) => (el.value = "200"));
  await page.$eval("#schema", (el) => (el.value = JSON.stringify({ type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false })));
  await page.type("#prompt", "Is the queue healthy? Answer in JSON.");
  await page.click("#send");
  await page.waitForFunction(() => document.querySelector(".msg.assistant")?.dataset.state === "done", { timeout: 60000 });
  const answer = await page.$eval(".msg.assistant .text", (el) => el.textContent);
  const obj = JSON.parse(answer);
  assert.equal(typeof obj.ok, "boolean");
  assert.equal(await page.$eval(".msg.assistant", (el) => el.dataset.json), "valid");
  const stats = await page.$eval(".msg.assistant .stats", (el) => el.textContent);
  assert.match(stats, /time to first token \d+ ms · [\d.]+ tokens\/s · \d+ tokens · \d+ cached/);
  if (GENQ_UI_SHOTS) await page.screenshot({ path: path.join(GENQ_UI_SHOTS, "ui-chat.png") });
  await page.close();
});

test("on variant C the progress bar advances and the image appears", async () => {
  const page = await open(GENQ_UI_IMAGE);
  await page.waitForSelector("#images:not([hidden])");
  await page.type("#image-prompt", "a red fox in the snow");
  await page.select("#image-size", "256x256");
  await page.$eval("#image-steps", (el) => (el.value = "4"));
  const seen = [];
  await page.exposeFunction("progressSeen", (v) => seen.push(v));
  await page.evaluate(() => {
    const bar = document.getElementById("image-progress");
    new MutationObserver(() => window.progressSeen(bar.value)).observe(bar, { attributes: true });
    const set = Object.getOwnPropertyDescriptor(HTMLProgressElement.prototype, "value").set;
    Object.defineProperty(bar, "value", { set(v) { set.call(this, v); window.progressSeen(v); }, get() { return this.getAttribute("value") === null ? 0 : Number(this.getAttribute("value")); } });
  });
  await page.click("#image-go");
  await page.waitForSelector("#image-result:not([hidden])", { timeout: 60000 });
  const src = await page.$eval("#image", (el) => el.src);
  assert.match(src, /^data:image\/png;base64,/);
  const ok = await page.$eval("#image", (el) => el.complete && el.naturalWidth === 256);
  assert.ok(ok, "the image is decoded, 256 wide");
  assert.ok(seen.some((v) => v > 0 && v < 1) && seen.at(-1) === 1, `progress ${JSON.stringify(seen)}`);
  assert.ok((await page.$$("#previews img")).length > 0, "previews");
  if (GENQ_UI_SHOTS) await page.screenshot({ path: path.join(GENQ_UI_SHOTS, "ui-images.jpg"), type: "jpeg", quality: 70 });
  await page.close();
});

test("the queue view shows the live workers and the tenants, and a second chat worker started here appears", async () => {
  const page = await open(GENQ_UI_TEXT);
  await page.waitForSelector("#tab-queue:not([hidden])");
  await page.click("#tab-queue");
  await page.waitForSelector('#workers tr[data-worker="ui-worker-1"]');
  // make run's stack: the chat worker and the embedding worker.
  await page.waitForFunction(() => document.querySelectorAll("#workers tr[data-worker]").length === 2);
  assert.equal(await page.$eval("#stat-workers", (el) => el.textContent), "2");
  assert.ok(GENQ_UI_SECOND_WORKER, "run.sh names the second worker's settings");
  const env = Object.fromEntries(GENQ_UI_SECOND_WORKER.split(" ").map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
  const child = spawn(path.resolve("../../bin/worker"), [], { env: { ...process.env, ...env }, stdio: "ignore" });
  children.push(child);
  await page.waitForSelector('#workers tr[data-worker="ui-worker-2"]', { timeout: 15000 });
  assert.equal(await page.$eval("#stat-workers", (el) => el.textContent), "3");
  assert.ok((await page.$$("#chart-rate rect")).length > 0, "the rate chart is drawn");
  // The chats above were the open api's tenant's: its usage today.
  const requests = await page.$eval('#tenants tr[data-tenant="anonymous"] td:nth-child(4)', (el) => Number(el.textContent));
  assert.ok(requests > 0, `the tenants' table counts ${requests} requests of tenant anonymous`);
  if (GENQ_UI_SHOTS) await page.screenshot({ path: path.join(GENQ_UI_SHOTS, "ui-queue.png") });
  child.kill("SIGTERM");
  await page.close();
});

test("with API_KEYS set, the page asks for a key, and the api answers 401 without one", async () => {
  const page = await open(GENQ_UI_KEYED);
  await page.waitForSelector("#key:not([hidden])");
  assert.equal(await page.$eval("#chat", (el) => el.hidden), true);
  assert.equal((await status(GENQ_UI_KEYED)).code, 401);
  const chat = await fetch(GENQ_UI_KEYED + "/v1/chat/completions", { method: "POST", body: "{}" });
  assert.equal(chat.status, 401);
  await page.type("#key-input", "not-the-key");
  await page.click("#key-form button");
  await page.waitForFunction(() => document.getElementById("key-error").textContent.includes("refused"));
  await page.close();
});

test("the queue view shows a tenant's jobs waiting and running apart", async () => {
  assert.ok(GENQ_UI_KEY, "run.sh names the keyed stack's key");
  const auth = { Authorization: "Bearer " + GENQ_UI_KEY, "Content-Type": "application/json" };
  // Four long jobs of the key's tenant on a worker of two slots: some
  // run, the others wait on the tenant's consumer.
  const ids = [];
  for (let i = 0; i < 4; i++) {
    const res = await fetch(GENQ_UI_KEYED + "/v1/jobs", { method: "POST", headers: auth,
      body: JSON.stringify({ type: "completion", request: { prompt: "job " + i, max_tokens: 30000 } }) });
    const body = await res.text();
    assert.equal(res.status, 202, body);
    ids.push(JSON.parse(body).id);
  }
  const page = await open(GENQ_UI_KEYED);
  await page.type("#key-input", GENQ_UI_KEY);
  await page.click("#key-form button");
  await page.waitForSelector("#tab-queue:not([hidden])");
  await page.click("#tab-queue");
  const cell = (n) => `#tenants tbody tr:first-child td:nth-child(${n})`;
  // The page's numbers are the tenant consumer's: pending jobs waiting,
  // delivered ones running; together, the four not yet done.
  const seen = await until("a tenant's line with jobs running and waiting", () => page.evaluate((w, r) => {
    const waiting = Number(document.querySelector(w)?.textContent), running = Number(document.querySelector(r)?.textContent);
    return running >= 1 && waiting >= 1 && running + waiting === 4 ? { waiting, running } : null;
  }, cell(2), cell(3)));
  const api = (await status(GENQ_UI_KEYED, GENQ_UI_KEY)).body.tenants[0];
  assert.ok(api.running >= 1 && api.waiting >= 1, `the status route says ${JSON.stringify(api)}; the page showed ${JSON.stringify(seen)}`);
  for (const id of ids) await fetch(GENQ_UI_KEYED + "/v1/jobs/" + id, { method: "DELETE", headers: auth });
  await page.close();
});
