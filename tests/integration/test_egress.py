"""The egress proxy, driven from inside real sandboxes with curl and raw sockets.

The upstream is a test server on the host's loopback. The daemon of this module allows
127.0.0.0/8 through the operator's config (egress.allowed_ranges), never by weakening the
defaults; the forbidden-address cases run on the session's default daemon, where loopback is
refused whatever name or spelling reaches it."""

import time

import pytest

from sandfort_harness import Daemon, HostUpstream


@pytest.fixture(scope="module")
def upstream():
    u = HostUpstream()
    yield u
    u.close()


@pytest.fixture(scope="module")
def egress_daemon():
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8", "max_tunnels_per_sandbox": 3}}).start()
    yield d
    d.stop()
    d.cleanup()


@pytest.fixture(scope="module")
def egress_member(egress_daemon):
    admin = egress_daemon.admin()
    org = admin.post("/v1/orgs", {"name": "egress"}).json()
    key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "m", "role": "member"}).json()["key"]
    return egress_daemon.client(key)


@pytest.fixture(scope="module")
def allowed(egress_member):
    sbx = egress_member.create_sandbox(egress_allowlist=["localhost"])
    yield sbx
    egress_member.delete(f"/v1/sandboxes/{sbx['id']}")


# curl bypasses the proxy for localhost because of NO_PROXY; these tests want the proxy.
THROUGH_PROXY = {"NO_PROXY": "", "no_proxy": ""}


def curl(member, sbx, args, **kw):
    return member.exec(sbx["id"], command="curl -sS -m 10 " + args, env=THROUGH_PROXY, timeout_s=30, **kw)


def test_allowed_host_through_connect(egress_member, allowed, upstream):
    before = upstream.connections
    r = curl(egress_member, allowed, f"-p http://localhost:{upstream.port}/tunnel")
    assert r["exit_code"] == 0, r
    assert r["stdout"] == "upstream says hi\n"
    assert upstream.connections == before + 1
    path, headers = upstream.requests[-1]
    assert path == "/tunnel"
    assert not any(h.lower().startswith("proxy-") for h in headers)


def test_allowed_host_through_plain_http(egress_member, allowed, upstream):
    r = curl(egress_member, allowed, f"http://localhost:{upstream.port}/plain?x=1")
    assert r["exit_code"] == 0, r
    assert r["stdout"] == "upstream says hi\n"
    path, headers = upstream.requests[-1]
    assert path == "/plain?x=1"  # origin-form upstream
    assert not any(h.lower().startswith("proxy-") for h in headers), headers


def test_host_not_on_the_allowlist_is_403_and_never_dialled(egress_member, allowed, upstream):
    before = upstream.connections
    for url in (f"-p http://127.0.0.1:{upstream.port}/", "https://other.example.net/"):
        r = curl(egress_member, allowed, url)
        assert r["exit_code"] == 56 and "CONNECT tunnel failed, response 403" in r["stderr"], r
    r = curl(egress_member, allowed, f"-o /dev/null -w '%{{http_code}}' http://127.0.0.1:{upstream.port}/")
    assert r["stdout"] == "403"
    assert upstream.connections == before


def test_missing_wrong_and_deleted_credentials_are_407(egress_daemon, egress_member, allowed, upstream):
    url = f"http://localhost:{upstream.port}/"
    gw = f"{egress_daemon.gateway}:3128"
    before = upstream.connections
    r = curl(egress_member, allowed, f"-p --proxy http://{gw} {url}")
    assert "407" in r["stderr"], r
    r = curl(egress_member, allowed, f"-p --proxy http://{allowed['id']}:wrong@{gw} {url}")
    assert "407" in r["stderr"], r
    r = curl(egress_member, allowed, f"-o /dev/null -w '%{{http_code}}' --proxy http://sbx:wrong@{gw} {url}")
    assert r["stdout"] == "407"
    r = curl(egress_member, allowed, f"-D - -o /dev/null --proxy http://sbx:wrong@{gw} {url}")
    assert 'proxy-authenticate: basic realm="sandfort"' in r["stdout"].lower()

    # A real credential works only from its own sandbox's address (tests/integration/attacks/
    # test_dead_container.py), and dies with the sandbox.
    other = egress_member.create_sandbox(egress_allowlist=["localhost"])
    stolen = egress_member.exec(other["id"], command="echo -n $HTTP_PROXY")["stdout"]
    assert stolen.startswith(f"http://{other['id']}:")
    r = curl(egress_member, other, f"-o /dev/null -w '%{{http_code}}' --proxy {stolen} {url}")
    assert r["stdout"] == "200"
    r = curl(egress_member, allowed, f"-o /dev/null -w '%{{http_code}}' --proxy {stolen} {url}")
    assert r["stdout"] == "407"
    egress_member.delete(f"/v1/sandboxes/{other['id']}")
    r = curl(egress_member, allowed, f"-o /dev/null -w '%{{http_code}}' --proxy {stolen} {url}")
    assert r["stdout"] == "407"
    assert upstream.connections == before + 1


