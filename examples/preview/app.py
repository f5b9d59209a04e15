"""A tiny web app that runs inside the sandbox (standard library only): a page and a JSON API."""

import json
import os
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STARTED = time.time()
HITS = 0


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        global HITS
        HITS += 1
        if self.path.startswith("/api/status"):
            body = json.dumps({"app": "sandfort-preview-example", "hostname": socket.gethostname(),
                               "hits": HITS, "uptime_s": round(time.time() - STARTED, 1)}).encode()
            kind = "application/json"
        else:
            body = b"<!doctype html><title>Sandfort preview</title><h1>Hello from inside a sandbox</h1>\n"
            kind = "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "3000"))
    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
