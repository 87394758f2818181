#!/usr/bin/env bash
# fetch-vocab.sh [DEST]
#
# Writes Llama 3's 128,256 tokens, one per line as hex bytes (an empty line
# for a special token), to DEST (default .cache/llama3-vocab.hex), taken from
# the npm package llama3-tokenizer-js, which bakes the vocabulary in. The
# benchmarks of internal/structured read it when it is there and fall back
# to a synthetic vocabulary of the same size when it is not.
set -euo pipefail

VERSION="${LLAMA3_TOKENIZER_JS_VERSION:-1.2.0}"
dest="${1:-.cache/llama3-vocab.hex}"

if [[ -s "$dest" ]]; then
	exit 0
fi
command -v npm >/dev/null && command -v node >/dev/null || {
	echo "fetch-vocab: npm and node are needed" >&2
	exit 1
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "llama3-tokenizer-js@$VERSION" >/dev/null && tar xzf ./*.tgz)

cat >"$tmp/dump.mjs" <<'JS'
// vocabById holds byte-level BPE strings: each byte is drawn as one
// printable character (GPT-2's table); undo it to get the token's bytes.
import tok from "./package/bundle/llama3-tokenizer-with-baked-data.js";
const bs = [];
for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
for (let b = 0xae; b <= 0xff; b++) bs.push(b);
const cs = bs.slice();
let n = 0;
for (let b = 0; b < 256; b++) {
  if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
}
const byChar = new Map();
bs.forEach((b, i) => byChar.set(String.fromCodePoint(cs[i]), b));
const lines = tok.vocabById.map((s, id) => {
  if (/^<\|.*\|>$/.test(s) && id >= 128000) return "";
  let hex = "";
  for (const ch of s) {
    const b = byChar.get(ch);
    if (b === undefined) throw new Error(`token ${id}: no byte for ${JSON.stringify(ch)}`);
    hex += b.toString(16).padStart(2, "0");
  }
  return hex;
});
process.stdout.write(lines.join("\n") + "\n");
JS
mkdir -p "$(dirname "$dest")"
node "$tmp/dump.mjs" >"$dest.tmp"
mv "$dest.tmp" "$dest"
echo "fetch-vocab: $(wc -l <"$dest") tokens in $dest" >&2