def test_patch_changes_the_allowlist_for_the_next_connection(egress_member, upstream):
    sbx = egress_member.create_sandbox(egress_allowlist=["localhost"])
    try:
        probe = f"-o /dev/null -w '%{{http_code}}' http://localhost:{upstream.port}/"
        assert curl(egress_member, sbx, probe)["stdout"] == "200"
        r = egress_member.request("PATCH", f"/v1/sandboxes/{sbx['id']}", body={"egress_allowlist": []})
        assert r.status == 200 and r.json()["egress_allowlist"] == []
        assert curl(egress_member, sbx, probe)["stdout"] == "403"
        r = egress_member.request("PATCH", f"/v1/sandboxes/{sbx['id']}", body={"egress_allowlist": ["*"]})
        assert r.status == 200
        assert curl(egress_member, sbx, probe)["stdout"] == "200"
        r = egress_member.request("PATCH", f"/v1/sandboxes/{sbx['id']}", body={"egress_allowlist": ["bad host"]})
        assert r.status == 400
        r = egress_member.request("PATCH", f"/v1/sandboxes/{sbx['id']}", body={"snapshot": "x"})
        assert r.status == 400
    finally:
        egress_member.delete(f"/v1/sandboxes/{sbx['id']}")


RAW = r"""
import base64, os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
def ask(head):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
    s.sendall(head.replace("AUTH", auth).encode("latin-1"))
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    return data.split(b"\r\n", 1)[0].decode()
for head in sys.stdin.read().split("\n====\n"):
    print(ask(head.replace("\\r\\n", "\r\n").replace("<CR>", "\r")))
"""


def raw_heads(member, sbx, heads):
    body = "\n====\n".join(heads)
    r = member.exec(sbx["id"], argv=["python3", "-c", RAW], stdin=body, env=THROUGH_PROXY, timeout_s=60)
    assert r["exit_code"] == 0, r
    return r["stdout"].splitlines()


def test_malformed_requests_are_400_and_the_proxy_keeps_serving(egress_daemon, egress_member, allowed, upstream):
    p = upstream.port
    auth = "Proxy-Authorization: Basic AUTH\\r\\n"
    heads = [
        f"CONNECT localhost:{p} HTTP/1.1\\r\\nHost: x\\r\\nX-Evil: a<CR>Injected: b\\r\\n{auth}\\r\\n",
        f"CONNECT localhost:0 HTTP/1.1\\r\\n{auth}\\r\\n",
        f"CONNECT localhost:65536 HTTP/1.1\\r\\n{auth}\\r\\n",
        f"CONNECT localhost:http HTTP/1.1\\r\\n{auth}\\r\\n",
        f"CONNECT localhost HTTP/1.1\\r\\n{auth}\\r\\n",
        f"GET /relative HTTP/1.1\\r\\nHost: localhost\\r\\n{auth}\\r\\n",
        f"GET http://localhost:{p}/ HTTP/1.1\\r\\nX-Big: {'a' * 20000}\\r\\n{auth}\\r\\n",
        "NONSENSE\\r\\n\\r\\n",
        f"CONNECT localhost:{p} HTTP/1.1\\r\\n{auth}\\r\\n",
    ]
    lines = raw_heads(egress_member, allowed, heads)
    assert len(lines) == len(heads), lines
    for line in lines[:-1]:
        assert line.startswith("HTTP/1.1 400"), lines
    assert lines[-1].startswith("HTTP/1.1 200"), lines
    assert egress_daemon.proc.poll() is None


