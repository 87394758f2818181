// golden.mjs writes the reference token ids that genq's tokenizers are
// tested against (internal/diffusion/tokenizer/ref_test.go), so that `make test`
// needs no Node.
//
//   cd scripts/tokref && npm ci && node golden.mjs
//
// It builds synthetic tokenizers in the formats real SD3 exports ship
// (tokenizer.json of CLIP-L, CLIP-G and T5, plus vocab.json/merges.txt and
// spiece.model), tokenizes one corpus with Hugging Face's Rust library (the
// Node binding @anush008/tokenizers) and with its pure-JS port
// (@huggingface/tokenizers), and writes the Rust library's ids as the
// golden files. The two libraries are compared too; where they disagree the
// Rust one (what Python's fast tokenizers run) is the reference and the
// disagreement is printed.
//
// The T5 model is trained by SentencePiece itself (spm_train), so its
// pieces, scores and precompiled normalization map (nmt_nfkc) are real. The
// trained spiece.model is committed; spm_train is only needed when it is
// missing (Debian: apt-get download sentencepiece libsentencepiece0, then
// SPM_TRAIN=path/to/spm_train with its library on LD_LIBRARY_PATH).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer as JsTokenizer } from "@huggingface/tokenizers";

const require = createRequire(import.meta.url);
const rust = require("@anush008/tokenizers");

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "..", "internal", "diffusion", "tokenizer", "testdata", "ref");

// ---- deterministic random numbers (mulberry32) ----
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const pick = (r, xs) => xs[Math.floor(r() * xs.length)];

// ---- the corpus ----
const english = `a an the of and with on in at by for from to photo painting portrait
  cat cats dog fox horse astronaut riding moon forest sunset mountain river city street
  night rain neon cyberpunk castle dragon knight wizard robot ocean wave beach flower
  garden house kitchen window light lighting cinematic detailed highly intricate sharp
  focus bokeh dramatic soft golden hour studio oil watercolor sketch pencil digital art
  trending artstation octane render unreal engine 4k 8k hdr realistic photorealistic
  red green blue yellow purple orange black white silver gold tiny huge old young happy
  sad beautiful ugly wooden glass metal stone frozen burning flying sleeping running
  don't it's we're I've you'll she'd I'm they're isn't can't SD3 GPU NASA iPhone McDonald's`
  .split(/\s+/).filter(Boolean);
const accented = `café naïve Zürich façade résumé über piñata smörgåsbord crème brûlée São
  Paulo Ærøskøbing İstanbul straße ΣΟΦΙΑ Ωμέγα σοφός Москва пейзаж Ελλάδα Łódź Kraków
  Dvořák Ångström ﬁne ﬂower ｆｕｌｌｗｉｄｔｈ Ⅷ ½ ² ① ٣ ℃ ™ Å ǅ ß ẞ`.split(/\s+/).filter(Boolean);
const decomposed = ["e\u0301", "cafe\u0301", "n\u0303", "A\u030a", "o\u0308\u0304", "ｅ\u0301", "\u1100\u1161", "\u1100\u1161\u11a8"];
const cjk = `猫 東京 夜景 山水画 一只猫 龍 富士山 桜 ねこ さくら カメラ ｶﾒﾗ 서울 고양이 한국어 北京烤鸭 風景 水墨画 の 中文`
  .split(/\s+/).filter(Boolean);
const emoji = ["🐱", "🚀", "👍🏽", "🇯🇵", "👨‍👩‍👧", "❤️", "✨", "1️⃣", "🌕", "🦊", "😀😀", "🏳️‍🌈", "©", "☃"];
const punct = `, . ! ? ... -- ( ) [ ] { } : ; " ' & # @ % $ * / \\ | < > ~ \` ^ _ + = « » “ ” — … · ¿ ¡ 、 。 ！ ？`
  .split(/\s+/).filter(Boolean);
