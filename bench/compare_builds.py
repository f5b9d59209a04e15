#!/usr/bin/python3
"""One operation through the REST API on two builds, in one run, interleaved.

  /usr/bin/python3 bench/compare_builds.py BASELINE_BUILD_DIR CANDIDATE_BUILD_DIR [--op exec|create]
                                           [--rounds N] [--per-round N]

  exec    POST /process/exec of `true` in one sandbox (default: 10 rounds of 100)
  create  POST /v1/sandboxes with wait=true (timed), then DELETE (not timed) (default: 10 rounds of 5)

  --role member|admin   call with a key of an ordinary organization instead of the superadmin's
  --candidate-config J  extra config (JSON) for the candidate only, e.g. rate limits high enough
                        for a benchmark (the key's and its organization's):
                        '{"guardrails":{"rate_limits":{"member":{"rate_per_s":1e5,"burst":1e5},"org":{"rate_per_s":1e5,"burst":1e5}}}}'
  --baseline-config J   the same for the baseline (one build against itself: a setting's cost)

Each build gets its own sandfortd (temporary state, its own sandbox network); rounds alternate
between them so that whatever else the machine does weighs on both alike. Prints p50/p95 of
each, and the candidate's p50 minus the baseline's. Use it for "before vs after" questions:
build the old commit in a worktree (`git worktree add /tmp/pre <commit>`,
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
    def __init__(self, name, build_dir, op, role=None, config=None):
        self.name = name
        self.op = op
        sandfort_harness.SANDFORTD = os.path.join(build_dir, "src", "sandfortd", "sandfortd")
        sandfort_harness.AGENT = os.path.join(build_dir, "src", "agent", "sandfort-agent")
        self.daemon = sandfort_harness.Daemon(config).start()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.daemon.port, timeout=120)
        self.key = self.daemon.admin_key
        if role:
            # A key of an ordinary organization: what a tenant's calls go through (the superadmin's
            # key skips the per-key rate limit when it is unlimited, as by default).
            status, org = self.call("POST", "/v1/orgs", {"name": "bench"})
            assert status == 201, org
            status, key = self.call("POST", f"/v1/orgs/{org['id']}/api-keys", {"name": "bench", "role": role})
            assert status == 201, key
            self.key = key["key"]
        if op == "exec":
            status, sbx = self.call("POST", "/v1/sandboxes", {"snapshot": sandfort_harness.IMAGE, "wait": True})
            assert status == 201, sbx
            self.path = f"/v1/sandboxes/{sbx['id']}/process/exec"
        self.samples = []

    def call(self, method, path, body=None):
        self.conn.request(method, path, body=None if body is None else json.dumps(body),
                          headers={"Authorization": "Bearer " + self.key,
                                   "Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None

    def once(self):
        """One timed operation; returns its duration in ms."""
        if self.op == "exec":
            t = time.perf_counter()
            status, r = self.call("POST", self.path, {"argv": ["true"]})
            elapsed = (time.perf_counter() - t) * 1000
            assert status == 200 and r["exit_code"] == 0, r
            return elapsed
        t = time.perf_counter()
        status, sbx = self.call("POST", "/v1/sandboxes", {"snapshot": sandfort_harness.IMAGE, "wait": True})
        elapsed = (time.perf_counter() - t) * 1000
        assert status == 201 and sbx["state"] == "started", sbx
        status, _ = self.call("DELETE", f"/v1/sandboxes/{sbx['id']}")
        assert status == 204, status
        return elapsed

    def round(self, n, record=True):
        for _ in range(n):
            elapsed = self.once()
            if record:
                self.samples.append(elapsed)

    def close(self):
        self.daemon.stop()
        self.daemon.cleanup()


WHAT = {"exec": "exec `true` through the REST API", "create": "create (wait: started) through the REST API"}
DEFAULTS = {"exec": (10, 100, 30), "create": (10, 5, 2)}  # rounds, per round, warm-up


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("baseline")
    ap.add_argument("candidate")
    ap.add_argument("--op", choices=sorted(WHAT), default="exec")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--per-round", type=int)
    ap.add_argument("--role", choices=["member", "admin"],
                    help="call with a key of that role in an organization of its own (default: the superadmin's)")
    ap.add_argument("--baseline-config", type=json.loads, default=None, help="extra config for the baseline, as JSON")
    ap.add_argument("--candidate-config", type=json.loads, default=None,
                    help="extra config for the candidate only, as JSON (keys the baseline may not know)")
    args = ap.parse_args()
    rounds, per_round, warm_up = DEFAULTS[args.op]
    rounds = args.rounds or rounds
    per_round = args.per_round or per_round
    sides = [Side("baseline", args.baseline, args.op, args.role, args.baseline_config),
             Side("candidate", args.candidate, args.op, args.role, args.candidate_config)]
    try:
        for s in sides:
            s.round(warm_up, record=False)
        for i in range(rounds):
            for s in (sides if i % 2 == 0 else reversed(sides)):
                s.round(per_round)
        print(f"{WHAT[args.op]}, {rounds} interleaved rounds of {per_round}")
        for s in sides:
            print(f"  {s.name:<10} p50 {pct(s.samples, 50):7.3f} ms   p95 {pct(s.samples, 95):7.3f} ms   (n={len(s.samples)})")
        delta = pct(sides[1].samples, 50) - pct(sides[0].samples, 50)
        print(f"  -> candidate - baseline at p50: {delta:+.3f} ms")
    finally:
        for s in sides:
            s.close()


if __name__ == "__main__":
    main()
