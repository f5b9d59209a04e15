#!/usr/bin/python3
"""The exec path against its floor, in one run (issue 37): what a call costs beyond the process it runs.

  floor            spawning `true` inside the sandbox, measured there (fork + exec + wait)
  one client       REST process/exec of `true` (argv), p50/p99, kept-alive connection
                   a session's builtin (`true` in a persistent bash: no fork), p50/p99
  4 x 8 clients    4 sandboxes, 8 kept-alive clients each: process/exec and session exec,
                   calls per second, p50, p99
  CPU per call     sandfortd's and the agents' own CPU (utime + stime of their processes, from
                   /proc; the spawned `true` is not theirs) over the 4 x 8 process/exec run,
                   divided by the calls made
  baseline         Docker's exec API (create/start/inspect) of `true` in the same container
  --syscalls       also counts system calls per call with `strace -c` (sandfortd: -f, every
                   thread; one agent: its own, not its children's), 300 sequential process/execs
  --baseline DIR   first measures everything for another build directory (its sandfortd and
                   agent, e.g. a worktree at the commit before a change), then this one, and
                   prints the ratios

Run after ./scripts/setup and ./scripts/build:
  /usr/bin/python3 bench/exec_path.py [--quick] [--syscalls] [--baseline DIR]
It starts its own sandfortd on a temporary state directory and removes everything it made.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import sandfort_harness as harness  # noqa: E402
from sandfort_harness import IMAGE, Daemon, container_id_of  # noqa: E402
from foundation import Api, docker_call, docker_exec_samples  # noqa: E402  (a kept-alive client; Docker's API)

QUICK = "--quick" in sys.argv
SYSCALLS = "--syscalls" in sys.argv
N_ONE = 200 if QUICK else 500
LOAD_SECONDS = 4 if QUICK else 10
N_SANDBOXES, N_CLIENTS = 4, 8
N_DOCKER = 20 if QUICK else 50
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * p / 100))]


def cpu_ms(pid, children=False):
    """The process's own CPU (every thread's user + system time); with children, that of the
    children it has waited for instead (an agent's: the commands it ran)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) * TICK_MS


def agent_pid(sandbox_id):
    """The host pid of the sandbox's agent (the container's process named agent)."""
    s, info = docker_call("GET", f"/containers/{container_id_of(sandbox_id)}/top?ps_args=-o%20pid,comm")
    for pid, comm in info["Processes"]:
        if comm.startswith("agent") or "sandfort" in comm:
            return int(pid)
    raise RuntimeError(f"no agent in {info}")


def timed_calls(api, path, body, n):
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        status, r = api.call("POST", path, body)
        samples.append((time.perf_counter() - t) * 1000)
        assert status == 200 and r["exit_code"] == 0, (status, r)
    return samples


def row(name, samples, floor=None):
    p50, p99 = pct(samples, 50), pct(samples, 99)
    extra = f"   floor + {p50 - floor:.2f} ms" if floor is not None else ""
    print(f"  {name:<46} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   (n={len(samples)}){extra}")
    return p50


def spawn_floor(api, sandbox_id):
    probe = ("import subprocess,time,statistics\n"
             "s=[]\n"
             f"for _ in range({N_ONE}):\n"
             "    t=time.perf_counter(); subprocess.run(['true']); s.append((time.perf_counter()-t)*1000)\n"
             "print(statistics.median(s))\n")
    status, r = api.call("POST", f"/v1/sandboxes/{sandbox_id}/process/exec", {"argv": ["python3", "-c", probe]})
    assert status == 200, r
    return float(r["stdout"])


def load(port, key, targets, seconds):
    """N_CLIENTS kept-alive clients per target (path, body), all at once for `seconds`."""
    samples, errors = [], []
    lock = threading.Lock()
    start = threading.Barrier(len(targets) * N_CLIENTS + 1)
    stop_at = [0.0]

    def client(path, body):
        api = Api(port, key)
        api.call("GET", "/v1/sandboxes?limit=1")  # connected before the clock starts
        mine = []
        start.wait()
        while time.perf_counter() < stop_at[0]:
            t = time.perf_counter()
            status, r = api.call("POST", path, body)
            mine.append((time.perf_counter() - t) * 1000)
            if status != 200 or r.get("exit_code") != 0:
                with lock:
                    errors.append((status, r))
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=client, args=t) for t in targets for _ in range(N_CLIENTS)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + 3600
    start.wait()
    began = time.perf_counter()
    stop_at[0] = began + seconds
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    assert not errors, errors[:3]
    return samples, elapsed


