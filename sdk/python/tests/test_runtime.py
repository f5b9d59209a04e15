"""`runtime` on create_sandbox (docs/gvisor.md) against a live daemon, real Docker and Debian's
runsc: a gVisor sandbox says so, runs commands on gVisor's kernel, and an unknown runtime is the
API's InvalidArgumentError. One gVisor sandbox for the whole file: each costs about a second and
50 MiB."""

import json
import os
import subprocess

import pytest

from sandfort_sdk import InvalidArgumentError


def runsc_registered():
    r = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True,
                       timeout=60)
    return r.returncode == 0 and "runsc" in json.loads(r.stdout or "{}")


@pytest.fixture(scope="module")
def runsc():
    # This file exists to test gVisor: under CI a missing runsc is a failure, never a skip.
    if not runsc_registered():
        why = "runsc is not registered with the Docker Engine (scripts/setup registers it)"
        pytest.fail(why) if os.environ.get("CI") == "true" else pytest.skip(why)


def test_a_gvisor_sandbox_says_so_and_runs_on_a_kernel_not_the_hosts(client, runsc):
    with client.create_sandbox() as runc, client.create_sandbox(runtime="gvisor") as gvisor:
        assert gvisor.runtime == "gvisor" and gvisor.info.runtime == "gvisor"
        assert client.get_sandbox(gvisor.id).runtime == "gvisor"
        assert {s.id: s.runtime for s in client.list_sandboxes()}[gvisor.id] == "gvisor"
        handle = client.sandbox(gvisor.id)  # no request yet: nothing known
        assert handle.runtime is None and handle.refresh().runtime == "gvisor"
        # A create that names none gets the daemon's default_runtime.
        assert runc.runtime == "runc"

        r = gvisor.process_exec("uname -r; exit 3")
        assert r.exit_code == 3
        runc_kernel = runc.process_exec("uname -r").stdout.strip()
        assert r.stdout.strip() and r.stdout.strip() != runc_kernel  # gVisor's Sentry, not the host's kernel


def test_an_unknown_runtime_is_the_apis_invalid_argument(client):
    with pytest.raises(InvalidArgumentError) as ei:
        client.create_sandbox(runtime="kata")
    e = ei.value
    assert e.status == 400 and e.code == "invalid_argument"
    assert e.message == "runtime must be runc or gvisor" and e.request_id.startswith("req-")
