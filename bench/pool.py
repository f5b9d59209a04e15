#!/usr/bin/python3
"""Warm pool benchmark: what a create served by the pool costs against a cold one and against
`docker run -d`, and what refilling the pool does to exec traffic, measured in one run on one
daemon (`pools: [{"size": --pool-size}]`: the default image and default resources).

  /usr/bin/python3 bench/pool.py [--samples 40] [--pool-size 4] [--rounds 4] [--idle-execs 300]

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
    running, one member at a time), over `--rounds` alternating rounds; the refill/idle ratio

Targets: pooled create p50 <= 50 ms and p99 <= 150 ms. Percentiles are bench/foundation.py's
(nearest rank): with 40 samples p99 is the largest, so it is also printed as max.

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
        self.stop = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        try:
            while not self.stop.is_set():
                t = time.perf_counter()
                p = pool_state(self.api)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=40, help="pooled, cold and docker run creates, each")
    ap.add_argument("--pool-size", type=int, default=4)
    ap.add_argument("--cold-cpus", type=float, default=0.5, help="resource class no pool serves")
    ap.add_argument("--rounds", type=int, default=4, help="exec rounds: pool idle, then refilling")
    ap.add_argument("--idle-execs", type=int, default=300, help="execs per round with the pool full and idle")
    args = ap.parse_args()
    assert args.samples >= 2 and args.pool_size >= 1
    signal.signal(signal.SIGTERM, on_sigterm)

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
        d.kill()  # first, so that requests still in flight fail at once
        for attempt in range(2):  # a `docker run` interrupted mid-way may finish creating just after
            for cid in bench_containers():  # before the network goes: they are attached to it
                docker("DELETE", f"/containers/{cid}?force=true")
            if attempt == 0 and not finished:
                time.sleep(1)
        d.cleanup()
        for cid in containers_of_instance(instance):  # members or a sandbox a killed daemon left behind
            docker("DELETE", f"/containers/{cid}?force=true")


if __name__ == "__main__":
    main()
