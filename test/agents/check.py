#!/usr/bin/env python3
"""check.py: judges one Claude Code conversation of run.sh.

    check.py OUTPUT_JSON REQUESTS_JSONL [tool]

Claude Code's JSON output must say is_error false, and every request it
made (proxy.py's lines) must have been answered 2xx. With "tool", the
conversation must also have gone through a tool call and its result: a
request carrying the model's tool_use and the tool_result after it,
answered 2xx, the call's arguments valid under the tool's own schema
(validate.mjs, with ajv). Prints the requests' sizes.
"""
import json
import os
import subprocess
import sys


def main():
    out, report = sys.argv[1], sys.argv[2]
    want_tool = len(sys.argv) > 3 and sys.argv[3] == "tool"
    name = os.path.splitext(os.path.basename(report))[0]
    ok = True

    def fail(*msg):
        nonlocal ok
        print("test-agents: FAIL: %s:" % name, *msg, file=sys.stderr)
        ok = False

    try:
        res = json.load(open(out))
    except ValueError as e:
        fail("claude's output is not JSON:", e, open(out).read()[:2000])
        return 1
    if res.get("is_error") is not False:
        fail("is_error is", res.get("is_error"), json.dumps(res)[:2000])
    reqs = [json.loads(l) for l in open(report) if l.strip()]
    if not reqs:
        fail("claude made no request")
    for r in reqs:
        if not 200 <= r["status"] < 300:
            fail("%s %s answered %d" % (r["method"], r["path"], r["status"]))
    msgs = [r for r in reqs if r["path"].startswith("/v1/messages")]
    for r in msgs:
        print("test-agents: %s: %-26s %3d %7d bytes, %2d tools (%6d bytes), %2d messages, max_tokens %s, thinking %s%s" % (
            name, r["path"], r["status"], r["bytes"], r.get("tools", 0), r.get("tools_bytes", 0), r.get("messages", 0),
            r.get("max_tokens"), r.get("thinking"), ", tool_choice forced" if r.get("forced_tool") else ""))
    if not any(r.get("thinking") not in (None, "disabled") for r in msgs):
        print("test-agents: %s: note: no request asked for thinking" % name, file=sys.stderr)
    if want_tool:
        turns = [r for r in msgs if r.get("tool_results") and r.get("tool_uses")]
        if not turns:
            fail("no request carried a tool call and its result back (num_turns %s)" % res.get("num_turns"))
        else:
            calls = turns[0]["tool_uses"]
            check = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "validate.mjs")],
                                   input=json.dumps(calls), text=True)
            if check.returncode != 0:
                fail("a tool call's arguments are not valid under its tool's schema")
    print("test-agents: %s: %d requests, %d to /v1/messages, largest %d bytes; num_turns %s" % (
        name, len(reqs), len(msgs), max([r["bytes"] for r in reqs] or [0]), res.get("num_turns")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
