"""Organization secrets injected at the egress proxy (docs/secrets.md), end to end: real sandboxes
created with `secrets`, a real HTTPS echo server on the host (its own test CA, trusted by the
daemon through secrets.upstream_ca_file), the real proxy intercepting TLS with the organization's
interception CA.

From inside a sandbox, curl, Python's urllib and Node's https (over a CONNECT tunnel it opens
itself: Node 18's fetch does not use HTTPS_PROXY) send the placeholder and the upstream receives
the value — in a header, a query parameter and basic auth. The sandbox sees only the placeholder:
its environment, /proc/*/environ, its filesystem (exported and searched on the host, so that the
value never enters the sandbox even as a search pattern), and the echoed answers (headers, a
Content-Length body and a chunked body with the value cut across chunks). Another host gets the
placeholder untouched; another organization cannot attach the secret nor have its requests
injected; a rotation applies to the next request and a deletion stops injection; method/path
rules allow and refuse on one kept-alive intercepted connection; an upstream whose certificate
does not verify is never impersonated; a client whose SNI names another host is refused; the
audit chain counts each injection by name and neither it nor the database holds the value."""

import base64
import http.server
import json
import os
import shutil
import socketserver
import ssl
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from sandfort_harness import Daemon, container_id_of, docker_containers_of

# Inside the sandbox: the proxy variables as the daemon set them, without NO_PROXY (whose
# "localhost" would match the *.localhost test hosts).
THROUGH_PROXY = {"NO_PROXY": "", "no_proxy": ""}


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(directory):
    """A test CA with a server certificate for api.localhost and other.localhost, and a second,
    untrusted CA with one for bad.localhost."""
    for ca in ("ca", "rogue"):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                f"{ca}.key", "-out", f"{ca}.crt", "-subj", f"/CN=sandfort test {ca}", "-days", "2",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                cwd=directory)
    for name, ca, sans in (("server", "ca", "DNS:api.localhost,DNS:other.localhost"),
                           ("bad", "rogue", "DNS:bad.localhost")):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
                "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=directory)
        with open(os.path.join(directory, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=directory)


class EchoServer:
    """HTTPS on the host's 127.0.0.1: every request is recorded (host, method, path, headers) and
    answered with JSON echoing it, its Authorization also in an X-Echo header. /chunked answers
    chunked, the Authorization cut across two chunks."""

    def __init__(self, certfile, keyfile):
        outer = self
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode(errors="replace") if length else ""
                seen = {"host": self.headers.get("Host"), "method": self.command, "path": self.path,
                        "headers": dict(self.headers.items()), "body": body}
                outer.requests.append(seen)
                auth = self.headers.get("Authorization") or ""
                if self.path.startswith("/chunked"):
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    half = len(auth) - 3
                    for piece in ("auth=" + auth[:half], auth[half:] + ";end"):
                        data = piece.encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.write(b"0\r\n\r\n")
                    return
                out = json.dumps(seen).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.send_header("X-Echo", auth)
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *args):
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile)

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

            def get_request(self):
                sock, addr = self.socket.accept()
                return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def since(self, mark):
        return self.requests[mark:]

    def close(self):
        self.server.shutdown()


@pytest.fixture(scope="module")
def pki():
    with tempfile.TemporaryDirectory() as d:
        make_pki(d)
        yield d


