#!/usr/bin/python3
"""Foundation benchmark: prints figures and ratios measured in one run on one image.

  create -> started   sandfortd (wait=true)         vs  `docker run -d` of the same image
  exec `true`         REST API, kept-alive client   vs  Docker's exec API (create/start/inspect)
                                                    and spawning `true` directly inside the container
  seed                20 creates waiting for started, then 50 short commands in one sandbox

Run after ./scripts/setup and ./scripts/build:   /usr/bin/python3 bench/foundation.py [--quick]
It starts its own sandfortd on a temporary state directory and removes everything it made.
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import IMAGE, Daemon, _UnixHTTPConnection, container_id_of  # noqa: E402

QUICK = "--quick" in sys.argv
N_CREATE = 5 if QUICK else 10
N_EXEC = 100 if QUICK else 300
N_DOCKER_EXEC = 20 if QUICK else 50


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def row(name, samples_ms):
    print(f"  {name:<44} p50 {pct(samples_ms, 50):8.2f} ms   p95 {pct(samples_ms, 95):8.2f} ms   (n={len(samples_ms)})")
    return pct(samples_ms, 50)


class Api:
    """One kept-alive connection, as an SDK would hold."""

    def __init__(self, port, key):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.key = key

    def call(self, method, path, body=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers={"Authorization": "Bearer " + self.key, "Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None


def docker_call(method, path, body=None):
    conn = _UnixHTTPConnection("/var/run/docker.sock")
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data) if data else None


def docker_exec_samples(container, n):
    """n execs of `true` through Docker's exec API (create, start attached, inspect), in ms each."""
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        s, made = docker_call("POST", f"/containers/{container}/exec",
                              {"Cmd": ["true"], "AttachStdout": True, "AttachStderr": True})
        assert s == 201, made
        conn = _UnixHTTPConnection("/var/run/docker.sock")
        conn.request("POST", f"/exec/{made['Id']}/start", body=json.dumps({"Detach": False, "Tty": False}),
                     headers={"Content-Type": "application/json"})
        conn.getresponse().read()
        conn.close()
        s, info = docker_call("GET", f"/exec/{made['Id']}/json")
        assert info["ExitCode"] == 0
        samples.append((time.perf_counter() - t) * 1000)
    return samples


def bench_create(api, network):
    print("create -> started")
    ours, theirs = [], []
    for _ in range(N_CREATE):
        t = time.perf_counter()
        status, sbx = api.call("POST", "/v1/sandboxes", {"snapshot": IMAGE, "wait": True})
        ours.append((time.perf_counter() - t) * 1000)
        assert status == 201 and sbx["state"] == "started", sbx
        api.call("DELETE", f"/v1/sandboxes/{sbx['id']}")
    for _ in range(N_CREATE):
        t = time.perf_counter()
        # On the sandboxes' own network: both sides pay for the same veth and address.
        cid = subprocess.run(["docker", "run", "-d", "--init", "--network", network, IMAGE, "sleep", "300"],
                             check=True, capture_output=True, text=True).stdout.strip()
        theirs.append((time.perf_counter() - t) * 1000)
        subprocess.run(["docker", "rm", "-f", cid], check=True, capture_output=True)
    a = row("sandfortd create (wait=true, agent answering)", ours)
    b = row("docker run -d (CLI, same image)", theirs)
    print(f"  -> sandfortd minus docker run: {a - b:+.1f} ms at p50 (target: <= +100 ms)\n")


def bench_exec(api, sandbox_id):
    print("exec of `true`")
    path = f"/v1/sandboxes/{sandbox_id}/process/exec"
    for _ in range(20):  # warm-up
        api.call("POST", path, {"argv": ["true"]})
    ours = []
    for _ in range(N_EXEC):
        t = time.perf_counter()
        status, r = api.call("POST", path, {"argv": ["true"]})
        ours.append((time.perf_counter() - t) * 1000)
        assert status == 200 and r["exit_code"] == 0, r
    ours_sh = []
    for _ in range(N_EXEC):
        t = time.perf_counter()
        status, r = api.call("POST", path, {"command": "true"})
        ours_sh.append((time.perf_counter() - t) * 1000)

    # What fork+exec of the same command costs inside the container, measured there.
    probe = ("import subprocess,time,statistics\n"
             "s=[]\n"
             f"for _ in range({N_EXEC}):\n"
             "    t=time.perf_counter(); subprocess.run(['true']); s.append((time.perf_counter()-t)*1000)\n"
             "print(statistics.median(s))\n")
    status, r = api.call("POST", path, {"argv": ["python3", "-c", probe]})
    direct_p50 = float(r["stdout"])

    docker_samples = docker_exec_samples(container_id_of(sandbox_id), N_DOCKER_EXEC)
    a = row("REST API process/exec argv [true]", ours)
    row("REST API process/exec command 'true' (sh -c)", ours_sh)
    print(f"  {'direct spawn of true inside the container':<44} p50 {direct_p50:8.2f} ms")
    d = row("Docker exec API (create/start/inspect)", docker_samples)
    print(f"  -> API overhead over direct spawn: {a - direct_p50:+.2f} ms at p50 (target: <= 0.5 ms)")
    print(f"  -> Docker exec / REST exec: {d / a:.1f}x at p50 (target: >= 30x)\n")


def bench_seed(api):
    print("seed: 20 creates waiting for started, then 50 short commands in one sandbox")
    t0 = time.perf_counter()
    ids = []
    for _ in range(20):
        status, sbx = api.call("POST", "/v1/sandboxes", {"snapshot": IMAGE, "wait": True})
        assert status == 201, sbx
        ids.append(sbx["id"])
    t1 = time.perf_counter()
    for i in range(50):
        status, r = api.call("POST", f"/v1/sandboxes/{ids[0]}/process/exec", {"command": f"echo {i}"})
        assert r["stdout"] == f"{i}\n"
    t2 = time.perf_counter()
    for sid in ids:
        api.call("DELETE", f"/v1/sandboxes/{sid}")
    print(f"  20 creates: {(t1 - t0):.2f} s total ({(t1 - t0) / 20 * 1000:.0f} ms each)")
    print(f"  50 commands: {(t2 - t1) * 1000:.0f} ms total ({(t2 - t1) / 50 * 1000:.2f} ms each)")
    print(f"  seed total: {(t2 - t0):.2f} s\n")


def agent_memory(daemon, sandbox_id):
    s, info = docker_call("GET", f"/containers/{container_id_of(sandbox_id)}/top?ps_args=-o%20pid,rss,comm")
    for proc in info["Processes"]:
        if proc[2].startswith("agent") or "sandfort" in proc[2]:
            print(f"agent resident memory: {int(proc[1]) / 1024:.1f} MiB (pid {proc[0]} on the host)\n")
            return


def main():
    d = Daemon({"log_level": "warn"}).start()
    try:
        api = Api(d.port, d.admin_key)
        engine = docker_call("GET", "/version")[1]
        print(f"sandfort bench: image {IMAGE}, Docker {engine['Version']} (API {engine['ApiVersion']}), "
              f"{os.cpu_count()} cores{' (quick)' if QUICK else ''}\n")
        bench_create(api, d.network["name"])
        status, sbx = api.call("POST", "/v1/sandboxes", {"snapshot": IMAGE, "wait": True})
        bench_exec(api, sbx["id"])
        agent_memory(d, sbx["id"])
        api.call("DELETE", f"/v1/sandboxes/{sbx['id']}")
        bench_seed(api)
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
