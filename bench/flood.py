#!/usr/bin/python3
"""Connection-flood benchmark: prints figures and ratios measured in one run.

  A sandbox opens 3000 connections to the egress proxy as fast as it can and holds them 5 s
  without ever sending a request (the attack of issue 9). Meanwhile the host samples
    - the daemon's open descriptors (/proc/<pid>/fd): baseline vs peak during the flood
    - /healthz on a fresh connection each time: p50/p99 during the flood  vs  before it
    - a fresh authenticated CONNECT from another tenant's sandbox: during  vs  before
  first on a daemon with the default caps, then on one whose pending caps are lifted (what the
  proxy did before egress.max_pending_per_source / max_pending existed), for reference.

Run after ./scripts/setup and ./scripts/build (as root, like the integration tests):
  /usr/bin/python3 bench/flood.py [--quick]
It starts its own sandfortd daemons on temporary state directories and removes everything.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration", "attacks"))
from sandfort_harness import Daemon  # noqa: E402
from foundation import pct  # noqa: E402
from test_floods import CONNECT_ONCE, Sampler, Upstream, fd_count, flood, org_key  # noqa: E402

QUICK = "--quick" in sys.argv
CONNECTIONS = 1000 if QUICK else 3000
HOLD_S = 2 if QUICK else 5
BEFORE_S = 2 if QUICK else 5
CONNECTS = 10 if QUICK else 30


def connect_ms(client, sid, port, n):
    """n CONNECTs from inside sid, one after another; their set-up times in ms."""
    out = []
    for _ in range(n):
        r = client.exec(sid, argv=["python3", "-c", CONNECT_ONCE, str(port)])
        answer = json.loads(r["stdout"])
        assert answer["answer"].startswith("HTTP/1.1 200"), answer
        out.append(answer["ms"])
    return out


def run(label, extra_egress):
    print(f"{label}: {CONNECTIONS} connections held {HOLD_S} s")
    d = Daemon({"log_level": "warn", "egress": dict({"allowed_ranges": "127.0.0.0/8"}, **extra_egress)}).start()
    upstream = Upstream()
    try:
        attacker_key, victim_key = org_key(d, "attacker"), org_key(d, "victim")
        attacker, victim = d.client(attacker_key), d.client(victim_key)
        a = attacker.create_sandbox()
        b = victim.create_sandbox(egress_allowlist=["localhost"])
        pid = d.proc.pid
        connects_before = connect_ms(victim, b["id"], upstream.port, CONNECTS)
        time.sleep(0.5)
        with Sampler(pid, d.port, every_s=0.005) as before:
            time.sleep(BEFORE_S)
        baseline = fd_count(pid)
        with Sampler(pid, d.port, every_s=0.005) as during:
            holding, closed, exit_event, connects_during = flood(
                d, attacker_key, a["id"], CONNECTIONS, HOLD_S,
                during=lambda: connect_ms(victim, b["id"], upstream.port, CONNECTS))
        assert exit_event and exit_event["exit_code"] == 0, (holding, closed, exit_event)
        peak = max(during.fds)
        print(f"  attacker: opened {holding['holding']} in {holding['open_s']:.2f} s "
              f"({holding['failed']} failed), {closed['closed_by_proxy']} closed by the proxy by the end")
        print(f"  daemon descriptors      baseline {baseline:6d}   peak {peak:6d}   (+{peak - baseline})")
        h0, h1 = pct(before.healthz, 50), pct(during.healthz, 50)
        q0, q1 = pct(before.healthz, 99), pct(during.healthz, 99)
        print(f"  /healthz before         p50 {h0:7.2f} ms   p99 {q0:7.2f} ms   (n={len(before.healthz)})")
        print(f"  /healthz during flood   p50 {h1:7.2f} ms   p99 {q1:7.2f} ms   (n={len(during.healthz)}, "
              f"unanswered {during.unanswered}, slowest {max(during.healthz):.2f} ms)")
        print(f"  -> during / before: p50 {h1 / h0:.2f}x, p99 {q1 / q0:.2f}x")
        c0, c1 = pct(connects_before, 50), pct(connects_during, 50)
        print(f"  CONNECT from another tenant: p50 {c0:.2f} ms before, {c1:.2f} ms during "
              f"({c1 / c0:.2f}x; n={CONNECTS} each)\n")
        attacker.delete(f"/v1/sandboxes/{a['id']}")
        victim.delete(f"/v1/sandboxes/{b['id']}")
    finally:
        upstream.close()
        d.stop()
        d.cleanup()


def main():
    run("default caps (max_pending_per_source 32, max_pending 512)", {})
    run("pending caps lifted (as before them)", {"max_pending_per_source": 1000000, "max_pending": 1000000})


if __name__ == "__main__":
    main()
