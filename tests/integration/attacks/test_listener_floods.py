"""Attack: a client without any credential holds idle connections to the API and preview listeners.

Each listener accepted up to max_connections (1024) and then stopped accepting: 1,100 connections
that never send a request (held 60 s each), or that send one header byte at a time (each byte
kept them within the header timeout), kept /healthz, every tenant's API calls and every tenant's
previews out. Now connections without a complete request are capped per source address and in
total, the whole head is due within header_timeout of the accept, and a new connection closes the
oldest idle one instead of waiting. Staged for real over loopback from 127.0.0.2 (one address) and
from 127.0.0.2...127.0.0.21 (twenty), while a client on 127.0.0.1 calls /healthz, runs an exec in
its own sandbox and opens another organization's preview. A persistent attacker opens again
whatever the daemon closes."""

import http.client
import os
import resource
import select
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandfort_harness import Client, Daemon, EventStream  # noqa: E402
from test_floods import fd_count, org_key  # noqa: E402 (the proxy flood's helpers)

CONNECTIONS = 1100  # per listener, as in the report
# Far above a loaded machine's worst answer with the caps in place (tens of ms), far below the
# 15-20 s a full listener took before (an unanswered request counts as infinitely slow).
BOUND_MS = 1000
REQUEST_TIMEOUT_S = 5
# Idle connections per source the daemon holds by default (max_idle_connections_per_source).
PER_SOURCE = 64
# A head that never ends: a slowloris sends it a byte at a time.
ENDLESS_HEAD = b"GET / HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 65536


def raise_fd_limit(need):
    """The test holds thousands of sockets: its soft descriptor limit goes up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(hard, max(need, soft))
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= need, \
        f"the test needs {need} descriptors; the hard limit is {hard} (raise it: ulimit -Hn)"


class Flood:
    """Holds `per_listener` connections to each port, spread over `sources`, without a credential:
    silent ones, or (slowloris) ones that send ENDLESS_HEAD one byte at a time. A thread opens
    again what the daemon closes, up to `reopen_per_s` a second, and counts what it saw."""

    def __init__(self, ports, sources, per_listener, slowloris=False, byte_every_s=0.5, reopen_per_s=2000):
        self.ports, self.sources = ports, sources
        self.slowloris, self.byte_every_s, self.reopen_per_s = slowloris, byte_every_s, reopen_per_s
        self.slots = [(port, sources[i % len(sources)]) for port in ports for i in range(per_listener)]
        self.socks = [None] * len(self.slots)
        self.sent = [0] * len(self.slots)
        self.opened = self.closed_by_daemon = self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, i):
        port, source = self.slots[i]
        s = socket.socket()
        s.setblocking(False)
        try:
            s.bind((source, 0))
            s.connect_ex(("127.0.0.1", port))  # in progress; completes in the kernel's backlog
            self.socks[i], self.sent[i] = s, 0
            self.opened += 1
        except OSError:
            s.close()
            self.socks[i] = None
            self.failed += 1

    def __enter__(self):
        for i in range(len(self.slots)):
            self._open(i)
        self._thread.start()
        return self

    def _closed_ones(self):
        poller = select.poll()
        by_fd = {}
        for i, s in enumerate(self.socks):
            if s is not None:
                poller.register(s.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
                by_fd[s.fileno()] = i
        gone = []
        for fd, _ in poller.poll(0):
            i = by_fd[fd]
            try:
                if self.socks[i].recv(4096) == b"":
                    gone.append(i)
            except BlockingIOError:
                pass
            except OSError:
                gone.append(i)
        return gone + [i for i, s in enumerate(self.socks) if s is None]

    def _run(self):
        next_byte = time.monotonic()
        while not self._stop.is_set():
            budget = int(self.reopen_per_s * 0.1)
            for i in self._closed_ones():
                if self.socks[i] is not None:
                    self.socks[i].close()
                    self.socks[i] = None
                    self.closed_by_daemon += 1
                if budget > 0:
                    budget -= 1
                    self._open(i)
            if self.slowloris and time.monotonic() >= next_byte:
                next_byte += self.byte_every_s
                for i, s in enumerate(self.socks):
                    if s is not None and self.sent[i] < len(ENDLESS_HEAD):
                        try:
                            s.send(ENDLESS_HEAD[self.sent[i]:self.sent[i] + 1])
                            self.sent[i] += 1
                        except OSError:
                            pass  # found closed on the next pass
            self._stop.wait(0.1)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(30)
        for s in self.socks:
            if s is not None:
                s.close()

    def report(self):
        return (f"{len(self.slots)} slots from {len(self.sources)} address(es), "
                f"{'slowloris' if self.slowloris else 'idle'}: opened {self.opened}, closed by the daemon "
                f"{self.closed_by_daemon}, failed {self.failed}")


def timed(fn):
    """fn's duration in ms, or None when it failed or timed out."""
    t0 = time.perf_counter()
    try:
        ok = fn()
    except (OSError, http.client.HTTPException, AssertionError):
        return None
    return (time.perf_counter() - t0) * 1000 if ok else None


