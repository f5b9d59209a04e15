"""Egress rules beyond the allowlist (docs/egress.md), from inside real sandboxes through the real
proxy: method/path rules checked per request on one kept-alive connection, deny entries that win
over allows, 403 bodies that name the rule, a policy changed on a running sandbox applying to the
next request, organization defaults, and an upstream proxy that sees the traffic only after the
policy allowed it."""

import base64
import http.server
import json
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from sandfort_harness import SANDFORTD, Daemon

# Inside the sandbox: each argument list is one connection through the proxy (Python's
# http.client, which keeps a connection alive while the answers allow it). For every request it
# prints the status, the body and the local port of the socket that carried the request: the
# same port twice is the same connection. With "--wait", it reads a line of stdin before each
# request after the first (the test changes the policy meanwhile).
CLIENT = r"""
import base64, http.client, json, os, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = "Basic " + base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
wait = sys.argv[1] == "--wait"
plan = json.loads(sys.argv[2 if wait else 1])
for connection in plan:
    conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
    for i, (method, url) in enumerate(connection):
        if wait and i > 0:
            sys.stdin.readline()
        conn.request(method, url, body=b"x" if method in ("POST", "PUT") else None,
                     headers={"Proxy-Authorization": auth})
        port = conn.sock.getsockname()[1]
        r = conn.getresponse()
        body = r.read().decode(errors="replace")
        print(json.dumps({"status": r.status, "reason": r.reason, "body": body, "port": port}), flush=True)
    conn.close()
"""


class Upstream:
    """An HTTP server on the host's 127.0.0.1 that answers every method with a short body and
    records (method, path) of what reaches it."""

    def __init__(self):
        outer = self
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                outer.requests.append((self.command, self.path))
                body = f"upstream saw {self.command} {self.path}\n".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


class ConnectProxy:
    """A small real CONNECT proxy on the host's 127.0.0.1 that wants Basic credentials: it records
    every CONNECT target (and whether its credential was right) and tunnels to the target."""

    def __init__(self, username, password):
        self.expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.connects = []  # (target, credential_ok)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            head, rest = head.split(b"\r\n\r\n", 1)
            lines = head.decode().split("\r\n")
            method, target, _ = lines[0].split(" ")
            headers = dict(line.split(": ", 1) for line in lines[1:])
            ok = headers.get("Proxy-Authorization") == self.expected
            self.connects.append((target, ok))
            if method != "CONNECT" or not ok:
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                return
            host, port = target.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30) as upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
                self._pipe(client, upstream)

    @staticmethod
    def _pipe(a, b):
        peers = {a: b, b: a}
        while True:
            ready, _, _ = select.select([a, b], [], [], 60)
            if not ready:
                return
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                peers[s].sendall(data)

    def close(self):
        self.listener.close()


@pytest.fixture(scope="module")
def upstream():
    u = Upstream()
    yield u
    u.close()


@pytest.fixture(scope="module")
def daemon():
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8"}}).start()
    yield d
    d.stop()
    d.cleanup()


@pytest.fixture(scope="module")
def org(daemon):
    admin = daemon.admin()
    org = admin.post("/v1/orgs", {"name": "egress-rules"}).json()
    keys = {role: admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": role, "role": role}).json()["key"]
            for role in ("admin", "member")}
    return {"id": org["id"], "admin": daemon.client(keys["admin"]), "member": daemon.client(keys["member"])}


def run_client(member, sbx, plan):
    r = member.exec(sbx["id"], argv=["python3", "-c", CLIENT, json.dumps(plan)],
                    env={"NO_PROXY": "", "no_proxy": ""}, timeout_s=60)
    assert r["exit_code"] == 0, r
    return [json.loads(line) for line in r["stdout"].splitlines()]


def seen_since(upstream, mark):
    return upstream.requests[mark:]


