"""The PTY over the SDK's own WebSocket client."""

import pytest

from sandfort_sdk import AuthenticationError, Client, Sandbox
from sandfort_sdk.pty import PtySession


def test_pty_echo_resize_and_exit(client):
    with client.create_sandbox() as sbx:
        with sbx.pty(cols=100, rows=30) as term:
            assert isinstance(term, PtySession)
            term.send("stty size; echo mark-$((6*7))\n")
            out = term.read_until(b"mark-42")
            assert b"30 100" in out
            term.resize(120, 40)
            # An interactive shell may drop keys typed while it is between commands (readline
            # resetting the terminal), so the question is asked again rather than once.
            for attempt in range(3):
                term.send("stty size\n")
                try:
                    assert b"40 120" in term.read_until(b"40 120", timeout=10)
                    break
                except TimeoutError:
                    if attempt == 2:
                        raise
            term.send("exit 3\n")
            assert term.wait(timeout=20) == 3
            assert term.closed


def test_pty_command_and_errors(client, env):
    with client.create_sandbox() as sbx:
        with sbx.pty(command="python3 -c 'print(input()[::-1])'") as term:
            term.send("olleh\r")
            assert b"hello" in term.read_until(b"hello")
            assert term.wait(timeout=20) == 0
        # The same sandbox seen through a client with a wrong key: the upgrade is refused.
        bad = Sandbox(Client(base_url=env["url"], api_key="sfk_wrong"), sbx.info)
        with pytest.raises(AuthenticationError) as ei:
            bad.pty()
        assert ei.value.status == 401 and ei.value.request_id.startswith("req-")
