#!/usr/bin/python3
"""Large exec answers benchmark (issue 30, "One member stalls everyone"): prints figures measured
in one run.

  A member of one organization runs PARALLEL `binary: true` execs at once, each printing
  STREAM_MIB of random bytes on stdout and as much on stderr (the issue's load: 6 x 11 MiB, cut to
  the 10 MiB cap: about 55 MB of JSON per answer). Meanwhile the host times, on fresh connections:
    - /healthz
    - an exec of `true` by another organization in its own sandbox
    - a preview of that organization's sandbox (python3 -m http.server)
  and reads the daemon's resident memory before and at its peak (VmHWM). Before the load, one
  answer alone is timed end to end (the client's view).

Run after ./scripts/setup and ./scripts/build (as root, like the integration tests):
  /usr/bin/python3 bench/large_answers.py [--quick] [--before BUILD_DIR]
--before runs the same load first on another build (for example the commit before answers left
the I/O thread, built in a worktree of its own: git worktree add /tmp/answers-before f76866b &&
(cd /tmp/answers-before && ./scripts/build --target sandfortd sandfort-agent)) and prints ratios.
It starts its own sandfortd daemons on temporary state directories and removes everything.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration", "attacks"))
import sandfort_harness  # noqa: E402
from sandfort_harness import Daemon  # noqa: E402
from test_large_answers import UNLIMITED, load_command, org_key, run_load  # noqa: E402

QUICK = "--quick" in sys.argv
PARALLEL = 4 if QUICK else 6
STREAM_MIB = 4 if QUICK else 11


def use_build(build_dir):
    sandfort_harness.SANDFORTD = os.path.join(build_dir, "src", "sandfortd", "sandfortd")
    sandfort_harness.AGENT = os.path.join(build_dir, "src", "agent", "sandfort-agent")


def one_answer_ms(daemon):
    """One binary exec of the load's size alone: the client's time to its whole answer."""
    member = daemon.client(org_key(daemon, "alone"))
    sbx = member.create_sandbox()
    out = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = member.post(f"/v1/sandboxes/{sbx['id']}/process/exec",
                        {"command": load_command(STREAM_MIB << 20), "binary": True, "timeout_s": 120})
        out.append(((time.perf_counter() - t0) * 1000, r.status, len(r.body)))
    member.delete(f"/v1/sandboxes/{sbx['id']}")
    return min(out)


def run(label, build_dir):
    use_build(build_dir)
    print(f"{label} ({build_dir}): {PARALLEL} parallel binary execs of {STREAM_MIB} MiB + {STREAM_MIB} MiB")
    d = Daemon({"log_level": "warn",
                "guardrails": {"rate_limits": {"viewer": UNLIMITED, "member": UNLIMITED, "admin": UNLIMITED}}}).start()
    try:
        alone_ms, status, size = one_answer_ms(d)
        got = run_load(d, PARALLEL, 1, STREAM_MIB << 20)
        assert d.stop() == 0, d.log()
    finally:
        d.cleanup()
    statuses = {}
    for status_, _, _ in got["outcomes"]:
        statuses[status_] = statuses.get(status_, 0) + 1
    sizes = [size_ for _, size_, _ in got["outcomes"]]
    print(f"  one answer alone: {alone_ms:.0f} ms (status {status}, {size / 1e6:.1f} MB)")
    print(f"  the load: {got['attack_s']:.1f} s, statuses {statuses}, answers {min(sizes) / 1e6:.1f}-"
          f"{max(sizes) / 1e6:.1f} MB")
    for name, s in got["probes"].items():
        print(f"  {name:8s} n={s['n']:4d} p50={s['p50']:7.1f} ms  p99={s['p99']:7.1f} ms  max={s['max']:7.1f} ms"
              f"  failed={s['failed']}")
    growth = got["rss_peak_mib"] - got["rss_before_mib"]
    print(f"  RSS {got['rss_before_mib']:.0f} MiB before, peak {got['rss_peak_mib']:.0f} MiB: +{growth:.0f} MiB")
    got["growth"] = growth
    return got


def main():
    before_dir = None
    if "--before" in sys.argv:
        before_dir = sys.argv[sys.argv.index("--before") + 1]
    after_dir = os.environ.get("SANDFORT_BUILD_DIR", os.path.join(HERE, "..", "build"))
    results = {}
    if before_dir:
        results["before"] = run("before", before_dir)
    results["after"] = run("after", after_dir)
    if before_dir:
        print("after / before:")
        for name in results["after"]["probes"]:
            b, a = results["before"]["probes"][name], results["after"]["probes"][name]
            print(f"  {name:8s} p99 {a['p99'] / b['p99']:.3f}  max {a['max'] / b['max']:.3f}")
        print(f"  RSS growth {results['after']['growth'] / results['before']['growth']:.2f}")
    print(json.dumps({k: {"probes": v["probes"], "growth_mib": round(v["growth"], 1), "attack_s": round(v["attack_s"], 1)}
                      for k, v in results.items()}))


if __name__ == "__main__":
    main()
