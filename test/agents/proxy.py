#!/usr/bin/env python3
"""proxy.py: a recording HTTP proxy between a coding agent and genq.

    proxy.py LISTEN_PORT UPSTREAM_URL LOG_FILE

Forwards every request to UPSTREAM_URL unchanged and streams the answer
back as it comes (server-sent events included), and writes one JSON line
per request to LOG_FILE: method, path, status, the body's size, and what a
Messages or chat request asks for (model, max_tokens, thinking, how many
tools and messages, stream). It never writes a body or a header's value,
so no key reaches the log.
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
    out["tools_bytes"] = len(json.dumps(req.get("tools") or []))
    out["messages"] = len(req.get("messages") or [])
    out["system_roles_in_messages"] = sum(1 for m in req.get("messages") or [] if isinstance(m, dict) and m.get("role") == "system")
    return out


def main():
    port, upstream, log_path = int(sys.argv[1]), urllib.parse.urlsplit(sys.argv[2]), sys.argv[3]
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def forward(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
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
            with lock, open(log_path, "a") as f:
                f.write(json.dumps(rec) + "\n")

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = forward

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    main()