const numbers = ["1024", "3.5", "16:9", "2x", "1st", "1920x1080", "0", "42", "3000", "v1.5", "2024-11-22"];
const spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u3000", "\u2003", "\v", "\f", "\u200b", "\u2028", "\u0085", " \t \n "];
const specials = ["<|startoftext|>", "<|endoftext|>", "<|ENDOFTEXT|>", "</s>", "<pad>", "<unk>", "▁", "▁word", "a▁b"];
const controls = ["\u0001", "\u0007", "\u001b[0m", "\u007f", "\u200d", "\ufeff", "\u00ad"];

function phrase(r, n) {
  const cats = [
    [english, 10], [accented, 3], [decomposed, 1], [cjk, 2], [emoji, 2], [punct, 2],
    [numbers, 1], [specials, 0.3], [controls, 0.3],
  ];
  const total = cats.reduce((s, [, w]) => s + w, 0);
  const seps = [" ", " ", " ", " ", "", ", ", "  ", "\n", "\t", " \u00a0", "\u3000"];
  let s = "";
  for (let i = 0; i < n; i++) {
    let x = r() * total;
    let words = english;
    for (const [list, w] of cats) {
      if ((x -= w) < 0) { words = list; break; }
    }
    let w = pick(r, words);
    const c = r();
    if (c < 0.1) w = w.toUpperCase();
    else if (c < 0.2) w = w[0].toUpperCase() + w.slice(1);
    s += (i ? pick(r, seps) : "") + w;
  }
  return s;
}

function corpus() {
  const cases = ["", " ", "  ", "\n", "\t\t", "a", "A", "a red fox", "A RED FOX", "  a   red\n\nfox  ",
    "an astronaut riding a horse on the moon", "a photo of a cat, highly detailed, 8k",
    "it's a cat's toy, isn't it?", "don't", "DON'T", "'s", "a's b't", "hello!!!", "...", "a...b",
    "e-mail", "x=y+z", "#hashtag @user", "C++ and C#", "~/path/to/file.txt", "https://example.com/a?b=c",
    "ABC123def456", "1234567890", "3.14159", "ﬁ", "Ⅻ", "x²", "İ", "İstanbul", "ΣΑΣ", "ǅungla",
    "\u0000".slice(1)];
  for (const group of [accented, decomposed, cjk, emoji, punct, numbers, spaces, specials, controls]) {
    for (const w of group) cases.push(w, `a ${w} b`);
  }
  cases.push(spaces.join("x"), "a" + spaces.join("") + "b", specials.join(""), specials.join(" "));
  // Long prompts, around and past the 75 tokens CLIP keeps and the 255 T5 keeps.
  const r = rng(7);
  for (let n = 50; n <= 100; n += 5) cases.push(phrase(r, n));
  for (let n = 200; n <= 400; n += 50) cases.push(phrase(r, n));
  cases.push(Array(100).fill("cat").join(" "), Array(300).fill("the").join(" "), "a".repeat(500), "猫".repeat(300));
  while (cases.length < 640) cases.push(phrase(r, 1 + Math.floor(r() * 16)));
  return cases;
}

function trainingText() {
  const r = rng(1);
  const lines = [];
  for (let i = 0; i < 4000; i++) lines.push(phrase(r, 3 + Math.floor(r() * 12)).replace(/[\r\n\v\f\u2028\u0085]+/g, " "));
  return lines;
}

// ---- CLIP: byte-level BPE learned from the training text ----
const clipSplit = /<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+/gu;
const clipSplitRegex = "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+";

// GPT-2's bytes_to_unicode, in its order (printable bytes first).
function byteSymbols() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  const table = new Array(256);
  bs.forEach((b, i) => { table[b] = String.fromCodePoint(cs[i]); });
  return { order: cs.map((c) => String.fromCodePoint(c)), table };
}