def load_row(name, samples, elapsed):
    rate = len(samples) / elapsed
    print(f"  {name:<46} {rate:7.0f}/s   p50 {pct(samples, 50):6.2f} ms   p99 {pct(samples, 99):6.2f} ms   "
          f"(n={len(samples)})")
    return rate


def strace_counts(pid, follow, run):
    """System calls made by pid (and its threads with follow) while run() runs: {name: count}."""
    out = f"/tmp/sandfort-bench-strace-{pid}.txt"
    args = ["strace", "-c", "-o", out] + (["-f"] if follow else []) + ["-p", str(pid)]
    tracer = subprocess.Popen(args, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached
    run()
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=30)
    counts = {}
    with open(out) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
            if m and m.group(2) != "total":
                counts[m.group(2)] = int(m.group(1))
    os.unlink(out)
    return counts


def syscalls(d, api, sbx, n=300):
    """System calls per process/exec: {"sandfortd": per call, "agent": per call}, printed with the top ones."""
    path = f"/v1/sandboxes/{sbx}/process/exec"
    out = {}
    for name, pid, follow in (("sandfortd", d.proc.pid, True), ("agent", agent_pid(sbx), False)):
        counts = strace_counts(pid, follow, lambda: timed_calls(api, path, {"argv": ["true"]}, n))
        out[name] = sum(counts.values()) / n
        top = sorted(counts.items(), key=lambda kv: -kv[1])[:10]
        print(f"  system calls per call, {name:<9} {out[name]:6.1f}: " + ", ".join(f"{k} {v / n:.1f}" for k, v in top))
    return out


def measure(label):
    """Every figure for the daemon the harness starts now (its SANDFORTD and AGENT)."""
    print(f"[{label}]")
    d = Daemon({"log_level": "warn"}).start()
    fig = {}
    try:
        api = Api(d.port, d.admin_key)
        sandboxes = []
        for _ in range(N_SANDBOXES):
            status, sbx = api.call("POST", "/v1/sandboxes", {"snapshot": IMAGE, "wait": True})
            assert status == 201, sbx
            sandboxes.append(sbx["id"])
            status, s = api.call("POST", f"/v1/sandboxes/{sbx['id']}/sessions", {"name": "bench"})
            assert status == 201, s
        first = sandboxes[0]
        exec_path = f"/v1/sandboxes/{first}/process/exec"
        session_path = f"/v1/sandboxes/{first}/sessions/bench/exec"
        timed_calls(api, exec_path, {"argv": ["true"]}, 50)  # warm-up
        timed_calls(api, session_path, {"command": "true"}, 50)

        fig["floor"] = floor = spawn_floor(api, first)
        print(f"  {'floor: spawn of `true` inside the sandbox':<46} p50 {floor:7.2f} ms")
        fig["exec_p50"] = row("REST process/exec argv [true]", timed_calls(api, exec_path, {"argv": ["true"]}, N_ONE),
                              floor)
        fig["session_p50"] = row("session exec of a builtin (`true`)",
                                 timed_calls(api, session_path, {"command": "true"}, N_ONE))
        fig["docker_p50"] = row("Docker's exec API (create/start/inspect)",
                                docker_exec_samples(container_id_of(first), N_DOCKER))

        daemon_cpu0 = cpu_ms(d.proc.pid)
        agents = [agent_pid(s) for s in sandboxes]
        agent_cpu0 = sum(cpu_ms(p) for p in agents)
        spawned_cpu0 = sum(cpu_ms(p, children=True) for p in agents)
        client_cpu0 = cpu_ms(os.getpid())
        samples, elapsed = load(d.port, d.admin_key,
                                [(f"/v1/sandboxes/{s}/process/exec", {"argv": ["true"]}) for s in sandboxes],
                                LOAD_SECONDS)
        daemon_cpu = cpu_ms(d.proc.pid) - daemon_cpu0
        agent_cpu = sum(cpu_ms(p) for p in agents) - agent_cpu0
        spawned_cpu = sum(cpu_ms(p, children=True) for p in agents) - spawned_cpu0
        client_cpu = cpu_ms(os.getpid()) - client_cpu0
        fig["exec_rate"] = load_row(f"{N_SANDBOXES} x {N_CLIENTS} clients: process/exec", samples, elapsed)
        fig["exec_p99_load"] = pct(samples, 99)
        fig["daemon_cpu"] = daemon_cpu / len(samples)
        fig["agent_cpu"] = agent_cpu / len(samples)
        samples, elapsed = load(d.port, d.admin_key,
                                [(f"/v1/sandboxes/{s}/sessions/bench/exec", {"command": "true"}) for s in sandboxes],
                                LOAD_SECONDS)
        fig["session_rate"] = load_row(f"{N_SANDBOXES} x {N_CLIENTS} clients: session builtin", samples, elapsed)
        fig["spawned_cpu"] = spawned_cpu / len(samples)
        print(f"  CPU per process/exec under that load: sandfortd {fig['daemon_cpu']:.3f} ms, "
              f"agent {fig['agent_cpu']:.3f} ms, the spawned `true` {fig['spawned_cpu']:.3f} ms, this "
              f"benchmark's own clients {client_cpu / len(samples):.3f} ms (all on the same {os.cpu_count()} cores)")
        if SYSCALLS:
            fig["syscalls"] = syscalls(d, api, first)
        for s in sandboxes:
            api.call("DELETE", f"/v1/sandboxes/{s}")
    finally:
        d.cleanup()
    print()
    return fig


