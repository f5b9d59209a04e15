"""Attack: one member's large exec answers stall every tenant (issue 30, "One member stalls everyone").

A whole (not streamed) exec result arrives from the agent as one JSON answer and leaves as
another: with `binary: true` and random output, 10 MiB per stream is about 55 MB of JSON each way.
Parsed and encoded on sandfortd's one I/O thread, six such answers at once held /healthz for
1.7 s and another organization's preview for 1.4 s, and the daemon's resident memory grew by
180 MB. Staged for real: a member of one organization runs parallel binary execs printing random
bytes on both streams, while the host times /healthz, another organization's exec and a preview
of that organization's sandbox, and reads the daemon's peak resident memory (VmHWM).

Sized to take seconds here; bench/large_answers.py runs the issue's full-size load and prints
the figures before and after."""

import http.client
import json
import multiprocessing
import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandfort_harness import BUILD, Client, Daemon  # noqa: E402

# Parallel execs and what each prints on each stream: answers of about 30 MB of JSON.
PARALLEL = 4
ROUNDS = 1
STREAM_BYTES = 3 << 20
OUTPUT_CAP = 10 << 20  # output_cap_bytes, the default
# The issue asks for p99 under 50 ms; on a loaded 2-core CI machine a fork/exec alone can take
# tens of milliseconds, so the bound has a margin. Without answers off the I/O thread every probe
# waited for whole parses (300 ms to over a second each).
P99_BOUND_MS = 250
RSS_GROWTH_BOUND_MIB = 128


def sanitized_build(build_dir):
    """AddressSanitizer keeps freed memory in its quarantine (256 MiB) and shadows the rest, so a
    sanitized daemon's resident memory says nothing about the product's; the plain build's run
    of this test holds the memory bound."""
    try:
        cache = open(os.path.join(build_dir, "CMakeCache.txt")).read()
    except OSError:
        return False
    return any(line.startswith("SANDFORT_SANITIZE:") and "address" in line for line in cache.splitlines())
UNLIMITED = {"rate_per_s": 0, "burst": 0}


def load_command(stream_bytes):
    return f"head -c {stream_bytes} /dev/urandom; head -c {stream_bytes} /dev/urandom >&2"


def org_key(daemon, name):
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": name})
    assert r.status == 201, r
    r = admin.post(f"/v1/orgs/{r.json()['id']}/api-keys", {"name": "k", "role": "member"})
    assert r.status == 201, r
    return r.json()["key"]


def vm_kib(pid, field):
    """VmRSS or VmHWM (peak resident) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def timed_ms(fn):
    t0 = time.perf_counter()
    ok = fn()
    return (time.perf_counter() - t0) * 1000, ok


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p / 100))] if s else float("nan")


class Probes:
    """While running: /healthz, the other organization's exec and a preview of its sandbox, each
    on a thread of its own, one after another on fresh connections. Latencies in ms; failures
    (an error status, no answer within 30 s) counted apart."""

    def __init__(self, daemon, victim, sandbox_id, preview_token):
        self.daemon, self.victim, self.sandbox_id, self.token = daemon, victim, sandbox_id, preview_token
        self.ms = {"healthz": [], "exec": [], "preview": []}
        self.failed = {name: 0 for name in self.ms}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(name, fn), daemon=True)
                         for name, fn in (("healthz", self.healthz), ("exec", self.exec), ("preview", self.preview))]

    def healthz(self):
        return self.daemon.client().get("/healthz").status == 200

    def exec(self):
        r = self.victim.post(f"/v1/sandboxes/{self.sandbox_id}/process/exec", {"argv": ["true"]})
        return r.status == 200 and r.json()["exit_code"] == 0

    def preview(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.daemon.preview_port, timeout=30)
        host = f"8080-{self.sandbox_id}.preview.localhost:{self.daemon.preview_port}"
        conn.request("GET", "/index.html", headers={"Host": host, "X-Sandfort-Preview-Token": self.token})
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return r.status == 200 and body == b"victim's page\n"

    def _loop(self, name, fn):
        while not self._stop.is_set():
            try:
                ms, ok = timed_ms(fn)
            except OSError:
                ms, ok = 0, False
            if ok:
                self.ms[name].append(ms)
            else:
                self.failed[name] += 1
            self._stop.wait(0.02)

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def summary(self):
        return {name: {"n": len(v), "p50": round(pct(v, 50), 1), "p99": round(pct(v, 99), 1),
                       "max": round(max(v, default=float("nan")), 1), "failed": self.failed[name]}
                for name, v in self.ms.items()}


def victim_with_preview(daemon, victim):
    """The other organization's sandbox, serving a page on 8080; its id and the preview token."""
    sbx = victim.create_sandbox()
    r = victim.exec(sbx["id"], command="mkdir -p /srv && echo \"victim's page\" > /srv/index.html")
    assert r["exit_code"] == 0, r
    r = victim.post(f"/v1/sandboxes/{sbx['id']}/commands", {"command": "cd /srv && exec python3 -m http.server 8080"})
    assert r.status == 201, r
    deadline = time.time() + 20
    while not any(p.get("port") == 8080 for p in victim.get(f"/v1/sandboxes/{sbx['id']}/ports").json()["items"]):
        assert time.time() < deadline, "the victim's server never listened"
        time.sleep(0.1)
    token = victim.get(f"/v1/sandboxes/{sbx['id']}/preview/8080").json()["token"]
    return sbx["id"], token


