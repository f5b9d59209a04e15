#!/usr/bin/python3
"""Listener-flood benchmark (issue 30, "locked out without a credential"): figures in one run.

  A client without any credential holds 1,100 connections to each of the API and preview
  listeners: silent ones from one address, a slowloris (one header byte every 0.5 s) from one
  address, and both from twenty addresses (127.0.0.2...127.0.0.21). Whatever the daemon closes
  is opened again. Meanwhile a client on 127.0.0.1 calls, each on a fresh connection:
    - GET /healthz
    - an authenticated exec of `true` in its own sandbox
    - another organization's preview (a python http.server in that sandbox), with its token
  and the script prints p50/p99 of each without the flood and under each flood, and the ratio.

Run after ./scripts/build (as root, like the integration tests):
  /usr/bin/python3 bench/listener_flood.py [--quick] [--before BUILD_DIR]
--before also runs a build without the caps (e.g. one of f76866b:
  git worktree add /tmp/before f76866b && SANDFORT_BUILD_DIR=/tmp/before/build ./scripts/build
  --target sandfortd sandfort-agent); there an unanswered request counts as the request timeout
(5 s) and a flood is sampled only until three requests went unanswered.
It starts its own sandfortd daemons on temporary state directories and removes everything.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration", "attacks"))
import sandfort_harness  # noqa: E402
from test_listener_floods import (CONNECTIONS, REQUEST_TIMEOUT_S, UNLIMITED, Flood, fd_count, pct,  # noqa: E402
                                  prepare, raise_fd_limit)

FLOODS = [
    ("idle, 1 address", ["127.0.0.2"], False),
    ("slowloris, 1 address", ["127.0.0.2"], True),
    ("idle + slowloris, 20 addresses", [f"127.0.0.{i}" for i in range(2, 22)], None),
]


def figures(samples):
    """(answered, total, p50, p99) with an unanswered request counted as the timeout."""
    values = [REQUEST_TIMEOUT_S * 1000 if ms is None else ms for ms in samples]
    return sum(ms is not None for ms in samples), len(samples), pct(values, 50), pct(values, 99)


def line(label, samples, baseline=None):
    answered, total, p50, p99 = figures(samples)
    out = f"  {label:<34} {answered:>3}/{total:<3} p50 {p50:8.1f} ms  p99 {p99:8.1f} ms"
    if baseline:
        _, _, b50, b99 = figures(baseline)
        out += f"   x{p50 / b50:.1f} / x{p99 / b99:.1f} of no flood"
    return out


def run(label, build_dir, rounds):
    sandfort_harness.SANDFORTD = os.path.join(build_dir, "src", "sandfortd", "sandfortd")
    sandfort_harness.AGENT = os.path.join(build_dir, "src", "agent", "sandfort-agent")
    print(f"{label}: {build_dir}")
    d = sandfort_harness.Daemon({"log_level": "warn", "guardrails": {"rate_limits": {"member": UNLIMITED}}}).start()
    try:
        victims = prepare(d)
        quiet = victims.sample(rounds, give_up_after=rounds * 3)
        for name, samples in quiet.items():
            print(line(f"{name}, no flood", samples))
        for flood_label, sources, slowloris in FLOODS:
            ports = [d.port, d.preview_port]
            baseline_fds = fd_count(d.proc.pid)
            # The mixed flood: silent connections plus a slowloris of half as many.
            extra = Flood(ports, sources, CONNECTIONS // 2, slowloris=True) if slowloris is None else None
            if extra:
                extra.__enter__()
            try:
                with Flood(ports, sources, CONNECTIONS, slowloris=bool(slowloris)) as flood:
                    time.sleep(1.5)
                    held = fd_count(d.proc.pid)
                    during = victims.sample(rounds)
            finally:
                if extra:
                    extra.__exit__(None, None, None)
            print(f" under flood: {flood_label} ({flood.report()}; daemon fds {baseline_fds} -> {held})")
            for name, samples in during.items():
                print(line(name, samples, quiet[name]))
            time.sleep(1)  # the flood's leftovers close before the next one
        d.stop()
    finally:
        d.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--before", help="a build directory without the caps, run first for comparison")
    args = ap.parse_args()
    raise_fd_limit(4 * CONNECTIONS + 1024)
    rounds = 20 if args.quick else 100
    if args.before:
        run("before", args.before, rounds)
    run("after", sandfort_harness.BUILD, rounds)


if __name__ == "__main__":
    main()
