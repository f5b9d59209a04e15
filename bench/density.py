#!/usr/bin/python3
"""Density benchmark: what N idle sandboxes cost the host and the daemon, measured in one run.

  /usr/bin/python3 bench/density.py [--count 400] [--concurrency 4] [--rounds 5]

  - host memory per idle sandbox: MemAvailable (/proc/meminfo) before the N creates and after
    them, divided by N; beside it the N containers' own memory (their cgroups), the
    containerd-shim processes' and dockerd's memory (PSS), before and after
  - sandfortd's resident memory, open descriptors and threads (/proc/<pid>) before, with the N
    sandboxes idle, and after they are deleted; its growth per sandbox in KiB
  - create (wait=true, `--concurrency` at a time) p50 of the first tenth and of the last tenth,
    and their ratio
  - exec of `true` round-robin over all N idle sandboxes, `--rounds` times (p50/p99 per round
    and overall) against the same number of execs in a single sandbox (1 cpu, or its CFS quota
    throttles back-to-back execs) before the N existed
  - delete of all N (`--concurrency` at a time): total and per sandbox

Each sandbox asks for the least it may (`--cpus` 0.1, 64 MiB, 64 pids) and never idles out
(`idle_timeout_s` 0). The daemon is given a /22 sandbox network (a /24 holds 253 sandboxes) and
quotas above N (guardrails.max_sandboxes, max_cpus, max_memory_mb, max_disk_mb: operator config) and host memory
admission over-committed far enough for N (host.memory_overcommit), and keeps
idle kept-alive connections for an hour (idle_timeout_s) so that the bench's connections live
through every phase; requests use the superadmin's key, which guardrails' rate limits do not
apply to. Shims' and dockerd's memory is their PSS (shared pages split among their users).

Run after ./scripts/setup and ./scripts/build (as root, like the integration tests). It starts
its own sandfortd on a temporary state directory and removes everything it made, also on Ctrl-C.
"""

import argparse
import concurrent.futures
import ipaddress
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import IMAGE, Daemon, docker, rss_kib  # noqa: E402
from foundation import Api, pct  # noqa: E402


def free_subnet(prefix=22):
    """A /22 under 10.214.0.0/16 that no Docker network uses (the harness's /24s are under
    10.215.0.0/16, sandfortd's default is 10.213.0.0/16)."""
    status, networks = docker("GET", "/networks")
    assert status == 200, networks
    used = [ipaddress.ip_network(c["Subnet"], strict=False)
            for n in networks for c in ((n.get("IPAM") or {}).get("Config") or []) if c.get("Subnet")]
    for candidate in ipaddress.ip_network("10.214.0.0/16").subnets(new_prefix=prefix):
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    raise RuntimeError("no free /%d left under 10.214.0.0/16" % prefix)


def meminfo_kib():
    """MemAvailable and the kernel's own (Slab + PageTables + KernelStack), in KiB."""
    with open("/proc/meminfo") as f:
        m = {line.split(":")[0]: int(line.split()[1]) for line in f}
    return m["MemAvailable"], m["Slab"] + m["PageTables"] + m["KernelStack"]


def mem_available_kib():
    return meminfo_kib()[0]


def proc_figures(pid):
    """RSS (KiB), open descriptors and threads of a process."""
    threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
    return {"rss": rss_kib(pid), "fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": threads}


def pss_of_named(prefix):
    """Total proportional set size (KiB: shared pages split among their users, so 400 shims are
    not counted 400 times for one binary) and number of the processes whose name starts with prefix."""
    total, n = 0, 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if not f.read().startswith(prefix):
                    continue
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
            n += 1
        except (OSError, StopIteration):
            pass
    return total, n


def instance_id(d):
    db = sqlite3.connect(os.path.join(d.state_dir, "sandfort.db"))
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'instance_id'").fetchone()[0]
    finally:
        db.close()


def containers_of_instance(instance):
    status, body = docker("GET", "/containers/json?all=true&filters=" +
                          urllib.parse.quote(json.dumps({"label": [f"io.sandfort.instance={instance}"]})))
    assert status == 200, body
    return [c["Id"] for c in body]


