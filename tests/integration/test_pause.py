"""Pause and resume against a real Docker engine: a paused sandbox keeps its processes and memory,
frozen (Docker's freezer), answers calls that need it with 409 and its preview URL with 503, and
carries on where it was once resumed; it stops, is deleted and survives a daemon restart paused."""

import http.client
import time

import pytest

from sandfort_harness import Daemon, docker_container

COUNTER = "i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.2; done"


def count(member, sbx):
    out = member.exec(sbx["id"], command="cat /tmp/count")
    return int(out["stdout"].strip())


def start_counter(member, sbx):
    r = member.post(f"/v1/sandboxes/{sbx['id']}/commands", {"command": COUNTER})
    assert r.status == 201, r
    deadline = time.time() + 10
    while time.time() < deadline:
        if member.exec(sbx["id"], command="cat /tmp/count 2>/dev/null || echo 0")["stdout"].strip() not in ("", "0"):
            return
        time.sleep(0.1)
    raise AssertionError("the counter never counted")


def pause(client, sbx):
    return client.post(f"/v1/sandboxes/{sbx['id']}/pause")


def resume(client, sbx):
    return client.post(f"/v1/sandboxes/{sbx['id']}/resume")


def preview_get(daemon, sbx, port, token):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.preview_port, timeout=10)
    conn.request("GET", "/", headers={"Host": f"{port}-{sbx['id']}.preview.localhost:{daemon.preview_port}",
                                      "X-Sandfort-Preview-Token": token})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def wait_preview(daemon, sbx, port, token):
    deadline = time.time() + 20
    while time.time() < deadline:
        status, _ = preview_get(daemon, sbx, port, token)
        if status == 200:
            return
        time.sleep(0.1)
    raise AssertionError(f"the preview of port {port} never answered")


@pytest.fixture
def running(member):
    sbx = member.create_sandbox()
    yield sbx
    member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_pause_freezes_and_resume_carries_on(daemon, member, running):
    sbx = running
    start_counter(member, sbx)
    r = member.post(f"/v1/sandboxes/{sbx['id']}/commands", {"command": "cd /tmp && python3 -m http.server 8080"})
    assert r.status == 201, r
    token = member.get(f"/v1/sandboxes/{sbx['id']}/preview/8080").json()["token"]
    wait_preview(daemon, sbx, 8080, token)

    before = count(member, sbx)
    r = pause(member, sbx)
    assert r.status == 200, r
    assert r.json()["state"] == "paused"
    assert member.get(f"/v1/sandboxes/{sbx['id']}").json()["state"] == "paused"
    state = docker_container(sbx["id"])["State"]
    assert state["Paused"] is True and state["Running"] is True, state
    # Again: unchanged.
    again = pause(member, sbx)
    assert again.status == 200 and again.json()["state"] == "paused", again

    # Calls that need it running: 409, saying what to do; the preview: 503 at once, not a hang.
    r = member.post(f"/v1/sandboxes/{sbx['id']}/process/exec", {"command": "true"})
    assert r.status == 409, r
    assert "resume it first" in r.json()["error"]["message"], r
    r = member.get(f"/v1/sandboxes/{sbx['id']}/commands")
    assert r.status == 409, r
    t0 = time.time()
    status, body = preview_get(daemon, sbx, 8080, token)
    assert status == 503 and b"paused" in body, (status, body)
    assert time.time() - t0 < 2
    r = member.post(f"/v1/sandboxes/{sbx['id']}/start")
    assert r.status == 409, r

    time.sleep(3.0)  # frozen: the counter does not move (it would take ~15 steps running)
    r = resume(member, sbx)
    assert r.status == 200, r
    assert r.json()["state"] == "started"
    assert docker_container(sbx["id"])["State"]["Paused"] is False
    after = count(member, sbx)
    # Carried on from where it was (not restarted from 1), and not by the 3 s it was frozen
    # (≈ 15 steps): only the moments around the two calls, which a busy machine may stretch.
    assert before <= after <= before + 7, (before, after)
    deadline = time.time() + 15
    while time.time() < deadline and count(member, sbx) < after + 3:
        time.sleep(0.2)
    assert count(member, sbx) >= after + 3
    status, body = preview_get(daemon, sbx, 8080, token)
    assert status == 200, (status, body)
    again = resume(member, sbx)
    assert again.status == 200 and again.json()["state"] == "started", again


