"""Background commands: start, watch, feed, signal."""

import time

from sandfort_harness import EventStream


def base(sandbox):
    return f"/v1/sandboxes/{sandbox['id']}/commands"


def wait_exit(member, sandbox, cmd_id, limit=20):
    deadline = time.time() + limit
    while time.time() < deadline:
        st = member.get(f"{base(sandbox)}/{cmd_id}").json()
        if st["state"] == "exited":
            return st
        time.sleep(0.1)
    raise AssertionError(f"{cmd_id} still running")


def test_start_status_logs_and_exit(member, sandbox):
    r = member.post(base(sandbox), {"command": "echo out; echo err >&2; exit 5"})
    assert r.status == 201, r
    cmd = r.json()
    assert cmd["id"].startswith("cmd-") and cmd["state"] == "running" and cmd["pid"] > 0
    st = wait_exit(member, sandbox, cmd["id"])
    assert st["exit_code"] == 5
    logs = member.get(f"{base(sandbox)}/{cmd['id']}/logs").json()
    assert logs["stdout"] == "out\n" and logs["stderr"] == "err\n"
    assert cmd["id"] in [c["id"] for c in member.get(base(sandbox)).json()["items"]]


def test_stdin_reaches_the_command(member, sandbox):
    cmd = member.post(base(sandbox), {"command": "read line; echo got:$line"}).json()
    r = member.request("POST", f"{base(sandbox)}/{cmd['id']}/stdin", raw=b"hello\n")
    assert r.status == 204, r
    wait_exit(member, sandbox, cmd["id"])
    assert member.get(f"{base(sandbox)}/{cmd['id']}/logs").json()["stdout"] == "got:hello\n"


def test_kill_by_signal(member, sandbox):
    cmd = member.post(base(sandbox), {"command": "sleep 300"}).json()
    r = member.post(f"{base(sandbox)}/{cmd['id']}/kill", {"signal": "TERM"})
    assert r.status == 204, r
    st = wait_exit(member, sandbox, cmd["id"])
    assert st["exit_code"] == 143
    assert member.post(f"{base(sandbox)}/{cmd['id']}/kill", {"signal": "TERM"}).status == 409
    assert member.get(f"{base(sandbox)}/cmd-0000000000000000").status == 404


def test_follow_streams_until_exit(daemon, org, sandbox):
    cmd = daemon.client(org["keys"]["member"]).post(
        base(sandbox), {"command": "echo one; sleep 1; echo two; exit 2"}).json()
    stream = EventStream(daemon.port, org["keys"]["member"], f"{base(sandbox)}/{cmd['id']}/logs?follow=true", None)
    events = []
    while (e := stream.next_event()) is not None:
        events.append(e)
    stream.close()
    out = "".join(d["data"] for name, d in events if name == "stdout")
    assert out == "one\ntwo\n"
    assert events[-1] == ("exit", {"exit_code": 2}) or (events[-1][0] == "exit" and events[-1][1]["exit_code"] == 2)


def test_a_server_started_in_the_background_keeps_serving(member, sandbox):
    cmd = member.post(base(sandbox), {"command": "python3 -m http.server 8099"}).json()
    deadline = time.time() + 20
    while time.time() < deadline:
        r = member.exec(sandbox["id"], command="curl -s -o /dev/null -w '%{http_code}' localhost:8099/")
        if r["stdout"] == "200":
            break
        time.sleep(0.2)
    assert r["stdout"] == "200"
    member.post(f"{base(sandbox)}/{cmd['id']}/kill", {"signal": "KILL"})
    assert wait_exit(member, sandbox, cmd["id"])["exit_code"] == 137
