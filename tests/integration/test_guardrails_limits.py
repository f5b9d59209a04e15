"""Guardrails against a real daemon and Docker: per-key rate limits (429 rate_limited with
Retry-After, then success; other keys unaffected; counted into the audit chain) and the
server-side maxima no request can raise (exec timeout refused above the maximum; output and
background-command logs cut at their caps, by the agent and, when the agent lies, by the daemon).
docs/guardrails.md describes each limit."""

import concurrent.futures
import time
import uuid

import pytest

from sandfort_harness import Daemon, read_sse

CAP = 1000      # output_cap_bytes of the maxima daemon
LOG_CAP = 2000  # guardrails.command_log_cap_bytes


def new_org(daemon, *roles):
    """An organization and one key per role asked for: (org id, [(key id, client)])."""
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": "gr-" + uuid.uuid4().hex[:8]})
    assert r.status == 201, r
    org_id = r.json()["id"]
    keys = []
    for i, role in enumerate(roles):
        r = admin.post(f"/v1/orgs/{org_id}/api-keys", {"name": f"{role}-{i}", "role": role})
        assert r.status == 201, r
        keys.append((r.json()["id"], daemon.client(r.json()["key"])))
    return org_id, keys


def audit_events(client, action):
    r = client.get(f"/v1/audit?action={action}&limit=1000")
    assert r.status == 200, r
    return r.json()["items"]


# ---------------------------------------------------------------- rate limits

@pytest.fixture(scope="module")
def limited():
    d = Daemon({"audit": {"summary_interval_s": 1},
                "guardrails": {"rate_limits": {"member": {"rate_per_s": 1, "burst": 3},
                                               "admin": {"rate_per_s": 100, "burst": 1000}}}}).start()
    yield d
    assert d.stop() == 0, d.log()
    d.cleanup()


def until_refused(client, path, allowed_status, most):
    """Requests path until one is refused; returns (requests allowed, the refusal)."""
    for allowed in range(most + 1):
        r = client.get(path)
        if r.status == 429:
            return allowed, r
        assert r.status == allowed_status, r
    raise AssertionError(f"{path}: never refused in {most + 1} requests")


def test_a_key_over_its_rate_gets_429_with_retry_after_then_succeeds(limited):
    _, [(admin_id, admin), (hot_id, hot), (_, calm)] = new_org(limited, "admin", "member", "member")
    t = time.monotonic()
    allowed, r = until_refused(hot, "/v1/sandboxes", 200, 10)
    # The burst, plus what refilled at one per second meanwhile.
    assert 3 <= allowed <= 3 + int(time.monotonic() - t) + 1, allowed
    assert r.json()["error"]["code"] == "rate_limited"
    assert "1 requests per second" in r.json()["error"]["message"]
    retry_after = int(r.headers["Retry-After"])
    assert retry_after >= 1
    # The streamed routes (forwarded to the agent) take from the same bucket, before anything else
    # (an allowed call finds no such sandbox).
    _, r = until_refused(hot, "/v1/sandboxes/sbx-0000000000000000/sessions", 404, 1)
    assert r.json()["error"]["code"] == "rate_limited" and int(r.headers["Retry-After"]) >= 1, r
    # Another key of the same organization is not affected.
    for _ in range(3):
        assert calm.get("/v1/sandboxes").status == 200

    time.sleep(retry_after + 0.05)
    assert hot.get("/v1/sandboxes").status == 200

    # Counted, not one event per refusal: after the summary interval, in the organization's chain.
    deadline = time.time() + 10
    events = []
    while time.time() < deadline:
        events = audit_events(admin, "rate_limit.exceeded")
        if sum(e["details"]["count"] for e in events) >= 2:
            break
        time.sleep(0.3)
    assert events, limited.log()
    assert {e["actor"] for e in events} == {f"key:{hot_id}"}, events
    assert sum(e["details"]["count"] for e in events) == 2
    for e in events:
        assert e["outcome"] == "denied" and e["source"] == "127.0.0.1", e
        assert e["details"]["burst"] == 3 and e["details"]["rate_per_s"] in ("1.0", "1"), e
    assert admin.get("/v1/audit/verify").json()["ok"] is True