def _one_attacker(port, key, sandbox_id, rounds, stream_bytes):
    """One attacker's execs, in a process of its own: parsing a 30 MB answer holds Python's GIL for
    a good part of a second, which would stall the probes' own threads."""
    attacker = Client(port, key)
    outcomes = []
    for _ in range(rounds):
        r = attacker.post(f"/v1/sandboxes/{sandbox_id}/process/exec",
                          {"command": load_command(stream_bytes), "binary": True, "timeout_s": 120})
        if r.status == 200:
            got = r.json()
            # The wire is as before: every field, both forms, whole (nothing cut below the cap).
            assert set(got) == {"exit_code", "stdout", "stderr", "stdout_b64", "stderr_b64", "duration_ms",
                                "timed_out", "truncated", "oom_killed"}, sorted(got)
            # Cut at the output cap (the load prints more than the 10 MiB default), not below.
            kept = min(stream_bytes, OUTPUT_CAP)
            want = {"exit_code": 0, "truncated": stream_bytes > OUTPUT_CAP}
            assert {k: got[k] for k in want} == want, {k: got[k] for k in want}
            assert len(got["stdout_b64"]) == len(got["stderr_b64"]) == (kept + 2) // 3 * 4
        outcomes.append((r.status, len(r.body), r.body[:200] if r.status != 200 else b""))
    return outcomes


def attack(attacker, sandbox_id, parallel, rounds, stream_bytes):
    """parallel processes, each running `rounds` binary execs printing stream_bytes of random bytes
    on both streams. Returns the answers' (status, JSON size, error body)."""
    with multiprocessing.get_context("fork").Pool(parallel) as pool:
        runs = [pool.apply_async(_one_attacker, (attacker.port, attacker.key, sandbox_id, rounds, stream_bytes))
                for _ in range(parallel)]
        return [o for run in runs for o in run.get(600)]


def run_load(daemon, parallel, rounds, stream_bytes, settle_s=0.5):
    """Two organizations on one daemon: the attack while the probes run. Returns the probes'
    summary, the attack's outcomes and the daemon's resident memory before and at its peak (MiB)."""
    attacker = daemon.client(org_key(daemon, "attacker"))
    victim = daemon.client(org_key(daemon, "victim"))
    a = attacker.create_sandbox()
    b, token = victim_with_preview(daemon, victim)
    attacker.exec(a["id"], command="true")  # the connection to its agent warmed up
    pid = daemon.proc.pid
    time.sleep(settle_s)
    before = vm_kib(pid, "VmRSS")
    # VmHWM is the peak over the daemon's life: start-up and the set-up above stay well under
    # what is measured here, and growth is taken against the resident size just before.
    with Probes(daemon, victim, b, token) as probes:
        time.sleep(0.3)
        t0 = time.perf_counter()
        outcomes = attack(attacker, a["id"], parallel, rounds, stream_bytes)
        attack_s = time.perf_counter() - t0
        time.sleep(0.3)
    peak = vm_kib(pid, "VmHWM")
    return {"probes": probes.summary(), "outcomes": outcomes, "attack_s": attack_s,
            "rss_before_mib": before / 1024, "rss_peak_mib": peak / 1024}


@pytest.fixture(scope="module")
def daemon():
    d = Daemon({"log_level": "warn",
                "guardrails": {"rate_limits": {"viewer": UNLIMITED, "member": UNLIMITED, "admin": UNLIMITED}}}).start()
    yield d
    assert d.stop() == 0, d.log()
    d.cleanup()


def test_large_answers_stall_no_other_tenant_and_stay_in_the_budget(daemon):
    got = run_load(daemon, PARALLEL, ROUNDS, STREAM_BYTES)
    print(json.dumps({k: v for k, v in got.items() if k != "outcomes"}, indent=1))
    statuses = [status for status, _, _ in got["outcomes"]]
    # Every answer whole, none refused: the budget serves them in turn.
    assert statuses == [200] * (PARALLEL * ROUNDS), [o for o in got["outcomes"] if o[0] != 200]
    assert min(size for _, size, _ in got["outcomes"]) > 4 * STREAM_BYTES  # text and base64 of both streams
    for name, s in got["probes"].items():
        assert s["failed"] == 0, (name, got["probes"])
        assert s["n"] >= 10, (name, got["probes"])
        assert s["p99"] < P99_BOUND_MS, (name, got["probes"])
    growth = got["rss_peak_mib"] - got["rss_before_mib"]
    if not sanitized_build(BUILD):
        assert growth < RSS_GROWTH_BOUND_MIB, (growth, got)
