#!/usr/bin/python3
"""Webhook outbox benchmark: what registered webhooks cost the requests whose events they deliver,
measured in one run against the same requests with no webhook.

  a volume create + delete (two life-cycle events, two cheap Docker calls), client latency:
  no webhook  vs  4 webhooks taking every event (the outbox write is the audit event the change
  writes anyway; the delivery worker's take — one cursor update and one row per webhook and
  event — and its POSTs run after the answer, on the same I/O thread)
  delivery lag: from the create's answer to the receiver holding its volume.created

The receiver listens on the Docker bridge's gateway address (a private address of this host, as a
real receiver would not be on loopback), allowed through webhooks.allowed_ranges. Run after
./scripts/build:
  /usr/bin/python3 bench/webhooks.py [--quick]
"""

import http.server
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from sandfort_harness import Daemon, docker  # noqa: E402
from foundation import Api, row  # noqa: E402

QUICK = "--quick" in sys.argv
PAIRS = 50 if QUICK else 200
WEBHOOKS = 4


def gateway_address():
    status, net = docker("GET", "/networks/bridge")
    assert status == 200, (status, net)
    return next(c["Gateway"] for c in net["IPAM"]["Config"] if c.get("Gateway"))


class Receiver:
    """Answers 204 to every POST and remembers when each volume's volume.created arrived."""

    def __init__(self, host):
        outer = self
        self.arrived = {}  # volume id → time.perf_counter() of its first delivery
        self.count = 0
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                now = time.perf_counter()
                with outer.lock:
                    outer.count += 1
                    if body.get("type") == "volume.created":
                        outer.arrived.setdefault(body.get("target"), now)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def volume_pairs(api, n):
    """n creates and deletes in a row; the create latencies and when each create was answered."""
    latencies, answered = [], {}
    for i in range(n):
        t = time.perf_counter()
        status, v = api.call("POST", "/v1/volumes", {"name": f"bench-{os.getpid()}-{time.time_ns()}-{i}"})
        done = time.perf_counter()
        assert status == 201, v
        latencies.append((done - t) * 1000)
        answered[v["id"]] = done
        status, _ = api.call("DELETE", f"/v1/volumes/{v['id']}")
        assert status in (200, 204), status
    return latencies, answered


def main():
    host = gateway_address()
    receiver = Receiver(host)
    d = Daemon({"log_level": "warn", "webhooks": {"allowed_ranges": f"{host}/32"}}).start()
    try:
        api = Api(d.port, d.admin_key)
        volume_pairs(api, 5)  # warm: Docker's first volume calls
        without, _ = volume_pairs(api, PAIRS)

        def register(i):
            status, w = api.call("POST", "/v1/webhooks", {"url": receiver.url + f"?n={i}"})
            assert status == 201, w

        register(0)
        with_one, _ = volume_pairs(api, PAIRS)
        for i in range(1, WEBHOOKS):
            register(i)
        time.sleep(2)  # the first webhook's backlog delivered
        with receiver.lock:
            receiver.arrived.clear()
            receiver.count = 0
        with_hooks, answered = volume_pairs(api, PAIRS)
        deadline = time.time() + 120
        while time.time() < deadline:
            with receiver.lock:
                if all(v in receiver.arrived for v in answered):
                    break
            time.sleep(0.05)
        with receiver.lock:
            lags = [(receiver.arrived[v] - t) * 1000 for v, t in answered.items() if v in receiver.arrived]
            delivered = receiver.count
        print(f"volume create (then delete), {PAIRS} in a row: client latency of the create")
        a = row("no webhook", without)
        one = row("1 webhook taking every event", with_one)
        b = row(f"{WEBHOOKS} webhooks taking every event", with_hooks)
        print(f"  -> 1 webhook adds {one - a:.2f} ms at p50 ({one / a:.2f}x), {WEBHOOKS} add {b - a:.2f} ms ({b / a:.2f}x)\n")
        print(f"delivery: {delivered} POSTs received for {2 * PAIRS * WEBHOOKS} events x webhooks")
        row("create answered -> volume.created received", lags)
        assert len(lags) == len(answered), f"{len(answered) - len(lags)} volume.created never arrived"
    finally:
        receiver.server.shutdown()
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
