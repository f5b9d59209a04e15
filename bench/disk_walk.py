#!/usr/bin/python3
"""What disk_mb enforcement costs and how fast it acts: figures measured in one run.

  the time from a `fallocate -l 5G` returning inside a sandbox with disk_mb 64 to the sandbox
  being stopped (before issue 30 it was never stopped: the baseline is a sandbox with the default
  disk_mb, still running after the same wait);
  sandfortd's CPU per measuring round with two started sandboxes holding F small files each,
  against the same daemon with two empty sandboxes (the ratio), and per million entries walked.

Run after ./scripts/setup and ./scripts/build:   /usr/bin/python3 bench/disk_walk.py [--quick]
It starts its own sandfortd on a temporary state directory and removes everything it made.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import Daemon  # noqa: E402

QUICK = "--quick" in sys.argv
FILES = 50_000 if QUICK else 200_000
WINDOW_S = 10
INTERVAL_S = 1


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_over(pid, seconds):
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def main():
    d = Daemon({"disk": {"check_interval_s": INTERVAL_S},
                "guardrails": {"rate_limits": {"superadmin": {"rate_per_s": 0, "burst": 0}}}}).start()
    try:
        c = d.admin()
        pid = d.proc.pid
        # 1. How fast a fill is stopped.
        small = c.create_sandbox(resources={"disk_mb": 64})
        big = c.create_sandbox()
        for s in (small, big):
            r = c.exec(s["id"], command="fallocate -l 5G /root/fill", timeout_s=60)
            assert r["exit_code"] == 0, r
        t0 = time.monotonic()
        while c.get(f"/v1/sandboxes/{small['id']}").json()["state"] == "started":
            assert time.monotonic() - t0 < 60, "never stopped"
            time.sleep(0.05)
        stopped_after = time.monotonic() - t0
        baseline_state = c.get(f"/v1/sandboxes/{big['id']}").json()["state"]
        print(f"fallocate -l 5G past disk_mb 64: stopped {stopped_after:.2f} s after the write returned "
              f"(check_interval_s {INTERVAL_S}); a sandbox under its limit after the same wait: {baseline_state}")
        for s in (small, big):
            c.delete(f"/v1/sandboxes/{s['id']}")

        # 2. What the rounds cost.
        a, b = c.create_sandbox(), c.create_sandbox()
        time.sleep(2 * INTERVAL_S)
        empty = cpu_over(pid, WINDOW_S)
        for s in (a, b):
            r = c.exec(s["id"], argv=["python3", "-c",
                                     f"import os\nos.makedirs('/root/m')\n"
                                     f"for i in range({FILES}): open(f'/root/m/{{i}}', 'w').close()"],
                       timeout_s=600)
            assert r["exit_code"] == 0, r
        time.sleep(2 * INTERVAL_S)
        full = cpu_over(pid, WINDOW_S)
        # A round takes per_round of one thread, then INTERVAL_S passes before the next:
        # extra = per_round / (INTERVAL_S + per_round).
        extra = min(max(full - empty, 0.0), 0.99)
        per_round = extra * INTERVAL_S / (1 - extra)
        print(f"sandfortd CPU with 2 empty sandboxes: {empty * 100:.1f}% of a core; with 2 × {FILES} files: "
              f"{full * 100:.1f}% (ratio {full / max(empty, 1e-3):.1f}); ≈ {per_round * 1000:.0f} ms per round of "
              f"{2 * FILES} entries, ≈ {per_round / (2 * FILES) * 1e6:.2f} s per million entries "
              f"(rounds every {INTERVAL_S} s plus the round itself)")
        for s in (a, b):
            c.delete(f"/v1/sandboxes/{s['id']}")
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
