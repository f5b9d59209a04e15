"""Daemon restarts, crashes, an absent Docker engine, and graceful shutdown."""

import os
import signal
import threading
import time

import pytest

from sandfort_harness import Daemon, EventStream, docker, docker_container, docker_containers_of


@pytest.fixture
def fresh():
    d = Daemon()
    yield d
    d.cleanup()


def test_sigkill_during_create_leaves_no_orphan_after_restart(fresh):
    fresh.start()
    member = fresh.admin()
    # Ask for several sandboxes without waiting, then kill the daemon while they are being made.
    ids = [member.post("/v1/sandboxes", {"wait": False}).json()["id"] for _ in range(3)]
    time.sleep(0.3)
    fresh.kill()
    fresh.start()
    for sid in ids:
        r = member.get(f"/v1/sandboxes/{sid}")
        assert r.status == 200, r
        assert r.json()["state"] in ("error", "started"), r.json()
    time.sleep(0.5)
    live = {c["Labels"]["io.sandfort.sandbox"] for c in docker_containers_of(fresh)}
    started = {sid for sid in ids if member.get(f"/v1/sandboxes/{sid}").json()["state"] == "started"}
    # Every container belongs to a sandbox the API reports as started; nothing else survives.
    assert live == started, (live, started)
    for sid in ids:
        assert member.delete(f"/v1/sandboxes/{sid}").status == 204
    assert docker_containers_of(fresh) == []


def test_restart_marks_vanished_containers_and_removes_unknown_ones(fresh):
    fresh.start()
    admin = fresh.admin()
    keep = admin.create_sandbox()
    vanish = admin.create_sandbox()
    fresh.stop()
    # Behind the daemon's back: one container disappears, and one appears that no row knows.
    docker("DELETE", f"/containers/{docker_container(vanish['id'])['Id']}?force=true")
    stray = docker_container(keep["id"])["Config"]["Labels"].copy()
    stray["io.sandfort.sandbox"] = "sbx-00000000000000aa"
    status, made = docker("POST", "/containers/create?name=sandfort-stray-" + os.path.basename(fresh.state_dir),
                          {"Image": "sandfort/base:bookworm", "Cmd": ["sleep", "300"], "Labels": stray,
                           "HostConfig": {"NetworkMode": "none"}})
    assert status == 201, made
    fresh.start()
    assert admin.get(f"/v1/sandboxes/{keep['id']}").json()["state"] == "started"
    assert admin.exec(keep["id"], command="echo still")["stdout"] == "still\n"
    gone = admin.get(f"/v1/sandboxes/{vanish['id']}").json()
    assert gone["state"] == "error" and "vanished" in gone["error_message"]
    assert docker("GET", f"/containers/{made['Id']}/json")[0] == 404
    assert admin.delete(f"/v1/sandboxes/{vanish['id']}").status == 204


def test_containers_of_another_daemon_are_left_alone(fresh, daemon, sandbox):
    # Both daemons share the engine; reconciling one must not touch the other's sandboxes.
    fresh.start()
    fresh.stop()
    fresh.start()
    assert docker_container(sandbox["id"])["State"]["Running"]


def test_docker_unreachable_is_503_not_a_hang():
    d = Daemon({"docker_socket": "/tmp/no-docker-here.sock"})
    try:
        d.start(wait_ready=False)
        c = d.admin()
        r = c.get("/readyz")
        assert r.status == 503 and r.json()["error"]["code"] == "unavailable", r
        assert "docker" in r.json()["error"]["message"].lower()
        started = time.time()
        r = c.post("/v1/sandboxes", {"wait": True})
        assert r.status == 503 and r.json()["error"]["code"] == "unavailable", r
        assert time.time() - started < 10
        assert c.get("/v1/sandboxes").json()["items"] == []
    finally:
        d.cleanup()


def test_sigterm_finishes_in_flight_requests_then_exits_zero(fresh):
    fresh.start()
    admin = fresh.admin()
    sbx = admin.create_sandbox()
    result = {}

    def slow():
        result["r"] = admin.post(f"/v1/sandboxes/{sbx['id']}/process/exec", {"command": "sleep 2; echo done"})

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.7)
    fresh.proc.send_signal(signal.SIGTERM)
    t.join(30)
    assert fresh.proc.wait(30) == 0
    assert result["r"].status == 200 and result["r"].json()["stdout"] == "done\n"
    # New connections are refused once it is gone.
    with pytest.raises(OSError):
        fresh.client().get("/healthz")
    fresh.start()
    assert admin.delete(f"/v1/sandboxes/{sbx['id']}").status == 204


def test_sigterm_lets_a_streamed_exec_finish_then_exits_zero(fresh):
    fresh.start()
    admin = fresh.admin()
    sbx = admin.create_sandbox()
    stream = EventStream(fresh.port, fresh.admin_key, f"/v1/sandboxes/{sbx['id']}/process/exec",
                         {"command": "echo started; sleep 1; echo done"})
    try:
        assert stream.response.status == 200
        assert stream.next_event() == ("stdout", {"data": "started\n"})
        fresh.proc.send_signal(signal.SIGTERM)
        events = []
        while (e := stream.next_event()) is not None:
            events.append(e)
    finally:
        stream.close()
    assert ("stdout", {"data": "done\n"}) in events, events
    assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 0, events
    assert fresh.proc.wait(30) == 0
    fresh.start()
    assert admin.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