def test_paused_sandbox_stops_and_deletes(member):
    a = member.create_sandbox()
    b = member.create_sandbox()
    assert pause(member, a).status == 200
    assert pause(member, b).status == 200

    r = member.post(f"/v1/sandboxes/{a['id']}/stop")
    assert r.status == 200, r
    assert r.json()["state"] == "stopped"
    state = docker_container(a["id"])["State"]
    assert state["Running"] is False and state["Paused"] is False, state
    # Stopped: neither pause nor resume applies.
    r = pause(member, a)
    assert r.status == 409 and "stopped" in r.json()["error"]["message"], r
    r = resume(member, a)
    assert r.status == 409, r

    assert member.delete(f"/v1/sandboxes/{b['id']}").status == 204
    assert docker_container(b["id"]) is None
    assert member.get(f"/v1/sandboxes/{b['id']}").status == 404
    assert member.delete(f"/v1/sandboxes/{a['id']}").status == 204
    assert docker_container(a["id"]) is None


def test_a_viewer_cannot_pause_or_resume(org, member, running):
    viewer = org["viewer"]
    assert pause(viewer, running).status == 403
    assert pause(member, running).status == 200
    assert resume(viewer, running).status == 403
    assert member.get(f"/v1/sandboxes/{running['id']}").json()["state"] == "paused"
    assert resume(member, running).status == 200


def test_pause_and_resume_are_audited(org, member, running):
    assert pause(member, running).status == 200
    assert resume(member, running).status == 200
    r = org["admin"].get(f"/v1/audit?target={running['id']}&limit=1000")
    assert r.status == 200, r
    events = {e["action"]: e for e in r.json()["items"]}
    assert events["sandbox.pause"]["details"]["state"] == "paused", events
    assert events["sandbox.resume"]["details"]["state"] == "started", events


@pytest.fixture
def fresh():
    d = Daemon()
    yield d
    d.cleanup()


def test_a_restart_keeps_a_paused_sandbox_paused(fresh):
    fresh.start()
    admin = fresh.admin()
    sbx = admin.create_sandbox()
    start_counter(admin, sbx)
    before = count(admin, sbx)
    assert pause(admin, sbx).status == 200
    assert fresh.stop() == 0
    fresh.start()
    r = admin.get(f"/v1/sandboxes/{sbx['id']}")
    assert r.json()["state"] == "paused", r
    assert docker_container(sbx["id"])["State"]["Paused"] is True
    # Docker's event stream, replayed from before the restart, does not mistake it for dead either.
    time.sleep(0.5)
    assert admin.get(f"/v1/sandboxes/{sbx['id']}").json()["state"] == "paused"
    assert resume(admin, sbx).status == 200
    after = count(admin, sbx)
    assert before <= after <= before + 4, (before, after)
    assert admin.delete(f"/v1/sandboxes/{sbx['id']}").status == 204


def test_disabling_an_organization_stops_its_paused_sandboxes(daemon):
    # Frozen, a sandbox still holds its memory, and nobody of a disabled organization could
    # resume or stop it: disabling stops paused ones like started ones.
    admin = daemon.admin()
    org = admin.post("/v1/orgs", {"name": "pause-disable"}).json()
    key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "m", "role": "member"}).json()["key"]
    member = daemon.client(key)
    sbx = member.create_sandbox()
    assert pause(member, sbx).status == 200
    assert admin.post(f"/v1/orgs/{org['id']}/disable").status == 200
    state = docker_container(sbx["id"])["State"]
    assert state["Running"] is False and state["Paused"] is False, state
    assert admin.post(f"/v1/orgs/{org['id']}/enable").status == 200
    assert member.get(f"/v1/sandboxes/{sbx['id']}").json()["state"] == "stopped"
    assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
