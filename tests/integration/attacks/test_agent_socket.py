"""Attack: root inside sandbox A rewrites the door to its own agent.

/run/sandfort/agent.sock is the socket sandfortd talks to for everything but exec's start: root
in A may replace it with a link (to another tenant's socket, to the host's docker.sock) or with a
server of its own that answers garbage, never ends, sends a gigantic header or says nothing.
Staged for real inside a real sandbox: the link to tenant B's socket at the path where it lived
on the host before (the attack of issue 9 that let A's key run commands in B), a link to
docker.sock, and fake agents in python bound where the agent's socket was. A's key must reach
neither B nor Docker, the attempt is logged as an attack, and the daemon stays healthy with
bounded memory whatever the fake agent does."""

import http.client
import json
import os
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandfort_harness import Daemon, rss_kib  # noqa: E402


def org_client(daemon, role="member"):
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": "attack-" + uuid.uuid4().hex[:8]})
    assert r.status == 201, r
    r = admin.post(f"/v1/orgs/{r.json()['id']}/api-keys", {"name": "k", "role": role})
    assert r.status == 201, r
    return daemon.client(r.json()["key"])


def as_root_in(client, sid, script):
    """Runs a shell script as root inside the sandbox (the agent still answers at this point)."""
    r = client.exec(sid, command=script)
    assert r["exit_code"] == 0, r
    return r


def test_a_link_to_another_tenants_socket_reaches_nothing(strict):
    daemon = strict
    a_client, b_client = org_client(daemon), org_client(daemon)
    a = a_client.create_sandbox()
    b = b_client.create_sandbox()
    try:
        as_root_in(b_client, b["id"], "echo B-SECRET > /tmp/secret")
        # Where B's socket lived on the host before: /proc/self/mountinfo used to show the path.
        old_b_path = os.path.join(daemon.state_dir, "sandboxes", b["id"], "run", "agent.sock")
        as_root_in(a_client, a["id"], f"rm -f /run/sandfort/agent.sock; ln -s {old_b_path} /run/sandfort/agent.sock")
        # A call may still travel over a connection the daemon kept open to A's own agent (it
        # was verified when opened, and stays bound to that agent): A's own answer, never B's.
        r = a_client.post(f"/v1/sandboxes/{a['id']}/process/exec", {"command": "cat /tmp/secret"})
        assert r.status == 503 or (r.status == 200 and r.json()["exit_code"] != 0), r
        assert b"B-SECRET" not in r.body
        r = a_client.get(f"/v1/sandboxes/{a['id']}/files?path=/tmp/secret")
        assert r.status in (503, 404) and b"B-SECRET" not in r.body, r
        # Once those have expired (agent_keepalive_s), every call opens a new connection, and the
        # link is found.
        time.sleep(1.2)
        r = a_client.get(f"/v1/sandboxes/{a['id']}/files?path=/tmp/secret")
        assert r.status == 503 and b"B-SECRET" not in r.body, r
        r = a_client.get(f"/v1/sandboxes/{a['id']}/sessions")
        assert r.status == 503, r
        attacks = [json.loads(line) for line in daemon.log().splitlines()
                   if line.startswith("{") and "attack" in line and a["id"] in line]
        assert attacks, daemon.log()
        # B is untouched and still answers its own key.
        assert b_client.exec(b["id"], command="cat /tmp/secret")["stdout"] == "B-SECRET\n"
    finally:
        a_client.delete(f"/v1/sandboxes/{a['id']}")
        b_client.delete(f"/v1/sandboxes/{b['id']}")


@pytest.mark.parametrize("target", ["/var/run/docker.sock", "/proc/1/root/run/sandfort/agent.sock"])
def test_links_to_docker_or_another_root_are_refused(strict, target):
    client = org_client(strict)
    sbx = client.create_sandbox()
    try:
        as_root_in(client, sbx["id"], f"rm -f /run/sandfort/agent.sock; ln -s {target} /run/sandfort/agent.sock")
        time.sleep(1.2)  # the connections kept to the real agent expire (agent_keepalive_s)
        r = client.get(f"/v1/sandboxes/{sbx['id']}/files/list?path=/")
        assert r.status == 503, r
        assert b"Containers" not in r.body and b"Docker" not in r.body
    finally:
        client.delete(f"/v1/sandboxes/{sbx['id']}")


