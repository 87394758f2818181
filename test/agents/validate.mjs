// Reads one JSON document on stdin, a list of {"name", "input", "schema"}
// (tool calls beside their tools' input schemas), and writes one line per
// call saying whether ajv, a validator written apart from genq, holds the
// arguments valid. Exits 1 when any is not.
import Ajv from "ajv";
import Ajv2019 from "ajv/dist/2019.js";
import Ajv2020 from "ajv/dist/2020.js";
import fs from "node:fs";

// validator picks ajv's build for the schema's own draft.
function validator(schema) {
  const draft = String(schema?.$schema ?? "");
  if (draft.includes("2020-12")) return new Ajv2020({ strict: false });
  if (draft.includes("2019-09")) return new Ajv2019({ strict: false });
  return new Ajv({ strict: false });
}

const calls = JSON.parse(fs.readFileSync(0, "utf8"));
let bad = 0;
for (const { name, input, schema } of calls) {
  const ajv = validator(schema);
  let ok, why = "";
  try {
    const validate = ajv.compile(schema ?? {});
    ok = validate(input);
    if (!ok) why = ajv.errorsText(validate.errors);
  } catch (e) {
    ok = false;
    why = "schema: " + e.message;
  }
  if (!ok) bad++;
  const args = JSON.stringify(input);
  const shown = args.length > 100 ? args.slice(0, 100) + "…" : args;
  console.log(`test-agents: ${name} ${shown} (${args.length} bytes): ${ok ? "valid under its schema" : "INVALID: " + why}`);
}
process.exit(bad ? 1 : 0);