def test_a_flood_writes_a_few_counted_events_and_the_operator_is_not_limited(limited):
    _, [(_, admin), (key_id, flooder)] = new_org(limited, "admin", "member")
    t = time.monotonic()
    statuses = [flooder.get("/v1/whoami").status for _ in range(60)]
    ok, refused = statuses.count(200), statuses.count(429)
    assert 3 <= ok <= 3 + int(time.monotonic() - t) + 1 and ok + refused == 60, statuses
    # The superadmin's keys are unlimited unless configured (guardrails.rate_limits.superadmin).
    operator = limited.admin()
    assert all(operator.get("/v1/whoami").status == 200 for _ in range(300))
    time.sleep(2.5)
    events = [e for e in audit_events(admin, "rate_limit.exceeded") if e["actor"] == f"key:{key_id}"]
    assert sum(e["details"]["count"] for e in events) == refused
    assert len(events) <= 3, events  # per interval, not per request


# ---------------------------------------------------------------- server-side maxima

@pytest.fixture(scope="module")
def strict():
    d = Daemon({"exec_max_timeout_s": 2, "exec_default_timeout_s": 2, "output_cap_bytes": CAP,
                "guardrails": {"command_log_cap_bytes": LOG_CAP}}).start()
    _, [(_, admin), (_, member)] = new_org(d, "admin", "member")
    sbx = member.create_sandbox()
    yield d, admin, member, sbx["id"]
    member.delete(f"/v1/sandboxes/{sbx['id']}")
    assert d.stop() == 0, d.log()
    d.cleanup()


def test_a_timeout_above_the_maximum_is_refused_and_audited(strict):
    _, admin, member, sid = strict
    r = member.post(f"/v1/sandboxes/{sid}/process/exec", {"command": "sleep 10", "timeout_s": 100})
    assert r.status == 400, r
    assert r.json()["error"]["code"] == "invalid_argument"
    assert "maximum of 2 s" in r.json()["error"]["message"]
    r = member.post(f"/v1/sandboxes/{sid}/process/code-run", {"language": "sh", "code": "sleep 10", "timeout_s": 3},
                    headers={"Accept": "text/event-stream"})
    assert r.status == 400 and "maximum of 2 s" in r.json()["error"]["message"], r
    refused = [e for e in audit_events(admin, "sandbox.exec") if e["outcome"] == "denied"]
    assert len(refused) == 1 and refused[0]["target"] == sid, refused
    assert refused[0]["details"]["guardrail"] == "exec_max_timeout_s"
    assert refused[0]["details"]["timeout_s"] == 100 and refused[0]["details"]["max_timeout_s"] == 2
    runs = [e for e in audit_events(admin, "sandbox.code_run") if e["outcome"] == "denied"]
    assert len(runs) == 1 and runs[0]["details"]["timeout_s"] == 3, runs


def test_commands_end_at_the_maximum(strict):
    _, admin, member, sid = strict
    for body in ({"command": "sleep 10", "timeout_s": 2}, {"command": "sleep 10"}):
        t = time.monotonic()
        out = member.exec(sid, **body)
        assert out["timed_out"] is True and out["exit_code"] == 124, out
        assert 1.5 < time.monotonic() - t < 6
    accepted = [e for e in audit_events(admin, "sandbox.exec") if e["outcome"] == "accepted"]
    assert accepted and all(e["details"]["timeout_s"] == 2 for e in accepted), accepted
    # A session (forwarded to the agent, which was started with the maxima): refused above the
    # maximum, and its default is held to it.
    r = member.post(f"/v1/sandboxes/{sid}/exec", {"command": "sleep 10", "timeout_s": 100})
    assert r.status == 400 and "no greater than 2" in r.json()["error"]["message"], r
    t = time.monotonic()
    r = member.post(f"/v1/sandboxes/{sid}/exec", {"command": "sleep 10"})
    assert r.status == 200 and r.json()["timed_out"] is True, r
    assert time.monotonic() - t < 6


def test_output_beyond_the_cap_is_cut(strict):
    _, _, member, sid = strict
    script = "head -c 5000 /dev/zero | tr '\\0' x; head -c 3000 /dev/zero | tr '\\0' e >&2"
    out = member.exec(sid, command=script)
    assert out["stdout"] == "x" * CAP and out["stderr"] == "e" * CAP and out["truncated"] is True, out
    r = member.post(f"/v1/sandboxes/{sid}/exec", {"command": script})
    assert r.status == 200, r
    assert len(r.json()["stdout"]) == CAP and r.json()["truncated"] is True, r
    r = member.post(f"/v1/sandboxes/{sid}/process/exec", {"command": script}, headers={"Accept": "text/event-stream"})
    assert r.status == 200, r
    events = read_sse(r.body)
    assert "".join(d["data"] for name, d in events if name == "stdout") == "x" * CAP
    assert "".join(d["data"] for name, d in events if name == "stderr") == "e" * CAP
    assert events[-1][0] == "exit" and events[-1][1]["truncated"] is True, events[-1]
    small = member.exec(sid, command="echo fits")
    assert small["stdout"] == "fits\n" and small["truncated"] is False


