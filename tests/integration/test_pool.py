"""The warm pool against a real daemon and Docker (docs/pool.md): a create that matches a pool
takes a started sandbox from it, with the caller's environment, proxy credential and working
directory applied so that nothing of the pool or of another claimant can be observed; members
are invisible to organizations and count against no quota; a member that dies is replaced; a
pooled sandbox keeps its environment across stop and start; the pool drains at shutdown; a pool
with room to grow learns a burst, refills in parallel, serves the next burst and shrinks when idle."""

import os
import subprocess
import threading
import time
import uuid

import pytest
import yaml

from sandfort_harness import BUILD, Daemon, _containers_labelled, docker
from test_openapi import SPEC, Checker

SIZE = 2
CREATED = set()  # every sandbox this module made: what is left with the pool label are members


class Member:
    """A member key's client that remembers the sandboxes it makes."""

    def __init__(self, client, org_id):
        self.client, self.org_id = client, org_id

    def __getattr__(self, name):
        return getattr(self.client, name)

    def create_sandbox(self, **spec):
        box = self.client.create_sandbox(**spec)
        CREATED.add(box["id"])
        return box

    def post(self, path, body=None, **kw):
        r = self.client.post(path, body, **kw)
        if path == "/v1/sandboxes" and r.status == 201:
            CREATED.add(r.json()["id"])
        return r


@pytest.fixture(scope="module")
def pooled():
    d = Daemon({"pools": [{"size": SIZE}]}).start()
    yield d
    d.stop()
    d.cleanup()


def pool_state(daemon):
    r = daemon.admin().get("/v1/pool")
    assert r.status == 200, r
    [p] = r.json()["pools"]
    return p


def wait_full(daemon, limit=120):
    deadline = time.time() + limit
    while time.time() < deadline:
        p = pool_state(daemon)
        if p["ready"] == p["size"]:
            return p
        time.sleep(0.1)
    raise AssertionError(f"pool not refilled: {pool_state(daemon)}\n{daemon.log()}")


def new_member(daemon, **limits):
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": "pool-" + uuid.uuid4().hex[:8]})
    assert r.status == 201, r
    org_id = r.json()["id"]
    if limits:
        assert admin.request("PUT", f"/v1/orgs/{org_id}/limits", limits).status == 200
    r = admin.post(f"/v1/orgs/{org_id}/api-keys", {"name": "m", "role": "member"})
    assert r.status == 201, r
    return Member(daemon.client(r.json()["key"]), org_id)


def sh(client, sandbox_id, command):
    r = client.post(f"/v1/sandboxes/{sandbox_id}/exec", {"command": command})
    assert r.status == 200, r
    return r.json()


def unclaimed_member_containers(daemon, claimed):
    return [c for c in _containers_labelled("io.sandfort.pool=1")
            if daemon.network["name"] in (c.get("NetworkSettings", {}).get("Networks") or {})
            and c["Labels"].get("io.sandfort.sandbox") not in claimed]


def test_the_pool_fills_and_only_the_operator_sees_it(pooled):
    p = wait_full(pooled)
    assert p["size"] == SIZE and p["last_error"] is None
    assert p["resources"]["cpus"] > 0
    member = new_member(pooled)
    assert member.get("/v1/pool").status == 403
    # Members belong to no organization: nobody lists them.
    assert member.get("/v1/sandboxes").json()["items"] == []


def test_a_claim_is_started_at_once_with_the_callers_environment(pooled):
    wait_full(pooled)
    before = pool_state(pooled)["claims"]
    member = new_member(pooled)
    r = member.post("/v1/sandboxes", {"name": "warm", "env": {"GREETING": "hello pool"}, "workdir": "/work/app",
                                      "labels": {"team": "a"}, "wait": False})
    assert r.status == 201, r
    box = r.json()
    assert box["state"] == "started" and box["name"] == "warm" and box["labels"] == {"team": "a"}
    assert pool_state(pooled)["claims"] == before + 1
    sid = box["id"]
    # exec, a persistent session and a background command all start from the claimed environment.
    out = sh(member, sid, 'echo "$GREETING|$PWD|$HTTP_PROXY"')
    greeting, pwd, proxy = out["stdout"].strip().split("|")
    assert greeting == "hello pool" and pwd == "/work/app"
    assert proxy.startswith(f"http://{sid}:")
    assert member.post(f"/v1/sandboxes/{sid}/sessions", {"name": "s"}).status == 201
    r = member.post(f"/v1/sandboxes/{sid}/sessions/s/exec", {"command": "echo $GREETING; pwd"})
    assert r.status == 200 and r.json()["stdout"] == "hello pool\n/work/app\n", r
    cmd = member.post(f"/v1/sandboxes/{sid}/commands", {"command": "echo $GREETING"}).json()
    deadline = time.time() + 20
    while member.get(f"/v1/sandboxes/{sid}/commands/{cmd['id']}").json()["state"] != "exited":
        assert time.time() < deadline
        time.sleep(0.1)
    assert member.get(f"/v1/sandboxes/{sid}/commands/{cmd['id']}/logs").json()["stdout"] == "hello pool\n"
    # The proxy knows the new credential: a refused host is 403 (allowlist), not 407 (credential).
    out = sh(member, sid, "curl -s -o /dev/null -w '%{http_code}' -x \"$HTTP_PROXY\" http://example.com/")
    assert out["stdout"] == "403", out
    forged = sh(member, sid, "curl -s -o /dev/null -w '%{http_code}' -x \"$(echo $HTTP_PROXY | "
                             "sed 's/:[0-9a-f]*@/:0000@/')\" http://example.com/")
    assert forged["stdout"] == "407", forged
    # The audit chain says where it came from.
    r = pooled.admin().get(f"/v1/audit?org={member.org_id}&action=sandbox.create")
    assert r.status == 200, r
    events = r.json()["items"]
    assert events and events[0]["details"]["spec"].get("pooled") is True


