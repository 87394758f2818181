#!/usr/bin/env python3
"""proxy.py: a recording HTTP proxy between a coding agent and genq.

    proxy.py LISTEN_PORT UPSTREAM_URL LOG_FILE [FORCE_TOOL]

Forwards every request to UPSTREAM_URL and streams the answer back as it
comes (server-sent events included), and writes one JSON line per request
to LOG_FILE: method, path, status, the body's size, and what a Messages or
chat request asks for (model, max_tokens, thinking, how many tools and
messages, stream), with the tool calls and tool results its messages carry
back (each call's arguments beside its tool's input schema, so that a test
can check them). It never writes a header's value, so no key reaches the
log.

With FORCE_TOOL, the first Messages request that offers that tool and
carries no tool result yet goes out with tool_choice naming it: a model of
random weights never chooses a tool, and a real one would, so this is how
a test reaches the agent's tool-result turn. Everything after it goes out
unchanged.
"""
import http.client
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
    out = {k: req.get(k) for k in ("model", "max_tokens", "stream") if k in req}
    if "thinking" in req:
        out["thinking"] = (req["thinking"] or {}).get("type")
    out["tools"] = len(req.get("tools") or [])
    out["tool_names"] = [t.get("name") for t in req.get("tools") or [] if isinstance(t, dict)]
    out["tools_bytes"] = len(json.dumps(req.get("tools") or []))
    out["messages"] = len(req.get("messages") or [])
    out["system_roles_in_messages"] = sum(1 for m in req.get("messages") or [] if isinstance(m, dict) and m.get("role") == "system")
    schemas = {t.get("name"): t.get("input_schema") for t in req.get("tools") or [] if isinstance(t, dict)}
    uses, results = [], 0
    for m in req.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                uses.append({"name": block.get("name"), "input": block.get("input"), "schema": schemas.get(block.get("name"))})
            elif block.get("type") == "tool_result":
                results += 1
    if uses:
        out["tool_uses"] = uses
    out["tool_results"] = results
    return out


def force_tool(body, name):
    """Returns body with tool_choice naming the tool name, or None where the
    request does not offer it or already carries a tool result."""
    try:
        req = json.loads(body)
    except ValueError:
        return None
    if not isinstance(req, dict) or not any(isinstance(t, dict) and t.get("name") == name for t in req.get("tools") or []):
        return None
    if summary(body).get("tool_results"):
        return None
    req["tool_choice"] = {"type": "tool", "name": name}
    return json.dumps(req).encode()


def main():
    port, upstream, log_path = int(sys.argv[1]), urllib.parse.urlsplit(sys.argv[2]), sys.argv[3]
    forced = {"tool": sys.argv[4] if len(sys.argv) > 4 else None, "done": False}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def forward(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            was_forced = False
            if forced["tool"] and self.path.split("?")[0] == "/v1/messages":
                with lock:
                    changed = None if forced["done"] else force_tool(body, forced["tool"])
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
            with lock, open(log_path, "a") as f:
                f.write(json.dumps(rec) + "\n")

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = forward

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    main()