def test_a_background_command_log_keeps_only_the_cap(strict):
    _, _, member, sid = strict
    r = member.post(f"/v1/sandboxes/{sid}/commands",
                    {"command": "head -c 6000 /dev/zero | tr '\\0' a; head -c 4000 /dev/zero | tr '\\0' z"})
    assert r.status == 201, r
    cmd = r.json()["id"]
    deadline = time.time() + 20
    while member.get(f"/v1/sandboxes/{sid}/commands/{cmd}").json()["state"] != "exited":
        assert time.time() < deadline
        time.sleep(0.1)
    logs = member.get(f"/v1/sandboxes/{sid}/commands/{cmd}/logs").json()
    assert logs["dropped_bytes"] == 10000 - LOG_CAP
    assert logs["stdout"] == f"[sandfort: {10000 - LOG_CAP} bytes dropped]\n" + "z" * LOG_CAP, logs["stdout"][:200]


# A fake agent that ignores the caps it was given: root in the sandbox can replace the agent, so
# the daemon holds what it relays to the caps itself.
LYING_AGENT = r'''
import json, os, socket, threading
path = "/run/sandfort/agent.sock"
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(16)
def event(name, data):
    frame = ("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode()
    return b"%x\r\n%s\r\n" % (len(frame), frame)
def serve(c):
    try:
        head = c.recv(65536)
        if b"text/event-stream" in head:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(10):
                c.sendall(event("stdout", {"data": "o" * 500}))
                c.sendall(event("stdout", {"data": ""}))
                c.sendall(event("stderr", {"data": "\u00e9" * 300}))
            c.sendall(event("exit", {"exit_code": 0, "timed_out": False, "truncated": False, "duration_ms": 1}))
            c.sendall(event("stdout", {"data": "after the end"}))
            c.sendall(b"0\r\n\r\n")
        else:
            body = json.dumps({"exit_code": 0, "stdout": "x" * 5000, "stderr": "\u00e9" * 3000,
                               "duration_ms": 1, "timed_out": False, "truncated": False}).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                      + body)
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


def test_the_daemon_holds_a_lying_agent_to_the_output_cap(strict):
    d, _, member, _ = strict
    sid = member.create_sandbox()["id"]
    try:
        r = member.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/lying_agent.py", raw=LYING_AGENT.encode())
        assert r.status in (200, 201, 204), r
        out = member.exec(sid, command="setsid python3 /tmp/lying_agent.py </dev/null >/dev/null 2>&1 & sleep 0.5")
        assert out["exit_code"] == 0, out

        # The daemon's kept connections still end at the real agent (docs/architecture.md, "The door
        # to the agent"); calls at once beyond the few it keeps open new ones, which the liar takes.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: member.exec(sid, command="sleep 1"), range(8)))
        lies = [out for out in answers if out["stdout"]]
        assert lies, answers
        assert all(out["stdout"] == "" and out["exit_code"] == 0 for out in answers if not out["stdout"]), answers
        for out in lies:
            assert out["stdout"] == "x" * CAP, len(out["stdout"])
            # Cut at a character boundary: 500 two-byte characters fit in 1000 bytes.
            assert out["stderr"] == "\u00e9" * (CAP // 2) and out["truncated"] is True, out

        r = member.post(f"/v1/sandboxes/{sid}/process/exec", {"command": "anything"},
                        headers={"Accept": "text/event-stream"})
        assert r.status == 200, r
        events = read_sse(r.body)
        assert "".join(e["data"] for name, e in events if name == "stdout") == "o" * CAP
        assert "".join(e["data"] for name, e in events if name == "stderr") == "\u00e9" * (CAP // 2)
        assert all(e["data"] for name, e in events if name in ("stdout", "stderr")), "empty events are dropped"
        assert [name for name, _ in events].count("exit") == 1 and events[-1][0] == "exit", events[-3:]
        assert events[-1][1]["truncated"] is True and events[-1][1]["exit_code"] == 0
        assert d.client().get("/healthz").status == 200
    finally:
        member.delete(f"/v1/sandboxes/{sid}")
