#!/usr/bin/python3
"""Snapshot benchmark: POST /v1/snapshots against `docker commit` of an equivalent container,
measured in one run.

  /usr/bin/python3 bench/snapshot.py [--mib 500] [--rounds 3] [--files 10] [--running-only]

Each round creates two sandboxes and writes `--mib` MiB of new files into each (`--files` files
of /dev/urandom under /root/bench, then `sync`). Then, the order alternating from round to round:
  - running source: POST /v1/snapshots of the first (Docker pauses it for the commit)  vs
    `docker commit` (which pauses too, by default) of the second's container on the host, found
    with `docker ps --filter label=io.sandfort.sandbox=<id>` (src/sandbox/spec.cpp);
  - stopped source: both stopped through the API, then the same two again;
  - removal: DELETE /v1/snapshots/{name}  vs  `docker rmi` of the committed images.
Per-round times, medians and the ratios snapshot / commit are printed, with both images' sizes.

Run after ./scripts/setup and ./scripts/build (as root, like the integration tests). It starts
its own sandfortd on a temporary state directory and removes everything it made — snapshots,
committed images, sandboxes — also on Ctrl-C.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import IMAGE, Daemon, docker  # noqa: E402
from foundation import Api  # noqa: E402
from density import instance_id  # noqa: E402


def on_sigterm(*_):
    raise KeyboardInterrupt  # cleans up as Ctrl-C does


def container_of(sandbox_id):
    out = subprocess.run(["docker", "ps", "-a", "-q", "--no-trunc", "--filter", f"label=io.sandfort.sandbox={sandbox_id}"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert len(out) == 1, out
    return out[0]


def images_labelled(label):
    status, body = docker("GET", "/images/json?filters=" + urllib.parse.quote(json.dumps({"label": [label]})))
    assert status == 200, body
    return [i["Id"] for i in body]


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


class Bench:
    def __init__(self, d, args):
        self.api = Api(d.port, d.admin_key)
        self.api.conn.timeout = 1800  # a commit of a large sandbox may take minutes
        self.args = args
        self.repo = "sandfort-bench-commit/" + os.path.basename(d.state_dir)[3:].lower()
        self.sandboxes, self.snapshots, self.images = [], [], []

    def call(self, method, path, body=None, expect=200):
        status, out = self.api.call(method, path, body)
        assert status == expect, (method, path, status, out)
        return out

    def sandbox_with_files(self):
        sbx = self.call("POST", "/v1/sandboxes", {"snapshot": IMAGE, "wait": True, "idle_timeout_s": 0}, 201)
        self.sandboxes.append(sbx["id"])
        per_file = (self.args.mib << 20) // self.args.files
        script = (f"mkdir -p /root/bench && for i in $(seq 1 {self.args.files}); do "
                  f"head -c {per_file} /dev/urandom > /root/bench/f$i || exit 1; done && sync && du -sm /root/bench")
        r = self.call("POST", f"/v1/sandboxes/{sbx['id']}/process/exec", {"command": script, "timeout_s": 1800})
        assert r["exit_code"] == 0, r
        return sbx["id"]

    def snapshot(self, sid, name):
        self.snapshots.append(name)
        seconds, snap = timed(lambda: self.call("POST", "/v1/snapshots", {"sandbox_id": sid, "name": name}, 201))
        return seconds, snap["size_bytes"]

    def commit(self, sid, tag):
        ref = f"{self.repo}:{tag}"
        self.images.append(ref)
        cid = container_of(sid)
        seconds, _ = timed(lambda: subprocess.run(["docker", "commit", cid, ref], capture_output=True, check=True))
        size = subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", ref], capture_output=True, text=True,
                              check=True).stdout.strip()
        return seconds, int(size)

    def remove_snapshot(self, name):
        seconds, _ = timed(lambda: self.call("DELETE", f"/v1/snapshots/{name}", expect=204))
        self.snapshots.remove(name)
        return seconds

    def remove_image(self, ref):
        seconds, _ = timed(lambda: subprocess.run(["docker", "rmi", ref], capture_output=True, check=True))
        self.images.remove(ref)
        return seconds

    def round(self, r, states):
        """One round; the API goes first in even rounds, `docker commit` in odd ones."""
        t0 = time.perf_counter()
        a, b = self.sandbox_with_files(), self.sandbox_with_files()
        prepare_s = time.perf_counter() - t0
        api_first = r % 2 == 0
        figures = {}
        for state in states:
            if state == "stopped":
                for sid in (a, b):
                    assert self.call("POST", f"/v1/sandboxes/{sid}/stop")["state"] == "stopped"
            ours = lambda: self.snapshot(a, f"bench-r{r}-{state}")  # noqa: E731
            theirs = lambda: self.commit(b, f"r{r}-{state}")  # noqa: E731
            if api_first:
                o, t = ours(), theirs()
            else:
                t, o = theirs(), ours()
            figures[state] = (o, t)
        # Removal, in the same order.
        names = list(self.snapshots)
        refs = list(self.images)
        if api_first:
            rm_ours = sum(self.remove_snapshot(n) for n in names)
            rm_theirs = sum(self.remove_image(ref) for ref in refs)
        else:
            rm_theirs = sum(self.remove_image(ref) for ref in refs)
            rm_ours = sum(self.remove_snapshot(n) for n in names)
        figures["remove"] = ((rm_ours / len(names), None), (rm_theirs / len(refs), None))
        for sid in (a, b):
            self.call("DELETE", f"/v1/sandboxes/{sid}", expect=204)
            self.sandboxes.remove(sid)
        return api_first, prepare_s, figures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=500, help="MiB of new files in each source sandbox")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=10, help="the MiB are spread over this many files")
    ap.add_argument("--running-only", action="store_true", help="skip the stopped-source measurement")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_sigterm)
    states = ["running"] if args.running_only else ["running", "stopped"]

    d = Daemon({"log_level": "warn"})
    instance = instance_id(d)
    bench = None
    try:
        d.start()
        bench = Bench(d, args)
        engine = docker("GET", "/version")[1]
        info = docker("GET", "/info")[1]
        base = docker("GET", f"/images/{IMAGE}/json")[1]["Size"]
        print(f"sandfort snapshot bench: {args.mib} MiB of new files ({args.files} files) in a sandbox of {IMAGE}, "
              f"{args.rounds} rounds, interleaved; Docker {engine['Version']} ({info.get('Driver')}), "
              f"{os.cpu_count()} cores\n")
        results = []
        print(f"{'round':>5}  {'first':<8} {'prepare':>8}   " +
              "   ".join(f"{s + ': snapshot':>17} {'commit':>8} {'ratio':>6}" for s in states + ["remove"]))
        for r in range(args.rounds):
            api_first, prepare_s, figures = bench.round(r, states)
            results.append(figures)
            cells = []
            for s in states + ["remove"]:
                (o, _), (t, _) = figures[s]
                cells.append(f"{o:15.2f} s {t:6.2f} s {o / t:5.2f}x")
            print(f"{r + 1:5d}  {'snapshot' if api_first else 'commit':<8} {prepare_s:6.1f} s   " + "   ".join(cells),
                  flush=True)

        print()
        print(f"medians over {args.rounds} round(s)")
        for s in states:
            o = statistics.median(f[s][0][0] for f in results)
            t = statistics.median(f[s][1][0] for f in results)
            so, st = results[-1][s][0][1], results[-1][s][1][1]
            print(f"  {s + ' source':16} POST /v1/snapshots {o:7.2f} s   docker commit {t:7.2f} s   "
                  f"-> snapshot / commit {o / t:.2f}x   (new layer {(so - base) / 1e6:.0f} MB vs {(st - base) / 1e6:.0f} MB)")
        o = statistics.median(f["remove"][0][0] for f in results)
        t = statistics.median(f["remove"][1][0] for f in results)
        print(f"  {'removal, each':16} DELETE /v1/snapshots {o * 1000:5.0f} ms  docker rmi {t * 1000:7.0f} ms   "
              f"-> {o / t:.2f}x")
    finally:
        d.kill()
        d.cleanup()
        refs = list(bench.images) if bench else []
        # The daemon's snapshot images and the committed ones (a commit keeps the container's
        # labels) carry this instance's label; a snapshot interrupted half-way has no row to delete.
        leftovers = refs + images_labelled(f"io.sandfort.instance={instance}")
        for ref in leftovers:
            subprocess.run(["docker", "rmi", "-f", ref], capture_output=True)


if __name__ == "__main__":
    main()
