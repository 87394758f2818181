// Reads JSON lines {"schema": ..., "answers": ["...", ...]} on stdin and
// writes one line per input: {"results": [{"ok": bool, "error": "..."}]}.
// Each answer is parsed with JSON.parse and validated with ajv, a
// validator written independently of genq's compiler.
import Ajv from "ajv";
import addFormats from "ajv-formats";
import readline from "node:readline";

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  const { schema, answers } = JSON.parse(line);
  const ajv = new Ajv({ strict: false, allErrors: false });
  addFormats(ajv);
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
