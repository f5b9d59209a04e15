"""`--runtime` on `sandbox create` and `new` (docs/gvisor.md): the real binary against a live
daemon, real Docker and Debian's runsc. One gVisor sandbox for the whole file: each costs about a
second and 50 MiB."""

import json
import os
import subprocess

import pytest


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


def test_new_with_gvisor_shows_its_runtime_and_runs_on_a_kernel_not_the_hosts(cli, sandbox, runsc):
    sid = cli.ok("new", "--runtime", "gvisor").stdout.strip()
    try:
        assert "runtime: gvisor" in cli.ok("sandbox", "get", sid).stdout.splitlines()
        assert cli.json("sandbox", "get", sid)["runtime"] == "gvisor"
        table = cli.ok("sandbox", "ls").stdout.splitlines()
        column = table[0].split().index("RUNTIME")
        rows = {line.split()[0]: line.split() for line in table[1:]}
        assert rows[sid][column] == "gvisor" and rows[sandbox][column] == "runc", table

        r = cli.run("run", "uname -r; exit 3")
        assert r.returncode == 3, r.stderr
        runc_kernel = cli.ok("exec", sandbox, "uname", "-r").stdout.strip()
        assert r.stdout.strip() and r.stdout.strip() != runc_kernel  # gVisor's Sentry, not the host's kernel
    finally:
        cli.run("rm")


def test_a_create_without_runtime_gets_the_servers_default(cli, sandbox):
    assert "runtime: runc" in cli.ok("sandbox", "get", sandbox).stdout.splitlines()


@pytest.mark.parametrize("create", [["new"], ["sandbox", "create", "--wait"]])
def test_an_unknown_runtime_is_the_servers_400(cli, create):
    # The CLI does not keep its own list: the server's message names the runtimes it knows.
    r = cli.run(*create, "--runtime", "kata")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "runtime must be runc or gvisor" in r.stderr and "invalid_argument" in r.stderr, r.stderr
    assert r.stdout == ""


def test_runtime_is_offered_by_help_and_completion(cli):
    assert "--runtime" in cli.ok("sandbox", "create", "--help").stdout
    assert "--runtime" in cli.ok("new", "--help").stdout
    create, new, value = cli.complete("sandfort sandbox create --ru", "sandfort new --ru",
                                      "sandfort new --runtime g")
    assert create == ["--runtime"] and new == ["--runtime"] and value == ["gvisor"]
