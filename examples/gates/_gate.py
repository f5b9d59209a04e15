"""Shared plumbing of the gates: configuration from the environment, the SDK, one line per check.

Every gate prints `PASS <gate>: <check>` or `FAIL <gate>: <check> — <why>` per check (and
`SKIP …` for a check that needs something the environment did not provide; with
SANDFORT_GATE_STRICT=1 a skip counts as a failure), then a summary, and exits 1 if any check
failed. Standard library plus the repository's Python SDK only."""

import os
import sys
import time
import traceback
from collections import namedtuple
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
try:
    import sandfort_sdk  # noqa: F401
except ImportError:  # not installed: the repository's copy
    sys.path.insert(0, os.path.join(REPO, "sdk", "python"))

from sandfort_sdk import Client, RateLimitedError  # noqa: E402,F401


def env(name, default=None):
    value = os.environ.get(name)
    return value if value else default


def client(key=None):
    """A client for SANDFORT_BASE_URL with SANDFORT_API_KEY (or another key)."""
    return Client(env("SANDFORT_BASE_URL"), key or env("SANDFORT_API_KEY"), timeout=120)


def retry(fn, *args, **kw):
    """Calls fn, waiting out 429 rate_limited answers (a rate limit is not a failure of a gate)."""
    for _ in range(30):
        try:
            return fn(*args, **kw)
        except RateLimitedError as e:
            time.sleep(max(1, e.retry_after or 1))
    return fn(*args, **kw)


def delete_all(c, sandboxes):
    """Deletes what a gate made; a failure is printed, not raised (the checks already ran)."""
    for s in sandboxes:
        try:
            retry(c.delete, s.id)
        except Exception as e:  # noqa: BLE001
            print(f"cleanup: could not delete {s.id}: {e}")


class Gate:
    def __init__(self, name):
        self.name = name
        self.failed = 0
        self.passed = 0
        self.skipped = 0
        self.strict = env("SANDFORT_GATE_STRICT") == "1"
        for needed in ("SANDFORT_BASE_URL", "SANDFORT_API_KEY"):
            if not env(needed):
                print(f"FAIL {name}: configuration — {needed} is not set")
                sys.exit(1)

    def ok(self, check, detail=""):
        self.passed += 1
        print(f"PASS {self.name}: {check}" + (f" ({detail})" if detail else ""), flush=True)

    def fail(self, check, why):
        self.failed += 1
        print(f"FAIL {self.name}: {check} — {why}", flush=True)

    def skip(self, check, why):
        if self.strict:
            self.fail(check, f"not run: {why} (SANDFORT_GATE_STRICT=1)")
            return
        self.skipped += 1
        print(f"SKIP {self.name}: {check} — {why}", flush=True)

    def check(self, check, fn):
        """Runs fn(); it returns a detail string (PASS) or raises AssertionError/anything (FAIL)."""
        try:
            detail = fn()
        except AssertionError as e:
            self.fail(check, str(e) or "assertion failed")
            return False
        except Exception as e:  # noqa: BLE001 - a gate reports every error as a failed check
            self.fail(check, f"{type(e).__name__}: {e}")
            if env("SANDFORT_GATE_DEBUG"):
                traceback.print_exc()
            return False
        self.ok(check, detail or "")
        return True

    def finish(self):
        print(f"{self.name}: {self.passed} passed, {self.failed} failed" +
              (f", {self.skipped} skipped" if self.skipped else ""), flush=True)
        return 1 if self.failed else 0


def run(gate_name, body):
    """Runs body(gate) and exits with the gate's status; an error outside a check fails the gate."""
    gate = Gate(gate_name)
    try:
        body(gate)
    except Exception as e:  # noqa: BLE001
        gate.fail("setup", f"{type(e).__name__}: {e}")
        if env("SANDFORT_GATE_DEBUG"):
            traceback.print_exc()
    sys.exit(gate.finish())


def sh(sbx, command, **kw):
    """exec in a sandbox, waiting out rate limits."""
    kw.setdefault("timeout_s", 60)
    return retry(sbx.process.exec, command, **kw)


# How a sandbox reaches the egress proxy, read from its HTTP_PROXY. On the sandbox network (runc)
# it is the gateway's proxy port with a per-sandbox credential; a sandbox with no network interface
# (gVisor, or runc_dials_home) has its agent's listener on 127.0.0.1 and no credential at all: its
# door is its identity (docs/gvisor.md).
Proxy = namedtuple("Proxy", "url user secret host port dials_home")


def proxy_of(sbx):
    url = sh(sbx, "printf %s \"$HTTP_PROXY\"").stdout
    parts = urlsplit(url)
    assert parts.scheme == "http" and parts.hostname and parts.port, f"HTTP_PROXY is not a proxy URL: {url[:40]!r}"
    dials_home = parts.hostname == "127.0.0.1" and not parts.username
    assert dials_home or (parts.username and parts.password), \
        f"HTTP_PROXY inside the sandbox is neither a proxy URL with a credential nor the agent's: {url[:40]!r}"
    return Proxy(url, parts.username, parts.password, parts.hostname, parts.port, dials_home)