function learnCLIP(lines, nMerges) {
  const { order, table } = byteSymbols();
  const enc = new TextEncoder();
  const counts = new Map();
  for (const line of lines) {
    const text = line.normalize("NFC").replace(/\s+/gu, " ").toLowerCase();
    for (const m of text.matchAll(clipSplit)) {
      const w = m[0];
      if (w === "<|startoftext|>" || w === "<|endoftext|>") continue;
      counts.set(w, (counts.get(w) || 0) + 1);
    }
  }
  let words = [...counts].map(([w, c]) => {
    const syms = [...enc.encode(w)].map((b) => table[b]);
    syms[syms.length - 1] += "</w>";
    return { syms, c };
  });
  const merges = [];
  for (let k = 0; k < nMerges; k++) {
    const pairs = new Map();
    for (const { syms, c } of words) {
      for (let i = 0; i + 1 < syms.length; i++) {
        const key = syms[i] + " " + syms[i + 1];
        pairs.set(key, (pairs.get(key) || 0) + c);
      }
    }
    let best = null, bestN = 0;
    for (const [key, n] of pairs) if (n > bestN || (n === bestN && key < best)) { best = key; bestN = n; }
    if (!best || bestN < 2) break;
    const [a, b] = best.split(" ");
    merges.push([a, b]);
    words = words.map(({ syms, c }) => {
      const outSyms = [];
      for (let i = 0; i < syms.length; i++) {
        if (i + 1 < syms.length && syms[i] === a && syms[i + 1] === b) { outSyms.push(a + b); i++; } else outSyms.push(syms[i]);
      }
      return { syms: outSyms, c };
    });
  }
  // CLIP's vocabulary layout: bytes, bytes with </w>, merges, then the specials.
  const vocab = {};
  for (const s of order) vocab[s] = Object.keys(vocab).length;
  for (const s of order) vocab[s + "</w>"] = Object.keys(vocab).length;
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
  vocab["<|startoftext|>"] = Object.keys(vocab).length;
  vocab["<|endoftext|>"] = Object.keys(vocab).length;
  return { vocab, merges };
}

// clipJSON is tokenizer.json as transformers' CLIPTokenizerFast writes it.
function clipJSON({ vocab, merges }, pairMerges) {
  const start = vocab["<|startoftext|>"], end = vocab["<|endoftext|>"];
  const added = (id, content, normalized) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized, special: true });
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(start, "<|startoftext|>", true), added(end, "<|endoftext|>", false)],
    normalizer: { type: "Sequence", normalizers: [
      { type: "NFC" },
      { type: "Replace", pattern: { Regex: "\\s+" }, content: " " },
      { type: "Lowercase" },
    ] },
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: clipSplitRegex }, behavior: "Removed", invert: true },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
    ] },
    post_processor: { type: "RobertaProcessing", sep: ["<|endoftext|>", end], cls: ["<|startoftext|>", start], trim_offsets: false, add_prefix_space: false },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: "<|endoftext|>", continuing_subword_prefix: "",
      end_of_word_suffix: "</w>", fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab,
      // Older exports list merges as "a b" strings, newer ones as pairs.
      merges: pairMerges ? merges : merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

// ---- T5: a SentencePiece unigram model ----
function trainT5(dir, lines) {
  const model = join(dir, "spiece.model");
  if (existsSync(model)) return model;
  const spm = process.env.SPM_TRAIN || "spm_train";
  const input = join(dir, "train.txt.tmp");
  writeFileSync(input, lines.join("\n") + "\n");
  execFileSync(spm, [
    `--input=${input}`, `--model_prefix=${join(dir, "spiece")}`, "--model_type=unigram",
    "--vocab_size=1000", "--character_coverage=0.995", "--normalization_rule_name=nmt_nfkc",
    "--pad_id=0", "--eos_id=1", "--unk_id=2", "--bos_id=-1", "--num_threads=1",
    "--pad_piece=<pad>", "--eos_piece=</s>", "--unk_piece=<unk>",
  ], { stdio: "inherit" });
  execFileSync("rm", ["-f", input, join(dir, "spiece.vocab")]);
  return model;
}