def option(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


def main():
    engine = docker_call("GET", "/version")[1]
    print(f"sandfort exec path bench: image {IMAGE}, Docker {engine['Version']}, {os.cpu_count()} cores"
          f"{' (quick)' if QUICK else ''}\n")
    baseline_dir = option("--baseline")
    base = None
    if baseline_dir:
        # Another build (e.g. the commit before a change) measured in the same run, with its own agent.
        current = (harness.SANDFORTD, harness.AGENT)
        harness.SANDFORTD = os.path.join(baseline_dir, "src", "sandfortd", "sandfortd")
        harness.AGENT = os.path.join(baseline_dir, "src", "agent", "sandfort-agent")
        base = measure(f"baseline: {baseline_dir}")
        harness.SANDFORTD, harness.AGENT = current
    fig = measure(f"this build: {os.path.dirname(os.path.dirname(os.path.dirname(harness.SANDFORTD)))}")

    print("against the goals (issue 37)")
    print(f"  REST exec p50 over the floor: {fig['exec_p50'] - fig['floor']:+.2f} ms (goal <= +0.80)")
    print(f"  session builtin p50: {fig['session_p50']:.2f} ms (goal <= 0.60)")
    print(f"  Docker's exec / REST exec at p50: {fig['docker_p50'] / fig['exec_p50']:.1f}x")
    print(f"  {N_SANDBOXES} x {N_CLIENTS} process/exec: {fig['exec_rate']:.0f}/s, p99 {fig['exec_p99_load']:.1f} ms "
          f"(goal: p99 <= 40 ms)")
    if base:
        print(f"  against the baseline: throughput {fig['exec_rate'] / base['exec_rate']:.2f}x (goal >= 2x), "
              f"sandfortd CPU per call {fig['daemon_cpu'] / base['daemon_cpu']:.2f}x, "
              f"agent CPU per call {fig['agent_cpu'] / base['agent_cpu']:.2f}x (goal <= 0.5x each)")
        if SYSCALLS:
            print(f"  system calls per call: sandfortd {base['syscalls']['sandfortd']:.0f} -> "
                  f"{fig['syscalls']['sandfortd']:.0f}, agent {base['syscalls']['agent']:.0f} -> "
                  f"{fig['syscalls']['agent']:.0f}")


if __name__ == "__main__":
    main()