def test_tunnels_beyond_the_limit_are_429_and_other_sandboxes_unaffected(egress_member, allowed, upstream):
    hold = r"""
import base64, os, socket, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
held = []
for i in range(4):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
    s.sendall(f"CONNECT localhost:PORT HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
    print(s.recv(4096).split(b"\r\n", 1)[0].decode(), flush=True)
    held.append(s)
time.sleep(60)
""".replace("PORT", str(upstream.port))
    other = egress_member.create_sandbox(egress_allowlist=["localhost"])
    try:
        cmd = egress_member.post(f"/v1/sandboxes/{allowed['id']}/commands",
                                 {"command": "python3 -c \"$HOLD\"", "env": {"HOLD": hold, **THROUGH_PROXY}})
        assert cmd.status == 201, cmd
        cmd_id = cmd.json()["id"]
        deadline = time.time() + 20
        logs = ""
        while time.time() < deadline:
            logs = egress_member.get(f"/v1/sandboxes/{allowed['id']}/commands/{cmd_id}/logs").json()["stdout"]
            if len(logs.splitlines()) == 4:
                break
            time.sleep(0.1)
        statuses = [line.split()[1] for line in logs.splitlines()]
        assert statuses == ["200", "200", "200", "429"], logs
        # While the first sandbox holds its three tunnels, another one gets through.
        r = curl(egress_member, other, f"-p -o /dev/null -w '%{{http_code}}' http://localhost:{upstream.port}/")
        assert r["stdout"] == "200"
        egress_member.post(f"/v1/sandboxes/{allowed['id']}/commands/{cmd_id}/kill", {"signal": "KILL"})
    finally:
        egress_member.delete(f"/v1/sandboxes/{other['id']}")


def test_every_decision_is_one_log_line_without_the_credential(egress_daemon, egress_member, allowed, upstream):
    secret = egress_member.exec(allowed["id"], command="echo -n $HTTP_PROXY")["stdout"].split(":")[2].split("@")[0]
    curl(egress_member, allowed, f"-p -o /dev/null http://localhost:{upstream.port}/logged")
    curl(egress_member, allowed, f"-o /dev/null http://127.0.0.1:{upstream.port}/denied")
    with open(egress_daemon.log_path) as f:
        log = f.read()
    assert secret not in log
    lines = [line for line in log.splitlines() if "egress" in line and allowed["id"] in line]
    assert any("decision=allow" in line and "bytes_in=" in line and "duration_ms=" in line for line in lines), lines
    assert any("decision=deny" in line and "host=127.0.0.1" in line for line in lines), lines


# --- on the default daemon: no operator-allowed ranges -----------------------------------


def test_forbidden_addresses_are_403_whatever_the_spelling(member, upstream):
    sbx = member.create_sandbox(egress_allowlist=["*"])
    try:
        before = upstream.connections
        p = upstream.port
        targets = ["localhost", "127.0.0.1", "127.1", "0x7f.1", "2130706433", "017700000001", "[::1]",
                   "[::ffff:127.0.0.1]", "169.254.169.254", "10.0.0.1", "100.64.0.1", "0.0.0.0"]
        for host in targets:
            for mode in ("-p ", ""):
                r = member.exec(sbx["id"], command=f"curl -sS -m 10 -o /dev/null -w '%{{http_code}}' {mode}http://{host}:{p}/",
                                env=THROUGH_PROXY, timeout_s=30)
                assert r["stdout"] == "403" or "403" in r["stderr"], (host, mode, r)
        assert upstream.connections == before
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_empty_allowlist_means_no_egress(member, sandbox, upstream):
    r = member.exec(sandbox["id"], command="curl -sS -m 10 -o /dev/null -w '%{http_code}' http://example.com/",
                    env=THROUGH_PROXY, timeout_s=30)
    assert r["stdout"] == "403", r


def test_metrics_count_egress_and_resources(egress_member, upstream):
    sbx = egress_member.create_sandbox(egress_allowlist=["localhost"], resources={"memory_mb": 256})
    try:
        r = curl(egress_member, sbx, f"-p -o /dev/null http://localhost:{upstream.port}/metered")
        assert r["exit_code"] == 0, r
        curl(egress_member, sbx, f"-p -o /dev/null http://127.0.0.1:{upstream.port}/denied")
        m = egress_member.get(f"/v1/sandboxes/{sbx['id']}/metrics").json()
        assert m["memory_limit_bytes"] == 256 << 20
        assert 0 < m["memory_bytes"] < m["memory_limit_bytes"]
        assert m["pids"] >= 1
        assert m["cpu_percent"] >= 0
        assert m["egress_bytes_in"] > len("upstream says hi\n")
        assert m["egress_bytes_out"] > 0
        assert m["egress_allowed"] == 1 and m["egress_denied"] == 1, m
    finally:
        egress_member.delete(f"/v1/sandboxes/{sbx['id']}")
