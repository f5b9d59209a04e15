#!/usr/bin/python3
"""Exec `true` through the REST API on two builds, in one run, interleaved.

  /usr/bin/python3 bench/compare_exec.py BASELINE_BUILD_DIR CANDIDATE_BUILD_DIR [--rounds 10] [--per-round 100]

Each build gets its own sandfortd (temporary state, its own sandbox network) and one sandbox;
rounds alternate between them so that whatever else the machine does weighs on both alike.
Prints p50/p95 of each, and the candidate's p50 minus the baseline's. Use it for "before vs
after" questions: build the old commit in a worktree (`git worktree add /tmp/pre <commit>`,
`SANDFORT_BUILD_DIR=/tmp/pre/build ./scripts/build --target sandfortd sandfort-agent`).
"""

import argparse
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import sandfort_harness  # noqa: E402


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Side:
    def __init__(self, name, build_dir):
        self.name = name
        sandfort_harness.SANDFORTD = os.path.join(build_dir, "src", "sandfortd", "sandfortd")
        sandfort_harness.AGENT = os.path.join(build_dir, "src", "agent", "sandfort-agent")
        self.daemon = sandfort_harness.Daemon().start()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.daemon.port, timeout=120)
        status, sbx = self.call("POST", "/v1/sandboxes", {"snapshot": sandfort_harness.IMAGE, "wait": True})
        assert status == 201, sbx
        self.path = f"/v1/sandboxes/{sbx['id']}/process/exec"
        self.samples = []

    def call(self, method, path, body):
        self.conn.request(method, path, body=json.dumps(body),
                          headers={"Authorization": "Bearer " + self.daemon.admin_key,
                                   "Content-Type": "application/json"})
        r = self.conn.getresponse()
        return r.status, json.loads(r.read())

    def round(self, n, record=True):
        for _ in range(n):
            t = time.perf_counter()
            status, r = self.call("POST", self.path, {"argv": ["true"]})
            elapsed = (time.perf_counter() - t) * 1000
            assert status == 200 and r["exit_code"] == 0, r
            if record:
                self.samples.append(elapsed)

    def close(self):
        self.daemon.stop()
        self.daemon.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("baseline")
    ap.add_argument("candidate")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--per-round", type=int, default=100)
    args = ap.parse_args()
    sides = [Side("baseline", args.baseline), Side("candidate", args.candidate)]
    try:
        for s in sides:
            s.round(30, record=False)  # warm-up
        for i in range(args.rounds):
            for s in (sides if i % 2 == 0 else reversed(sides)):
                s.round(args.per_round)
        print(f"exec `true` through the REST API, {args.rounds} interleaved rounds of {args.per_round}")
        for s in sides:
            print(f"  {s.name:<10} p50 {pct(s.samples, 50):6.3f} ms   p95 {pct(s.samples, 95):6.3f} ms   (n={len(s.samples)})")
        delta = pct(sides[1].samples, 50) - pct(sides[0].samples, 50)
        print(f"  -> candidate - baseline at p50: {delta:+.3f} ms")
    finally:
        for s in sides:
            s.close()


if __name__ == "__main__":
    main()
