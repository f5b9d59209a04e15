#!/usr/bin/env python3
"""Gate: isolation, checked from inside real sandboxes of a live deployment.

    SANDFORT_BASE_URL=http://127.0.0.1:8080 SANDFORT_API_KEY=sfk_... python3 examples/gates/isolation.py

The key needs the member role (or higher). Checks (docs/security.md):
- a fork bomb is contained by the pids limit: the daemon and a neighbour answer while it runs,
  and the bombed sandbox itself once a stop has ended it;
- 169.254.169.254 is unreachable directly, and the proxy refuses it even when allowlisted;
- the environment inside (env and every /proc/*/environ) holds no SANDFORT_ variable, no API key
  (`sfk_…`, the gate's own key in particular) and no proxy credential but the sandbox's own;
- no docker.sock anywhere in the sandbox;
- another sandbox's address is unreachable, directly and through the proxy;
- the host (the sandbox network's gateway) answers only on the proxy port; when the API URL is on
  this machine's loopback, every IPv4 address of this machine is probed too, with a listener the
  gate opens on all of them.
Sandboxes with no network interface (gVisor, or runc with runc_dials_home; docs/gvisor.md) are
checked for what they are: only `lo`, the proxy on their own 127.0.0.1 with no credential, no
address of a neighbour or of the host reachable; under gVisor a fork bomb ends the whole sandbox
(the API says why) instead of being held at its limit.
Optional: SANDFORT_PREVIEW_PORT (the preview listener's port, else taken from the preview URL
template), SANDFORT_GATE_IMAGE (default: the server's default image; needs python3 and curl).
"""

import json
import re
import socket
import subprocess
import threading
import time
import urllib.request
from urllib.parse import urlsplit

import _gate
from _gate import env, retry, sh

PROBE = r"""
import json, socket, sys, threading
targets = json.loads(sys.argv[1])
out = {}
def one(t):
    host, port = t
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(3)
    try:
        s.connect((host, port))
        out[f"{host}:{port}"] = "connected"
    except Exception as e:
        out[f"{host}:{port}"] = f"refused ({type(e).__name__})"
    finally:
        s.close()
threads = [threading.Thread(target=one, args=(t,)) for t in targets]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(out))
"""

THROUGH_PROXY = {"NO_PROXY": "", "no_proxy": ""}


def probe(sbx, targets):
    r = sh(sbx, None, argv=["python3", "-c", PROBE, json.dumps(targets)], timeout_s=60)
    assert r.exit_code == 0, f"probe failed: {r.stderr.strip()[-300:]}"
    return json.loads(r.stdout)


