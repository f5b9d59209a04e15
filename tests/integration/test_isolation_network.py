"""Isolation proofs from inside real sandboxes on the default configuration: the host, other
sandboxes and the metadata address are out of reach, DNS resolves nothing, a fork bomb and a
memory hog stay inside their limits, and the only thing that answers is the egress proxy."""

import ipaddress
import socket
import subprocess
import threading
import time

import pytest

from sandfort_harness import docker, docker_container, firewall_rules


class CountingServer:
    """A TCP server on every host address that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi")
            conn.close()

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def host_server():
    s = CountingServer()
    yield s
    s.close()


def host_addresses():
    """Every IPv4 address of this host's interfaces except loopback: docker0, the sandbox
    bridges, the machine's own."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    addrs = []
    for line in out.splitlines():
        parts = line.split()
        iface, addr = parts[1], parts[3].split("/")[0]
        if iface != "lo":
            addrs.append((iface, addr))
    return addrs


def sh(member, sbx, command, **kw):
    return member.exec(sbx["id"], command=command, **kw)


PROBE = """
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket()
s.settimeout(3)
try:
    s.connect((host, port))
    print("connected")
except Exception as e:
    print("refused", type(e).__name__, e)
"""


def probe(member, sbx, host, port):
    r = member.exec(sbx["id"], argv=["python3", "-c", PROBE, host, str(port)], timeout_s=30)
    return r["stdout"].strip()


def test_sandbox_sits_on_its_internal_network(daemon, sandbox):
    c = docker_container(sandbox["id"])
    net = daemon.network["name"]
    assert c["HostConfig"]["NetworkMode"] == net
    assert list(c["NetworkSettings"]["Networks"]) == [net]
    status, info = docker("GET", f"/networks/{net}")
    assert status == 200
    assert info["Internal"] is True
    assert info["Options"]["com.docker.network.bridge.enable_icc"] == "false"
    assert info["Labels"]["io.sandfort.network"] == "1"


def test_host_firewall_rules_are_installed(daemon):
    rules = firewall_rules(daemon.network["bridge"])
    bridge = daemon.network["bridge"]
    assert f"-A INPUT -i {bridge} -j SANDFORT-IN-{bridge}" in rules, rules
    assert f"-A FORWARD -i {bridge} -j SANDFORT-FW-{bridge}" in rules, rules
    assert any("--dport 3128" in r and "ACCEPT" in r for r in rules), rules


def test_the_transcript_environment(member, sandbox):
    r = sh(member, sandbox, "env | grep SANDFORT_; echo rc=$?")
    assert r["stdout"].strip() == "rc=1"
    r = sh(member, sandbox, "ls /var/run/docker.sock")
    assert "No such file" in r["stderr"]
    r = sh(member, sandbox, "echo $HTTPS_PROXY")
    assert r["stdout"].startswith(f"http://{sandbox['id']}:")


def test_metadata_address_is_unreachable(member, sandbox):
    r = sh(member, sandbox, "curl -sS -m 3 --noproxy '*' http://169.254.169.254/latest/meta-data/", timeout_s=30)
    assert r["exit_code"] != 0, r
    assert probe(member, sandbox, "169.254.169.254", 80).startswith("refused")


def test_dns_resolves_nothing(member, sandbox):
    # And fails soon: one attempt of 1 s per query, not glibc's 2 of 5 s (a lookup took 20 s).
    conf = sh(member, sandbox, "cat /etc/resolv.conf")["stdout"]
    options = [w for line in conf.splitlines() if line.startswith("options") for w in line.split()[1:]]
    assert "timeout:1" in options and "attempts:1" in options, conf
    r = sh(member, sandbox, "getent hosts example.com; echo rc=$?")
    assert r["stdout"].strip().endswith("rc=2"), r
    r = member.exec(sandbox["id"], argv=["python3", "-c", "import socket; socket.getaddrinfo('pypi.org', 443)"])
    assert r["exit_code"] != 0 and "gaierror" in r["stderr"], r


def test_host_addresses_answer_nothing_but_the_proxy(daemon, member, sandbox, host_server):
    """A server listening on every host address is out of reach through every one of them,
    and so are the API and the preview listener; the proxy port answers."""
    addrs = host_addresses()
    assert any(addr == daemon.gateway for _, addr in addrs)
    for iface, addr in addrs:
        for port in (host_server.port, daemon.port, daemon.preview_port, 22):
            assert probe(member, sandbox, addr, port).startswith("refused"), (iface, addr, port)
    assert host_server.accepted == 0
    assert probe(member, sandbox, daemon.gateway, 3128) == "connected"


