#!/usr/bin/python3
"""A million deleted sandboxes: what they cost every request (target: nothing, within 10%).

  /usr/bin/python3 bench/history.py [--deleted 1000000] [--live 1000] [--samples 2000]

Two daemons, in one run:
  - history: one real sandbox (made through the API, so it exists in Docker), then, with the
    daemon stopped, `--live` - 1 more live rows and `--deleted` deleted ones written straight
    into its SQLite file in one transaction (this is not a create benchmark). The deleted rows
    look like the live ones: the same names, the same labels, ids all over the key space,
    deleted within the retention window (so nothing is pruned while it runs);
  - empty: the same real sandbox and the same live rows, and no history.
Then, with requests to the two daemons interleaved one by one over kept-alive connections:
  GET /v1/sandboxes/{id}, GET /v1/sandboxes/{name}, POST .../process/exec ["true"],
  GET /v1/sandboxes?label=group:7 (51 of the live sandboxes match; 1 in 20 deleted rows too),
  GET /v1/whoami (key authentication),
each as p50/p99 and the ratio history / empty. When tests/unit/store/store_plans is built it also
prints the SQLite VM steps of each lookup in both stores (the work done, not the time taken).

The requests use the superadmin's key: guardrails' per-key rate limits do not apply to it.
"""

import argparse
import hashlib
import http.client
import json
import os
import random
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import sandfort_harness  # noqa: E402

STORE_PLANS = os.path.join(sandfort_harness.BUILD, "tests", "unit", "store", "store_plans")
COLUMNS = "id, org_id, name, state, snapshot, spec_json, error_message, created_at, updated_at"
GROUPS = 20


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


def spec(i):
    return json.dumps({"env": {"HOME": "/root"}, "labels": {"bench": "history", "group": str(i % GROUPS)},
                       "resources": {"cpus": 1.0, "memory_mb": 1024, "pids": 512},
                       "egress_allowlist": ["pypi.org", "*.pythonhosted.org"], "user": "", "workdir": "/work",
                       "public_preview": False, "ttl_s": 3600}, separators=(",", ":"))