def test_one_kept_alive_connection_is_checked_request_by_request(org, upstream):
    member = org["member"]
    rule = {"host": "localhost", "methods": ["GET"], "paths": ["/repos/acme/*"]}
    sbx = member.create_sandbox(egress_rules=[rule])
    assert sbx["egress_rules"] == [rule] and sbx["egress_allowlist"] == [] and sbx["egress_deny"] == []
    base = f"http://localhost:{upstream.port}"
    mark = len(upstream.requests)
    [allowed, refused] = run_client(member, sbx, [[("GET", base + "/repos/acme/widget"),
                                                   ("DELETE", base + "/repos/acme/widget")]])
    assert allowed["status"] == 200 and allowed["body"] == "upstream saw GET /repos/acme/widget\n", allowed
    # The same connection (the same local port) carried the second request, and the rule refused it.
    assert refused["port"] == allowed["port"], (allowed, refused)
    assert refused["status"] == 403, refused
    assert 'egress_rules[0] {"host":"localhost","methods":["GET"],"paths":["/repos/acme/*"]}' in refused["body"]
    assert "method DELETE" in refused["body"], refused
    assert seen_since(upstream, mark) == [("GET", "/repos/acme/widget")]

    # Two allowed requests share the connection too; a path outside the pattern is refused on it.
    mark = len(upstream.requests)
    answers = run_client(member, sbx, [[("GET", base + "/repos/acme/a"), ("GET", base + "/repos/acme/b"),
                                        ("GET", base + "/repos/other/c")]])
    assert [a["status"] for a in answers] == [200, 200, 403], answers
    assert len({a["port"] for a in answers}) == 1, answers
    assert seen_since(upstream, mark) == [("GET", "/repos/acme/a"), ("GET", "/repos/acme/b")]


def test_path_tricks_are_refused(org, upstream):
    member = org["member"]
    sbx = member.create_sandbox(egress_rules=[{"host": "localhost", "methods": ["GET"], "paths": ["/repos/acme/*"]}])
    base = f"http://localhost:{upstream.port}"
    tricks = ["/repos/acme/../other", "/repos/acme/%2e%2e/other", "/repos/acme/%2E%2E/other",
              "/repos/acme%2f..%2fother", "/repos/acme/..%5cother", "/repos/acme/..;/other", "/REPOS/acme/x"]
    mark = len(upstream.requests)
    answers = run_client(member, sbx, [[("GET", base + t)] for t in tricks])
    assert [a["status"] for a in answers] == [403] * len(tricks), answers
    # Double slashes collapse to the allowed path; the host's case does not change the host.
    answers = run_client(member, sbx, [[("GET", base + "//repos//acme//x")],
                                       [("GET", f"http://LOCALHOST.:{upstream.port}/repos/acme/y")]])
    assert [a["status"] for a in answers] == [200, 200], answers
    # (Python's http.server itself turns a leading "//" into "/".)
    assert seen_since(upstream, mark) == [("GET", "/repos//acme//x"), ("GET", "/repos/acme/y")]


def test_a_deny_entry_wins_over_an_allow(org, upstream):
    member = org["member"]
    sbx = member.create_sandbox(egress_allowlist=["*"], egress_deny=["localhost"])
    mark = len(upstream.requests)
    [other, denied, tunnel] = run_client(member, sbx, [[("GET", f"http://127.0.0.1:{upstream.port}/ok")],
                                                       [("GET", f"http://localhost:{upstream.port}/no")],
                                                       [("CONNECT", f"localhost:{upstream.port}")]])
    assert other["status"] == 200, other
    assert denied["status"] == 403 and 'egress_deny[0] "localhost"' in denied["body"], denied
    assert tunnel["status"] == 403 and 'egress_deny[0] "localhost"' in tunnel["body"], tunnel
    assert seen_since(upstream, mark) == [("GET", "/ok")]


def test_connect_to_a_host_only_method_rules_allow_is_refused_without_an_interception_ca(daemon, upstream):
    # With an interception CA, such a CONNECT is intercepted and each request decided
    # (test_secret_injection.py). An organization that has none (its sandboxes were made with
    # neither secrets nor method/path rules; here the rules came later, by PATCH) is refused.
    admin = daemon.admin()
    fresh = admin.post("/v1/orgs", {"name": "egress-rules-no-ca"}).json()
    member = daemon.client(admin.post(f"/v1/orgs/{fresh['id']}/api-keys", {"name": "m", "role": "member"}).json()["key"])
    sbx = member.create_sandbox(egress_allowlist=["localhost"])
    r = member.request("PATCH", f"/v1/sandboxes/{sbx['id']}",
                       body={"egress_allowlist": [], "egress_rules": [{"host": "localhost", "methods": ["GET"]}]})
    assert r.status == 200, r
    [tunnel] = run_client(member, sbx, [[("CONNECT", f"localhost:{upstream.port}")]])
    assert tunnel["status"] == 403, tunnel
    assert "needs interception" in tunnel["body"] and "egress_rules[0]" in tunnel["body"], tunnel
    assert "interception" in tunnel["reason"], tunnel


