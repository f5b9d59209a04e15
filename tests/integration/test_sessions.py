"""Persistent shells: state that survives between calls, like a person's terminal."""

import concurrent.futures
import time

import pytest

from sandfort_harness import EventStream


@pytest.fixture(scope="module")
def box(member):
    sbx = member.create_sandbox(name="sessions")
    yield sbx
    member.delete(f"/v1/sandboxes/{sbx['id']}")


def sh(member, box, command, session=None, **extra):
    path = f"/v1/sandboxes/{box['id']}/exec" if session is None else \
        f"/v1/sandboxes/{box['id']}/sessions/{session}/exec"
    r = member.post(path, {"command": command, **extra})
    assert r.status == 200, r
    return r.json()


def test_the_issue_transcript(member, box):
    assert sh(member, box, "cd /tmp && mkdir -p w && cd w")["exit_code"] == 0
    assert sh(member, box, "pwd")["stdout"] == "/tmp/w\n"
    assert sh(member, box, "export TOKEN=abc")["exit_code"] == 0
    assert sh(member, box, "echo $TOKEN")["stdout"] == "abc\n"
    started = sh(member, box, "python3 -m http.server 8080 >/dev/null 2>&1 &")
    assert started["exit_code"] == 0 and started["duration_ms"] < 5000
    deadline = time.time() + 20
    while time.time() < deadline:
        r = sh(member, box, "curl -s localhost:8080 | head -c 15")
        if r["stdout"]:
            break
        time.sleep(0.2)
    assert r["stdout"] == "<!DOCTYPE HTML>"


def test_functions_persist_and_streams_stay_separate(member, box):
    sh(member, box, "greet() { echo \"hi $1\"; echo oops >&2; }")
    r = sh(member, box, "greet you")
    assert r["stdout"] == "hi you\n" and r["stderr"] == "oops\n"


def test_stdin_is_eof(member, box):
    r = sh(member, box, "cat; echo after", timeout_s=10)
    assert r["stdout"] == "after\n" and r["timed_out"] is False


def test_background_job_keeping_stdout_does_not_hold_the_call(member, box):
    member.post(f"/v1/sandboxes/{box['id']}/sessions", {"name": "bg"})
    r = sh(member, box, "sleep 100 & echo ok", session="bg", timeout_s=20)
    assert r["stdout"] == "ok\n" and r["timed_out"] is False
    assert sh(member, box, "echo next", session="bg")["stdout"] == "next\n"
    assert member.delete(f"/v1/sandboxes/{box['id']}/sessions/bg").status == 204


def test_exit_restarts_the_session(member, box):
    member.post(f"/v1/sandboxes/{box['id']}/sessions", {"name": "quitter"})
    sh(member, box, "cd /tmp && export GONE=1", session="quitter")
    r = sh(member, box, "exit 3", session="quitter")
    assert r["exit_code"] == 3 and r["session_restarted"] is True
    r = sh(member, box, "echo ${GONE:-unset}", session="quitter")
    assert r["stdout"] == "unset\n" and r["session_restarted"] is False


def test_timeout_kills_the_command_and_the_shell_survives(member, box):
    member.post(f"/v1/sandboxes/{box['id']}/sessions", {"name": "slow"})
    sh(member, box, "cd /tmp && export KEEP=yes", session="slow")
    r = sh(member, box, "sleep 30", session="slow", timeout_s=1)
    assert r["exit_code"] == 124 and r["timed_out"] is True
    r = sh(member, box, "echo $KEEP; pwd; pgrep -x sleep || echo none", session="slow")
    assert r["stdout"] == "yes\n/tmp\nnone\n", r


def test_named_sessions_are_independent_and_listed(member, box):
    base = f"/v1/sandboxes/{box['id']}/sessions"
    assert member.post(base, {"name": "a"}).status == 201
    assert member.post(base, {"name": "a"}).status == 409
    assert member.post(base, {"name": "b"}).status == 201
    sh(member, box, "cd /usr", session="a")
    sh(member, box, "cd /etc", session="b")
    assert sh(member, box, "pwd", session="a")["stdout"] == "/usr\n"
    assert sh(member, box, "pwd", session="b")["stdout"] == "/etc\n"
    names = {s["name"] for s in member.get(base).json()["items"]}
    assert {"default", "a", "b"} <= names
    assert member.delete(f"{base}/b").status == 204
    assert member.delete(f"{base}/b").status == 404
    assert member.post(f"{base}/b/exec", {"command": "true"}).status == 404
    assert member.post(base, {"name": "bad name!"}).status == 400


def test_calls_to_one_session_are_serialized_in_order(member, box):
    member.post(f"/v1/sandboxes/{box['id']}/sessions", {"name": "queue"})
    sh(member, box, "rm -f /tmp/order", session="queue")

    def one(i):
        return sh(member, box, f"echo {i} >> /tmp/order; echo {i}", session="queue")["stdout"]

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        outs = list(pool.map(one, range(20)))
    assert outs == [f"{i}\n" for i in range(20)]
    lines = sh(member, box, "cat /tmp/order", session="queue")["stdout"].split()
    assert sorted(lines, key=int) == [str(i) for i in range(20)] and len(lines) == 20


def test_session_exec_streams_events(daemon, org, box):
    org["member"].post(f"/v1/sandboxes/{box['id']}/sessions", {"name": "streamer"})
    stream = EventStream(daemon.port, org["keys"]["member"], f"/v1/sandboxes/{box['id']}/sessions/streamer/exec",
                         {"command": "echo first; sleep 1; echo second >&2; exit 4"})
    first = stream.next_event()
    assert first == ("stdout", {"data": "first\n"}), first
    rest = []
    while (e := stream.next_event()) is not None:
        rest.append(e)
    stream.close()
    assert ("stderr", {"data": "second\n"}) in rest
    assert rest[-1][0] == "exit" and rest[-1][1]["exit_code"] == 4


def test_another_orgs_session_is_404(daemon, box):
    admin = daemon.admin()
    other = admin.post("/v1/orgs", {"name": "session-intruders"}).json()
    key = admin.post(f"/v1/orgs/{other['id']}/api-keys", {"name": "k", "role": "admin"}).json()["key"]
    r = daemon.client(key).post(f"/v1/sandboxes/{box['id']}/exec", {"command": "id"})
    assert r.status == 404
