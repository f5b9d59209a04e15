#!/usr/bin/python3
"""Sessions and files benchmark: prints figures and ratios measured in one run.

  exec in a persistent session (builtin `true`)  vs  a plain process/exec of `true`
  upload / download of a 256 MiB file through the API  vs  `docker cp` in and out
  resident memory of sandfortd and of the agent before and after a 1 GiB upload (streamed)

Run after ./scripts/setup and ./scripts/build:   /usr/bin/python3 bench/sessions_files.py [--quick]
"""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import IMAGE, Daemon, container_id_of, rss_kib  # noqa: E402
from foundation import Api, pct, row  # noqa: E402

QUICK = "--quick" in sys.argv
N = 100 if QUICK else 300
BIG = 256 << 20


def agent_pid(sandbox_id):
    out = subprocess.run(["docker", "top", container_id_of(sandbox_id), "-o", "pid,comm"], capture_output=True,
                         text=True, check=True).stdout.splitlines()[1:]
    for line in out:
        pid, comm = line.split(None, 1)
        if comm.strip() == "agent":
            return int(pid)
    raise RuntimeError("agent not found: " + "\n".join(out))


def stream_upload(port, key, path, total, piece=1 << 20):
    """PUT `total` zero bytes without holding them: the client streams too."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.putrequest("PUT", path)
    conn.putheader("Authorization", "Bearer " + key)
    conn.putheader("Content-Length", str(total))
    conn.endheaders()
    chunk = bytes(piece)
    sent = 0
    while sent < total:
        n = min(piece, total - sent)
        conn.send(chunk[:n])
        sent += n
    r = conn.getresponse()
    r.read()
    conn.close()
    return r.status


def bench_sessions(api, sid):
    print("session exec vs plain exec")
    for _ in range(20):
        api.call("POST", f"/v1/sandboxes/{sid}/exec", {"command": "true"})
        api.call("POST", f"/v1/sandboxes/{sid}/process/exec", {"argv": ["true"]})
    sess, plain = [], []
    for _ in range(N):
        t = time.perf_counter()
        status, r = api.call("POST", f"/v1/sandboxes/{sid}/exec", {"command": "true"})
        sess.append((time.perf_counter() - t) * 1000)
        assert status == 200 and r["exit_code"] == 0, r
        t = time.perf_counter()
        api.call("POST", f"/v1/sandboxes/{sid}/process/exec", {"argv": ["true"]})
        plain.append((time.perf_counter() - t) * 1000)
    a = row("session exec `true` (builtin, no fork)", sess)
    b = row("process/exec argv [true]", plain)
    print(f"  -> session / plain: {a / b:.2f}x at p50 (target: session <= 1 ms, about a plain exec)\n")


def bench_files(d, api, sid):
    print(f"files: {BIG >> 20} MiB")
    src = tempfile.NamedTemporaryFile(delete=False)
    src.write(os.urandom(BIG))
    src.close()
    key = d.admin_key
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=600)
    with open(src.name, "rb") as f:
        t = time.perf_counter()
        conn.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/big.bin", body=f,
                     headers={"Authorization": "Bearer " + key, "Content-Length": str(BIG)})
        r = conn.getresponse()
        r.read()
        up = time.perf_counter() - t
    assert r.status == 201, r.status
    t = time.perf_counter()
    conn.request("GET", f"/v1/sandboxes/{sid}/files?path=/tmp/big.bin", headers={"Authorization": "Bearer " + key})
    r = conn.getresponse()
    got = 0
    while chunk := r.read(1 << 20):
        got += len(chunk)
    down = time.perf_counter() - t
    assert got == BIG
    t = time.perf_counter()
    subprocess.run(["docker", "cp", src.name, f"{container_id_of(sid)}:/tmp/cp.bin"], check=True)
    cp_in = time.perf_counter() - t
    out = tempfile.mkdtemp()
    t = time.perf_counter()
    subprocess.run(["docker", "cp", f"{container_id_of(sid)}:/tmp/cp.bin", out + "/cp.bin"], check=True)
    cp_out = time.perf_counter() - t
    os.unlink(src.name)
    subprocess.run(["rm", "-rf", out])
    mib = BIG / (1 << 20)
    print(f"  upload   API {mib / up:7.1f} MiB/s   docker cp in  {mib / cp_in:7.1f} MiB/s   ratio {cp_in / up:.2f}x")
    print(f"  download API {mib / down:7.1f} MiB/s   docker cp out {mib / cp_out:7.1f} MiB/s   ratio {cp_out / down:.2f}x\n")


def bench_memory(d, sid):
    print("resident memory around a streamed 1 GiB upload")
    apid = agent_pid(sid)
    before = (rss_kib(d.proc.pid), rss_kib(apid))
    status = stream_upload(d.port, d.admin_key, f"/v1/sandboxes/{sid}/files?path=/tmp/gig.bin", 1 << 30)
    assert status == 201, status
    after = (rss_kib(d.proc.pid), rss_kib(apid))
    print(f"  sandfortd: {before[0] / 1024:.1f} MiB -> {after[0] / 1024:.1f} MiB (+{(after[0] - before[0]) / 1024:.1f} MiB)")
    print(f"  agent:     {before[1] / 1024:.1f} MiB -> {after[1] / 1024:.1f} MiB (+{(after[1] - before[1]) / 1024:.1f} MiB)\n")


def main():
    d = Daemon({"log_level": "warn"}).start()
    try:
        api = Api(d.port, d.admin_key)
        status, sbx = api.call("POST", "/v1/sandboxes", {"snapshot": IMAGE, "wait": True,
                                                         "resources": {"memory_mb": 4096}})
        assert status == 201, sbx
        bench_sessions(api, sbx["id"])
        bench_files(d, api, sbx["id"])
        bench_memory(d, sbx["id"])
        api.call("DELETE", f"/v1/sandboxes/{sbx['id']}")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