# A fake agent in python, started detached by the real agent's last exec: it takes the socket's
# place and behaves as `mode` says for every connection.
FAKE_AGENT = r'''
import os, socket, sys, threading, time
mode = sys.argv[1]
path = "/run/sandfort/agent.sock"
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(64)
def serve(c):
    try:
        c.settimeout(120)
        c.recv(65536)
        if mode == "garbage":
            c.sendall(os.urandom(1 << 20))
        elif mode == "endless":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            piece = b"%x\r\n%s\r\n" % (65536, b"a" * 65536)
            while True:
                c.sendall(piece)
        elif mode == "lying_length":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n")
            while True:
                c.sendall(b"a" * 65536)
        elif mode == "huge_header":
            c.sendall(b"HTTP/1.1 200 OK\r\nX-Huge: ")
            while True:
                c.sendall(b"a" * 65536)
        elif mode == "silent":
            time.sleep(120)
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


@pytest.fixture(scope="module")
def strict():
    """A daemon whose patience with agents is short enough to test: forwarded answers must start
    within 3 s and keep moving; a connection to an agent is kept idle for 1 s."""
    d = Daemon({"agent_idle_timeout_s": 3, "exec_default_timeout_s": 2, "exec_max_timeout_s": 5,
                "agent_keepalive_s": 1}).start()
    yield d
    d.stop()
    d.cleanup()


@pytest.mark.parametrize("mode", ["garbage", "endless", "lying_length", "huge_header", "silent"])
def test_a_hostile_agent_leaves_the_daemon_healthy(strict, mode):
    client = org_client(strict)
    sbx = client.create_sandbox()
    sid = sbx["id"]
    try:
        r = client.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/fake_agent.py", raw=FAKE_AGENT.encode())
        assert r.status in (200, 201, 204), r
        as_root_in(client, sid, f"setsid python3 /tmp/fake_agent.py {mode} </dev/null >/dev/null 2>&1 & sleep 0.5")
        # The connections the daemon kept to the real agent expire (agent_keepalive_s): from now
        # on every call opens a new one, and the fake agent answers it.
        time.sleep(1.2)
        pid = strict.proc.pid
        before = rss_kib(pid)
        peak = before
        for _ in range(2):
            t = time.monotonic()
            r = client.post(f"/v1/sandboxes/{sid}/process/exec", {"command": "true", "timeout_s": 1})
            assert r.status in (502, 503), r
            assert time.monotonic() - t < 20
            peak = max(peak, rss_kib(pid))
            # A forwarded call: the answer streams to us, so the daemon holds only pieces of it.
            conn = http.client.HTTPConnection("127.0.0.1", strict.port, timeout=30)
            conn.request("GET", f"/v1/sandboxes/{sid}/files?path=/etc/hostname",
                         headers={"Authorization": "Bearer " + client.key})
            res = conn.getresponse()
            got = 0
            try:
                while got < (32 << 20):
                    chunk = res.read(1 << 20)
                    if not chunk:
                        break
                    got += len(chunk)
            except (OSError, http.client.HTTPException):
                pass
            conn.close()
            peak = max(peak, rss_kib(pid))
            assert strict.client().get("/healthz").status == 200
        # Bounded: nothing of what the fake agent sent piles up in the daemon.
        assert peak - before < 64 * 1024, (mode, before, peak)
        # The daemon still serves everyone else.
        other = client.create_sandbox()
        assert client.exec(other["id"], command="echo fine")["stdout"] == "fine\n"
        client.delete(f"/v1/sandboxes/{other['id']}")
    finally:
        client.delete(f"/v1/sandboxes/{sid}")