def fill(db_path, org_id, live, deleted):
    """live rows (state error: no container, which reconciliation leaves alone) and deleted ones,
    in one transaction; ids sorted so that the indexes grow at their ends."""
    now = time.time()
    # The same live ids in every store, so that both serve the same pages.
    same = random.Random(live)
    live_ids = sorted({same.getrandbits(64) for _ in range(live)})
    taken = set(live_ids)
    deleted_ids = sorted({v for v in (random.getrandbits(64) for _ in range(deleted)) if v not in taken})

    def rows():
        for n, v in enumerate(live_ids):
            yield ("sbx-%016x" % v, org_id, f"row-{n}", "error", "sandfort/base:bookworm", spec(n),
                   "bench filler", rfc3339(now), rfc3339(now))
        for n, v in enumerate(deleted_ids):
            deleted_at = now - 6 * 86400 + n * (5 * 86400 / max(1, deleted))
            yield ("sbx-%016x" % v, org_id, f"row-{n % max(1, live)}", "deleted", "sandfort/base:bookworm",
                   spec(n), "", rfc3339(deleted_at - 120), rfc3339(deleted_at))

    db = sqlite3.connect(db_path)
    db.execute("PRAGMA cache_size=-1000000")
    db.execute("BEGIN")
    db.executemany(f"INSERT INTO sandboxes ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows())
    db.commit()
    db.close()
    return ["sbx-%016x" % v for v in live_ids]


class Api:
    def __init__(self, port, key):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.key = key

    def request(self, method, path, body=None):
        headers = {"Authorization": "Bearer " + self.key}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        t = time.perf_counter()
        self.conn.request(method, path, body=data, headers=headers)
        r = self.conn.getresponse()
        payload = r.read()
        return (time.perf_counter() - t) * 1000, r.status, payload


class Store:
    def __init__(self, name):
        self.name = name
        self.daemon = sandfort_harness.Daemon()
        self.db_path = os.path.join(self.daemon.state_dir, "sandfort.db")

    def prepare(self, live, deleted):
        d = self.daemon
        d.start()
        self.real = d.admin().create_sandbox(name="real", labels={"bench": "history", "group": "7"})
        assert d.stop() == 0
        db = sqlite3.connect(self.db_path)
        self.org_id = db.execute("SELECT org_id FROM sandboxes WHERE id = ?", (self.real["id"],)).fetchone()[0]
        db.close()
        t = time.perf_counter()
        self.live_ids = fill(self.db_path, self.org_id, live - 1, deleted)
        fill_s = time.perf_counter() - t
        size = os.path.getsize(self.db_path)
        print(f"{self.name}: {live} live + {deleted} deleted sandboxes, filled in {fill_s:.1f} s, "
              f"database {size / 1e6:.0f} MB", flush=True)
        t = time.perf_counter()
        d.start()
        print(f"{self.name}: daemon ready in {time.perf_counter() - t:.1f} s", flush=True)
        self.api = Api(d.port, d.admin_key)

    def plans(self):
        if not os.path.exists(STORE_PLANS):
            return None
        out = subprocess.run([STORE_PLANS, self.db_path, self.org_id, self.live_ids[7], "row-7", "group:7",
                              self.live_ids[len(self.live_ids) // 2],
                              hashlib.sha256(self.daemon.admin_key.encode()).hexdigest()],
                             capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout) if out.returncode == 0 else None


def metrics(store):
    sid = store.real["id"]
    return [
        ("GET /v1/sandboxes/{id}", lambda: store.api.request("GET", f"/v1/sandboxes/{sid}")),
        ("GET /v1/sandboxes/{name}", lambda: store.api.request("GET", "/v1/sandboxes/row-7")),
        ("exec [true]", lambda: store.api.request("POST", f"/v1/sandboxes/{sid}/process/exec", {"argv": ["true"]})),
        ("GET /v1/sandboxes?label=group:7", lambda: store.api.request("GET", "/v1/sandboxes?label=group:7")),
        ("GET /v1/whoami (key auth)", lambda: store.api.request("GET", "/v1/whoami")),
    ]


def measure(stores, samples, warmup):
    """Per metric: requests to the two daemons alternately, the first of each pair alternating."""
    results = {}
    per_store = [metrics(s) for s in stores]
    for m in range(len(per_store[0])):
        name = per_store[0][m][0]
        times = [[] for _ in stores]
        for i in range(warmup + samples):
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for k in order:
                ms, status, body = per_store[k][m][1]()
                assert status == 200, (stores[k].name, name, status, body[:300])
                if i >= warmup:
                    times[k].append(ms)
        results[name] = times
        print(f"  measured {name}", flush=True)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deleted", type=int, default=1000000)
    ap.add_argument("--live", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    args = ap.parse_args()
    stores = []
    try:
        # One after the other: each daemon's sandbox network takes a subnet the previous one left free.
        for name, deleted in (("empty", 0), ("history", args.deleted)):
            stores.append(Store(name))
            stores[-1].prepare(args.live, deleted)
        empty, history = stores
        # Both label lists return the same sandboxes (ids differ: each store has its own).
        for s in (empty, history):
            _, status, body = s.api.request("GET", "/v1/sandboxes?label=group:7")
            assert status == 200 and len(json.loads(body)["items"]) == args.live // GROUPS + 1, body[:300]
        results = measure([empty, history], args.samples, args.warmup)

        print()
        print(f"{args.deleted} deleted + {args.live} live sandboxes (history) vs {args.live} live (empty); "
              f"{args.samples} samples each, interleaved")
        print(f"{'':34} {'empty p50':>10} {'p99':>8}   {'history p50':>11} {'p99':>8}   {'ratio p50':>9} {'p99':>6}")
        for name, (e, h) in results.items():
            print(f"{name:34} {pct(e, 50):8.3f}ms {pct(e, 99):6.3f}ms   {pct(h, 50):9.3f}ms {pct(h, 99):6.3f}ms"
                  f"   {pct(h, 50) / pct(e, 50):9.2f} {pct(h, 99) / pct(e, 99):6.2f}")

        pe, ph = empty.plans(), history.plans()
        if pe and ph:
            print()
            print("store lookups: SQLite VM steps (rows visited), as the store runs them")
            steps_e = {c["name"]: c["vm_steps"] for c in pe["calls"]}
            for c in ph["calls"]:
                print(f"  {c['name']:40} empty {steps_e[c['name']]:6}   history {c['vm_steps']:6}")
            bad = [p["name"] for p in ph["plans"] if p["reads_history"]]
            print("query plans reading deleted rows: " + (", ".join(bad) if bad else "none"))
    finally:
        for s in stores:
            s.daemon.stop()
            s.daemon.cleanup()


if __name__ == "__main__":
    main()
