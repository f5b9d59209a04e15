"""An interactive terminal over WebSocket, driven through sandfortd by the project's own C++ client."""

import os
import subprocess

import pytest

from sandfort_harness import BUILD

PROBE = os.path.join(BUILD, "tests", "pty_probe")


@pytest.mark.parametrize("auth", ["header", "subprotocol"])
def test_terminal_size_resize_echo_ctrl_c_and_exit(daemon, org, sandbox, auth):
    out = subprocess.run([PROBE, str(daemon.port), sandbox["id"], org["keys"]["member"], auth],
                         capture_output=True, text=True, timeout=90)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "echo hi read back: ok" in out.stdout


def test_pty_needs_a_member_key(daemon, org, sandbox):
    out = subprocess.run([PROBE, str(daemon.port), sandbox["id"], org["keys"]["viewer"], "header"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "connect: FAILED" in out.stdout