def test_bad_rules_are_refused_with_the_error_shape(org):
    member = org["member"]
    for bad in ([{"host": "localhost", "paths": ["no-slash"]}], [{"host": "localhost", "methods": ["get"]}],
                [{"host": "localhost", "nope": 1}], [{"methods": ["GET"]}], "x",
                [{"host": "localhost", "paths": ["/a/../b"]}], [{"host": "h.example"}] * 65):
        r = member.post("/v1/sandboxes", {"egress_rules": bad})
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", (bad, r)
    r = member.post("/v1/sandboxes", {"egress_deny": ["bad host"]})
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", r


def test_a_policy_changed_on_a_running_sandbox_applies_to_the_next_request(org, upstream):
    member = org["member"]
    sbx = member.create_sandbox(egress_allowlist=["localhost"])
    base = f"http://localhost:{upstream.port}"
    plan = [[("POST", base + "/first"), ("POST", base + "/second")]]
    cmds = f"/v1/sandboxes/{sbx['id']}/commands"
    r = member.post(cmds, {"command": 'python3 -c "$CLIENT" --wait "$PLAN"',
                           "env": {"CLIENT": CLIENT, "PLAN": json.dumps(plan), "NO_PROXY": "", "no_proxy": ""}})
    assert r.status == 201, r
    cmd = r.json()["id"]
    deadline = time.time() + 60
    while time.time() < deadline and not member.get(f"{cmds}/{cmd}/logs").json()["stdout"]:
        time.sleep(0.2)
    first = json.loads(member.get(f"{cmds}/{cmd}/logs").json()["stdout"].splitlines()[0])
    assert first["status"] == 200, first
    # The connection stays open; POST is now allowed only for /first.
    r = member.request("PATCH", f"/v1/sandboxes/{sbx['id']}",
                       body={"egress_allowlist": [], "egress_rules": [{"host": "localhost", "paths": ["/first"]}]})
    assert r.status == 200 and r.json()["egress_rules"] == [{"host": "localhost", "paths": ["/first"]}], r
    assert member.request("POST", f"{cmds}/{cmd}/stdin", raw=b"\n").status == 204
    while time.time() < deadline and member.get(f"{cmds}/{cmd}").json()["state"] != "exited":
        time.sleep(0.2)
    logs = member.get(f"{cmds}/{cmd}/logs").json()
    lines = [json.loads(line) for line in logs["stdout"].splitlines()]
    assert len(lines) == 2, logs
    second = lines[1]
    assert second["port"] == first["port"], lines
    assert second["status"] == 403 and "egress_rules[0]" in second["body"], second
    assert ("POST", "/second") not in upstream.requests
    # A PATCH with a bad rule changes nothing.
    r = member.request("PATCH", f"/v1/sandboxes/{sbx['id']}", body={"egress_rules": [{"host": "x", "paths": ["a"]}]})
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", r
    assert member.get(f"/v1/sandboxes/{sbx['id']}").json()["egress_rules"] == [{"host": "localhost", "paths": ["/first"]}]


