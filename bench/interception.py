#!/usr/bin/python3
"""Secret injection benchmark: what TLS interception costs against a plain CONNECT tunnel, both
measured in one run, from inside one sandbox, to one HTTPS server on the host.

  per request on a kept-alive connection: GET through the intercepted connection (the proxy
  decrypts, decides the request, puts the secret in, re-encrypts, rewrites the answer)  vs  the
  same GET through a plain CONNECT tunnel (the proxy only copies bytes)
  per new connection: connect to the proxy + CONNECT + TLS handshake(s) + one GET, intercepted
  (the proxy dials and verifies the upstream, then completes the client's handshake with a leaf
  of the organization's CA)  vs  a plain tunnel (one handshake, end to end)

Both hosts name the same server (api.localhost is bound to the secret, other.localhost is not),
so the difference is the proxy's work. The upstream is on 127.0.0.1 (egress.allowed_ranges), with
a test CA the daemon trusts through secrets.upstream_ca_file. Run after ./scripts/build:
  /usr/bin/python3 bench/interception.py [--quick]
"""

import base64
import http.server
import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import Daemon  # noqa: E402
from foundation import Api, row  # noqa: E402

QUICK = "--quick" in sys.argv
REQUESTS = 200 if QUICK else 1000
CONNECTIONS = 50 if QUICK else 200


def make_pki(directory):
    """A test CA and a certificate for api.localhost and other.localhost."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.crt", "-subj", "/CN=sandfort bench CA", "-days", "2",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
            "-out", "server.csr", "-subj", "/CN=server")
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:api.localhost,DNS:other.localhost\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "2", "-extfile", "server.ext")


def https_server(directory):
    """HTTP/1.1 over TLS on 127.0.0.1, a small JSON answer to every GET, connections kept alive."""
    body = json.dumps({"ok": True, "pad": "x" * 200}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(directory, "server.crt"), os.path.join(directory, "server.key"))

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        request_queue_size = 256

        def get_request(self):
            sock, addr = self.socket.accept()
            # The head and the body go out as two writes: without this, Nagle holds the second
            # until the client's delayed ACK (40 ms) and every figure measures that instead.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# Inside the sandbox: one kept-alive connection through the proxy to `host`, `n` GETs, and `c`
# connections of one GET each; the times of each, in ms, as JSON. It trusts the interception CA
# (SSL_CERT_FILE, as the daemon set it) and the bench CA (for the plain tunnel's end-to-end TLS).
CLIENT = r"""
import http.client, json, os, socket, ssl, sys, time, urllib.parse
host, port, n, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
auth = "Basic " + __import__("base64").b64encode(
    f"{urllib.parse.unquote(proxy.username)}:{urllib.parse.unquote(proxy.password)}".encode()).decode()
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
ctx.load_verify_locations("/tmp/bench-ca.crt")
headers = {"Authorization": "Bearer " + os.environ["OPENAI"]}

def connection():
    conn = http.client.HTTPSConnection(proxy.hostname, proxy.port, context=ctx, timeout=30)
    conn.set_tunnel(host, port, headers={"Proxy-Authorization": auth})
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn

def get(conn):
    conn.request("GET", "/bench", headers=headers)
    r = conn.getresponse()
    r.read()
    assert r.status == 200, r.status

kept = connection()
get(kept)  # the set-up is measured below, not here
per_request = []
for _ in range(n):
    t = time.perf_counter()
    get(kept)
    per_request.append((time.perf_counter() - t) * 1000)
kept.close()
per_connection = []
for _ in range(c):
    t = time.perf_counter()
    conn = connection()
    get(conn)
    per_connection.append((time.perf_counter() - t) * 1000)
    conn.close()
print(json.dumps({"request": per_request, "connection": per_connection}))
"""


def measure(api, sid, host, port):
    status, r = api.call("POST", f"/v1/sandboxes/{sid}/process/exec",
                         {"argv": ["python3", "-c", CLIENT, host, str(port), str(REQUESTS), str(CONNECTIONS)],
                          "env": {"NO_PROXY": "", "no_proxy": ""}, "timeout_s": 900})
    assert status == 200 and r["exit_code"] == 0, r
    return json.loads(r["stdout"])


def main():
    pki = tempfile.mkdtemp(prefix="sf-bench-pki-")
    make_pki(pki)
    d = Daemon({"log_level": "warn", "egress": {"allowed_ranges": "127.0.0.0/8"},
                "secrets": {"upstream_ca_file": os.path.join(pki, "ca.crt")}}).start()
    server = None
    try:
        server = https_server(pki)
        port = server.server_address[1]
        api = Api(d.port, d.admin_key)
        status, s = api.call("POST", "/v1/secrets", {"name": "openai", "value": "sk-bench-" + "v" * 40,
                                                     "hosts": ["api.localhost"], "header": "Authorization",
                                                     "format": "Bearer {value}"})
        assert status == 201, s
        status, sbx = api.call("POST", "/v1/sandboxes", {"wait": True, "secrets": ["openai"],
                                                         "egress_allowlist": ["api.localhost", "other.localhost"],
                                                         "resources": {"cpus": 2}})
        assert status == 201, sbx
        with open(os.path.join(pki, "ca.crt"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        status, r = api.call("POST", f"/v1/sandboxes/{sbx['id']}/process/exec",
                             {"command": f"echo {ca} | base64 -d > /tmp/bench-ca.crt"})
        assert status == 200 and r["exit_code"] == 0, r

        plain = measure(api, sbx["id"], "other.localhost", port)
        intercepted = measure(api, sbx["id"], "api.localhost", port)
        print(f"one GET on a kept-alive HTTPS connection, {REQUESTS} in a row")
        a = row("plain CONNECT tunnel (no secret for the host)", plain["request"])
        b = row("intercepted, secret injected, answer rewritten", intercepted["request"])
        print(f"  -> interception adds {b - a:.2f} ms per request at p50 ({b / a:.2f}x)\n")
        print(f"a new connection and one GET, {CONNECTIONS} in a row")
        a = row("plain CONNECT tunnel: one TLS handshake", plain["connection"])
        b = row("intercepted: upstream dialled and verified, leaf", intercepted["connection"])
        print(f"  -> interception adds {b - a:.2f} ms per connection at p50 ({b / a:.2f}x)\n")
        api.call("DELETE", f"/v1/sandboxes/{sbx['id']}")
    finally:
        if server is not None:
            server.shutdown()
        subprocess.run(["rm", "-rf", pki])
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