// readSentencePiece parses the fields of ModelProto that the converter
// needs: pieces (1: piece, score, type) and the normalizer's
// precompiled_charsmap (3.2).
function readSentencePiece(path) {
  const buf = readFileSync(path);
  const fields = (b) => {
    const outFields = [];
    let i = 0;
    const varint = () => { let v = 0n, s = 0n; for (;;) { const x = b[i++]; v |= BigInt(x & 0x7f) << s; s += 7n; if (!(x & 0x80)) return v; } };
    while (i < b.length) {
      const tag = Number(varint());
      const num = tag >> 3, wt = tag & 7;
      if (wt === 0) outFields.push([num, varint()]);
      else if (wt === 1) { outFields.push([num, b.subarray(i, i + 8)]); i += 8; }
      else if (wt === 5) { outFields.push([num, b.readFloatLE(i)]); i += 4; }
      else if (wt === 2) { const n = Number(varint()); outFields.push([num, b.subarray(i, i + n)]); i += n; }
      else throw new Error(`wire type ${wt}`);
    }
    return outFields;
  };
  const pieces = [];
  let charsmap = null;
  for (const [num, v] of fields(buf)) {
    if (num === 1) {
      const p = { piece: "", score: 0, type: 1 };
      for (const [n, x] of fields(v)) {
        if (n === 1) p.piece = x.toString("utf8");
        if (n === 2) p.score = x;
        if (n === 3) p.type = Number(x);
      }
      pieces.push(p);
    } else if (num === 3) {
      for (const [n, x] of fields(v)) if (n === 2) charsmap = Buffer.from(x);
    }
  }
  return { pieces, charsmap };
}

// t5JSON is tokenizer.json as transformers' T5 converter wrote it for
// T5 v1.1 (the tokenizer SD3's tokenizer_3 carries).
function t5JSON({ pieces, charsmap }) {
  const unk = pieces.findIndex((p) => p.type === 2);
  const eos = pieces.findIndex((p) => p.piece === "</s>");
  const added = pieces.flatMap((p, id) => (p.type === 1 ? [] : [{ id, content: p.piece, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }]));
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: added,
    normalizer: { type: "Sequence", normalizers: [
      { type: "Precompiled", precompiled_charsmap: charsmap.toString("base64") },
      { type: "Replace", pattern: { Regex: " {2,}" }, content: " " },
    ] },
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "WhitespaceSplit" },
      { type: "Metaspace", replacement: "▁", add_prefix_space: true, prepend_scheme: "always" },
    ] },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      pair: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }, { Sequence: { id: "B", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      special_tokens: { "</s>": { id: "</s>", ids: [eos], tokens: ["</s>"] } },
    },
    decoder: { type: "Metaspace", replacement: "▁", add_prefix_space: true, prepend_scheme: "always" },
    model: { type: "Unigram", unk_id: unk, vocab: pieces.map((p) => [p.piece, p.score]), byte_fallback: false },
  };
}

// ---- running both references ----
// diffusers calls the tokenizers with padding="max_length",
// max_length=N, truncation=True; the Rust tokenizer is set up the same way.
async function rustIDs(json, texts, length, padID, padToken) {
  const tok = rust.Tokenizer.fromString(JSON.stringify(json));
  tok.setTruncation(length);
  tok.setPadding({ maxLength: length, padId: padID, padToken });
  const ids = [];
  for (const t of texts) ids.push((await tok.encode(t)).getIds());
  return ids;
}

// The JS port has no padding or truncation: its unpadded ids are cut and
// padded the way diffusers asks for (content, then the end token, cut to
// length, then padding).
function jsIDs(json, config, texts, length, padID, nSpecialsAfter) {
  const tok = new JsTokenizer(json, config);
  return texts.map((t) => {
    const raw = tok.encode(t).ids;
    const tail = raw.slice(raw.length - nSpecialsAfter);
    let body = raw.slice(0, raw.length - nSpecialsAfter);
    body = body.slice(0, length - tail.length);
    const ids = [...body, ...tail];
    while (ids.length < length) ids.push(padID);
    return ids;
  });
}

