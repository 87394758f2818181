#!/usr/bin/env python3
"""proxy.py: a recording HTTP proxy between a coding agent and genq.

    proxy.py LISTEN_PORT UPSTREAM_URL LOG_FILE [FORCE_TOOL]

Forwards every request to UPSTREAM_URL and streams the answer back as it
comes (server-sent events included), and writes one JSON line per request
to LOG_FILE: method, path, status, the body's size, and what a Messages,
chat or Responses request asks for (model, max_tokens or
max_output_tokens, thinking or reasoning, how many tools and of which
hosted types, how many messages or input items, stream), with the tool
calls and tool results its messages carry back (each call's arguments
beside its tool's input schema, so that a test can check them), and the
hosted tools genq left out (its Genq-Tools-Ignored header). It writes no
other header's value, so no key reaches the log.

With FORCE_TOOL, the first Messages, chat or Responses request that offers
that tool and carries no tool result yet goes out with tool_choice naming
it, in that route's shape: a model of
random weights never chooses a tool, and a real one would, so this is how
a test reaches the agent's tool-result turn. That request also carries the
tool's schema bounded (bounded below): such a model writes a string until
it happens to sample a closing quote, tens of thousands of tokens on a
vocabulary of 128k, or past the request's deadline. Everything after it
goes out unchanged, and the call's arguments are checked against the
tool's own schema as the agent sends it next.

With PROXY_TOOLS_LOG naming a file, each distinct set of tools a request
offers is appended to it, one JSON line {"tools": [...]}, as the agent
sent them: the schemas BenchmarkSchemas (internal/structured) reads from
GENQ_AGENT_TOOLS. They are the agent's own text, for this machine's
results folder, never for the repository.
"""
import hashlib
import http.client
import os
import http.server
import json
import sys
import threading
import urllib.parse

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
       "trailers", "transfer-encoding", "upgrade", "host", "content-length"}


