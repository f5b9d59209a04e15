#!/usr/bin/python3
"""What untrusted agent answers cost the daemon: figures measured in one run.

  peak RSS of sandfortd while N parallel execs each print 10 MiB of random bytes (binary: true),
  for N = 4 and 8, against its RSS before (the ratio), and the buffered-answer budget it keeps to
  exec `true` p50 through the REST API (the door to the agent included: path walked inside the
  container's root, peer checked) against spawning `true` directly inside the container

Run after ./scripts/setup and ./scripts/build:   /usr/bin/python3 bench/agent_memory.py [--quick]
It starts its own sandfortd on a temporary state directory and removes everything it made.
"""

import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import Daemon, rss_kib  # noqa: E402

QUICK = "--quick" in sys.argv
N_EXEC = 100 if QUICK else 400
TEN_MIB = 10 << 20


def rss_mib(pid):
    return rss_kib(pid) / 1024


def parallel_binary_execs(daemon, client, sid, n):
    """Peak daemon RSS while n execs each return 10 MiB of random bytes as base64."""
    pid = daemon.proc.pid
    before = rss_mib(pid)
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib(pid))
            time.sleep(0.005)

    results = []

    def one():
        r = client.post(f"/v1/sandboxes/{sid}/process/exec",
                        {"command": f"head -c {TEN_MIB} /dev/urandom", "binary": True, "timeout_s": 120})
        results.append((r.status, len(r.body)))

    sampler = threading.Thread(target=sample)
    sampler.start()
    workers = [threading.Thread(target=one) for _ in range(n)]
    t = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t
    done.set()
    sampler.join()
    ok = sum(1 for status, _ in results if status == 200)
    print(f"  {n} x 10 MiB binary execs: RSS before {before:6.1f} MiB, peak {peak[0]:6.1f} MiB "
          f"(+{peak[0] - before:.1f} MiB, {peak[0] / before:.1f}x), {ok}/{n} answered 200, "
          f"answers of {max(size for _, size in results) / (1 << 20):.1f} MiB, {elapsed:.1f} s")
    return peak[0]


def exec_latency(client, sid):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=60)
    headers = {"Authorization": "Bearer " + client.key, "Content-Type": "application/json"}
    samples = []
    for i in range(N_EXEC + 10):
        t = time.perf_counter()
        conn.request("POST", f"/v1/sandboxes/{sid}/process/exec", body=json.dumps({"argv": ["true"]}), headers=headers)
        r = conn.getresponse()
        r.read()
        if i >= 10:
            samples.append((time.perf_counter() - t) * 1000)
    probe = ("import subprocess,time,statistics\n"
             "s=[]\n"
             f"for _ in range({N_EXEC}):\n"
             "    t=time.perf_counter(); subprocess.run(['true']); s.append((time.perf_counter()-t)*1000)\n"
             "print(statistics.median(s))\n")
    direct = float(client.exec(sid, argv=["python3", "-c", probe])["stdout"])
    api = statistics.median(samples)
    print(f"  exec `true` through the API p50 {api:.2f} ms; spawned inside the container p50 {direct:.2f} ms; "
          f"the API adds {api - direct:.2f} ms")


def main():
    daemon = Daemon().start()
    try:
        client = daemon.admin()
        sid = client.create_sandbox(resources={"memory_mb": 2048})["id"]
        print("sandfortd and untrusted agent answers (default config: 10 MiB output cap, 128 MiB answer budget)")
        exec_latency(client, sid)
        for n in (4, 8) if QUICK else (4, 8, 16):
            parallel_binary_execs(daemon, client, sid, n)
        client.delete(f"/v1/sandboxes/{sid}")
    finally:
        daemon.stop()
        daemon.cleanup()


if __name__ == "__main__":
    main()