class Victims:
    """What everyone else does, each on a fresh connection from 127.0.0.1 (as a load balancer and
    most clients do): /healthz, an authenticated exec in its own sandbox, another organization's
    preview with its token."""

    def __init__(self, daemon, exec_key, exec_sandbox, preview_host, preview_token):
        self.daemon = daemon
        self.exec_client = Client(daemon.port, exec_key, timeout=REQUEST_TIMEOUT_S)
        self.exec_sandbox = exec_sandbox
        self.preview_host, self.preview_token = preview_host, preview_token

    def healthz(self):
        return Client(self.daemon.port, timeout=REQUEST_TIMEOUT_S).get("/healthz").status == 200

    def exec(self):
        r = self.exec_client.post(f"/v1/sandboxes/{self.exec_sandbox}/process/exec", {"argv": ["true"]})
        return r.status == 200 and r.json()["exit_code"] == 0

    def preview(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.daemon.preview_port, timeout=REQUEST_TIMEOUT_S)
        try:
            conn.request("GET", "/", headers={"Host": self.preview_host, "X-Sandfort-Preview-Token": self.preview_token})
            r = conn.getresponse()
            return r.status == 200 and b"preview of the other tenant" in r.read()
        finally:
            conn.close()

    def sample(self, rounds, give_up_after=3):
        """rounds x (healthz, exec, preview); {name: [ms or None]}. Stops after a few failures:
        a stalled listener would otherwise cost a timeout per request."""
        out = {"healthz": [], "exec": [], "preview": []}
        failures = 0
        for _ in range(rounds):
            for name in out:
                ms = timed(getattr(self, name))
                out[name].append(ms)
                failures += ms is None
            if failures >= give_up_after:
                break
        return out


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def summary(samples):
    answered = [ms for ms in samples if ms is not None]
    if not answered:
        return f"0/{len(samples)} answered"
    return (f"{len(answered)}/{len(samples)} answered, p50 {pct(answered, 50):.1f} ms, "
            f"p99 {pct(answered, 99):.1f} ms, max {max(answered):.1f} ms")


def start_preview_server(client, sandbox_id, port=8080):
    """A web server in the sandbox answering on `port`."""
    r = client.exec(sandbox_id, command="mkdir -p /srv && echo 'preview of the other tenant' > /srv/index.html")
    assert r["exit_code"] == 0, r
    r = client.post(f"/v1/sandboxes/{sandbox_id}/commands", {"command": f"cd /srv && python3 -m http.server {port}"})
    assert r.status == 201, r
    deadline = time.time() + 20
    while time.time() < deadline:
        if any(p.get("port") == port for p in client.get(f"/v1/sandboxes/{sandbox_id}/ports").json()["items"]):
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port} in {sandbox_id}")


def prepare(daemon):
    """Two organizations: one runs commands, the other serves a preview. Returns Victims."""
    runner_key, server_key = org_key(daemon, "runner"), org_key(daemon, "server")
    runner, server = daemon.client(runner_key), daemon.client(server_key)
    sbx = runner.create_sandbox()
    served = server.create_sandbox()
    start_preview_server(server, served["id"])
    token = server.get(f"/v1/sandboxes/{served['id']}/preview/8080").json()["token"]
    host = f"8080-{served['id']}.preview.localhost:{daemon.preview_port}"
    return Victims(daemon, runner_key, sbx["id"], host, token)


UNLIMITED = {"rate_per_s": 0, "burst": 0}


@pytest.fixture(scope="module")
def setting():
    raise_fd_limit(4 * CONNECTIONS + 1024)
    d = Daemon({"guardrails": {"rate_limits": {"member": UNLIMITED}}}).start()
    try:
        victims = prepare(d)
        yield d, victims
        assert d.stop() == 0, d.log()
    finally:
        d.cleanup()