function writeJSON(path, v) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify(v, null, 1) + "\n");
}

async function golden(name, json, config, texts, length, padID, padToken, nSpecialsAfter) {
  const ref = await rustIDs(json, texts, length, padID, padToken);
  const js = jsIDs(json, config, texts, length, padID, nSpecialsAfter);
  const disagree = [];
  texts.forEach((t, i) => {
    if (ref[i].join() !== js[i].join()) disagree.push(i);
  });
  for (const i of disagree.slice(0, 10)) {
    console.log(`${name}: the JS port disagrees on ${JSON.stringify(texts[i])}\n  rust ${ref[i].filter((x) => x !== padID)}\n  js   ${js[i].filter((x) => x !== padID)}`);
  }
  console.log(`${name}: ${texts.length} strings, JS port disagrees with the Rust library on ${disagree.length}`);
  // Trailing padding is left out to keep the files small; the test pads
  // back to length with pad_id.
  const cases = texts.map((text, i) => {
    const ids = [...ref[i]];
    while (ids.length && ids[ids.length - 1] === padID) ids.pop();
    return { text, ids };
  });
  // One case a line, so that a diff shows which strings changed.
  const head = {
    reference: "Hugging Face tokenizers 0.22.2 (Rust) through @anush008/tokenizers 0.6.0",
    js_port_disagreements: disagree.length,
    length, pad_id: padID,
  };
  const body = cases.map((c) => " " + JSON.stringify(c)).join(",\n");
  writeFileSync(join(out, `golden-${name}.json`), JSON.stringify(head).slice(0, -1) + ',"cases":[\n' + body + "\n]}\n");
}

async function main() {
  const lines = trainingText();
  const texts = corpus();

  const clip = learnCLIP(lines, 1500);
  const end = clip.vocab["<|endoftext|>"];
  for (const [name, pad, pairs] of [["clip-l", "<|endoftext|>", false], ["clip-g", "!", true]]) {
    const dir = join(out, name);
    const json = clipJSON(clip, pairs);
    const specials = { bos_token: "<|startoftext|>", eos_token: "<|endoftext|>", unk_token: "<|endoftext|>", pad_token: pad };
    writeJSON(join(dir, "tokenizer.json"), json);
    writeJSON(join(dir, "vocab.json"), clip.vocab);
    writeFileSync(join(dir, "merges.txt"), "#version: 0.2\n" + clip.merges.map(([a, b]) => `${a} ${b}\n`).join(""));
    writeJSON(join(dir, "special_tokens_map.json"), specials);
    const config = { ...specials, model_max_length: 77, do_lower_case: true, tokenizer_class: "CLIPTokenizer" };
    await golden(name, json, config, texts, 77, clip.vocab[pad], pad, 1);
  }
  console.log(`clip: ${clip.merges.length} merges, ${Object.keys(clip.vocab).length} tokens, end ${end}`);

  const t5dir = join(out, "t5");
  mkdirSync(t5dir, { recursive: true });
  const sp = readSentencePiece(trainT5(t5dir, lines));
  const t5 = t5JSON(sp);
  writeJSON(join(t5dir, "tokenizer.json"), t5);
  const specials = { eos_token: "</s>", unk_token: "<unk>", pad_token: "<pad>" };
  writeJSON(join(t5dir, "special_tokens_map.json"), specials);
  await golden("t5", t5, { ...specials, model_max_length: 512, tokenizer_class: "T5Tokenizer" }, texts, 256, 0, "<pad>", 1);
  console.log(`t5: ${sp.pieces.length} pieces, charsmap ${sp.charsmap.length} bytes`);
}

await main();
