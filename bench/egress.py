#!/usr/bin/python3
"""Egress proxy benchmark: prints figures and ratios measured in one run.

  download of a file from a server on the host: inside a sandbox through the proxy's CONNECT
  tunnel  vs  curl on the host, directly
  CONNECT set-up (TCP connect to the proxy, CONNECT, the proxy's checks and upstream dial,
  "200 Connection established") p50/p95  vs  a plain TCP connect to the same server from the host

The upstream is on 127.0.0.1 (allowed through egress.allowed_ranges, as an operator would
allow an internal mirror). Run after ./scripts/setup and ./scripts/build:
  /usr/bin/python3 bench/egress.py [--quick]
"""

import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import Daemon  # noqa: E402
from foundation import Api, pct, row  # noqa: E402

QUICK = "--quick" in sys.argv
SIZE = (256 if QUICK else 1024) << 20
CONNECTS = 200 if QUICK else 1000


def file_server(path):
    """HTTP/1.0 server on 127.0.0.1 that sends one file with sendfile()."""
    size = os.path.getsize(path)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.wfile.flush()
            with open(path, "rb") as f:
                self.connection.sendfile(f)

        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 256  # the default 5 drops SYNs under a connect loop

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


CONNECT_LOOP = r"""
import base64, json, os, socket, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
head = f"CONNECT localhost:{sys.argv[1]} HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode()
samples = []
for i in range(int(sys.argv[2])):
    t = time.perf_counter()
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.sendall(head)
    answer = s.recv(4096)
    samples.append((time.perf_counter() - t) * 1000)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    s.close()
print(json.dumps(samples))
"""


def bench_download(api, sid, port):
    mib = SIZE / (1 << 20)
    print(f"download of {mib:.0f} MiB from a server on the host")
    url = f"http://localhost:{port}/big"
    host = subprocess.run(["curl", "-sS", "--noproxy", "*", "-o", "/dev/null", "-w", "%{time_total}", url],
                          capture_output=True, text=True, check=True)
    direct_s = float(host.stdout)
    status, r = api.call("POST", f"/v1/sandboxes/{sid}/process/exec",
                         {"command": f"curl -sS -p -o /dev/null -w '%{{time_total}}' {url}",
                          "env": {"NO_PROXY": "", "no_proxy": ""}, "timeout_s": 600})
    assert status == 200 and r["exit_code"] == 0, r
    proxied_s = float(r["stdout"])
    print(f"  direct on the host        {mib / direct_s:8.1f} MiB/s")
    print(f"  sandbox, CONNECT tunnel   {mib / proxied_s:8.1f} MiB/s")
    print(f"  -> proxied / direct: {direct_s / proxied_s:.2f}x of the direct throughput\n")


def bench_connect(api, sid, port):
    print(f"CONNECT set-up, {CONNECTS} tunnels one after another")
    status, r = api.call("POST", f"/v1/sandboxes/{sid}/process/exec",
                         {"argv": ["python3", "-c", CONNECT_LOOP, str(port), str(CONNECTS)],
                          "env": {"NO_PROXY": "", "no_proxy": ""}, "timeout_s": 600})
    assert status == 200 and r["exit_code"] == 0, r
    tunnel = json.loads(r["stdout"])
    direct = []
    for _ in range(CONNECTS):
        t = time.perf_counter()
        s = socket.create_connection(("127.0.0.1", port))
        direct.append((time.perf_counter() - t) * 1000)
        s.close()
    a = row("sandbox: connect + CONNECT + 200 (proxy checks, dials)", tunnel)
    b = row("host: plain TCP connect to the same server", direct)
    print(f"  -> the proxy adds {a - b:.2f} ms at p50\n")


def main():
    d = Daemon({"log_level": "warn", "egress": {"allowed_ranges": "127.0.0.0/8"}}).start()
    big = tempfile.NamedTemporaryFile(delete=False, dir="/tmp")
    try:
        chunk = os.urandom(1 << 20)
        for _ in range(SIZE >> 20):
            big.write(chunk)
        big.close()
        server = file_server(big.name)
        port = server.server_address[1]
        api = Api(d.port, d.admin_key)
        status, sbx = api.call("POST", "/v1/sandboxes", {"wait": True, "egress_allowlist": ["localhost"],
                                                         "resources": {"cpus": 2}})
        assert status == 201, sbx
        bench_download(api, sbx["id"], port)
        bench_connect(api, sbx["id"], port)
        api.call("DELETE", f"/v1/sandboxes/{sbx['id']}")
        server.shutdown()
    finally:
        os.unlink(big.name)
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
