"""Attack: a sandbox's container dies (root inside kills the agent) or is removed behind
sandfortd's back, Docker gives its address to another container, and the dead sandbox's preview
URL and proxy credential now speak for someone else's container. Or a credential is simply copied
out of one sandbox and used from another.

Staged for real: a public preview served from sandbox A, root in A kills PID 1's child (the
agent), then a container of "another tenant" is started by the Docker API on A's old address on
the sandbox network, serving its own private page and holding A's proxy credential. sandfortd must
see the death on Docker's event stream within a second (stopped, exit code in error_message,
address cleared), the preview must never answer 200 from the newcomer, and the proxy must refuse
A's credential from the newcomer's (= A's old) address. A credential copied from A into a live
sandbox B of another organization must be refused too (the proxy binds it to A's current
address). The upstream is a server on the host's loopback, allowed by the operator's
egress.allowed_ranges as in test_egress.py."""

import http.client
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandfort_harness import IMAGE, Daemon, HostUpstream, docker, docker_container  # noqa: E402

# curl bypasses the proxy for localhost because of NO_PROXY; these tests want the proxy.
THROUGH_PROXY = {"NO_PROXY": "", "no_proxy": ""}


@pytest.fixture(scope="module")
def upstream():
    u = HostUpstream()
    yield u
    u.close()


@pytest.fixture(scope="module")
def attack_daemon():
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8"}}).start()
    yield d
    d.stop_and_cleanup()


def new_member(daemon, name):
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": name})
    assert r.status == 201, r
    r = admin.post(f"/v1/orgs/{r.json()['id']}/api-keys", {"name": "m", "role": "member"})
    assert r.status == 201, r
    return daemon.client(r.json()["key"])


@pytest.fixture(scope="module")
def victim(attack_daemon):
    return new_member(attack_daemon, "victim-org")


@pytest.fixture(scope="module")
def attacker(attack_daemon):
    return new_member(attack_daemon, "attacker-org")


def preview(daemon, sandbox_id, port, path="/"):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.preview_port, timeout=10)
    conn.request("GET", path, headers={"Host": f"{port}-{sandbox_id}.preview.localhost:{daemon.preview_port}"})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def serve_in(member, sbx, text, port=8080):
    member.exec(sbx["id"], command=f"mkdir -p /srv && echo '{text}' > /srv/index.html")
    r = member.post(f"/v1/sandboxes/{sbx['id']}/commands",
                    {"command": f"cd /srv && python3 -m http.server {port}"})
    assert r.status == 201, r
    deadline = time.time() + 20
    while time.time() < deadline:
        items = member.get(f"/v1/sandboxes/{sbx['id']}/ports").json()["items"]
        if any(p.get("port") == port for p in items):
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port} in {sbx['id']}")


def credential_of(member, sbx):
    proxy = member.exec(sbx["id"], command="echo -n $HTTP_PROXY")["stdout"]
    assert proxy.startswith(f"http://{sbx['id']}:"), proxy
    return proxy


def proxied_status(member, sbx, proxy, url):
    """The HTTP status curl in sbx gets through the proxy with credential `proxy`."""
    r = member.exec(sbx["id"], command=f"curl -sS -m 10 -o /dev/null -w '%{{http_code}}' --proxy {proxy} {url}",
                    env=THROUGH_PROXY, timeout_s=30)
    return r["stdout"]


def wait_state(member, sandbox_id, state, within):
    """Polls GET until the sandbox is in state; returns (seconds taken, sandbox) or fails."""
    t0 = time.monotonic()
    while True:
        sbx = member.get(f"/v1/sandboxes/{sandbox_id}").json()
        if sbx["state"] == state:
            return time.monotonic() - t0, sbx
        if time.monotonic() - t0 > within:
            raise AssertionError(f"{sandbox_id} is still {sbx['state']} after {within} s, not {state}: {sbx}")
        time.sleep(0.01)


def start_impostor(daemon, address, page):
    """Another tenant's container on the sandbox network at `address`, serving `page` on 8080."""
    net = daemon.network["name"]
    script = f"mkdir -p /srv && echo '{page}' > /srv/index.html && cd /srv && exec python3 -m http.server 8080"
    status, made = docker("POST", "/containers/create", {
        "Image": IMAGE, "Entrypoint": ["sh", "-c", script],
        "Labels": {"io.sandfort.test": "dead-container-impostor"},
        "HostConfig": {"NetworkMode": net, "Init": True},
        "NetworkingConfig": {"EndpointsConfig": {net: {"IPAMConfig": {"IPv4Address": address}}}}})
    assert status == 201, made
    status, body = docker("POST", f"/containers/{made['Id']}/start")
    assert status == 204, body
    # Up when its server answers on its own loopback.
    deadline = time.time() + 20
    while time.time() < deadline:
        out = subprocess.run(["docker", "exec", made["Id"], "curl", "-s", "-m", "2", "http://127.0.0.1:8080/"],
                             capture_output=True, text=True)
        if page in out.stdout:
            return made["Id"]
        time.sleep(0.1)
    raise AssertionError("the impostor's server did not come up")