def test_direct_connections_without_the_proxy_fail(member, sandbox, host_server):
    r = sh(member, sandbox, f"curl -sS -m 3 --noproxy '*' http://{host_addresses()[0][1]}:{host_server.port}/",
           timeout_s=30)
    assert r["exit_code"] != 0
    assert host_server.accepted == 0


def test_sandboxes_cannot_reach_each_other(daemon, member, sandbox):
    other = member.create_sandbox()
    try:
        srv = member.post(f"/v1/sandboxes/{other['id']}/commands", {"command": "python3 -m http.server 8000"})
        assert srv.status == 201
        deadline = time.time() + 20
        while time.time() < deadline:
            r = sh(member, other, "curl -s -o /dev/null -w '%{http_code}' localhost:8000/")
            if r["stdout"] == "200":
                break
            time.sleep(0.2)
        assert r["stdout"] == "200"
        address = sh(member, other, "hostname -i")["stdout"].split()[0]
        assert ipaddress.ip_address(address) in ipaddress.ip_network(daemon.network["subnet"])
        assert probe(member, sandbox, address, 8000).startswith("refused")
    finally:
        member.delete(f"/v1/sandboxes/{other['id']}")


def pids_events_max(sandbox_id):
    """How many forks the sandbox's pids cgroup refused (host side: a full sandbox cannot fork a
    cat). cgroup v1 or v2."""
    pid = docker_container(sandbox_id)["State"]["Pid"]
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    path = next((f"/sys/fs/cgroup/pids{p}" for _, c, p in lines if "pids" in c.split(",")),
                next(f"/sys/fs/cgroup{p}" for h, _, p in lines if h == "0"))
    with open(path + "/pids.events") as f:
        return int(f.read().split()[-1])


def test_a_real_fork_bomb_is_contained(daemon, member, sandbox):
    bomb = member.create_sandbox(resources={"pids": 64})
    try:
        # (`:(){ :|:& };:` is a syntax error for /bin/sh, which runs `command`: dash wants a name.)
        # In a background subshell: dash forks both sides of a pipe from the calling shell and
        # exits 2 when a fork fails, so run by the call's own shell the bomb can meet the limit
        # before that shell's second fork. The forks' "Cannot fork" goes to /dev/null: inherited,
        # it could reach the call's stderr. A syntax error would still be the shell's own.
        r = member.exec(bomb["id"], command="(f(){ f|f& };f) >/dev/null 2>&1 &", timeout_s=5)
        assert r["exit_code"] == 0 and r["stderr"] == "", r
        # It runs on in the background until the limit holds it.
        deadline = time.time() + 20
        while time.time() < deadline and pids_events_max(bomb["id"]) == 0:
            time.sleep(0.1)
        assert pids_events_max(bomb["id"]) > 0, "the bomb never met the pids limit"
        # The host and other sandboxes never noticed.
        assert daemon.client().get("/healthz").status == 200
        assert member.exec(sandbox["id"], command="echo fine")["stdout"] == "fine\n"
        # Held at its limit, not ended; a stop ends the bomb and the sandbox works again.
        assert member.get(f"/v1/sandboxes/{bomb['id']}").json()["state"] == "started"
        assert member.post(f"/v1/sandboxes/{bomb['id']}/stop").status == 200
        assert member.post(f"/v1/sandboxes/{bomb['id']}/start").status == 200
        r = member.exec(bomb["id"], command="cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max")
        assert r["stdout"].strip() == "64"
    finally:
        member.delete(f"/v1/sandboxes/{bomb['id']}")


def test_a_memory_hog_is_killed_by_the_oom_killer(daemon, member, sandbox):
    hog = member.create_sandbox(resources={"memory_mb": 128})
    try:
        r = member.exec(hog["id"], argv=["python3", "-c", "b = b'x' * (512 * 1024 * 1024); print(len(b))"],
                        timeout_s=60)
        assert r["exit_code"] == 137, r
        assert r["oom_killed"] is True, r
        # The sandbox itself survives (only the hog was chosen) and says so when asked again.
        got = member.get(f"/v1/sandboxes/{hog['id']}").json()
        assert got["state"] == "started"
        assert member.exec(hog["id"], command="echo alive")["stdout"] == "alive\n"
        assert member.exec(hog["id"], command="true")["oom_killed"] is False
        assert daemon.client().get("/healthz").status == 200
        assert member.exec(sandbox["id"], command="echo fine")["stdout"] == "fine\n"
    finally:
        member.delete(f"/v1/sandboxes/{hog['id']}")