def cgroup_memory(cid):
    """(usage, rss) bytes of one container's memory cgroup (v1 or v2), or None."""
    for base in (f"/sys/fs/cgroup/memory/docker/{cid}", f"/sys/fs/cgroup/system.slice/docker-{cid}.scope",
                 f"/sys/fs/cgroup/docker/{cid}"):
        for usage_file, stat_key in (("memory.usage_in_bytes", "total_rss"), ("memory.current", "anon")):
            try:
                with open(os.path.join(base, usage_file)) as f:
                    usage = int(f.read())
                with open(os.path.join(base, "memory.stat")) as f:
                    stat = dict(line.split() for line in f)
                return usage, int(stat.get(stat_key, 0))
            except OSError:
                continue
    return None


def containers_memory(cids):
    """Sum of the containers' memory (usage, rss) in bytes, from their cgroups, else `docker stats`."""
    figures = [cgroup_memory(c) for c in cids]
    if all(f is not None for f in figures):
        return sum(f[0] for f in figures), sum(f[1] for f in figures), "cgroup"
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "kB": 1000, "MB": 10 ** 6, "GB": 10 ** 9}
    out = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.ID}} {{.MemUsage}}"] + cids,
                         capture_output=True, text=True, check=True).stdout
    total = 0
    for line in out.splitlines():
        used = line.split()[1]
        for u in sorted(units, key=len, reverse=True):
            if used.endswith(u):
                total += float(used[:-len(u)]) * units[u]
                break
    return int(total), None, "docker stats"


class Pool:
    """`concurrency` threads, each with its own kept-alive connection to the daemon."""

    def __init__(self, port, key, concurrency):
        self.local = threading.local()
        self.port, self.key = port, key
        self.executor = concurrent.futures.ThreadPoolExecutor(concurrency)

    def api(self):
        if not hasattr(self.local, "api"):
            self.local.api = Api(self.port, self.key)
        return self.local.api

    def map(self, fn, items):
        """fn(api, item) for every item; results in item order (raises the first failure)."""
        futures = [self.executor.submit(lambda it=it: fn(self.api(), it)) for it in items]
        return [f.result() for f in futures]

    def connect_all(self, concurrency):
        """Every thread opens its connection now, so that they are in the 'before' figures."""
        barrier = threading.Barrier(concurrency, timeout=60)
        self.map(lambda a, _: (a.call("GET", "/v1/whoami"), barrier.wait()), range(concurrency))

    def close(self):
        self.executor.shutdown(wait=True, cancel_futures=True)


def create_one(api, spec):
    t = time.perf_counter()
    status, sbx = api.call("POST", "/v1/sandboxes", spec)
    ms = (time.perf_counter() - t) * 1000
    assert status == 201 and sbx["state"] == "started", (status, sbx)
    return sbx["id"], ms


def delete_one(api, sid):
    t = time.perf_counter()
    status, body = api.call("DELETE", f"/v1/sandboxes/{sid}")
    assert status == 204, (status, body)
    return (time.perf_counter() - t) * 1000


def exec_ms(api, sid):
    t = time.perf_counter()
    status, r = api.call("POST", f"/v1/sandboxes/{sid}/process/exec", {"argv": ["true"]})
    ms = (time.perf_counter() - t) * 1000
    assert status == 200 and r["exit_code"] == 0, (status, r)
    return ms


def on_sigterm(*_):
    raise KeyboardInterrupt  # cleans up as Ctrl-C does


