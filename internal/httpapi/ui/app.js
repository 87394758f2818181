// genq's web UI: a chat playground (variants A and B), an image playground
// (variant C) and a live queue view, over the api's own routes. No
// framework and no build step; the page's CSP allows only this file.
"use strict";

const $ = (id) => document.getElementById(id);
const keyName = "genq-api-key";
let status = null;
let pollTimer = null;

// api calls path with the tab's key, if any; a 401 asks for one.
async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  const key = sessionStorage.getItem(keyName);
  if (key) headers["Authorization"] = "Bearer " + key;
  const res = await fetch(path, Object.assign({}, opts, { headers }));
  if (res.status === 401) {
    showKey(key ? "That key was refused." : "");
    throw new Error("a key is required");
  }
  return res;
}

async function errorText(res) {
  try {
    const body = await res.json();
    return (body.error && (body.error.message || body.error)) || res.statusText;
  } catch {
    return res.status + " " + res.statusText;
  }
}

function show(view) {
  for (const v of ["key", "chat", "images", "queue"]) $(v).hidden = v !== view;
  for (const b of document.querySelectorAll("nav button")) b.classList.toggle("active", b.dataset.view === view);
  if (view === "queue") refreshQueue();
}

function showKey(message) {
  for (const b of document.querySelectorAll("nav button")) b.hidden = true;
  $("key-error").textContent = message || "";
  show("key");
}

async function start() {
  let res;
  try {
    res = await api("/ui/api/status");
  } catch {
    return; // the key prompt is up
  }
  status = await res.json();
  $("variant").textContent = "variant " + status.variant;
  const models = status.models || [];
  const chatModels = models.filter((m) => m.kind === "chat");
  const imageModels = models.filter((m) => m.kind === "image");
  const text = status.kind === "text" || chatModels.length > 0;
  const images = status.kind === "image" || imageModels.length > 0;
  fillPicker("model", chatModels);
  fillPicker("image-model", imageModels);
  $("tab-chat").hidden = !text;
  $("tab-images").hidden = !images;
  $("tab-queue").hidden = false;
  show(text ? "chat" : "images");
  clearInterval(pollTimer);
  pollTimer = setInterval(() => { if (!$("queue").hidden) refreshQueue(); }, 1000);
}

// fillPicker lists a catalogue's models of one kind in a playground's
// picker, the default (the first) chosen; with none the picker hides and
// requests name no model.
function fillPicker(id, models) {
  const sel = $(id);
  const keep = sel.value;
  sel.replaceChildren(...models.map((m) => {
    const o = document.createElement("option");
    o.value = o.textContent = m.id;
    return o;
  }));
  if (models.some((m) => m.id === keep)) sel.value = keep;
  $(id + "-row").hidden = models.length === 0;
}

$("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(keyName, $("key-input").value.trim());
  $("key-input").value = "";
  start();
});
for (const b of document.querySelectorAll("nav button")) b.addEventListener("click", () => show(b.dataset.view));

// readEvents yields the data of each server-sent event of res.
async function* readEvents(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) yield data;
    }
  }
}

// Chat.
const chat = [];
let abort = null;

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("messages").appendChild(div);
  return div;
}

$("stop").addEventListener("click", () => { if (abort) abort.abort(); });