def test_the_terminal_of_a_claimed_sandbox_has_the_callers_environment(pooled):
    wait_full(pooled)
    admin = pooled.admin()
    r = admin.post("/v1/orgs", {"name": "pool-pty-" + uuid.uuid4().hex[:8]})
    org_id = r.json()["id"]
    key = admin.post(f"/v1/orgs/{org_id}/api-keys", {"name": "m", "role": "member"}).json()["key"]
    box = Member(pooled.client(key), org_id).create_sandbox(env={"PTYVAR": "from-the-claim"})
    assert pool_state(pooled)["claims"] >= 1
    probe = os.path.join(BUILD, "tests", "pty_probe")
    out = subprocess.run([probe, str(pooled.port), box["id"], key, "header", "PTYVAR=from-the-claim"],
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0 and "env read back: ok" in out.stdout, out.stdout + out.stderr


def test_nothing_of_one_claimant_reaches_the_next(pooled):
    wait_full(pooled)
    first, second = new_member(pooled), new_member(pooled)
    a = first.create_sandbox(env={"SECRET_A": "alpha-" + uuid.uuid4().hex})
    secret = sh(first, a["id"], "echo $SECRET_A")["stdout"].strip()
    sh(first, a["id"], "echo leftover > /tmp/a-was-here")
    b = second.create_sandbox(env={"ONLY_B": "b"})
    assert b["id"] != a["id"]
    out = sh(second, b["id"], "ls /tmp; env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert "a-was-here" not in out["stdout"] and secret not in out["stdout"] and "SECRET_A" not in out["stdout"]
    assert "ONLY_B=b" in out["stdout"]
    # And the first claimant's sandbox is no one else's: 404 for the second organization.
    assert second.get(f"/v1/sandboxes/{a['id']}").status == 404


def test_members_count_against_no_quota(pooled):
    wait_full(pooled)
    member = new_member(pooled, max_sandboxes=1)
    box = member.create_sandbox()
    assert box["state"] == "started"
    r = member.post("/v1/sandboxes", {"wait": True})
    assert r.status == 429 and r.json()["error"]["code"] == "quota_exceeded", r


def test_a_create_the_pool_cannot_serve_is_made_cold(pooled):
    wait_full(pooled)
    before = pool_state(pooled)
    member = new_member(pooled)
    box = member.create_sandbox(resources={"cpus": 0.5})  # another resource class
    assert box["state"] == "started"
    after = pool_state(pooled)
    assert after["claims"] == before["claims"] and after["ready"] == SIZE


def test_a_dead_member_is_replaced(pooled):
    wait_full(pooled)
    claimed = CREATED
    victims = unclaimed_member_containers(pooled, claimed)
    assert len(victims) == SIZE, victims
    status, _ = docker("POST", f"/containers/{victims[0]['Id']}/kill")
    assert status == 204
    deadline = time.time() + 60
    while time.time() < deadline:
        ids = {c["Id"] for c in unclaimed_member_containers(pooled, claimed)}
        if victims[0]["Id"] not in ids and pool_state(pooled)["ready"] == SIZE:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the dead member was not replaced: {pool_state(pooled)}")
    member = new_member(pooled)
    box = member.create_sandbox(env={"X": "1"})
    assert sh(member, box["id"], "echo $X")["stdout"] == "1\n"


def test_a_pooled_sandbox_keeps_its_environment_across_stop_and_start(pooled):
    wait_full(pooled)
    member = new_member(pooled)
    box = member.create_sandbox(env={"KEEP": "me"}, workdir="/srv/w")
    proxy_before = sh(member, box["id"], "echo $HTTP_PROXY")["stdout"]
    assert member.post(f"/v1/sandboxes/{box['id']}/stop").status == 200
    r = member.post(f"/v1/sandboxes/{box['id']}/start")
    assert r.status == 200 and r.json()["state"] == "started", r
    out = sh(member, box["id"], 'echo "$KEEP|$PWD"; echo $HTTP_PROXY')
    keep, proxy_after = out["stdout"].split("\n")[0], out["stdout"].split("\n")[1]
    assert keep == "me|/srv/w"
    # A new credential for the new processes; the proxy accepts it (403: the allowlist speaks).
    assert proxy_after + "\n" != proxy_before and box["id"] in proxy_after
    code = sh(member, box["id"], "curl -s -o /dev/null -w '%{http_code}' -x \"$HTTP_PROXY\" http://example.com/")
    assert code["stdout"] == "403", code


def test_the_pool_drains_at_shutdown():
    d = Daemon({"pools": [{"size": 1}]}).start()
    try:
        wait_full(d)
        member = new_member(d)
        kept = member.create_sandbox()
        wait_full(d)
        assert len(unclaimed_member_containers(d, {kept["id"]})) == 1
        assert d.stop() == 0, d.log()
        assert unclaimed_member_containers(d, {kept["id"]}) == []
        # A claimed sandbox is its organization's: the shutdown leaves it.
        assert [c for c in _containers_labelled(f"io.sandfort.sandbox={kept['id']}")]
    finally:
        d.cleanup()


# A pool that learns (docs/pool.md, "How big it gets"): a small resource class, so that the
# bursts and the members together stay far inside this host's memory admission.
LEARNING = {"cpus": 0.5, "memory_mb": 256, "pids": 256}
BURST, MAX_SIZE, MAX_PARALLEL, IDLE_S = 5, 6, 3, 15


class MostMaking:
    """Polls GET /v1/pool on its own, keeping the most members it saw being made at once."""

    def __init__(self, daemon):
        self.daemon, self.most, self.error = daemon, 0, None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        try:
            while not self.stop.is_set():
                self.most = max(self.most, pool_state(self.daemon)["making"])
                self.stop.wait(0.02)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def close(self):
        self.stop.set()
        self.thread.join(10)
        assert self.error is None, self.error
        return self.most


def test_a_pool_learns_a_burst_refills_in_parallel_serves_the_next_and_shrinks_when_idle():
    d = Daemon({"pools": [{"min_size": 1, "max_size": MAX_SIZE, "resources": LEARNING}],
                "pool": {"max_parallel": MAX_PARALLEL, "idle_shrink_s": IDLE_S}}).start()
    try:
        # The answer is what docs/openapi.yaml says, with every field named (as test_openapi.py checks
        # every answer), before any burst (last_burst null) and after one.
        with open(SPEC) as f:
            documented = Checker(yaml.safe_load(f))
        p = wait_full(d)
        documented.check("GET", "/v1/pool", d.admin().get("/v1/pool"), 200)
        assert (p["min_size"], p["max_size"], p["target"], p["size"]) == (1, MAX_SIZE, 1, 1), p
        assert p["reason"] == "min_size 1: no matching create yet" and p["last_burst"] is None, p
        member = new_member(d)
        spec = {"resources": LEARNING, "wait": True}

        # The first burst: one member, then cold creates while the pool learns and grows.
        watcher = MostMaking(d)
        first = [member.post("/v1/sandboxes", spec) for _ in range(BURST)]
        assert all(r.status == 201 and r.json()["state"] == "started" for r in first), first
        p = documented.check("GET", "/v1/pool", d.admin().get("/v1/pool"), 200)["pools"][0]
        assert p["target"] == BURST and p["size"] == BURST, p
        assert p["reason"].startswith(f"a burst of {BURST} matching creates within 60 s"), p
        assert p["last_burst"]["creates"] == BURST and p["last_burst"]["age_s"] >= 0, p
        assert p["claims"] + p["misses"] == BURST and p["misses"] >= 1, p
        full = wait_full(d)
        most = watcher.close()
        # Made in parallel, and never more at once than configured.
        assert 2 <= most <= MAX_PARALLEL, (most, full)
        assert full["ready"] == BURST and full["making"] == 0 and full["last_error"] is None, full
        assert len(unclaimed_member_containers(d, CREATED)) == BURST

        # The second burst of the same size is served from the pool, every create of it.
        before = pool_state(d)
        second = [member.create_sandbox(**spec) for _ in range(BURST)]
        after = pool_state(d)
        assert after["claims"] == before["claims"] + BURST and after["misses"] == before["misses"], (before, after)
        r = d.admin().get(f"/v1/audit?org={member.org_id}&action=sandbox.create&limit=100")
        assert r.status == 200, r
        pooled = {e["target"] for e in r.json()["items"] if e["details"]["spec"].get("pooled") is True}
        assert {b["id"] for b in second} <= pooled
        # Ten within the window now: bounded by max_size.
        assert after["target"] == MAX_SIZE and after["reason"].startswith(f"max_size {MAX_SIZE}: a burst of"), after

        # Idle for IDLE_S: back to min_size, the members beyond it removed from Docker too.
        deadline = time.time() + IDLE_S + 120
        while time.time() < deadline:
            p = pool_state(d)
            if p["target"] == 1 and p["ready"] == 1 and len(unclaimed_member_containers(d, CREATED)) == 1:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the pool did not shrink: {pool_state(d)}\n{d.log()}")
        assert p["reason"] == f"min_size 1: idle, no matching create for {IDLE_S} s", p
        assert p["last_burst"]["creates"] == 2 * BURST, p
        # Claimed sandboxes are their organization's: the shrink left them.
        for r in first:
            assert member.get(f"/v1/sandboxes/{r.json()['id']}").json()["state"] == "started"
        assert d.stop() == 0, d.log()
    finally:
        d.cleanup()