@pytest.fixture(scope="module")
def upstream(pki):
    s = EchoServer(os.path.join(pki, "server.crt"), os.path.join(pki, "server.key"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def bad_upstream(pki):
    s = EchoServer(os.path.join(pki, "bad.crt"), os.path.join(pki, "bad.key"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def daemon(pki):
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8, ::1/128"},
                "audit": {"summary_interval_s": 1},
                "secrets": {"upstream_ca_file": os.path.join(pki, "ca.crt")}}).start()
    yield d
    d.stop()
    d.cleanup()


def new_org(daemon, name):
    su = daemon.admin()
    org = su.post("/v1/orgs", {"name": name}).json()
    out = {"id": org["id"]}
    for role in ("admin", "member"):
        out[role] = daemon.client(su.post(f"/v1/orgs/{org['id']}/api-keys", {"name": role, "role": role}).json()["key"])
    return out


VALUES = {name: f"sk-{name}-{uuid.uuid4().hex}" for name in ("openai", "search", "deploy", "rotated")}


@pytest.fixture(scope="module")
def acme(daemon):
    org = new_org(daemon, f"inject-{uuid.uuid4().hex[:6]}")
    admin = org["admin"]
    hosts = ["api.localhost", "bad.localhost"]
    for body in ({"name": "openai", "value": VALUES["openai"], "hosts": hosts, "header": "Authorization",
                  "format": "Bearer {value}"},
                 {"name": "search", "value": VALUES["search"], "hosts": hosts, "query": "api_key"},
                 {"name": "deploy", "value": VALUES["deploy"], "hosts": ["*.localhost"],
                  "basic_auth": {"username": "deploy"}}):
        r = admin.post("/v1/secrets", body)
        assert r.status == 201, r
    return org


@pytest.fixture(scope="module")
def sandbox(acme):
    sbx = acme["member"].create_sandbox(
        secrets=["openai", {"name": "search", "env": "SEARCH_KEY"}],
        egress_allowlist=["api.localhost", "other.localhost", "bad.localhost"])
    return sbx


def run(member, sbx, command, **kw):
    return member.exec(sbx["id"], command=command, env=THROUGH_PROXY, timeout_s=60, **kw)


def placeholders(sbx):
    return {a["name"]: a["placeholder"] for a in sbx["secrets"]}


def test_create_attaches_placeholders_and_the_view_names_them(acme, sandbox):
    assert [(a["name"], a["env"]) for a in sandbox["secrets"]] == [("openai", "OPENAI"), ("search", "SEARCH_KEY")]
    for a in sandbox["secrets"]:
        assert a["placeholder"].startswith("sfph_") and len(a["placeholder"]) == 37, a
        assert "value" not in a
    again = acme["member"].get(f"/v1/sandboxes/{sandbox['id']}").json()
    assert again["secrets"] == sandbox["secrets"]
    env = run(acme["member"], sandbox, "env")["stdout"]
    assert f"OPENAI={placeholders(sandbox)['openai']}" in env
    assert f"SEARCH_KEY={placeholders(sandbox)['search']}" in env
    assert "SSL_CERT_FILE=/etc/sandfort/ca-certificates.crt" in env
    assert "NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/sandfort-interception.crt" in env
    # The CA's certificate, never its key.
    ca = acme["member"].get("/v1/interception-ca").json()["certificate_pem"]
    inside = run(acme["member"], sandbox, "cat /usr/local/share/ca-certificates/sandfort-interception.crt")["stdout"]
    assert inside.strip() == ca.strip()
    assert "PRIVATE KEY" not in run(acme["member"], sandbox, "cat /etc/sandfort/ca-certificates.crt")["stdout"]


def test_curl_python_and_node_get_the_value_to_the_upstream_and_see_only_the_placeholder(acme, sandbox, upstream):
    member, ph = acme["member"], placeholders(sandbox)
    url = f"https://api.localhost:{upstream.port}"
    mark = len(upstream.requests)
    r = run(member, sandbox, f'curl -sS -m 20 -D /tmp/h -H "Authorization: Bearer $OPENAI" -H "X-Mine: $OPENAI" '
                             f'"{url}/v1/models?api_key=$SEARCH_KEY&q=$SEARCH_KEY" && cat /tmp/h')
    assert r["exit_code"] == 0, r
    [seen] = upstream.since(mark)
    assert seen["headers"]["Authorization"] == "Bearer " + VALUES["openai"]
    # Only where the placement says: another header and another parameter keep the placeholder.
    assert seen["headers"]["X-Mine"] == ph["openai"]
    assert seen["path"] == f"/v1/models?api_key={VALUES['search']}&q={ph['search']}"
    assert seen["headers"]["Accept-Encoding"] == "identity"
    # The echo (body and X-Echo header) came back with the placeholder in place of each value.
    out = r["stdout"]
    assert VALUES["openai"] not in out and VALUES["search"] not in out
    assert f"Bearer {ph['openai']}" in out and f"X-Echo: Bearer {ph['openai']}" in out
    assert f"api_key={ph['search']}" in out

    mark = len(upstream.requests)
    py = (f"import os, urllib.request\n"
          f"req = urllib.request.Request('{url}/py', headers={{'Authorization': 'Bearer ' + os.environ['OPENAI']}})\n"
          f"print(urllib.request.urlopen(req, timeout=20).read().decode())\n")
    r = member.exec(sandbox["id"], argv=["python3", "-c", py], env=THROUGH_PROXY, timeout_s=60)
    assert r["exit_code"] == 0, r
    assert upstream.since(mark)[0]["headers"]["Authorization"] == "Bearer " + VALUES["openai"]
    assert VALUES["openai"] not in r["stdout"] and ph["openai"] in r["stdout"]

    mark = len(upstream.requests)
    node = ("const http=require('http'),https=require('https'),tls=require('tls');"
            "const p=new URL(process.env.HTTPS_PROXY);"
            "const auth='Basic '+Buffer.from(decodeURIComponent(p.username)+':'+decodeURIComponent(p.password)).toString('base64');"
            f"const c=http.request({{host:p.hostname,port:p.port,method:'CONNECT',path:'api.localhost:{upstream.port}',"
            "headers:{'Proxy-Authorization':auth}});"
            "c.on('connect',(res,socket)=>{if(res.statusCode!==200){console.error(res.statusCode);process.exit(2);}"
            f"https.get({{host:'api.localhost',port:{upstream.port},path:'/node',headers:{{Authorization:'Bearer '+process.env.OPENAI}},"
            "createConnection:()=>tls.connect({socket,servername:'api.localhost'})},"
            "r=>{let b='';r.on('data',d=>b+=d);r.on('end',()=>{console.log(b);process.exit(0);});})"
            ".on('error',e=>{console.error(e.message);process.exit(3);});});c.end();")
    r = member.exec(sandbox["id"], argv=["node", "-e", node], timeout_s=60)
    assert r["exit_code"] == 0, r
    assert upstream.since(mark)[0]["headers"]["Authorization"] == "Bearer " + VALUES["openai"]
    assert VALUES["openai"] not in r["stdout"] and ph["openai"] in r["stdout"]


def test_a_chunked_echo_is_rewritten_across_chunks(acme, sandbox, upstream):
    ph = placeholders(sandbox)
    r = run(acme["member"], sandbox, f'curl -sS -m 20 -H "Authorization: Bearer $OPENAI" '
                                     f'https://api.localhost:{upstream.port}/chunked')
    assert r["exit_code"] == 0, r
    assert r["stdout"] == f"auth=Bearer {ph['openai']};end", r


def test_basic_auth_is_injected(acme, upstream):
    member = acme["member"]
    sbx = member.create_sandbox(secrets=[{"name": "deploy", "env": "DEPLOY_PASSWORD"}],
                                egress_allowlist=["api.localhost"])
    ph = placeholders(sbx)["deploy"]
    mark = len(upstream.requests)
    r = run(member, sbx, f'curl -sS -m 20 -u "me:$DEPLOY_PASSWORD" https://api.localhost:{upstream.port}/basic')
    assert r["exit_code"] == 0, r
    sent = upstream.since(mark)[0]["headers"]["Authorization"]
    assert base64.b64decode(sent.split(" ", 1)[1]).decode() == "deploy:" + VALUES["deploy"]
    assert VALUES["deploy"] not in r["stdout"]
    assert base64.b64encode(f"deploy:{VALUES['deploy']}".encode()).decode() not in r["stdout"]


def test_another_host_gets_the_placeholder_untouched(acme, sandbox, upstream, pki):
    member, ph = acme["member"], placeholders(sandbox)
    with open(os.path.join(pki, "ca.crt")) as f:
        test_ca = f.read()
    assert member.request("PUT", f"/v1/sandboxes/{sandbox['id']}/files?path=/tmp/test-ca.crt",
                          raw=test_ca.encode()).status == 201
    # other.localhost is no secret's host: a plain tunnel, the real server's certificate (the test CA).
    mark = len(upstream.requests)
    r = run(member, sandbox, f'curl -sS -m 20 --cacert /tmp/test-ca.crt -H "Authorization: Bearer $OPENAI" '
                             f'"https://other.localhost:{upstream.port}/x?api_key=$SEARCH_KEY"')
    assert r["exit_code"] == 0, r
    [seen] = upstream.since(mark)
    assert seen["headers"]["Authorization"] == "Bearer " + ph["openai"]
    assert seen["path"] == f"/x?api_key={ph['search']}"


def test_plain_http_to_a_bound_host_is_not_injected(acme, sandbox):
    # An http:// server answering on a bound host: the value would cross the network in the clear.
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r = run(acme["member"], sandbox,
                f'curl -sS -m 20 -H "Authorization: Bearer $OPENAI" http://api.localhost:{server.server_address[1]}/')
        assert r["exit_code"] == 0 and r["stdout"] == "ok", r
        assert seen == ["Bearer " + placeholders(sandbox)["openai"]]
    finally:
        server.shutdown()


def test_the_value_is_nowhere_in_the_sandbox(acme, sandbox):
    member, ph = acme["member"], placeholders(sandbox)
    environ = run(member, sandbox, "cat /proc/*/environ | tr '\\0' '\\n'")["stdout"]
    assert ph["openai"] in environ
    for v in VALUES.values():
        assert v not in environ
    # The container's whole filesystem, searched on the host.
    cid = container_id_of(sandbox["id"])
    proc = subprocess.Popen(["docker", "export", cid], stdout=subprocess.PIPE)
    needles = [v.encode() for v in VALUES.values()]
    tail = b""
    found = []
    while chunk := proc.stdout.read(1 << 20):
        window = tail + chunk
        found += [n for n in needles if n in window]
        tail = window[-128:]
    assert proc.wait() == 0
    assert found == []


def test_another_organization_cannot_use_the_secret(daemon, acme, sandbox, upstream, pki):
    other = new_org(daemon, f"other-{uuid.uuid4().hex[:6]}")
    before = len(docker_containers_of(daemon))
    r = other["member"].post("/v1/sandboxes", {"secrets": ["openai"], "wait": True})
    assert r.status == 404 and r.json()["error"]["message"] == "secret openai not found", r
    assert len(docker_containers_of(daemon)) == before
    # Its sandbox sending acme's placeholder to the bound host: a plain tunnel, nothing put in.
    sbx = other["member"].create_sandbox(egress_allowlist=["api.localhost"])
    with open(os.path.join(pki, "ca.crt")) as f:
        assert other["member"].request("PUT", f"/v1/sandboxes/{sbx['id']}/files?path=/tmp/test-ca.crt",
                                       raw=f.read().encode()).status == 201
    mark = len(upstream.requests)
    stolen = placeholders(sandbox)["openai"]
    r = run(other["member"], sbx, f'curl -sS -m 20 --cacert /tmp/test-ca.crt -H "Authorization: Bearer {stolen}" '
                                  f'https://api.localhost:{upstream.port}/stolen')
    assert r["exit_code"] == 0, r
    assert upstream.since(mark)[0]["headers"]["Authorization"] == "Bearer " + stolen


def test_bad_requests_on_create_make_nothing(daemon, acme):
    member = acme["member"]
    before = len(docker_containers_of(daemon))
    for body, word in (({"secrets": ["nope"]}, "secret nope not found"),
                       ({"secrets": ["openai", "openai"]}, "attached twice"),
                       ({"secrets": [{"name": "openai", "env": "HTTPS_PROXY"}]}, "set otherwise"),
                       ({"secrets": [{"name": "openai", "env": "1X"}]}, "not a valid variable name"),
                       ({"secrets": [{"name": "openai", "value": "x"}]}, "unknown field"),
                       ({"secrets": "openai"}, "must be an array")):
        r = member.post("/v1/sandboxes", {**body, "wait": True})
        assert r.status in (400, 404), r
        assert word in r.json()["error"]["message"], r
    assert len(docker_containers_of(daemon)) == before


def test_rotation_applies_to_the_next_request_and_deletion_stops_injection(acme, upstream, pki):
    admin, member = acme["admin"], acme["member"]
    r = admin.post("/v1/secrets", {"name": "rotating", "value": "sk-first-" + uuid.uuid4().hex,
                                   "hosts": ["api.localhost"], "header": "X-Key", "format": "{value}"})
    assert r.status == 201, r
    sbx = member.create_sandbox(secrets=["rotating"], egress_allowlist=["api.localhost"])
    ph = placeholders(sbx)["rotating"]
    r = admin.request("PUT", "/v1/secrets/rotating", {"value": VALUES["rotated"]})
    assert r.status == 200, r
    mark = len(upstream.requests)
    r = run(member, sbx, f'curl -sS -m 20 -H "X-Key: $ROTATING" https://api.localhost:{upstream.port}/rotated')
    assert r["exit_code"] == 0, r
    assert upstream.since(mark)[0]["headers"]["X-Key"] == VALUES["rotated"]
    assert admin.delete("/v1/secrets/rotating").status == 204
    # No secret of the sandbox is bound to the host any more: a plain tunnel to the real server
    # (whose certificate is the test CA's), the placeholder sent as it is.
    with open(os.path.join(pki, "ca.crt")) as f:
        assert member.request("PUT", f"/v1/sandboxes/{sbx['id']}/files?path=/tmp/test-ca.crt",
                              raw=f.read().encode()).status == 201
    mark = len(upstream.requests)
    r = run(member, sbx, f'curl -sS -m 20 --cacert /tmp/test-ca.crt -H "X-Key: $ROTATING" '
                         f'https://api.localhost:{upstream.port}/deleted')
    assert r["exit_code"] == 0, r
    assert upstream.since(mark)[0]["headers"]["X-Key"] == ph


# One kept-alive HTTPS connection through the proxy (http.client with a tunnel): status, body and
# local port of each request.
RULES_CLIENT = r"""
import base64, http.client, json, os, ssl, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
auth = "Basic " + base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
host, port, plan = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
conn = http.client.HTTPSConnection(proxy.hostname, proxy.port, timeout=30, context=ssl.create_default_context())
conn.set_tunnel(host, port, headers={"Proxy-Authorization": auth})
for method, path in plan:
    conn.request(method, path, body=b"x" if method in ("POST", "PUT") else None)
    local = conn.sock.getsockname()[1]
    r = conn.getresponse()
    print(json.dumps({"status": r.status, "body": r.read().decode(errors="replace"), "port": local}), flush=True)
"""


def test_method_and_path_rules_apply_per_request_on_one_intercepted_connection(acme, upstream):
    member = acme["member"]
    rule = {"host": "api.localhost", "methods": ["GET"], "paths": ["/repos/acme/*"]}
    sbx = member.create_sandbox(egress_rules=[rule])
    assert sbx["secrets"] == []
    mark = len(upstream.requests)
    plan = [("GET", "/repos/acme/widget"), ("DELETE", "/repos/acme/widget"), ("POST", "/repos/acme/widget"),
            ("GET", "/repos/other/x"), ("GET", "/repos/acme/again")]
    r = member.exec(sbx["id"], argv=["python3", "-c", RULES_CLIENT, "api.localhost", str(upstream.port),
                                     json.dumps(plan)], env=THROUGH_PROXY, timeout_s=60)
    assert r["exit_code"] == 0, r
    answers = [json.loads(line) for line in r["stdout"].splitlines()]
    assert [a["status"] for a in answers] == [200, 403, 403, 403, 200], answers
    assert len({a["port"] for a in answers}) == 1, answers  # one connection carried them all
    assert 'egress_rules[0] {"host":"api.localhost","methods":["GET"],"paths":["/repos/acme/*"]}' in answers[1]["body"]
    assert [(s["method"], s["path"]) for s in upstream.since(mark)] == [("GET", "/repos/acme/widget"),
                                                                       ("GET", "/repos/acme/again")]


def test_an_upstream_that_does_not_verify_is_never_impersonated(acme, sandbox, bad_upstream):
    mark = len(bad_upstream.requests)
    r = run(acme["member"], sandbox, f'curl -sS -m 20 -H "Authorization: Bearer $OPENAI" '
                                     f'https://bad.localhost:{bad_upstream.port}/')
    assert r["exit_code"] == 35, r  # curl's "SSL connect error": the proxy closed the handshake
    assert bad_upstream.since(mark) == []


SNI_CLIENT = r"""
import base64, os, socket, ssl, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
s = socket.create_connection((proxy.hostname, proxy.port), timeout=20)
s.sendall(f"CONNECT api.localhost:{sys.argv[1]} HTTP/1.1\r\nHost: api.localhost\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
print(head.split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname=sys.argv[2])
    print("handshake ok")
except ssl.SSLError as e:
    print("refused", e.reason)
"""


def test_a_client_whose_sni_names_another_host_is_refused(acme, sandbox, upstream):
    for sni, expected in (("other.localhost", "refused"), ("api.localhost", "handshake ok")):
        r = acme["member"].exec(sandbox["id"], argv=["python3", "-c", SNI_CLIENT, str(upstream.port), sni],
                                env=THROUGH_PROXY, timeout_s=60)
        lines = r["stdout"].splitlines()
        assert lines[0].startswith("HTTP/1.1 200"), r
        assert lines[1].startswith(expected), r


def test_the_audit_chain_counts_injections_without_the_value(daemon, acme, sandbox):
    deadline = time.time() + 30
    injected = {}
    while time.time() < deadline:
        events = acme["admin"].get("/v1/audit?action=egress&limit=1000").json()["items"]
        injected = {}
        for e in events:
            for name, n in (e["details"].get("injected") or {}).items():
                injected[name] = injected.get(name, 0) + n
        if injected.get("openai", 0) >= 4 and injected.get("search", 0) >= 1 and injected.get("deploy", 0) >= 1:
            break
        time.sleep(0.5)
    assert injected.get("openai", 0) >= 4 and injected.get("search", 0) >= 1 and injected.get("deploy", 0) >= 1, injected
    export = acme["admin"].get("/v1/audit?format=jsonl&limit=100000").body
    for v in VALUES.values():
        assert v.encode() not in export
    # The database holds each value sealed only (main file, WAL).
    data = b""
    for suffix in ("", "-wal"):
        path = os.path.join(daemon.state_dir, "sandfort.db" + suffix)
        if os.path.exists(path):
            with open(path, "rb") as f:
                data += f.read()
    for v in VALUES.values():
        assert v.encode() not in data
    with open(daemon.log_path) as f:
        log = f.read()
    for v in VALUES.values():
        assert v not in log


def test_deleting_the_sandbox_ends_its_attachments(acme):
    member = acme["member"]
    sbx = member.create_sandbox(secrets=["openai"], egress_allowlist=["api.localhost"])
    assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    assert member.get(f"/v1/sandboxes/{sbx['id']}").status == 404


def test_an_intercepted_connection_goes_through_the_upstream_proxy(pki, upstream):
    from test_egress_rules import ConnectProxy

    proxy = ConnectProxy("corp", "s3cret-pass")
    directory = tempfile.mkdtemp(prefix="sf-pw-", dir="/tmp")
    password = os.path.join(directory, "upstream-proxy-password")
    fd = os.open(password, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("s3cret-pass\n")
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8, ::1/128", "upstream_proxy": f"127.0.0.1:{proxy.port}",
                           "upstream_proxy_username": "corp", "upstream_proxy_password_file": password},
                "secrets": {"upstream_ca_file": os.path.join(pki, "ca.crt")}}).start()
    try:
        org = new_org(d, "inject-upstream-proxy")
        value = "sk-via-corp-" + uuid.uuid4().hex
        assert org["admin"].post("/v1/secrets", {"name": "corp", "value": value, "hosts": ["api.localhost"],
                                                 "header": "Authorization", "format": "Bearer {value}"}).status == 201
        sbx = org["member"].create_sandbox(secrets=["corp"], egress_allowlist=["api.localhost"])
        mark = len(upstream.requests)
        r = run(org["member"], sbx, f'curl -sS -m 20 -H "Authorization: Bearer $CORP" '
                                    f'https://api.localhost:{upstream.port}/via-corp')
        assert r["exit_code"] == 0, r
        assert value not in r["stdout"]
        assert upstream.since(mark)[0]["headers"]["Authorization"] == "Bearer " + value
        # The organization's proxy carried it (by name, with its credential): TLS to the real host
        # inside its tunnel, so it saw neither the value nor the placeholder.
        assert proxy.connects == [(f"api.localhost:{upstream.port}", True)], proxy.connects
    finally:
        d.stop()
        d.cleanup()
        proxy.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_the_python_sdk_attaches_secrets_and_shows_them(daemon, acme):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python"))
    from sandfort_sdk import Client as SdkClient

    sdk = SdkClient(f"http://127.0.0.1:{daemon.port}", acme["member"].key, timeout=120)
    sbx = sdk.create_sandbox(secrets=["openai", {"name": "search", "env": "SEARCH_API_KEY"}])
    try:
        assert [(a["name"], a["env"]) for a in sbx.info.secrets] == [("openai", "OPENAI"), ("search", "SEARCH_API_KEY")]
        assert all(a["placeholder"].startswith("sfph_") for a in sbx.info.secrets)
    finally:
        assert acme["member"].delete(f"/v1/sandboxes/{sbx.info.id}").status == 204
