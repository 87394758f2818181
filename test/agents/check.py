#!/usr/bin/env python3
"""check.py: did a coding agent finish its one-shot task?

    check.py AGENT OUTPUT REQUESTS [tool]

AGENT is claude, codex, opencode or qwen; OUTPUT is what it printed in
its JSON mode; REQUESTS is proxy.py's log of its requests. The agent passes when
its output holds a final answer and no error, and every request it made
was answered 2xx. With "tool", the conversation must also have gone
through a tool call and its result: a request carrying the model's call
and the tool's output back, the call's arguments valid under the tool's
own schema (validate.mjs, with ajv). The requests' sizes are printed
either way. Exits 1 on a failure, saying why.
"""
import json
import os
import subprocess
import sys


def lines(path):
    """The JSON values of a JSON-lines file; a line that is not one fails."""
    out = []
    for n, line in enumerate(open(path), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise ValueError("line %d is not JSON (%s): %s" % (n, e, line[:200]))
    return out


def claude(path):
    """claude -p --output-format json: a result that is not an error."""
    res = json.load(open(path))
    if res.get("is_error") is not False:
        return "claude's result is an error: " + json.dumps(res)[:500]
    return None


def codex(path):
    """codex exec --json: a turn.completed, an agent_message, no failure."""
    events = lines(path)
    fails = [e for e in events if e.get("type") in ("turn.failed", "error")]
    if fails:
        return "codex reported " + json.dumps(fails[0])[:500]
    items = [e.get("item") or {} for e in events if e.get("type") == "item.completed"]
    for i in items:
        if i.get("type") == "error":
            print("test-agents: codex noted: %s" % i.get("message"))
    if not any(e.get("type") == "turn.completed" for e in events):
        return "codex's output has no turn.completed"
    if not any(i.get("type") == "agent_message" for i in items):
        return "codex's output has no agent_message"
    return None


def opencode(path):
    """opencode run --format json: a text part and a finished step."""
    events = lines(path)
    fails = [e for e in events if e.get("type") == "error"]
    if fails:
        return "opencode reported " + json.dumps(fails[0])[:500]
    if not any(e.get("type") == "text" for e in events):
        return "opencode's output has no text part"
    ends = [(e.get("part") or {}).get("reason") for e in events if e.get("type") == "step_finish"]
    if not ends:
        return "opencode's output has no step_finish"
    if ends[-1] not in ("stop", "length"):
        return "opencode's last step finished for %r" % ends[-1]
    return None


def qwen(path):
    """qwen --output-format json: a result that is not an error."""
    out = json.load(open(path))
    results = [m for m in out if isinstance(m, dict) and m.get("type") == "result"]
    if not results:
        return "qwen's output has no result"
    res = results[-1]
    if res.get("is_error") is not False or res.get("subtype") != "success":
        return "qwen's result is an error: " + json.dumps({k: res.get(k) for k in ("subtype", "is_error", "error", "result")})[:500]
    return None


def tool_turn(reqs):
    """Why the conversation did not go through a tool call and its result,
    or None."""
    turns = [r for r in reqs if r.get("tool_results") and r.get("tool_uses")]
    if not turns:
        return "no request carried a tool call and its output back"
    check = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "validate.mjs")],
                           input=json.dumps(turns[0]["tool_uses"]), text=True)
    if check.returncode != 0:
        return "a tool call's arguments are not valid under its tool's schema"
    return None


def main():
    agent, out, report = sys.argv[1:4]
    want_tool = len(sys.argv) > 4 and sys.argv[4] == "tool"
    try:
        why = {"claude": claude, "codex": codex, "opencode": opencode, "qwen": qwen}[agent](out)
    except (ValueError, OSError) as e:
        why = "%s's output cannot be read: %s" % (agent, e)
    if why:
        print("test-agents: FAIL: " + why, file=sys.stderr)
        print(open(out, errors="replace").read()[-2000:], file=sys.stderr)
    reqs = lines(report)
    if not reqs:
        print("test-agents: FAIL: %s made no request" % agent, file=sys.stderr)
        why = why or "no request"
    if want_tool and not why:
        why = tool_turn(reqs)
        if why:
            print("test-agents: FAIL: %s: %s" % (agent, why), file=sys.stderr)
    bad = [r for r in reqs if not 200 <= r["status"] < 300]
    for r in bad:
        print("test-agents: FAIL: %s: %s %s answered %d" % (agent, r["method"], r["path"], r["status"]), file=sys.stderr)
    for r in reqs:
        print("test-agents: %-8s %-22s %3d %7d bytes, %2d tools (%6d bytes) %s, %3d messages/items, max tokens %s, reasoning %s, ignored %s" % (
            agent, r["path"], r["status"], r["bytes"], r.get("tools", 0), r.get("tools_bytes", 0),
            ",".join(r.get("tool_types") or []) or "-", r.get("messages", 0) or r.get("input", 0),
            r.get("max_tokens") or r.get("max_output_tokens"), r.get("reasoning") or r.get("thinking"), r.get("tools_ignored") or "-") +
            (", tool_choice forced" if r.get("forced_tool") else "") + (", %d tool results" % r["tool_results"] if r.get("tool_results") else ""))
    print("test-agents: %s: %d requests, largest %d bytes" % (agent, len(reqs), max([r["bytes"] for r in reqs] or [0])))
    sys.exit(1 if why or bad else 0)


if __name__ == "__main__":
    main()