def under_flood(setting, sources, slowloris):
    daemon, victims = setting
    before = victims.sample(3)
    assert all(ms is not None for v in before.values() for ms in v), before
    baseline_fds = fd_count(daemon.proc.pid)
    with Flood([daemon.port, daemon.preview_port], sources, CONNECTIONS, slowloris=slowloris) as flood:
        time.sleep(1.5)  # every connection opened, the daemon's answer to them settled
        held_fds = fd_count(daemon.proc.pid)
        during = victims.sample(10)
        report = "; ".join([flood.report(), f"daemon fds {baseline_fds} -> {held_fds}"] +
                           [f"{name}: {summary(v)}" for name, v in during.items()])
    print(report)
    for name, samples in during.items():
        assert None not in samples, f"{name} went unanswered under the flood: {report}"
        assert pct(samples, 99) < BOUND_MS, f"{name} p99 over {BOUND_MS} ms under the flood: {report}"
    assert flood.closed_by_daemon >= CONNECTIONS, report  # the daemon closed the surplus, over and over
    return baseline_fds, held_fds, report


def test_idle_connections_from_one_address_lock_nobody_out(setting):
    baseline, held, report = under_flood(setting, ["127.0.0.2"], slowloris=False)
    # One address holds its cap on each listener, not 1,100 descriptors each.
    assert held < baseline + 2 * PER_SOURCE + 64, report


def test_a_slowloris_from_one_address_locks_nobody_out(setting):
    baseline, held, report = under_flood(setting, ["127.0.0.2"], slowloris=True)
    # A connection whose header's first byte came within the last 250 ms is not closed for room (a
    # burst of real requests looks like that for a moment): beyond its cap the slowloris holds what
    # it opens again in 250 ms (the flood reopens up to 2,000 a second: 650-800 measured), never
    # the 2,200 it tries.
    assert held < baseline + 2 * CONNECTIONS * 3 // 4, report


def test_idle_and_slowloris_from_twenty_addresses_lock_nobody_out(setting):
    daemon, victims = setting
    sources = [f"127.0.0.{i}" for i in range(2, 22)]
    # Opened before the flood, so the oldest connection of all: a stream is busy, never closed for
    # room, although twenty addresses together pass the total cap over and over.
    stream = EventStream(daemon.port, victims.exec_client.key, f"/v1/sandboxes/{victims.exec_sandbox}/process/exec",
                         {"command": "sleep 4; echo survived", "timeout_s": 60})
    try:
        assert stream.response.status == 200
        with Flood([daemon.port, daemon.preview_port], sources, CONNECTIONS // 2, slowloris=True) as slow:
            under_flood(setting, sources, slowloris=False)
        print(slow.report())
        events = []
        while (event := stream.next_event()) is not None:
            events.append(event)
        assert ("stdout", {"data": "survived\n"}) in [(n, {"data": d.get("data")}) for n, d in events], events
        assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 0, events
    finally:
        stream.close()


def tls_answer_ms(port, ctx, host, path):
    """One request over a fresh TLS connection; its duration in ms, or None when unanswered."""
    def once():
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S, context=ctx)
        try:
            conn.request("GET", path, headers={"Host": host})
            r = conn.getresponse()
            r.read()
            return r.status < 500
        finally:
            conn.close()
    return timed(once)


def test_silent_connections_on_the_tls_front_lock_nobody_out():
    """With sandfortd's own TLS the listener facing clients is the TLS front: a connection that
    never starts its handshake is idle there, under the same caps."""
    raise_fd_limit(4 * CONNECTIONS + 1024)
    from test_tls import issue, make_ca  # noqa: E402 (the TLS tests' certificate helpers)
    directory = tempfile.mkdtemp(prefix="sf-tls-flood-")
    d = None
    try:
        ca = make_ca(directory)
        cert, key = issue(directory, "server", "sandfort-flood")
        ctx = ssl.create_default_context(cafile=ca)
        d = Daemon({"tls": {"cert_file": cert, "key_file": key}}, ssl_context=ctx).start()
        probes = {"healthz": (d.port, "localhost", "/healthz"),
                  "preview": (d.preview_port, f"8080-sbx-0000000000000000.preview.localhost:{d.preview_port}", "/")}
        for sources in (["127.0.0.2"], [f"127.0.0.{i}" for i in range(2, 22)]):
            with Flood([d.port, d.preview_port], sources, CONNECTIONS) as flood:
                time.sleep(1.5)
                during = {name: [tls_answer_ms(*probe[:1], ctx, *probe[1:]) for _ in range(10)]
                          for name, probe in probes.items()}
                report = "; ".join([flood.report()] + [f"{name}: {summary(v)}" for name, v in during.items()])
            print(report)
            for name, samples in during.items():
                assert None not in samples, f"{name} over TLS went unanswered under the flood: {report}"
                assert pct(samples, 99) < BOUND_MS, f"{name} over TLS p99 over {BOUND_MS} ms: {report}"
        assert d.stop() == 0, d.log()
    finally:
        if d:
            d.cleanup()
        shutil.rmtree(directory, ignore_errors=True)