def summary(body):
    try:
        req = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(req, dict):
        return {}
    out = {k: req.get(k) for k in ("model", "max_tokens", "max_output_tokens", "stream") if k in req}
    if "thinking" in req:
        out["thinking"] = (req["thinking"] or {}).get("type")
    if isinstance(req.get("reasoning"), dict):
        out["reasoning"] = req["reasoning"].get("effort") or "default"
    elif "reasoning_effort" in req:
        out["reasoning"] = req["reasoning_effort"]
    if isinstance(req.get("input"), list):
        out["input"] = len(req["input"])
    types = {t.get("type") for t in req.get("tools") or [] if isinstance(t, dict)}
    out["tool_types"] = sorted(t for t in types if t and t != "function")
    out["tools"] = len(req.get("tools") or [])
    out["tool_names"] = [tool_name(t) for t in req.get("tools") or [] if isinstance(t, dict)]
    out["tools_bytes"] = len(json.dumps(req.get("tools") or []))
    out["messages"] = len(req.get("messages") or [])
    out["system_roles_in_messages"] = sum(1 for m in req.get("messages") or [] if isinstance(m, dict) and m.get("role") == "system")
    schemas = {tool_name(t): tool_schema(t) for t in req.get("tools") or [] if isinstance(t, dict)}
    uses, results = [], 0

    def use(name, args):
        uses.append({"name": name, "input": args, "schema": schemas.get(name)})

    for m in req.get("messages") or []:
        if not isinstance(m, dict):
            continue
        # Chat completions: an assistant's tool_calls, a tool's turn.
        for c in m.get("tool_calls") or []:
            fn = (c.get("function") or {}) if isinstance(c, dict) else {}
            use(fn.get("name"), arguments(fn.get("arguments")))
        if m.get("role") == "tool":
            results += 1
        content = m.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                use(block.get("name"), block.get("input"))
            elif block.get("type") == "tool_result":
                results += 1
    # The Responses API: function_call and function_call_output items.
    for item in req.get("input") if isinstance(req.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call":
            use(item.get("name"), arguments(item.get("arguments")))
        elif isinstance(item, dict) and item.get("type") == "function_call_output":
            results += 1
    if uses:
        out["tool_uses"] = uses
    out["tool_results"] = results
    return out


def tool_name(t):
    """A tool's name in the Messages, chat or Responses shape."""
    return t.get("name") or (t.get("function") or {}).get("name")


def tool_schema(t):
    """A tool's input schema in the Messages, chat or Responses shape."""
    return t.get("input_schema") or t.get("parameters") or (t.get("function") or {}).get("parameters")


def set_tool_schema(t, schema):
    """Sets a tool's input schema where tool_schema found it."""
    if "input_schema" in t:
        t["input_schema"] = schema
    elif "parameters" in t:
        t["parameters"] = schema
    elif isinstance(t.get("function"), dict):
        t["function"]["parameters"] = schema


def arguments(text):
    """A call's arguments, a JSON text in OpenAI's APIs, as a value."""
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


# The tool_choice naming one tool, in each route's own shape.
NAMED_CHOICE = {
    "/v1/messages": lambda name: {"type": "tool", "name": name},
    "/v1/chat/completions": lambda name: {"type": "function", "function": {"name": name}},
    "/v1/responses": lambda name: {"type": "function", "name": name},
}


def force_tool(body, name, path):
    """Returns body with tool_choice naming the tool name in path's shape, or
    None where the request does not offer it or already carries a tool
    result."""
    try:
        req = json.loads(body)
    except ValueError:
        return None
    if not isinstance(req, dict) or not any(isinstance(t, dict) and tool_name(t) == name for t in req.get("tools") or []):
        return None
    if summary(body).get("tool_results"):
        return None
    req["tool_choice"] = NAMED_CHOICE[path](name)
    for t in req["tools"]:
        if isinstance(t, dict) and tool_name(t) == name:
            set_tool_schema(t, bounded(tool_schema(t)))
    return json.dumps(req).encode()


# The longest string and array a bounded schema lets a forced call write.
BOUND_CHARS, BOUND_ITEMS = 32, 2


def bounded(schema):
    """schema narrowed so that every value under it ends within a few dozen
    tokens: only its required properties, strings of at most BOUND_CHARS
    characters (or their minLength), arrays of at most BOUND_ITEMS items
    (or their minItems), the same within anyOf, oneOf and allOf. A value
    valid under the result is valid under schema. A required name without
    a property schema of its own keeps whatever schema applies to it."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            out[key] = [bounded(s) for s in schema[key]]
    if schema.get("type") == "object" or "properties" in schema:
        required = schema.get("required") or []
        props = schema.get("properties") or {}
        out["properties"] = {k: bounded(v) for k, v in props.items() if k in required}
        if all(k in props for k in required):
            out["additionalProperties"] = False
            out.pop("patternProperties", None)
    if schema.get("type") == "string":
        cap = max(BOUND_CHARS, schema.get("minLength", 0))
        out["maxLength"] = min(schema.get("maxLength", cap), cap)
    if schema.get("type") == "array":
        cap = max(BOUND_ITEMS, schema.get("minItems", 0))
        out["maxItems"] = min(schema.get("maxItems", cap), cap)
        if isinstance(schema.get("items"), dict):
            out["items"] = bounded(schema["items"])
    return out


def main():
    port, upstream, log_path = int(sys.argv[1]), urllib.parse.urlsplit(sys.argv[2]), sys.argv[3]
    forced = {"tool": sys.argv[4] if len(sys.argv) > 4 else None, "done": False}
    lock = threading.Lock()
    tools_log, seen = os.environ.get("PROXY_TOOLS_LOG"), set()

    def record_tools(body):
        try:
            tools = json.loads(body).get("tools")
        except (ValueError, AttributeError):
            return
        if not tools:
            return
        text = json.dumps({"tools": tools})
        digest = hashlib.sha256(text.encode()).hexdigest()
        with lock:
            if digest in seen:
                return
            seen.add(digest)
            with open(tools_log, "a") as f:
                f.write(text + "\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def forward(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            sent = body  # as the agent sent it, for the tools' log
            was_forced = False
            path = self.path.split("?")[0]
            if forced["tool"] and path in NAMED_CHOICE:
                with lock:
                    changed = None if forced["done"] else force_tool(body, forced["tool"], path)
                    if changed is not None:
                        body, forced["done"], was_forced = changed, True, True
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=3600)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            conn.close()
            rec = {"method": self.command, "path": self.path.split("?")[0], "status": resp.status, "bytes": len(body)}
            rec.update(summary(body))
            if was_forced:
                rec["forced_tool"] = forced["tool"]
            if resp.getheader("Genq-Tools-Ignored"):
                rec["tools_ignored"] = resp.getheader("Genq-Tools-Ignored")
            with lock, open(log_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
            if tools_log:
                record_tools(sent)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = forward

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    main()