def test_organization_defaults_apply_to_sandboxes_created_without_egress_fields(org, upstream, daemon):
    admin, member = org["admin"], org["member"]
    path = f"/v1/orgs/{org['id']}/egress-defaults"
    assert member.get(path).json() == {"org_id": org["id"], "egress_defaults": None}
    defaults = {"egress_allowlist": [], "egress_deny": [],
                "egress_rules": [{"host": "localhost", "methods": ["GET"]}]}
    r = member.request("PUT", path, body={"egress_defaults": defaults})
    assert r.status == 403 and r.json()["error"]["code"] == "permission_denied", r
    r = admin.request("PUT", path, body={"egress_defaults": {"egress_rules": [{"host": "x", "methods": ["get"]}]}})
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", r
    r = admin.request("PUT", path, body={"egress_defaults": defaults})
    assert r.status == 200 and r.json()["egress_defaults"] == defaults, r
    assert member.get(path).json()["egress_defaults"] == defaults
    # Another organization's defaults are not found, not forbidden.
    other = daemon.admin().post("/v1/orgs", {"name": "egress-rules-other"}).json()
    assert member.get(f"/v1/orgs/{other['id']}/egress-defaults").status == 404

    sbx = member.create_sandbox()
    assert sbx["egress_rules"] == defaults["egress_rules"], sbx
    own = member.create_sandbox(egress_allowlist=["localhost"])
    assert own["egress_rules"] == [] and own["egress_allowlist"] == ["localhost"], own
    base = f"http://localhost:{upstream.port}"
    mark = len(upstream.requests)
    [get, post] = run_client(member, sbx, [[("GET", base + "/d1"), ("POST", base + "/d2")]])
    assert get["status"] == 200 and post["status"] == 403 and "egress_rules[0]" in post["body"], (get, post)
    [posted] = run_client(member, own, [[("POST", base + "/d3")]])
    assert posted["status"] == 200, posted
    assert seen_since(upstream, mark) == [("GET", "/d1"), ("POST", "/d3")]
    # Removed: a new sandbox without egress fields gets no egress at all, as before defaults.
    r = admin.request("PUT", path, body={"egress_defaults": None})
    assert r.status == 200 and r.json()["egress_defaults"] is None, r
    bare = member.create_sandbox()
    assert bare["egress_rules"] == [] and bare["egress_allowlist"] == []
    [refused] = run_client(member, bare, [[("GET", base + "/d4")]])
    assert refused["status"] == 403, refused


@pytest.fixture(scope="module")
def proxied(upstream):
    proxy = ConnectProxy("corp", "s3cret-pass")
    secrets = tempfile.mkdtemp(prefix="sf-pw-", dir="/tmp")
    password = os.path.join(secrets, "upstream-proxy-password")
    fd = os.open(password, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("s3cret-pass\n")
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8", "upstream_proxy": f"127.0.0.1:{proxy.port}",
                           "upstream_proxy_username": "corp", "upstream_proxy_password_file": password}}).start()
    yield d, proxy, password
    d.stop()
    d.cleanup()
    proxy.close()
    shutil.rmtree(secrets, ignore_errors=True)


def test_an_upstream_proxy_carries_what_the_policy_allowed_and_nothing_else(proxied, upstream):
    d, proxy, _ = proxied
    org = d.admin().post("/v1/orgs", {"name": "egress-upstream"}).json()
    member = d.client(d.admin().post(f"/v1/orgs/{org['id']}/api-keys", {"name": "m", "role": "member"}).json()["key"])
    sbx = member.create_sandbox(egress_allowlist=["localhost"], egress_deny=["127.0.0.1"])
    mark = len(upstream.requests)
    [allowed, again, denied] = run_client(member, sbx, [
        [("GET", f"http://localhost:{upstream.port}/via-corp"), ("GET", f"http://localhost:{upstream.port}/again")],
        [("GET", f"http://127.0.0.1:{upstream.port}/never")]])
    assert allowed["status"] == 200 and allowed["body"] == "upstream saw GET /via-corp\n", allowed
    assert again["status"] == 200 and again["port"] == allowed["port"], again
    assert denied["status"] == 403 and 'egress_deny[0] "127.0.0.1"' in denied["body"], denied
    # The upstream proxy saw both allowed requests, by name and with the configured credential, and
    # never the denied host.
    assert proxy.connects == [(f"localhost:{upstream.port}", True)] * 2, proxy.connects
    assert seen_since(upstream, mark) == [("GET", "/via-corp"), ("GET", "/again")]


def test_the_upstream_proxy_password_file_must_be_mode_0600(proxied):
    d, _, password = proxied
    os.chmod(password, 0o640)
    try:
        out = subprocess.run([SANDFORTD, "admin", "bootstrap", "--config", d.config_path],
                             capture_output=True, text=True)
    finally:
        os.chmod(password, 0o600)
    assert out.returncode != 0, out
    assert "upstream_proxy_password_file" in out.stderr and "0600" in out.stderr, out.stderr