$("chat-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const prompt = $("prompt").value.trim();
  if (!prompt) return;
  $("prompt").value = "";
  chat.push({ role: "user", content: prompt });
  addMessage("user", prompt);
  const out = addMessage("assistant", "");
  out.dataset.state = "streaming";
  const text = document.createElement("span");
  text.className = "text";
  out.appendChild(text);
  const stats = document.createElement("span");
  stats.className = "stats";
  out.appendChild(stats);

  const messages = [];
  if ($("system").value.trim()) messages.push({ role: "system", content: $("system").value.trim() });
  messages.push(...chat);
  const body = { messages, stream: true, stream_options: { include_usage: true }, max_tokens: Number($("max-tokens").value) || 256,
    temperature: Number($("temperature").value) };
  if ($("seed").value !== "") body.seed = Number($("seed").value);
  if ($("model").value) body.model = $("model").value;
  const schemaText = $("schema").value.trim();
  if (schemaText) {
    let schema;
    try { schema = JSON.parse(schemaText); } catch (err) {
      out.dataset.state = "error"; stats.textContent = "The JSON schema is not JSON: " + err.message; stats.classList.add("error"); chat.pop(); return;
    }
    body.response_format = { type: "json_schema", json_schema: { name: "answer", schema } };
  }
  abort = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  const t0 = performance.now();
  let first = 0, tokens = 0, cached = 0, answer = "";
  try {
    const res = await api("/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body), signal: abort.signal });
    if (!res.ok) throw new Error(await errorText(res));
    for await (const data of readEvents(res)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      for (const c of chunk.choices || []) {
        const piece = (c.delta && c.delta.content) || "";
        if (piece && !first) first = performance.now();
        answer += piece;
        text.textContent = answer;
      }
      if (chunk.usage) {
        tokens = chunk.usage.completion_tokens;
        cached = (chunk.usage.prompt_tokens_details && chunk.usage.prompt_tokens_details.cached_tokens) || 0;
      }
    }
    chat.push({ role: "assistant", content: answer });
    // The decode rate after the first token, or, where the answer came
    // in one burst (a constrained answer is sent as it is checked), over
    // the whole request.
    const end = performance.now();
    const rate = first && end - first >= 100 ? (tokens - 1) / ((end - first) / 1000) : tokens / ((end - t0) / 1000);
    stats.textContent = `time to first token ${first ? Math.round(first - t0) : "–"} ms · ${rate.toFixed(1)} tokens/s · ${tokens} tokens · ${cached} cached`;
    if (schemaText) {
      try { JSON.parse(answer); stats.textContent += " · valid JSON"; out.dataset.json = "valid"; } catch { out.dataset.json = "invalid"; }
    }
    out.dataset.state = "done";
  } catch (err) {
    if (err.name === "AbortError") {
      stats.textContent = "stopped";
      out.dataset.state = "stopped";
      chat.pop();
    } else {
      stats.textContent = err.message;
      stats.classList.add("error");
      out.dataset.state = "error";
      chat.pop();
    }
  } finally {
    abort = null;
    $("send").disabled = false;
    $("stop").disabled = true;
  }
});

// Images.
$("image-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const partials = 3;
  const body = { prompt: $("image-prompt").value, size: $("image-size").value, n: 1, stream: true, partial_images: partials,
    num_inference_steps: Number($("image-steps").value), guidance_scale: Number($("image-guidance").value) };
  if ($("negative-prompt").value) body.negative_prompt = $("negative-prompt").value;
  if ($("image-seed").value !== "") body.seed = Number($("image-seed").value);
  if ($("image-model").value) body.model = $("image-model").value;
  $("previews").replaceChildren();
  $("image-result").hidden = true;
  $("image-progress").value = 0;
  $("image-status").textContent = "queued";
  $("image-status").classList.remove("error");
  $("image-go").disabled = true;
  try {
    const res = await api("/v1/images/generations", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(await errorText(res));
    let previews = 0;
    for await (const data of readEvents(res)) {
      const ev = JSON.parse(data);
      if (ev.error) throw new Error(ev.error.message);
      const src = "data:image/" + (ev.output_format || "png") + ";base64," + ev.b64_json;
      if (ev.type === "image_generation.partial_image") {
        previews++;
        const img = document.createElement("img");
        img.src = src;
        img.alt = "preview " + previews;
        $("previews").appendChild(img);
        $("image-progress").value = previews / (partials + 1);
        $("image-status").textContent = `preview ${previews} of ${partials}`;
      } else if (ev.type === "image_generation.completed") {
        $("image-progress").value = 1;
        $("image").src = src;
        $("download").href = src;
        $("image-result").hidden = false;
        $("image-status").textContent = "done";
      }
    }
  } catch (err) {
    $("image-status").textContent = err.message;
    $("image-status").classList.add("error");
  } finally {
    $("image-go").disabled = false;
  }
});