def kib(n):
    return f"{n / 1024:9.1f} MiB"  # 13 characters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=400, help="idle sandboxes to create (20 for a smoke run)")
    ap.add_argument("--concurrency", type=int, default=4, help="creates and deletes in flight at once")
    ap.add_argument("--rounds", type=int, default=5, help="exec rounds over all sandboxes")
    ap.add_argument("--cpus", type=float, default=0.1)
    ap.add_argument("--memory-mb", type=int, default=64)
    ap.add_argument("--settle", type=float, default=5.0, help="seconds to wait before reading memory")
    args = ap.parse_args()
    n = args.count
    assert n >= 10, "--count must be at least 10 (tenths are compared)"
    signal.signal(signal.SIGTERM, on_sigterm)

    subnet = free_subnet(22 if n < 1000 else 20)
    # idle_timeout_s: kept-alive connections wait through the other phases (minutes at N=400).
    d = Daemon({"log_level": "warn", "idle_timeout_s": 3600, "network": {"subnet": subnet},
                "guardrails": {"max_sandboxes": n + 10, "max_cpus": max(32, int(n * args.cpus) + 8),
                               "max_memory_mb": max(65536, n * args.memory_mb + 4096),
                               # Each sandbox reserves disk.default_mb (10 GiB) against the quota.
                               "max_disk_mb": max(1048576, (n + 10) * 10240)},
                # Idle sandboxes use a fraction of their limits: the host admits their limits
                # over-committed (docs/limits.md, "Host memory").
                "host": {"memory_overcommit": 100}})
    instance = instance_id(d)
    pool = None
    ids = []
    try:
        d.start()
        pool = Pool(d.port, d.admin_key, args.concurrency)
        api = Api(d.port, d.admin_key)
        spec = {"snapshot": IMAGE, "wait": True, "idle_timeout_s": 0, "labels": {"bench": "density"},
                "resources": {"cpus": args.cpus, "memory_mb": args.memory_mb, "pids": 64}}
        _, who = api.call("GET", "/v1/whoami")
        org = who["org_id"]
        status, limits = api.call("GET", f"/v1/orgs/{org}/limits")
        engine = docker("GET", "/version")[1]
        print(f"sandfort density bench: {n} idle sandboxes of {IMAGE} ({args.cpus} cpus, {args.memory_mb} MiB, "
              f"64 pids each), {args.concurrency} creates/deletes at once; Docker {engine['Version']}, "
              f"{os.cpu_count()} cores, {mem_available_kib() / 1048576:.1f} GiB available")
        if status == 200:
            print(f"  org {org} limits in force: {json.dumps(limits['limits'])}; network {subnet}")
        print()

        # Warm-up and baseline: one sandbox alone, exec'd as many times as the fleet will be.
        samples = min(n * args.rounds, 2000)
        # 1 cpu: a 0.1-cpu sandbox exec'd back to back spends its CFS quota and is throttled
        # (p99 ~90 ms); the fleet's sandboxes are each exec'd once per round and never are.
        warm, _ = create_one(api, dict(spec, resources=dict(spec["resources"], cpus=1.0)))
        for _ in range(20):
            exec_ms(api, warm)
        alone = [exec_ms(api, warm) for _ in range(samples)]
        delete_one(api, warm)
        pool.connect_all(args.concurrency)

        time.sleep(args.settle)
        mem0, kern0 = meminfo_kib()
        daemon0 = proc_figures(d.proc.pid)
        shim0, shims0 = pss_of_named("containerd-shim")
        dockerd0, _ = pss_of_named("dockerd")

        print(f"create {n} sandboxes ({args.concurrency} at a time)", flush=True)
        t0 = time.perf_counter()
        made = pool.map(lambda a, i: create_one(a, spec), range(n))
        create_s = time.perf_counter() - t0
        ids = [sid for sid, _ in made]
        create_ms = [ms for _, ms in made]
        tenth = max(1, n // 10)
        first, last = pct(create_ms[:tenth], 50), pct(create_ms[-tenth:], 50)
        print(f"  total {create_s:.1f} s ({n / create_s:.1f} per second); p50 {pct(create_ms, 50):.0f} ms, "
              f"p99 {pct(create_ms, 99):.0f} ms")
        print(f"  first tenth p50 {first:8.0f} ms   last tenth p50 {last:8.0f} ms   -> last / first {last / first:.2f}x\n")

        time.sleep(args.settle)
        mem1, kern1 = meminfo_kib()
        daemon1 = proc_figures(d.proc.pid)
        shim1, shims1 = pss_of_named("containerd-shim")
        dockerd1, _ = pss_of_named("dockerd")
        cids = containers_of_instance(instance)
        assert len(cids) == n, (len(cids), n)
        usage, rss, source = containers_memory(cids)

        load0 = os.getloadavg()[0]
        print(f"host memory, {n} idle sandboxes (after {args.settle:.0f} s settling; load average {load0:.2f}: "
              f"MemAvailable is the whole host's)")
        print(f"  {'':34} {'before':>13} {'after':>13}   per sandbox")
        print(f"  {'MemAvailable (drop)':34} {kib(mem0)} {kib(mem1)}   {(mem0 - mem1) / n / 1024:7.2f} MiB")
        print(f"  {'kernel: Slab+PageTables+KernelStack':34} {kib(kern0)} {kib(kern1)}   "
              f"{(kern1 - kern0) / n / 1024:7.2f} MiB")
        print(f"  {'containers, cgroup usage' if source == 'cgroup' else 'containers, docker stats':34} "
              f"{'':>13} {kib(usage / 1024)}   {usage / n / 1048576:7.2f} MiB")
        if rss is not None:
            print(f"  {'containers, cgroup rss':34} {'':>13} {kib(rss / 1024)}   {rss / n / 1048576:7.2f} MiB")
        print(f"  {f'containerd-shim PSS ({shims0} -> {shims1})':34} {kib(shim0)} {kib(shim1)}   "
              f"{(shim1 - shim0) / n / 1024:7.2f} MiB")
        print(f"  {'dockerd PSS':34} {kib(dockerd0)} {kib(dockerd1)}   {(dockerd1 - dockerd0) / n / 1024:7.2f} MiB")
        print(f"  {'sandfortd RSS':34} {kib(daemon0['rss'])} {kib(daemon1['rss'])}   "
              f"{(daemon1['rss'] - daemon0['rss']) / n / 1024:7.2f} MiB")
        accounted = usage / 1024 + (kern1 - kern0) + (shim1 - shim0) + (dockerd1 - dockerd0) + \
            (daemon1["rss"] - daemon0["rss"])
        print(f"  -> accounted (all but MemAvailable): {accounted / n / 1024:.2f} MiB per sandbox; "
              f"MemAvailable drop / accounted {(mem0 - mem1) / max(accounted, 1):.2f}x\n")

        print(f"exec of `true`: {args.rounds} rounds over all {n} idle sandboxes, one kept-alive connection")
        rounds = []
        for r in range(args.rounds):
            rounds.append([exec_ms(api, sid) for sid in ids])
            print(f"  {f'round {r + 1}':34} p50 {pct(rounds[-1], 50):7.2f} ms   p99 {pct(rounds[-1], 99):7.2f} ms", flush=True)
        fleet = [ms for r in rounds for ms in r]
        a50, a99, f50, f99 = pct(alone, 50), pct(alone, 99), pct(fleet, 50), pct(fleet, 99)
        print(f"  {'one sandbox alone (1 cpu, before)':34} p50 {a50:7.2f} ms   p99 {a99:7.2f} ms   (n={len(alone)})")
        print(f"  {f'across {n} idle sandboxes':34} p50 {f50:7.2f} ms   p99 {f99:7.2f} ms   (n={len(fleet)})")
        print(f"  -> across / alone: p50 {f50 / a50:.2f}x, p99 {f99 / a99:.2f}x\n")
        daemon2 = proc_figures(d.proc.pid)

        print(f"delete {n} sandboxes ({args.concurrency} at a time)", flush=True)
        t0 = time.perf_counter()
        delete_ms = pool.map(delete_one, ids)
        delete_s = time.perf_counter() - t0
        ids = []
        print(f"  total {delete_s:.1f} s -> {delete_s / n * 1000:.0f} ms per sandbox of wall time; each delete "
              f"p50 {pct(delete_ms, 50):.0f} ms, p99 {pct(delete_ms, 99):.0f} ms\n")
        time.sleep(args.settle)
        daemon3 = proc_figures(d.proc.pid)
        left = containers_of_instance(instance)

        print("sandfortd (pid %d)" % d.proc.pid)
        print(f"  {'':18} {'before':>13} {f'{n} idle':>13} {'after execs':>13} {'after delete':>13}   "
              f"growth per sandbox")
        print(f"  {'RSS':18} {kib(daemon0['rss'])} {kib(daemon1['rss'])} {kib(daemon2['rss'])} "
              f"{kib(daemon3['rss'])}   {(daemon1['rss'] - daemon0['rss']) / n:+8.1f} KiB")
        for k, label in (("fds", "open descriptors"), ("threads", "threads")):
            print(f"  {label:18} {daemon0[k]:13d} {daemon1[k]:13d} {daemon2[k]:13d} {daemon3[k]:13d}   "
                  f"{(daemon1[k] - daemon0[k]) / n:+8.2f}")
        print(f"  containers left after delete: {len(left)}")
    finally:
        d.kill()  # first, so that requests still in flight fail at once
        if pool:
            pool.close()
        d.cleanup()
        for cid in containers_of_instance(instance):  # one a killed daemon's last create left behind
            docker("DELETE", f"/containers/{cid}?force=true")


if __name__ == "__main__":
    main()
