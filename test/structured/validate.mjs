// Reads JSON lines {"schema": ..., "answers": ["...", ...]} on stdin and
// writes one line per input: {"results": [{"ok": bool, "error": "..."}]}.
// Each answer is parsed with JSON.parse and validated with ajv, a
// validator written independently of genq's compiler. The schema's
// $schema picks ajv's draft (2019-09, 2020-12, else draft 7), and formats
// assert, with ajv-formats, where that draft makes them (draft 7 and
// before), or where the line says "assertFormats": true.
import Ajv from "ajv";
import Ajv2019 from "ajv/dist/2019.js";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import readline from "node:readline";
import { suiteFormats } from "./formats.mjs";

function newAjv(schema, assertFormats) {
  const uri = typeof schema === "object" && schema !== null ? String(schema.$schema ?? "") : "";
  let Class = Ajv;
  let annotates = false;
  if (uri.includes("2020-12")) {
    Class = Ajv2020;
    annotates = true;
  } else if (uri.includes("2019-09")) {
    Class = Ajv2019;
    annotates = true;
  }
  const ajv = new Class({ strict: false, allErrors: false, validateFormats: assertFormats || !annotates });
  addFormats(ajv);
  for (const [name, re] of Object.entries(suiteFormats)) ajv.addFormat(name, re);
  return ajv;
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  const { schema, answers, assertFormats } = JSON.parse(line);
  const ajv = newAjv(schema, assertFormats === true);
  let validate;
  try {
    validate = ajv.compile(schema);
  } catch (e) {
    process.stdout.write(JSON.stringify({ compileError: String(e) }) + "\n");
    continue;
  }
  const results = answers.map((text) => {
    let v;
    try {
      v = JSON.parse(text);
    } catch (e) {
      return { ok: false, error: "not JSON: " + e.message };
    }
    if (validate(v)) return { ok: true };
    return { ok: false, error: ajv.errorsText(validate.errors) };
  });
  process.stdout.write(JSON.stringify({ results }) + "\n");
}
