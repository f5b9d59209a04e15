#!/usr/bin/python3
"""Warm pool benchmark: what a create served by the pool costs against a cold one and against
`docker run -d`, and what refilling the pool does to exec traffic, measured in one run on one
daemon (`pools: [{"size": --pool-size}]`: the default image and default resources).

  /usr/bin/python3 bench/pool.py [--samples 40] [--pool-size 4] [--rounds 4] [--idle-execs 300]
                                 [--burst 20] [--burst-max 24] [--max-parallel 2] [--burst-only]
                                 [--sweep 1,2,3,4 [--sweep-size 12]]

  - pooled create: POST /v1/sandboxes (wait=true) of the default image and resources, request to
    response (`state: started`); before each sample the bench waits (untimed) until GET /v1/pool
    shows ready == size, so every sample finds a member; each sample is checked to be a claim
  - cold create: the same request with resources {"cpus": 0.5}, a class no pool serves
  - `docker run -d --rm <image> sleep 300` (CLI, on the sandboxes' own network, as
    bench/foundation.py does), until it returns; beside it, until a `docker exec <id> true` answers
  - the three are interleaved (pooled, cold, docker run, pooled, ...) and each starts with the pool
    full and no refill running, so all three see the same machine state; the sandbox or container
    is removed after each sample (its delete timed apart)
  - exec of `true` in a separate idle sandbox (2 cpus, made cold) while the pool is full and idle
    against right after claiming all --pool-size members, until the pool is full again (refills
    running, pool.max_parallel at once), over `--rounds` alternating rounds; the refill/idle ratio

Then, on a second daemon whose pool learns (`pools: [{"min_size": 2, "max_size": --burst-max}]`,
`pool.max_parallel`: --max-parallel, a resource class of --burst-memory-mb), the figure of issue 37:
  - --burst creates waiting for started, in a row, twice: a first burst (which teaches the pool
    its size), an untimed pause until the pool has refilled to its new target (how long that took
    and how many members it made at once are printed), then a second burst; each burst's total
  - beside them, in the same run, with the pool full and idle: --burst cold creates in a row (a
    resource class no pool serves) and --burst `docker run -d` + first `docker exec` in a row
  - single-create p50/p99 of the second burst's creates (the pool not empty, refills running)
  The sandboxes of each burst stay until the end of the run (removed untimed), so that no delete
  runs beside a burst or the refill.

Targets: pooled create p50 <= 50 ms and p99 <= 150 ms; the second burst under 2 s. Percentiles are
bench/foundation.py's (nearest rank): with 40 samples p99 is the largest, so it is also printed as max.
  --burst-only runs the burst part alone. --sweep 1,2,3,4 runs only this: a pool of --sweep-size
  (the burst's class) filled from empty after start, for each pool.max_parallel given, twice each.

Run after ./scripts/setup and ./scripts/build (as root, like the integration tests). It starts
its own sandfortd on a temporary state directory and removes everything it made, also on Ctrl-C
and SIGTERM.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import Daemon, docker  # noqa: E402
from foundation import Api, pct  # noqa: E402
from density import containers_of_instance, instance_id  # noqa: E402

BENCH_LABEL = "io.sandfort.bench=pool"  # on the `docker run` containers, so that cleanup finds them


def on_sigterm(*_):
    raise KeyboardInterrupt  # cleans up as Ctrl-C does


def ms_since(t):
    return (time.perf_counter() - t) * 1000


def pool_state(api):
    status, body = api.call("GET", "/v1/pool")
    assert status == 200, (status, body)
    [p] = body["pools"]
    return p


def wait_full(api, limit=180):
    """Polls GET /v1/pool until every member is ready; returns (state, seconds waited)."""
    t0 = time.perf_counter()
    while True:
        p = pool_state(api)
        if p["ready"] == p["size"] and not p["filling"]:
            return p, time.perf_counter() - t0
        if time.perf_counter() - t0 > limit:
            raise RuntimeError(f"the pool did not refill in {limit} s: {p}")
        time.sleep(0.02)


def create(api, spec):
    t = time.perf_counter()
    status, sbx = api.call("POST", "/v1/sandboxes", spec)
    ms = ms_since(t)
    assert status == 201 and sbx["state"] == "started", (status, sbx)
    return sbx["id"], ms


def delete(api, sid):
    t = time.perf_counter()
    status, body = api.call("DELETE", f"/v1/sandboxes/{sid}")
    assert status == 204, (status, body)
    return ms_since(t)


def exec_ms(api, sid):
    t = time.perf_counter()
    status, r = api.call("POST", f"/v1/sandboxes/{sid}/process/exec", {"argv": ["true"]})
    ms = ms_since(t)
    assert status == 200 and r["exit_code"] == 0, (status, r)
    return ms


def run(argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def bench_containers():
    status, body = docker("GET", "/containers/json?all=true&filters=" +
                          urllib.parse.quote(json.dumps({"label": [BENCH_LABEL]})))
    return [c["Id"] for c in body] if status == 200 else []


class Watcher:
    """Polls GET /v1/pool on its own connection every `interval` s (in both exec phases alike, so
    that its own load is the same in each) and says whether the pool is full and idle."""

    def __init__(self, port, key, interval=0.05):
        self.api = Api(port, key)
        self.interval = interval
        self.full_seen = 0.0  # when the latest poll that found the pool full began (perf_counter)
        self.most_making = 0  # the most members seen being made at once
        self.stop = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        try:
            while not self.stop.is_set():
                t = time.perf_counter()
                p = pool_state(self.api)
                self.most_making = max(self.most_making, p["making"])
                if p["ready"] == p["size"] and not p["filling"]:
                    self.full_seen = t
                self.stop.wait(self.interval)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.error = e
            self.full_seen = float("inf")

    def full_since(self, t):
        """Whether a poll begun after t found the pool full."""
        return self.full_seen > t

    def close(self):
        self.stop.set()
        self.thread.join(5)


def row(name, samples, note=""):
    print(f"  {name:<46} p50 {pct(samples, 50):8.1f} ms   p99 {pct(samples, 99):8.1f} ms   "
          f"max {max(samples):8.1f} ms   (n={len(samples)}){note}")


def burst(api, spec, n):
    """n creates waiting for started, in a row: (ids, per-create ms, total s)."""
    ids, times = [], []
    t0 = time.perf_counter()
    for _ in range(n):
        sid, ms = create(api, spec)
        ids.append(sid)
        times.append(ms)
    return ids, times, time.perf_counter() - t0


def docker_run_burst(image, network, n):
    """n `docker run -d` + first `docker exec` in a row: (ids, per-container ms, total s)."""
    ids, times = [], []
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        cid = run(["docker", "run", "-d", "--rm", "--label", BENCH_LABEL, "--network", network, image, "sleep", "300"])
        run(["docker", "exec", cid, "true"])
        ids.append(cid)
        times.append(ms_since(t))
    return ids, times, time.perf_counter() - t0


def cleanup(d, instance, finished):
    d.kill()  # first, so that requests still in flight fail at once
    for attempt in range(2):  # a `docker run` interrupted mid-way may finish creating just after
        for cid in bench_containers():  # before the network goes: they are attached to it
            docker("DELETE", f"/containers/{cid}?force=true")
        if attempt == 0 and not finished:
            time.sleep(1)
    d.cleanup()
    for cid in containers_of_instance(instance):  # members or a sandbox a killed daemon left behind
        docker("DELETE", f"/containers/{cid}?force=true")


def burst_bench(args):
    res = {"cpus": 1.0, "memory_mb": args.burst_memory_mb, "pids": 512}
    d = Daemon({"log_level": "warn", "idle_timeout_s": 3600,
                "pools": [{"min_size": 2, "max_size": args.burst_max, "resources": res}],
                "pool": {"max_parallel": args.max_parallel}})
    instance = instance_id(d)
    watcher = None
    finished = False
    try:
        d.start()
        api = Api(d.port, d.admin_key)
        p, filled_s = wait_full(api)
        image, network, n = p["image"], d.network["name"], args.burst
        # Three bursts' sandboxes are running at the end: more CPUs than an organization's default quota.
        status, me = api.call("GET", "/v1/whoami")
        assert status == 200, (status, me)
        status, body = api.call("PUT", f"/v1/orgs/{me['org_id']}/limits", {"max_cpus": 4 * n, "max_sandboxes": 4 * n})
        assert status == 200, (status, body)
        pooled_spec = {"snapshot": image, "wait": True, "resources": res}
        cold_spec = dict(pooled_spec, resources=dict(res, cpus=args.cold_cpus))
        print(f"burst: {n} creates waiting for started, in a row, twice, against a pool of {p['min_size']} to "
              f"{p['max_size']} x {image} {json.dumps(res)}, pool.max_parallel {args.max_parallel}; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        # Warm-up, untimed, with classes the pool does not serve: no first-time cost in a figure.
        sid, _ = create(api, cold_spec)
        delete(api, sid)
        cid = run(["docker", "run", "-d", "--rm", "--label", BENCH_LABEL, "--network", network, image, "sleep", "300"])
        run(["docker", "rm", "-f", cid])

        watcher = Watcher(d.port, d.admin_key)
        before = pool_state(api)
        ids1, first, first_s = burst(api, pooled_spec, n)
        taught = pool_state(api)
        t = time.perf_counter()
        full, _ = wait_full(api, limit=600)
        refill_s = time.perf_counter() - t
        most_making = watcher.most_making
        print(f"  first burst: {first_s:.2f} s ({taught['claims'] - before['claims']} from the pool, "
              f"{taught['misses'] - before['misses']} cold); target now {taught['target']} "
              f"({taught['reason']})", flush=True)
        print(f"  pause: the pool reached {full['ready']} ready {refill_s:.1f} s after the burst, "
              f"at most {most_making} made at once", flush=True)

        ids2, second, second_s = burst(api, pooled_spec, n)
        after = pool_state(api)
        served = after["claims"] - full["claims"]
        print(f"  second burst: {second_s:.2f} s ({served} from the pool, {after['misses'] - full['misses']} cold)",
              flush=True)
        wait_full(api, limit=600)
        watcher.close()
        watcher = None

        # The baselines, with the pool full and idle.
        ids3, cold, cold_s = burst(api, cold_spec, n)
        cids, drun, drun_s = docker_run_burst(image, network, n)
        for cid in cids:
            run(["docker", "rm", "-f", cid])
        for sid in ids1 + ids2 + ids3:
            delete(api, sid)
        print()

        print(f"results: {n} creates waiting for started, in a row")
        print(f"  {'first burst (teaches the pool)':<46} total {first_s:7.2f} s   per create p50 {pct(first, 50):7.1f} ms")
        print(f"  {'second burst (after the refill)':<46} total {second_s:7.2f} s   per create p50 {pct(second, 50):7.1f} ms"
              f"   ({served}/{n} from the pool)")
        print(f"  {'cold creates (cpus ' + str(args.cold_cpus) + ', no pool)':<46} total {cold_s:7.2f} s   "
              f"per create p50 {pct(cold, 50):7.1f} ms")
        print(f"  {'docker run -d + first docker exec':<46} total {drun_s:7.2f} s   "
              f"per container p50 {pct(drun, 50):7.1f} ms")
        print(f"  -> second burst / cold: {second_s / cold_s:.3f}x, / docker run: {second_s / drun_s:.3f}x; "
              f"target second burst < 2 s: {'MET' if second_s < 2 else 'MISSED'} ({second_s:.2f} s)")
        row("single create, the pool not empty (2nd burst)", second)
        p99 = pct(second, 99)
        print(f"  -> target p99 < 150 ms: {'MET' if p99 < 150 else 'MISSED'} ({p99:.1f} ms)")
        print(f"  refill after the first burst: {refill_s:.1f} s to {full['ready']} ready, at most {most_making} "
              f"being made at once (pool.max_parallel {args.max_parallel}); the pool filled to "
              f"{p['min_size']} in {filled_s:.1f} s after start")
        print(f"  pool at the end: {json.dumps({k: after[k] for k in ('target', 'reason', 'last_burst')})}; "
              f"load average {os.getloadavg()[0]:.2f}")
        finished = True
    finally:
        if watcher:
            watcher.stop.set()
        cleanup(d, instance, finished)


def parallel_sweep(args):
    """How long a pool of --sweep-size takes to fill from empty after start, for each
    pool.max_parallel of --sweep (twice each, interleaved): the figure behind its default."""
    res = {"cpus": 1.0, "memory_mb": args.burst_memory_mb, "pids": 512}
    settings = [int(x) for x in args.sweep.split(",")]
    seen = {mp: [] for mp in settings}
    for _ in range(2):
        for mp in settings:
            d = Daemon({"log_level": "warn", "pools": [{"size": args.sweep_size, "resources": res}],
                        "pool": {"max_parallel": mp}})
            instance = instance_id(d)
            finished = False
            try:
                d.start()
                api = Api(d.port, d.admin_key)
                t0, most = time.perf_counter(), 0
                while (p := pool_state(api))["ready"] < args.sweep_size:
                    most = max(most, p["making"])
                    if time.perf_counter() - t0 > 300:
                        raise RuntimeError(f"the pool did not fill in 300 s: {p}")
                    time.sleep(0.02)
                seen[mp].append(time.perf_counter() - t0)
                print(f"  pool.max_parallel {mp}: {args.sweep_size} members ready {seen[mp][-1]:.2f} s after start "
                      f"(at most {most} made at once); load average {os.getloadavg()[0]:.2f}", flush=True)
                finished = True
            finally:
                cleanup(d, instance, finished)
    print("results: " + ", ".join(f"{mp} at once: " + " / ".join(f"{t:.1f} s" for t in seen[mp]) for mp in settings))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=40, help="pooled, cold and docker run creates, each")
    ap.add_argument("--pool-size", type=int, default=4)
    ap.add_argument("--cold-cpus", type=float, default=0.5, help="resource class no pool serves")
    ap.add_argument("--rounds", type=int, default=4, help="exec rounds: pool idle, then refilling")
    ap.add_argument("--idle-execs", type=int, default=300, help="execs per round with the pool full and idle")
    ap.add_argument("--burst", type=int, default=20, help="creates in a row in each burst")
    ap.add_argument("--burst-max", type=int, default=24, help="max_size of the learning pool")
    ap.add_argument("--burst-memory-mb", type=int, default=256, help="memory_mb of the learning pool's class")
    ap.add_argument("--max-parallel", type=int, default=2, help="pool.max_parallel of the learning pool's daemon")
    ap.add_argument("--burst-only", action="store_true", help="only the burst part")
    ap.add_argument("--sweep", metavar="N,N,...", help="only this: fill times for these pool.max_parallel")
    ap.add_argument("--sweep-size", type=int, default=12, help="the pool --sweep fills")
    args = ap.parse_args()
    assert args.samples >= 2 and args.pool_size >= 1 and args.burst >= 1
    signal.signal(signal.SIGTERM, on_sigterm)
    if args.sweep:
        parallel_sweep(args)
        return
    if not args.burst_only:
        fixed_pool_bench(args)
        print()
    burst_bench(args)


def fixed_pool_bench(args):
    d = Daemon({"log_level": "warn", "idle_timeout_s": 3600, "pools": [{"size": args.pool_size}]})
    instance = instance_id(d)
    watcher = None
    finished = False
    try:
        d.start()
        api = Api(d.port, d.admin_key)
        other = Api(d.port, d.admin_key)  # claims during the exec phase
        p, filled_s = wait_full(api)
        image, res = p["image"], p["resources"]
        assert abs(args.cold_cpus - res["cpus"]) > 1e-9, "--cold-cpus must differ from the pool's cpus"
        exec_cpus = 2.0 if abs(res["cpus"] - 2.0) > 1e-9 else 1.5
        engine = docker("GET", "/version")[1]
        print(f"sandfort pool bench: pool of {p['size']} x {image} {json.dumps(res)}, {args.samples} samples "
              f"each; Docker {engine['Version']}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
              f"the pool filled in {filled_s:.1f} s after start\n", flush=True)

        pooled_spec = {"snapshot": image, "wait": True}
        cold_spec = dict(pooled_spec, resources={"cpus": args.cold_cpus})
        network = d.network["name"]

        # Warm-up, untimed: one of each, so that no first-time cost lands in a sample.
        for spec in (pooled_spec, cold_spec):
            wait_full(api)
            sid, _ = create(api, spec)
            delete(api, sid)
        cid = run(["docker", "run", "-d", "--rm", "--label", BENCH_LABEL, "--network", network, image, "sleep", "300"])
        run(["docker", "rm", "-f", cid])

        pooled, cold, drun, drun_exec, refill_s = [], [], [], [], []
        pooled_del, cold_del = [], []
        print(f"creates: pooled, cold (cpus {args.cold_cpus}), docker run -d, interleaved, {args.samples} rounds",
              flush=True)
        for i in range(args.samples):
            before, _ = wait_full(api)
            sid, ms = create(api, pooled_spec)
            after = pool_state(api)
            assert after["claims"] == before["claims"] + 1 and after["misses"] == before["misses"], \
                f"sample {i} was not served by the pool: {before} -> {after}"
            pooled.append(ms)
            pooled_del.append(delete(api, sid))
            refill_s.append(wait_full(api)[1])  # untimed for the create: a member is made again

            before = pool_state(api)
            sid, ms = create(api, cold_spec)
            after = pool_state(api)
            assert after["claims"] == before["claims"], f"cold sample {i} took a member: {before} -> {after}"
            cold.append(ms)
            cold_del.append(delete(api, sid))

            wait_full(api)  # (full already: the cold create takes nothing)
            t = time.perf_counter()
            cid = run(["docker", "run", "-d", "--rm", "--label", BENCH_LABEL, "--network", network,
                       image, "sleep", "300"])
            drun.append(ms_since(t))
            run(["docker", "exec", cid, "true"])
            drun_exec.append(ms_since(t))
            run(["docker", "rm", "-f", cid])
            if (i + 1) % 10 == 0:
                print(f"  {i + 1}/{args.samples}: pooled p50 {pct(pooled, 50):.1f} ms, cold p50 {pct(cold, 50):.0f} ms, "
                      f"docker run p50 {pct(drun, 50):.0f} ms", flush=True)
        print()

        # Exec while the pool refills.
        xid, _ = create(api, {"snapshot": image, "wait": True, "idle_timeout_s": 0,
                              "resources": {"cpus": exec_cpus}})
        for _ in range(30):
            exec_ms(api, xid)
        watcher = Watcher(d.port, d.admin_key)
        idle, busy, claim_ms, refill_round_s = [], [], [], []
        print(f"exec of `true` in an idle sandbox ({exec_cpus} cpus): {args.rounds} rounds of {args.idle_execs} with "
              f"the pool full and idle, then claim {args.pool_size} members and exec until it is full again",
              flush=True)
        for r in range(args.rounds):
            wait_full(api)
            time.sleep(0.2)
            assert watcher.full_since(time.perf_counter() - 0.15), watcher.error
            round_idle = [exec_ms(api, xid) for _ in range(args.idle_execs)]
            assert pool_state(api)["ready"] == args.pool_size  # nothing refilled meanwhile
            claimed = []
            t0 = time.perf_counter()
            for _ in range(args.pool_size):
                sid, ms = create(other, pooled_spec)
                claimed.append(sid)
                claim_ms.append(ms)
            claimed_at = time.perf_counter()
            round_busy = []
            while not watcher.full_since(claimed_at):
                round_busy.append(exec_ms(api, xid))
            if watcher.error:
                raise watcher.error
            refill_round_s.append(time.perf_counter() - t0)
            for sid in claimed:
                delete(other, sid)
            idle += round_idle
            busy += round_busy
            print(f"  round {r + 1}: idle p50 {pct(round_idle, 50):6.2f} ms p99 {pct(round_idle, 99):6.2f} ms | "
                  f"refilling ({refill_round_s[-1]:.1f} s) p50 {pct(round_busy, 50):6.2f} ms "
                  f"p99 {pct(round_busy, 99):6.2f} ms (n={len(round_busy)})", flush=True)
        watcher.close()
        watcher = None
        delete(api, xid)
        print()

        final = pool_state(api)
        p50, p99 = pct(pooled, 50), pct(pooled, 99)
        print("results")
        row("pooled create (wait=true) -> started", pooled)
        row(f"cold create (cpus {args.cold_cpus}) -> started", cold)
        row("docker run -d --rm (CLI, same image)", drun)
        row("docker run -d + first docker exec answers", drun_exec)
        row("delete of a pooled sandbox (not in the above)", pooled_del)
        row("delete of a cold sandbox (not in the above)", cold_del)
        row("untimed wait for refill after pooled delete", [s * 1000 for s in refill_s])
        print(f"  -> pooled / cold:        p50 {p50 / pct(cold, 50):.3f}x ({pct(cold, 50) / p50:.1f}x faster), "
              f"p99 {p99 / pct(cold, 99):.3f}x")
        print(f"  -> pooled / docker run:  p50 {p50 / pct(drun, 50):.3f}x ({pct(drun, 50) / p50:.1f}x faster), "
              f"p99 {p99 / pct(drun, 99):.3f}x")
        print(f"  -> target pooled p50 <= 50 ms: {'MET' if p50 <= 50 else 'MISSED'} ({p50:.1f} ms); "
              f"p99 <= 150 ms: {'MET' if p99 <= 150 else 'MISSED'} ({p99:.1f} ms)\n")

        print(f"exec of `true` while the pool refills ({args.rounds} rounds)")
        row("pool full and idle", idle)
        row(f"after claiming {args.pool_size}, until full again", busy)
        row(f"the {len(claim_ms)} claims themselves (back to back)", claim_ms)
        print(f"  refill of {args.pool_size} members: p50 {pct(refill_round_s, 50):.1f} s per round")
        print(f"  -> refilling / idle: p50 {pct(busy, 50) / pct(idle, 50):.2f}x, "
              f"p99 {pct(busy, 99) / pct(idle, 99):.2f}x\n")
        print(f"pool at the end: ready {final['ready']}/{final['size']}, claims {final['claims']}, "
              f"misses {final['misses']}, last_error {final['last_error']!r}; load average {os.getloadavg()[0]:.2f}")
        finished = True
    finally:
        if watcher:
            watcher.stop.set()
        cleanup(d, instance, finished)


if __name__ == "__main__":
    main()
