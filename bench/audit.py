#!/usr/bin/python3
"""The audit log at size: how long verifying and exporting a long chain take, and what they cost
every other request while they run (they run on the background reader, not the I/O thread).

  /usr/bin/python3 bench/audit.py [--events 100000] [--samples 400]

Fills one organization's chain with N events written straight into the SQLite file (hashed as
the daemon hashes them; this is not an append benchmark — for the append cost on exec and
create see bench/compare_builds.py), then reports, in one run:
  - GET /v1/whoami p50/p99 with the daemon idle (the baseline),
  - GET /v1/audit/verify and the JSON Lines export of the whole chain (wall time),
  - GET /v1/whoami p50/p99 from a second client while verify runs in a loop,
  - `sandfortd audit-verify` on the same file (offline, for cron).
"""

import argparse
import hashlib
import http.client
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import sandfort_harness  # noqa: E402

COLUMNS = ("org_id", "seq", "ts", "actor", "action", "target", "outcome", "request_id", "source", "details",
           "prev_hash", "hash")


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def canonical(e):
    obj = {k: e[k] for k in COLUMNS if k not in ("hash", "details")}
    obj["details"] = json.loads(e["details"])
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fill(db_path, org_id, n):
    db = sqlite3.connect(db_path)
    seq, prev = db.execute("SELECT seq, hash FROM audit_events WHERE org_id = ? ORDER BY seq DESC LIMIT 1",
                           (org_id,)).fetchone()
    rows = []
    for i in range(n):
        seq += 1
        e = {"org_id": org_id, "seq": seq, "ts": "2026-12-01T00:00:00.000Z", "actor": "key:key-0123456789abcdef",
             "action": "sandbox.exec", "target": "sbx-0123456789abcdef", "outcome": "accepted",
             "request_id": f"req-{seq}", "source": "127.0.0.1",
             "details": json.dumps({"argv": ["python3", "-c", f"print({i})"], "cwd": "/work", "env": []},
                                   sort_keys=True, separators=(",", ":")),
             "prev_hash": prev}
        e["hash"] = prev = hashlib.sha256(prev.encode() + canonical(e)).hexdigest()
        rows.append(tuple(e[c] for c in COLUMNS))
    db.executemany(f"INSERT INTO audit_events ({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})", rows)
    db.commit()
    db.close()
    return seq


class Api:
    def __init__(self, port, key):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.key = key

    def get(self, path):
        self.conn.request("GET", path, headers={"Authorization": "Bearer " + self.key})
        r = self.conn.getresponse()
        return r.status, r.read()


def whoami_samples(api, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        status, _ = api.get("/v1/whoami")
        out.append((time.perf_counter() - t) * 1000)
        assert status == 200
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100000)
    ap.add_argument("--samples", type=int, default=400)
    args = ap.parse_args()
    d = sandfort_harness.Daemon()
    try:
        d.start()
        admin = d.admin()
        org = admin.post("/v1/orgs", {"name": "bench"}).json()
        key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "a", "role": "admin"}).json()["key"]
        d.stop()
        t = time.perf_counter()
        head = fill(os.path.join(d.state_dir, "sandfort.db"), org["id"], args.events)
        print(f"filled {args.events} events into {org['id']} in {time.perf_counter() - t:.1f} s (head seq {head})")
        d.start()
        api = Api(d.port, key)

        idle = whoami_samples(api, args.samples)
        t = time.perf_counter()
        status, body = api.get("/v1/audit/verify")
        verify_s = time.perf_counter() - t
        report = json.loads(body)
        assert status == 200 and report["ok"] and report["events"] == head, report
        t = time.perf_counter()
        status, body = api.get(f"/v1/audit?format=jsonl&limit={min(head, 100000)}")
        export_s = time.perf_counter() - t
        assert status == 200

        stop = threading.Event()
        verifies = [0]

        def verify_loop():
            other = Api(d.port, key)
            while not stop.is_set():
                s, _ = other.get("/v1/audit/verify")
                assert s == 200, s
                verifies[0] += 1

        loop = threading.Thread(target=verify_loop)
        loop.start()
        busy = []
        while verifies[0] < 3:  # sampled across three whole verifications
            busy += whoami_samples(api, 20)
        stop.set()
        loop.join()

        t = time.perf_counter()
        out = subprocess.run([sandfort_harness.SANDFORTD, "audit-verify", "--config", d.config_path, "--org", org["id"]],
                             capture_output=True, text=True)
        offline_s = time.perf_counter() - t
        assert out.returncode == 0, out.stdout + out.stderr

        print(f"chain of {head} events ({len(body) / 1e6:.1f} MB as JSON Lines)")
        print(f"  GET /v1/audit/verify          {verify_s * 1000:8.0f} ms")
        print(f"  GET /v1/audit?format=jsonl    {export_s * 1000:8.0f} ms")
        print(f"  sandfortd audit-verify        {offline_s * 1000:8.0f} ms (process start included)")
        print("GET /v1/whoami")
        print(f"  idle                          p50 {pct(idle, 50):6.3f} ms   p99 {pct(idle, 99):7.3f} ms   (n={len(idle)})")
        print(f"  while verify runs in a loop   p50 {pct(busy, 50):6.3f} ms   p99 {pct(busy, 99):7.3f} ms"
              f"   (n={len(busy)}, across {verifies[0]} verifies)")
        print(f"  -> p99 during / idle: {pct(busy, 99) / pct(idle, 99):.2f}x")
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
