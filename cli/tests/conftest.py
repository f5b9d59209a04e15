"""Fixtures for driving the real `sandfort` binary against a live sandfortd.

SANDFORT_BASE_URL and SANDFORT_API_KEY name the daemon (tests/integration/with_daemon.py sets
them); the binary is SANDFORT_CLI, else <SANDFORT_BUILD_DIR>/cli/sandfort, else build/cli/sandfort.
"""

import json
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SANDFORT_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.environ.get("SANDFORT_CLI", os.path.join(BUILD, "cli", "sandfort"))


class Cli:
    def __init__(self, home, base_url, api_key):
        self.home = str(home)
        self.base_url = base_url
        self.api_key = api_key

    def env(self, with_credentials=True, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SANDFORT_")}
        env["HOME"] = self.home
        env["XDG_CONFIG_HOME"] = os.path.join(self.home, "xdg")
        if with_credentials:
            env["SANDFORT_BASE_URL"] = self.base_url
            env["SANDFORT_API_KEY"] = self.api_key
        env.update(extra)
        return env

    def run(self, *args, with_credentials=True, input=None, timeout=180, cwd=None, **extra_env):
        return subprocess.run([CLI, *args], env=self.env(with_credentials, **extra_env), input=input,
                              capture_output=True, text=True, timeout=timeout, cwd=cwd or self.home)

    def ok(self, *args, **kw):
        r = self.run(*args, **kw)
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
        return r

    def json(self, *args, **kw):
        return json.loads(self.ok(*args, "--json", **kw).stdout)

    def complete(self, *lines):
        """What bash completion offers after each of `lines` ("sandfort volume r": the words typed,
        the last one being completed), a list of words for each, from one bash."""
        script = (f'eval "$({CLI} completion bash)"; PATH="{os.path.dirname(CLI)}:$PATH"; '
                  'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _sandfort; '
                  'printf "%s\\n" "${COMPREPLY[@]}"; echo ---; }; '
                  + "; ".join(f"complete_words {line}" for line in lines))
        r = subprocess.run(["bash", "-c", script], env=self.env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return [part.split() for part in r.stdout.split("---")[:len(lines)]]


# `volume` and `snapshot` are one named-resource layer in the CLI (cli/named_resource.cpp): the
# checks of what they share.

def check_named(cli, kind, rid, name, header):
    """`kind get` by name (JSON) and by id, `kind ls` as a table with `header` and as JSON all find
    the resource `rid` called `name`; returns what `get --json` answered."""
    got = cli.json(kind, "get", name)
    assert got["id"] == rid and got["name"] == name and got["state"] == "ready"
    assert f"id: {rid}" in cli.ok(kind, "get", rid).stdout
    table = cli.ok(kind, "ls").stdout.splitlines()
    assert table[0].split() == header
    assert any(line.split()[:2] == [rid, name] for line in table[1:])
    assert name in [v["name"] for v in cli.json(kind, "ls")["items"]]
    return got


def check_deleted(cli, kind, name):
    """`kind rm name` says it deleted it; then get and rm of the name fail."""
    assert cli.ok(kind, "rm", name).stdout == f"deleted {name}\n"
    r = cli.run(kind, "get", name)
    assert r.returncode == 1 and "not_found" in r.stderr, r.stderr
    assert cli.run(kind, "rm", name).returncode == 1


@pytest.fixture(scope="session")
def daemon():
    base_url = os.environ.get("SANDFORT_BASE_URL")
    api_key = os.environ.get("SANDFORT_API_KEY")
    if not base_url or not api_key:
        pytest.fail("SANDFORT_BASE_URL and SANDFORT_API_KEY must name a live sandfortd "
                    "(run through tests/integration/with_daemon.py)")
    assert os.access(CLI, os.X_OK), f"no sandfort binary at {CLI} (set SANDFORT_BUILD_DIR or SANDFORT_CLI)"
    return base_url, api_key


@pytest.fixture
def cli(daemon, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return Cli(home, *daemon)


@pytest.fixture(scope="session")
def sandbox(daemon, tmp_path_factory):
    """One started sandbox shared by the tests that only run commands in it."""
    c = Cli(tmp_path_factory.mktemp("shared-home"), *daemon)
    sid = c.ok("sandbox", "create", "--wait").stdout.strip()
    assert sid.startswith("sbx-"), sid
    yield sid
    c.run("sandbox", "rm", sid)
