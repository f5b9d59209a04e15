"""Sessions, streaming and background commands."""

import time
import warnings

import pytest

from sandfort_sdk import ConflictError, ExecStream, NotFoundError, SessionRestartedWarning, StreamEvent


def test_sessions_keep_cwd_and_env(client):
    with client.create_sandbox() as sbx:
        session = sbx.process.create_session("work")
        assert session.info.name == "work" and session.info.pid
        assert session.exec("mkdir -p /tmp/w && cd /tmp/w").exit_code == 0
        assert session.exec("export T=abc").exit_code == 0
        assert session.exec("pwd").stdout == "/tmp/w\n"
        assert session.exec("echo $T").stdout == "abc\n"
        # Another session and one-off exec do not see that state.
        assert sbx.process.session("default").exec("echo ${T:-unset}").stdout == "unset\n"
        assert sbx.process_exec(command="echo ${T:-unset}").stdout == "unset\n"
        with pytest.raises(ConflictError):
            sbx.process.create_session("work")
        names = {s.name for s in sbx.process.list_sessions()}
        assert "work" in names
        with pytest.warns(SessionRestartedWarning):
            r = session.exec("exit 3")
        assert r.exit_code == 3 and r.session_restarted is True
        assert session.exec("echo ${T:-fresh}").stdout == "fresh\n"
        # Streaming works on a session too.
        seen = []
        r = session.exec("echo a; echo b >&2", on_stdout=seen.append, on_stderr=seen.append)
        assert r.exit_code == 0 and "".join(seen).count("\n") == 2
        session.delete()
        with pytest.raises(NotFoundError):
            session.delete()


def test_a_restarted_shell_is_told_with_a_warning(client):
    with client.create_sandbox() as sbx:
        session = sbx.process.session("default")
        assert session.exec("cd /tmp && export KEPT=1").exit_code == 0
        with pytest.warns(SessionRestartedWarning, match=r"session 'default' in sbx-\w+ was restarted") as caught:
            r = session.exec("exit 7")
        assert r.exit_code == 7 and r.session_restarted is True
        assert caught[0].filename == __file__  # it points at the caller's line
        # Streamed, with callbacks or as an iterator, alike.
        with pytest.warns(SessionRestartedWarning):
            assert session.exec("exit 3", on_stdout=lambda chunk: None).exit_code == 3
        with pytest.warns(SessionRestartedWarning):
            assert list(session.exec_stream("exit 4"))[-1].result.exit_code == 4
        # A command that keeps the shell says nothing; the state is gone, as the warning said.
        with warnings.catch_warnings():
            warnings.simplefilter("error", SessionRestartedWarning)
            r = session.exec("pwd; echo ${KEPT:-gone}")
        assert r.stdout.endswith("gone\n") and r.session_restarted is False


def test_a_streamed_command_that_cannot_start_says_why(client):
    with client.create_sandbox() as sbx:
        err = []
        r = sbx.process.exec(argv=["sfa-no-such-program"], on_stderr=err.append)
        assert r.exit_code == 127
        assert "".join(err) == r.stderr == "sandfort-agent: sfa-no-such-program: command not found\n"
        events = list(sbx.process.exec_stream(argv=["sfa-no-such-program"]))
        assert [e.type for e in events] == ["stderr", "exit"]


def test_streaming_callbacks(client):
    with client.create_sandbox() as sbx:
        out, err, stamps = [], [], []
        t0 = time.monotonic()

        def on_out(chunk):
            out.append(chunk)
            stamps.append(time.monotonic() - t0)

        r = sbx.process.exec("echo first; sleep 1; printf 'a\\rb'; echo oops >&2; exit 3",
                             on_stdout=on_out, on_stderr=err.append)
        assert r.exit_code == 3
        assert "".join(out) == "first\na\rb" and r.stdout == "first\na\rb"
        assert "".join(err) == "oops\n" and r.stderr == "oops\n"
        assert stamps[0] < 0.9, "the first chunk must arrive before the command ends"
        run = sbx.process.code_run("python", "print(21 * 2)", on_stdout=out.append)
        assert run.stdout == "42\n" and out[-1] == "42\n"


def test_streaming_iterator(client):
    with client.create_sandbox() as sbx:
        stream = sbx.process.exec_stream("for i in 1 2 3; do echo $i; done; echo e >&2; exit 2")
        assert isinstance(stream, ExecStream)
        events = list(stream)
        assert all(isinstance(e, StreamEvent) for e in events)
        assert events[-1].type == "exit" and events[-1].result.exit_code == 2
        assert "".join(e.data for e in events if e.type == "stdout") == "1\n2\n3\n"
        assert [e.data for e in events if e.type == "stderr"] == ["e\n"]
        assert stream.result.exit_code == 2 and stream.result.stdout == "1\n2\n3\n"
        with sbx.process.code_run_stream("python", "import sys; print(sys.argv[1])", argv=["x"]) as s:
            assert s.wait().stdout == "x\n"


def test_leaving_a_stream_early_kills_the_command(client):
    with client.create_sandbox() as sbx:
        with sbx.process.exec_stream("echo $$ > /tmp/s.pid; echo go; exec sleep 300") as stream:
            first = next(stream)
            assert first.type == "stdout" and first.data == "go\n"
        pid = sbx.process_exec(command="cat /tmp/s.pid").stdout.strip()
        deadline = time.time() + 10
        probe = f"kill -0 {pid} 2>/dev/null && echo alive || echo gone"
        while time.time() < deadline and sbx.process_exec(command=probe).stdout != "gone\n":
            time.sleep(0.2)
        assert sbx.process_exec(command=probe).stdout == "gone\n"


def test_background_command_logs_stdin_and_kill(client):
    with client.create_sandbox() as sbx:
        cmd = sbx.process.start("echo started; echo warn >&2; sleep 0.3; echo done; exit 4")
        assert cmd.id.startswith("cmd-") and cmd.info.state == "running"
        info = cmd.wait(timeout=20)
        assert info.state == "exited" and info.exit_code == 4 and cmd.exit_code == 4
        logs = cmd.logs()
        assert logs.stdout == "started\ndone\n" and logs.stderr == "warn\n" and logs.dropped_bytes == 0
        assert any(c.id == cmd.id for c in sbx.process.list_commands())
        assert sbx.process.get_command(cmd.id).info.exit_code == 4

        cat = sbx.process.start("cat")
        cat.send_stdin("hello\n")
        cat.send_stdin(b"bytes\n", eof=True)
        assert cat.wait(timeout=20).exit_code == 0
        assert cat.logs().stdout == "hello\nbytes\n"

        sleeper = sbx.process.start("echo up; sleep 300")
        sleeper.kill("KILL")
        info = sleeper.wait(timeout=20)
        assert info.state == "exited" and info.exit_code == 128 + 9
        with pytest.raises(ConflictError):
            sleeper.kill()
        with pytest.raises(NotFoundError):
            sbx.process.get_command("cmd-0000000000000000")


def test_follow_logs_streams_until_exit(client):
    with client.create_sandbox() as sbx:
        cmd = sbx.process.start("echo one; sleep 1; echo two; exit 6")
        chunks = []
        result = cmd.follow(on_stdout=chunks.append).wait()
        assert result.exit_code == 6
        assert "".join(chunks) == "one\ntwo\n"
