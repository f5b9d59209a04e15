#!/usr/bin/env python3
"""Gate: speed, reported with the machine's details. 20 creates that wait for `started`, one
after the other, then 50 short commands (`process/exec` of `true`) in one sandbox; prints p50,
p99 and total of each. Slowness is reported, not asserted: the gate fails only on errors.

    SANDFORT_BASE_URL=... SANDFORT_API_KEY=sfk_... python3 examples/gates/speed.py

The machine details are those of the machine running the gate (the daemon's host when the API
URL is on loopback). SANDFORT_GATE_CREATES / SANDFORT_GATE_EXECS change the counts.
"""

import os
import platform
import statistics
import time
from urllib.parse import urlsplit

import _gate
from _gate import env, retry


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def figures(values_ms):
    return (f"p50 {statistics.median(values_ms):.1f} ms, p99 {pct(values_ms, 99):.1f} ms, "
            f"min {min(values_ms):.1f} ms, max {max(values_ms):.1f} ms")


def machine():
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model}), {mem} memory, kernel {platform.release()}, "
            f"{platform.freedesktop_os_release().get('PRETTY_NAME', platform.system()) if hasattr(platform, 'freedesktop_os_release') else platform.system()}")


def main(gate):
    c = _gate.client()
    n_create = int(env("SANDFORT_GATE_CREATES", "20"))
    n_exec = int(env("SANDFORT_GATE_EXECS", "50"))
    host = urlsplit(c.base_url).hostname
    where = "this machine (the daemon's host)" if host in ("127.0.0.1", "localhost", "::1") else f"this machine (the daemon runs at {host})"
    try:
        print(f"machine: {where}: {machine()}")
    except Exception as e:  # noqa: BLE001 - details are best effort
        print(f"machine: {where}: {e}")
    made = []
    try:
        create_ms = []

        def creates():
            t0 = time.perf_counter()
            for _ in range(n_create):
                t = time.perf_counter()
                sbx = retry(c.create_sandbox, env("SANDFORT_GATE_IMAGE"), wait=True, labels={"gate": "speed"})
                create_ms.append((time.perf_counter() - t) * 1000)
                made.append(sbx)
                assert sbx.state == "started", f"{sbx.id} is {sbx.state}"
            total = time.perf_counter() - t0
            return f"{n_create} creates waiting for started: {figures(create_ms)}, total {total:.2f} s"
        gate.check(f"{n_create} creates", creates)

        def execs():
            sbx = made[0] if made else retry(c.create_sandbox, env("SANDFORT_GATE_IMAGE"), labels={"gate": "speed"})
            if not made:
                made.append(sbx)
            exec_ms = []
            t0 = time.perf_counter()
            for i in range(n_exec):
                t = time.perf_counter()
                r = retry(sbx.process.exec, "true")
                exec_ms.append((time.perf_counter() - t) * 1000)
                assert r.exit_code == 0, f"exec {i}: exit {r.exit_code}: {r.stderr}"
            total = time.perf_counter() - t0
            return f"{n_exec} short commands: {figures(exec_ms)}, total {total:.2f} s"
        gate.check(f"{n_exec} short commands", execs)

        def deletes():
            t0 = time.perf_counter()
            while made:
                retry(c.delete, made.pop().id)
            return f"deleted in {time.perf_counter() - t0:.2f} s"
        gate.check("cleanup", deletes)
    finally:
        _gate.delete_all(c, made)


if __name__ == "__main__":
    _gate.run("speed", main)