class Listener:
    """A TCP server on every address of this machine that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        self.sock.close()


def interfaces(sbx):
    """The network interfaces inside, from /proc/net/dev (gVisor has no /sys/class/net)."""
    out = sh(sbx, "tail -n +3 /proc/net/dev | cut -d: -f1").stdout
    return sorted(line.strip() for line in out.splitlines() if line.strip())


def local_addresses():
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line.split()[3].split("/")[0] for line in out.splitlines() if line.split()[1] != "lo"]


def main(gate):
    c = _gate.client()
    key = env("SANDFORT_API_KEY")
    image = env("SANDFORT_GATE_IMAGE")
    made = []

    def create(**kw):
        sbx = retry(c.create_sandbox, image, labels={"gate": "isolation"}, **kw)
        made.append(sbx)
        return sbx

    try:
        sbx = create()
        neighbour = create()
        proxy = _gate.proxy_of(sbx)
        gateway, proxy_port = proxy.host, proxy.port  # dials home: its own 127.0.0.1, no gateway
        gvisor = sbx.info.runtime == "gvisor"

        # --- the fork bomb -------------------------------------------------------------------
        def fork_bomb():
            if gvisor:
                return fork_bomb_under_gvisor()
            bomb = create(resources={"pids": 64})
            # A real one for /bin/sh (dash), which runs `command`: `:(){ :|:& };:` is a syntax error
            # there, and nothing would fork. It starts in a background subshell: dash forks each
            # side of a pipe from the calling shell and exits 2 when a fork fails, so a bomb run by
            # the call's own shell can meet the limit before its second fork. The call's shell forks
            # once and returns 0. The forks' own complaints ("Cannot fork") go to /dev/null: they
            # inherit the call's stderr; a syntax error is still the shell's own.
            r = sh(bomb, "(f(){ f|f& };f) >/dev/null 2>&1 &", timeout_s=5)
            assert r.exit_code == 0 and r.stderr == "", f"the bomb did not start: {r.exit_code} {r.stderr[:200]!r}"
            time.sleep(3)  # long enough for it to meet the limit
            health = urllib.request.urlopen(c.base_url + "/healthz", timeout=10).status
            assert health == 200, f"/healthz answered {health} during the bomb"
            assert sh(neighbour, "echo fine").stdout == "fine\n", "the neighbour did not answer"
            # Held at its limit, it forks on: a stop ends it, and the sandbox works again.
            bomb.stop()
            bomb.start()
            r = sh(bomb, "echo ok; cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max")
            assert r.stdout.startswith("ok\n"), f"the bombed sandbox did not answer after its restart: {r.stdout!r}"
            limit = r.stdout.split("\n")[1].strip()
            assert limit == "64", f"pids.max is {limit!r}, not 64"
            return "pids.max 64; /healthz 200 and the neighbour answer during the bomb; a stop ends it"

        def fork_bomb_under_gvisor():
            # runsc's own threads count against pids (an idle sandbox holds about 40): 128 leaves
            # the bomb room to be one. Reaching the limit ends the whole sandbox (docs/gvisor.md).
            bomb = create(resources={"pids": 128})
            try:
                sh(bomb, "f(){ f|f& };f", timeout_s=5)
            except Exception:  # noqa: BLE001 - the call may end with the sandbox; the state says
                pass
            time.sleep(3)
            health = urllib.request.urlopen(c.base_url + "/healthz", timeout=10).status
            assert health == 200, f"/healthz answered {health} during the bomb"
            assert sh(neighbour, "echo fine").stdout == "fine\n", "the neighbour did not answer"
            deadline = time.time() + 30
            while (got := retry(c.get_sandbox, bomb.id)).state != "stopped":
                assert time.time() < deadline, f"the bombed sandbox is still {got.state}"
                time.sleep(0.5)
            assert "pids" in (got.info.error_message or ""), f"stopped without naming its limit: {got.info.error_message!r}"
            bomb.start()
            assert sh(bomb, "echo ok").stdout == "ok\n", "the bombed sandbox did not answer after its start"
            return ("pids 128 (gVisor): the sandbox ended whole, stopped naming its pids limit; /healthz 200 and the "
                    "neighbour answer during the bomb; a start gives it back")
        gate.check("fork bomb contained", fork_bomb)

        # --- the metadata address ----------------------------------------------------------------
        def metadata():
            r = sh(sbx, "curl -sS -m 3 --noproxy '*' http://169.254.169.254/latest/meta-data/", timeout_s=30)
            assert r.exit_code != 0, f"curl reached 169.254.169.254: {r.stdout[:100]!r}"
            got = probe(sbx, [["169.254.169.254", 80], ["169.254.169.254", 443]])
            assert all(v.startswith("refused") for v in got.values()), got
            retry(sbx.set_egress_allowlist, ["169.254.169.254"])
            try:
                r = sh(sbx, "curl -sS -m 10 -o /dev/null -w '%{http_code}' http://169.254.169.254/latest/meta-data/",
                       env=THROUGH_PROXY, timeout_s=30)
                assert r.stdout == "403", f"through the proxy, allowlisted: {r.stdout!r} {r.stderr.strip()!r}"
            finally:
                retry(sbx.set_egress_allowlist, [])
            return "direct: no route; through the proxy even when allowlisted: 403"
        gate.check("169.254.169.254 unreachable", metadata)

        # --- the environment ----------------------------------------------------------------
        def environment():
            r = sh(sbx, "env | grep SANDFORT_; echo rc=$?")
            assert r.stdout.strip() == "rc=1", f"env | grep SANDFORT_ printed {r.stdout.strip()!r}"
            other = _gate.proxy_of(neighbour)
            assert other.dials_home == proxy.dials_home, "two sandboxes of one create reach the proxy differently"
            # Everything every process inside sees, compared here (no secret is sent in).
            everything = sh(sbx, "env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; echo; done 2>/dev/null; true").stdout
            assert key not in everything, "the gate's own API key is visible inside the sandbox"
            assert "sfk_" not in everything, "an API key (sfk_…) is visible inside the sandbox"
            names = sorted({line.split("=", 1)[0] for line in everything.splitlines() if "=" in line})
            assert not [n for n in names if n.startswith("SANDFORT")], names
            if proxy.dials_home:
                # No credential to steal: the proxy knows the sandbox by the door its tunnel came through.
                assert other.secret is None and proxy.secret is None
                return (f"env | grep SANDFORT_ empty; no API key; no proxy credential at all, the door is the identity "
                        f"({len(names)} variable names seen)")
            assert other.secret, "the neighbour has no proxy credential to compare with"
            assert other.secret not in everything, "another sandbox's proxy credential is visible inside"
            assert proxy.user == sbx.id, f"the proxy credential names {proxy.user}, not {sbx.id}"
            return f"env | grep SANDFORT_ empty; no API key; only its own proxy credential ({len(names)} variable names seen)"
        gate.check("env | grep SANDFORT_ shows nothing secret", environment)

        # --- docker.sock ----------------------------------------------------------------------
        def docker_sock():
            r = sh(sbx, "ls /var/run/docker.sock /run/docker.sock 2>&1; true")
            assert r.stdout.count("No such file") == 2, r.stdout
            r = sh(sbx, "find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print 2>/dev/null; true",
                   timeout_s=120)
            sockets = [s for s in r.stdout.split() if "docker" in s or "containerd" in s]
            assert not sockets, f"found {sockets}"
            return "absent at /var/run and /run; no docker/containerd socket anywhere"
        gate.check("/var/run/docker.sock absent", docker_sock)

        # --- other sandboxes ----------------------------------------------------------------
        def neighbours():
            retry(neighbour.process.start, "python3 -m http.server 8000")
            deadline = time.time() + 30
            while sh(neighbour, "curl -s -o /dev/null -w '%{http_code}' --noproxy '*' localhost:8000/").stdout != "200":
                assert time.time() < deadline, "the neighbour's server did not start"
                time.sleep(0.3)
            if proxy.dials_home:
                # No address to try: each has lo alone, and the neighbour's loopback is not this one's.
                for one in (sbx, neighbour):
                    assert interfaces(one) == ["lo"], f"{one.id} has interfaces {interfaces(one)}"
                got = probe(sbx, [["127.0.0.1", 8000]])
                assert all(v.startswith("refused") for v in got.values()), got
                return "no interface but lo in either; the neighbour's server (200 on its own 127.0.0.1:8000) is not on this one's"
            address = sh(neighbour, "hostname -i").stdout.split()[0]
            got = probe(sbx, [[address, 8000], [address, 22]])
            assert all(v.startswith("refused") for v in got.values()), got
            retry(sbx.set_egress_allowlist, [address])
            try:
                r = sh(sbx, f"curl -sS -m 10 -o /dev/null -w '%{{http_code}}' http://{address}:8000/",
                       env=THROUGH_PROXY, timeout_s=30)
                assert r.stdout == "403", f"through the proxy: {r.stdout!r} {r.stderr.strip()!r}"
            finally:
                retry(sbx.set_egress_allowlist, [])
            return f"{address}:8000 (serving, 200 inside its own sandbox): refused directly, 403 through the proxy"
        gate.check("other sandboxes unreachable", neighbours)

        # --- the host ------------------------------------------------------------------------
        def host():
            api = urlsplit(c.base_url)
            preview_port = env("SANDFORT_PREVIEW_PORT")
            if not preview_port:
                m = re.search(r":(\d+)$", urlsplit(sbx.info.preview_url_template or "").netloc or "")
                preview_port = m.group(1) if m else "8081"
            ports = sorted({22, 80, 443, 2375, 2376, 8080, 8081, 3128 if proxy_port != 3128 else 22,
                            api.port or 80, int(preview_port)} - {proxy_port})
            # With no interface the proxy is on the sandbox's own loopback: there is no gateway, and
            # the host is every address it has.
            addresses = [] if proxy.dials_home else [gateway]
            listener = None
            local = api.hostname in ("localhost", "127.0.0.1", "::1")
            if local:
                listener = Listener()
                ports.append(listener.port)
                addresses += [a for a in local_addresses() if a != gateway]
            elif proxy.dials_home:
                addresses += sorted({ai[4][0] for ai in socket.getaddrinfo(api.hostname, None, socket.AF_INET)})
            if proxy.dials_home:
                assert interfaces(sbx) == ["lo"], f"interfaces inside: {interfaces(sbx)}"
            try:
                targets = [[a, p] for a in addresses for p in ports]
                got = probe(sbx, targets + [[gateway, proxy_port]])
                proxy_answer = got.pop(f"{gateway}:{proxy_port}")
                open_ = {k: v for k, v in got.items() if not v.startswith("refused")}
                assert not open_, f"reachable from the sandbox: {sorted(open_)}"
                assert proxy_answer == "connected", f"the proxy port {gateway}:{proxy_port} did not answer: {proxy_answer}"
                if listener:
                    assert listener.accepted == 0, f"the gate's listener accepted {listener.accepted} connections"
            finally:
                if listener:
                    listener.close()
            if proxy.dials_home:
                where = f"no interface but lo; {len(addresses)} addresses of this host"
            else:
                where = f"gateway {gateway}" + (f" and {len(addresses) - 1} more addresses of this host" if local else "")
            return f"{where}: ports {','.join(map(str, ports))} refused; proxy port {proxy_port} answers"
        gate.check("host unreachable except the proxy port", host)
    finally:
        _gate.delete_all(c, made)


if __name__ == "__main__":
    _gate.run("isolation", main)
