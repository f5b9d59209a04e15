#!/usr/bin/python3
"""runc against gVisor sandboxes (issue 34, docs/gvisor.md), through sandfortd, in one run, and runc
with no network interface (`runc_dials_home`: the gVisor sandbox's transport on runc's kernel):

  create → started (the agent answering), a file's stat (the agent alone: no process, no shell),
  exec `true` p50/p99 (the REST API's one-shot exec:
  over the door and a link home for gVisor, over the socket in the container for runc), a
  session's builtin (`echo`), a 1 MiB file up and down, an egress CONNECT's answer (a denied host:
  the proxy's decision, no upstream), a preview request (Python's http.server in the sandbox, a
  new upstream connection per request: over the sandbox network for runc, through the agent and a
  link home for gVisor), and the host memory of idle sandboxes (RSS of the
  processes in each container's cgroup, runsc's own included).

Run after ./scripts/setup and ./scripts/build:   /usr/bin/python3 bench/runtimes.py [--quick]
It starts its own sandfortd on a temporary state directory and removes everything it made.
"""

import http.client
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import Daemon  # noqa: E402

QUICK = "--quick" in sys.argv
N_CREATE = 3 if QUICK else 10
N_EXEC = 50 if QUICK else 200
N_IDLE = 5 if QUICK else 20
MIB = os.urandom(1 << 20)


def ms(seconds):
    return seconds * 1000


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def timed(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(ms(time.perf_counter() - t))
    return out


def container_rss_mib(sandbox_id):
    """RSS of every host process of the sandbox's container (its cgroup's tasks)."""
    cid = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", f"label=io.sandfort.sandbox={sandbox_id}"],
                         capture_output=True, text=True).stdout.strip()
    pids = set()
    for root, _, files in os.walk("/sys/fs/cgroup/memory"):
        if cid in root and "cgroup.procs" in files:
            with open(os.path.join(root, "cgroup.procs")) as f:
                pids.update(int(p) for p in f.read().split())
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def preview_requests(daemon, client, sid):
    client.post(f"/v1/sandboxes/{sid}/commands",
                {"command": "mkdir -p /srv && echo ok > /srv/i && cd /srv && exec python3 -m http.server 8080"})
    deadline = time.time() + 30
    while not any(p["port"] == 8080 for p in client.get(f"/v1/sandboxes/{sid}/ports").json()["items"]):
        assert time.time() < deadline, "the preview's server did not listen"
        time.sleep(0.1)
    token = client.get(f"/v1/sandboxes/{sid}/preview/8080").json()["token"]
    headers = {"Host": f"8080-{sid}.preview.localhost:{daemon.preview_port}", "X-Sandfort-Preview-Token": token}
    conn = http.client.HTTPConnection("127.0.0.1", daemon.preview_port, timeout=30)

    def get():
        conn.request("GET", "/i", headers=headers)
        r = conn.getresponse()
        assert (r.status, r.read()) == (200, b"ok\n")
    try:
        return timed(get, N_EXEC)
    finally:
        conn.close()


def measure(daemon, client, runtime):
    fig = {}
    created = []
    for _ in range(N_CREATE):
        t = time.perf_counter()
        sbx = client.create_sandbox(runtime=runtime)
        created.append(ms(time.perf_counter() - t))
        client.delete(f"/v1/sandboxes/{sbx['id']}")
    fig["create → started, p50 ms"] = statistics.median(created)
    sid = client.create_sandbox(runtime=runtime)["id"]
    try:
        # The agent alone (one stat, no process, no shell): the transport's share of a call.
        fig["a file's stat, p50 ms"] = pct(timed(lambda: client.get(f"/v1/sandboxes/{sid}/files/stat?path=/work"),
                                                 N_EXEC), 50)
        execs = timed(lambda: client.exec(sid, argv=["true"]), N_EXEC)
        fig["exec true, p50 ms"] = pct(execs, 50)
        fig["exec true, p99 ms"] = pct(execs, 99)
        client.post(f"/v1/sandboxes/{sid}/exec", {"command": "true"})
        fig["session echo, p50 ms"] = pct(timed(lambda: client.post(f"/v1/sandboxes/{sid}/exec",
                                                                     {"command": "echo hi"}), N_EXEC), 50)

        def round_trip():
            assert client.request("PUT", f"/v1/sandboxes/{sid}/files?path=/work/m.bin", raw=MIB).status == 201
            assert client.get(f"/v1/sandboxes/{sid}/files?path=/work/m.bin").body == MIB
        fig["1 MiB up and down, p50 ms"] = pct(timed(round_trip, N_EXEC // 4), 50)
        proxy = client.exec(sid, command="echo $HTTPS_PROXY")["stdout"].strip()
        connect = ("import socket, time, urllib.parse, base64\n"
                   f"u = urllib.parse.urlparse({proxy!r})\n"
                   "auth = ''\n"
                   "if u.username: auth = 'Proxy-Authorization: Basic ' + base64.b64encode(f'{u.username}:{u.password}'.encode()).decode() + '\\r\\n'\n"
                   "out = []\n"
                   "for _ in range(50):\n"
                   "    t = time.perf_counter(); s = socket.create_connection((u.hostname, u.port))\n"
                   "    s.sendall(f'CONNECT denied.example:443 HTTP/1.1\\r\\nHost: denied.example:443\\r\\n{auth}\\r\\n'.encode())\n"
                   "    assert s.recv(100).startswith(b'HTTP/1.1 403'); out.append((time.perf_counter() - t) * 1000); s.close()\n"
                   "out.sort(); print(out[len(out) // 2])\n")
        fig["egress CONNECT answered (403), p50 ms"] = float(client.exec(sid, argv=["python3", "-c", connect],
                                                                         timeout_s=120)["stdout"])
        fig["preview request, p50 ms"] = pct(preview_requests(daemon, client, sid), 50)
    finally:
        client.delete(f"/v1/sandboxes/{sid}")
    idle = [client.create_sandbox(runtime=runtime)["id"] for _ in range(N_IDLE)]
    try:
        time.sleep(2)
        fig[f"host memory per idle sandbox (of {N_IDLE}), MiB"] = statistics.mean(container_rss_mib(i) for i in idle)
    finally:
        for i in idle:
            client.delete(f"/v1/sandboxes/{i}")
    return fig


def main():
    columns = {}
    daemon = Daemon({"log_level": "warn", "host": {"memory_overcommit": 8}}).start()
    try:
        client = daemon.admin()
        columns["runc"] = measure(daemon, client, "runc")
        columns["gvisor"] = measure(daemon, client, "gvisor")
    finally:
        daemon.stop()
        daemon.cleanup()
    # runc with no interface (runc_dials_home): the gVisor sandbox's transport on runc's kernel.
    daemon = Daemon({"log_level": "warn", "host": {"memory_overcommit": 8}, "runc_dials_home": True}).start()
    try:
        columns["runc, home"] = measure(daemon, daemon.admin(), "runc")
    finally:
        daemon.stop()
        daemon.cleanup()
    runc, gvisor, home = columns["runc"], columns["gvisor"], columns["runc, home"]
    print(f"{'':44} {'runc':>10} {'runc,home':>10} {'gvisor':>10} {'home/runc':>9} {'gvisor/runc':>11}")
    for key in runc:
        print(f"{key:44} {runc[key]:10.2f} {home[key]:10.2f} {gvisor[key]:10.2f} {home[key] / runc[key]:9.2f} "
              f"{gvisor[key] / runc[key]:11.2f}")


if __name__ == "__main__":
    main()
