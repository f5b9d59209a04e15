"""exec and code-run as server-sent events, and what a vanished reader leaves behind."""

import socket
import time

from sandfort_harness import EventStream, read_sse


def test_exec_streams_output_before_the_command_ends(daemon, org, sandbox):
    stream = EventStream(daemon.port, org["keys"]["member"], f"/v1/sandboxes/{sandbox['id']}/process/exec",
                         {"command": "echo first; sleep 1; printf 'a\\rb'; echo err >&2; exit 3"})
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type") == "text/event-stream"
    t0 = time.time()
    first = stream.next_event()
    assert first == ("stdout", {"data": "first\n"})
    events = []
    while (e := stream.next_event()) is not None:
        events.append(e)
    stream.close()
    assert time.time() - t0 > 0.5, "the first event must arrive before the command ends"
    stdout = "".join(d["data"] for name, d in events if name == "stdout")
    assert stdout == "a\rb"
    assert ("stderr", {"data": "err\n"}) in events
    assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 3


def test_code_run_streams_too(member, sandbox):
    r = member.post(f"/v1/sandboxes/{sandbox['id']}/process/code-run",
                    {"language": "python", "code": "print(21 * 2)"}, headers={"Accept": "text/event-stream"})
    assert r.status == 200, r
    events = read_sse(r.body)
    assert ("stdout", {"data": "42\n"}) in events
    assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 0


def test_a_command_that_cannot_start_says_why_in_the_stream_too(member, sandbox):
    """The whole answer's stderr ("command not found") reaches a streamed caller as a stderr
    event before the exit, with the same exit code: 127 alone says nothing."""
    path = f"/v1/sandboxes/{sandbox['id']}/process/exec"
    whole = member.post(path, {"argv": ["sfa-no-such-program"]})
    assert whole.status == 200, whole
    assert whole.json()["exit_code"] == 127
    r = member.post(path, {"argv": ["sfa-no-such-program"]}, headers={"Accept": "text/event-stream"})
    assert r.status == 200, r
    events = read_sse(r.body)
    assert [name for name, _ in events] == ["stderr", "exit"], events
    assert events[0][1]["data"] == whole.json()["stderr"] == "sandfort-agent: sfa-no-such-program: command not found\n"
    assert events[1][1]["exit_code"] == 127
    # Found but not executable: 126 and the reason, streamed the same way.
    member.exec(sandbox["id"], command="printf 'echo never' > /tmp/sfa-plain && chmod 0644 /tmp/sfa-plain")
    r = member.post(path, {"argv": ["/tmp/sfa-plain"]}, headers={"Accept": "text/event-stream"})
    events = read_sse(r.body)
    assert events[-1] == ("exit", events[-1][1]) and events[-1][1]["exit_code"] == 126, events
    assert "cannot execute /tmp/sfa-plain: Permission denied" in "".join(
        d["data"] for name, d in events if name == "stderr"), events


def test_stream_errors_before_output_are_plain_json(member, sandbox):
    r = member.post(f"/v1/sandboxes/{sandbox['id']}/process/exec", {"command": "x", "argv": ["y"]},
                    headers={"Accept": "text/event-stream"})
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument"
    r = member.post("/v1/sandboxes/sbx-0000000000000000/process/exec", {"command": "true"},
                    headers={"Accept": "text/event-stream"})
    assert r.status == 404


def test_a_reader_that_disconnects_kills_the_command(daemon, member, sandbox):
    sid = sandbox["id"]
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        body = b'{"command": "echo $$ > /tmp/streamed.pid; echo go; exec sleep 300"}'
        s.sendall(b"POST /v1/sandboxes/" + sid.encode() + b"/process/exec HTTP/1.1\r\nHost: x\r\n"
                  b"Authorization: Bearer " + member.key.encode() + b"\r\nAccept: text/event-stream\r\n"
                  b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        seen = b""
        while b"go" not in seen:
            seen += s.recv(4096)
    pid = member.exec(sid, command="cat /tmp/streamed.pid")["stdout"].strip()
    deadline = time.time() + 10
    while time.time() < deadline:
        if member.exec(sid, command=f"kill -0 {pid} 2>/dev/null && echo alive || echo gone")["stdout"] == "gone\n":
            break
        time.sleep(0.2)
    assert member.exec(sid, command=f"kill -0 {pid} 2>/dev/null && echo alive || echo gone")["stdout"] == "gone\n"