// Queue.
function svg(tag, attrs) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

function drawRate(buckets) {
  const chart = $("chart-rate");
  const top = Math.max(1, ...buckets.map((b) => b.per_second));
  const w = 300 / buckets.length;
  chart.replaceChildren(...buckets.map((b, i) => {
    const h = (b.per_second / top) * 56;
    return svg("rect", { x: i * w + 0.5, y: 58 - h, width: Math.max(w - 1, 1), height: h });
  }));
}

function drawLatency(buckets) {
  const chart = $("chart-latency");
  const top = Math.max(1, ...buckets.map((b) => b.p99_ms));
  const w = 300 / buckets.length;
  const line = (key) => buckets.map((b, i) => `${(i + 0.5) * w},${58 - (b[key] / top) * 56}`).join(" ");
  chart.replaceChildren(svg("polyline", { class: "p99", points: line("p99_ms") }), svg("polyline", { class: "p50", points: line("p50_ms") }));
}

function cells(row, values) {
  const tr = document.createElement("tr");
  for (const v of values) {
    const td = document.createElement("td");
    td.textContent = v;
    tr.appendChild(td);
  }
  row.appendChild(tr);
  return tr;
}

function ago(t) {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(t)) / 1000));
  return s < 120 ? s + " s" : Math.round(s / 60) + " min";
}

async function refreshQueue() {
  let res;
  try { res = await api("/ui/api/status"); } catch { return; }
  if (!res.ok) return;
  const st = await res.json();
  // A worker of several models beats once per model.
  $("stat-workers").textContent = new Set(st.workers.map((w) => w.worker_id)).size;
  const models = $("models").tBodies[0];
  models.replaceChildren();
  $("models-view").hidden = !(st.models && st.models.length);
  for (const m of st.models || []) {
    cells(models, [m.id, m.kind, m.context_length || "", (m.loaded_on || []).join(", "), (m.loading_on || []).join(", "),
      (m.loadable_on || []).join(", ")]).dataset.model = m.id;
  }
  $("stat-interactive").textContent = st.interactive_depth ?? "–";
  $("stat-batch").textContent = st.batch_depth ?? "–";
  $("stat-inflight").textContent = st.in_flight ?? "–";
  drawRate(st.recent);
  drawLatency(st.recent);
  const workers = $("workers").tBodies[0];
  workers.replaceChildren();
  for (const w of st.workers) {
    const state = w.model_state === "loading" ? `loading ${Math.round((w.load_progress || 0) * 100)}%` : (w.model_state || "loaded");
    const tr = cells(workers, [w.worker_id, `${w.device.kind} ${w.device.name || ""}`.trim(), w.device.engine || "", w.model, state, w.slots,
      w.slots - w.free_slots, ago(w.started_at) + (w.draining ? " (draining)" : "")]);
    tr.dataset.worker = w.worker_id;
  }
  const tenants = $("tenants").tBodies[0];
  tenants.replaceChildren();
  for (const t of st.tenants || []) {
    const tr = cells(tenants, [t.tenant, t.waiting ?? 0, t.running ?? 0, t.requests, t.prompt_tokens, t.completion_tokens, t.images, t.engine_seconds.toFixed(1)]);
    tr.dataset.tenant = t.tenant;
  }
  const jobs = $("jobs").tBodies[0];
  jobs.replaceChildren();
  for (const j of st.jobs || []) {
    const p = j.progress ? `${j.progress.done} / ${j.progress.total}` : "";
    cells(jobs, [j.id, j.type || "", j.status, p, j.created ? new Date(j.created * 1000).toLocaleTimeString() : ""]);
  }
  const batches = $("batches").tBodies[0];
  batches.replaceChildren();
  for (const b of st.batches) {
    const c = b.request_counts;
    cells(batches, [b.id, b.status, `${c.completed} / ${c.total}`, c.failed, new Date(b.created_at * 1000).toLocaleTimeString()]);
  }
}

start();