def test_killed_agent_stops_the_sandbox_and_its_address_serves_nobody(attack_daemon, victim, upstream):
    sbx = victim.create_sandbox(public_preview=True, egress_allowlist=["localhost"])
    serve_in(victim, sbx, "victim public page")
    status, body = preview(attack_daemon, sbx["id"], 8080)
    assert status == 200 and b"victim public page" in body
    proxy = credential_of(victim, sbx)
    url = f"http://localhost:{upstream.port}/"
    assert proxied_status(victim, sbx, proxy, url) == "200"
    address = docker_container(sbx["id"])["NetworkSettings"]["Networks"][attack_daemon.network["name"]]["IPAddress"]
    assert address

    # Root inside the sandbox kills the agent (PID 1's child): tini exits with it, the container dies.
    t0 = time.monotonic()
    victim.post(f"/v1/sandboxes/{sbx['id']}/process/exec",
                {"command": "kill -9 $(cat /proc/1/task/1/children)"})
    died, seen = wait_state(victim, sbx["id"], "stopped", within=1.0)
    print(f"\nkill → stopped in the API: {(time.monotonic() - t0) * 1000:.0f} ms (poll: {died * 1000:.0f} ms)")
    assert seen["error_message"] == "the container exited with code 137", seen
    assert not docker_container(sbx["id"])["State"]["Running"]
    status, _ = preview(attack_daemon, sbx["id"], 8080)
    assert status in (503, 404), status

    # Docker hands the address to a container of another tenant with a private page on the same port.
    impostor = start_impostor(attack_daemon, address, "private page of another tenant")
    try:
        for _ in range(20):
            status, body = preview(attack_daemon, sbx["id"], 8080)
            assert status in (503, 404), (status, body)
            assert b"private page of another tenant" not in body
            time.sleep(0.05)
        # The dead sandbox's credential, used from its old address: refused.
        before = len(upstream.requests)
        out = subprocess.run(["docker", "exec", impostor, "curl", "-sS", "-m", "10", "-o", "/dev/null",
                              "-w", "%{http_code}", "--proxy", proxy, url], capture_output=True, text=True)
        assert out.stdout == "407", (out.stdout, out.stderr)
        assert len(upstream.requests) == before
    finally:
        docker("DELETE", f"/containers/{impostor}?force=true")
    # Started again, it is reachable again under its own name, credential included.
    r = victim.post(f"/v1/sandboxes/{sbx['id']}/start")
    assert r.status == 200 and r.json()["state"] == "started", r
    assert proxied_status(victim, sbx, credential_of(victim, sbx), url) == "200"
    victim.delete(f"/v1/sandboxes/{sbx['id']}")


def test_container_removed_behind_the_daemons_back_is_error_within_a_second(attack_daemon, victim):
    sbx = victim.create_sandbox(public_preview=True)
    container = docker_container(sbx["id"])["Id"]
    t0 = time.monotonic()
    status, body = docker("DELETE", f"/containers/{container}?force=true")
    assert status == 204, body
    _, seen = wait_state(victim, sbx["id"], "error", within=1.0)
    print(f"\ndocker rm -f → error in the API: {(time.monotonic() - t0) * 1000:.0f} ms")
    assert seen["error_message"] == "the sandbox's container was removed outside sandfortd", seen
    status, _ = preview(attack_daemon, sbx["id"], 8080)
    assert status in (503, 404), status
    assert victim.delete(f"/v1/sandboxes/{sbx['id']}").status == 204


def test_credential_copied_into_another_sandbox_is_refused(victim, attacker, upstream):
    a = victim.create_sandbox(egress_allowlist=["localhost"])
    b = attacker.create_sandbox(egress_allowlist=["localhost"])
    url = f"http://localhost:{upstream.port}/"
    stolen = credential_of(victim, a)
    assert proxied_status(victim, a, stolen, url) == "200"  # good where it belongs
    assert proxied_status(attacker, b, credential_of(attacker, b), url) == "200"
    before = len(upstream.requests)
    # Root in B holds A's secret (leaked, or read while A's agent was B's): the proxy says 407.
    assert proxied_status(attacker, b, stolen, url) == "407"
    r = attacker.exec(b["id"], command=f"curl -sS -m 10 -p --proxy {stolen} {url}", env=THROUGH_PROXY, timeout_s=30)
    assert r["exit_code"] != 0 and "407" in r["stderr"], r
    assert len(upstream.requests) == before
    victim.delete(f"/v1/sandboxes/{a['id']}")
    attacker.delete(f"/v1/sandboxes/{b['id']}")
