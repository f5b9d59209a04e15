"""What a new user meets first, end to end with the real binary: errors that name the mistake
(an unknown command or option, the preview port or a pasted "Bearer " at login, a refused key, a
quota), a command that could not start, a shell that was restarted, and a background command
whose id `sandfort logs` takes."""

import json
import os
import re
import sys
import urllib.parse
import uuid

import pytest
from conftest import REPO, Cli

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from sandfort_harness import Client  # noqa: E402


def config_path(cli):
    return os.path.join(cli.home, "xdg", "sandfort", "config.json")


# --- usage errors ----------------------------------------------------------------------------------

def test_an_unknown_command_is_named_with_its_near_matches(cli):
    r = cli.run("nosuchcmd", with_credentials=False)
    assert r.returncode == 2
    assert 'unknown command "nosuchcmd"' in r.stderr, r.stderr
    assert "Commands: login, logout, whoami, sandbox" in r.stderr and "A subcommand is required" not in r.stderr
    r = cli.run("sandboxes", "ls", with_credentials=False)
    assert r.returncode == 2 and 'did you mean "sandbox"?' in r.stderr, r.stderr
    r = cli.run("sandbox", "lss", with_credentials=False)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith('sandfort sandbox: unknown command "lss"; did you mean "ls"'), r.stderr
    r = cli.run("sandbox", with_credentials=False)
    assert r.returncode == 2 and "sandfort sandbox: a command is needed: create, ls, get, rm" in r.stderr, r.stderr
    r = cli.run(with_credentials=False)
    assert r.returncode == 2 and "sandfort: a command is needed: login, logout" in r.stderr, r.stderr


def test_a_misspelt_option_gets_the_one_meant(cli):
    # Refused before anything is sent: without credentials the CLI would otherwise say "not logged in".
    for args, typed, meant in [(("new", "--cpu", "2"), "--cpu", "--cpus"),
                               (("sandbox", "create", "--memroy=512"), "--memroy", "--memory"),
                               (("exec", "--timout", "5", "sbx-x", "ls"), "--timout", "--timeout"),
                               (("run", "--backgroud", "sleep 1"), "--backgroud", "--background"),
                               (("audit", "export", "--page-sise", "3"), "--page-sise", "--page-size")]:
        r = cli.run(*args, with_credentials=False)
        assert r.returncode == 2, (args, r.stderr)
        assert f"unknown option {typed}; did you mean {meant}?" in r.stderr, (args, r.stderr)
        assert "not logged in" not in r.stderr
    # Nothing near: no guess, but where the options are listed.
    r = cli.run("new", "--frobnicate", with_credentials=False)
    assert r.returncode == 2 and "unknown option --frobnicate (`sandfort new --help` lists" in r.stderr, r.stderr


# --- login -----------------------------------------------------------------------------------------

def test_login_to_the_preview_port_says_it_is_not_the_api(cli):
    preview_port = os.environ.get("SANDFORT_PREVIEW_PORT")
    if not preview_port:
        pytest.fail("SANDFORT_PREVIEW_PORT must name the daemon's preview port (run through with_daemon.py)")
    r = cli.run("login", "--url", f"http://127.0.0.1:{preview_port}", "--api-key-stdin", input=cli.api_key + "\n",
                with_credentials=False)
    assert r.returncode == 1, r.stderr
    assert "is sandfortd's preview listener" in r.stderr and "not its API" in r.stderr, r.stderr
    assert "nothing was saved" in r.stderr and "`listen`" in r.stderr
    assert "sandfort login" not in r.stderr
    assert not os.path.exists(config_path(cli))


def test_a_failed_login_says_what_was_wrong_and_not_to_log_in(cli):
    r = cli.run("login", "--url", cli.base_url, "--api-key-stdin", input="sfk_" + "0" * 32 + "\n",
                with_credentials=False)
    assert r.returncode == 1
    assert "refused the API key: invalid API key" in r.stderr and "request req-" in r.stderr, r.stderr
    assert "nothing was saved" in r.stderr and "sandfort login" not in r.stderr
    # The key's id is not its secret.
    r = cli.run("login", "--url", cli.base_url, "--api-key-stdin", input="key-0123456789abcdef\n",
                with_credentials=False)
    assert r.returncode == 1 and "is an API key's id, not its secret" in r.stderr, r.stderr
    # Nobody there.
    r = cli.run("login", "--url", "http://127.0.0.1:1", "--api-key-stdin", input=cli.api_key + "\n",
                with_credentials=False)
    assert r.returncode == 1 and "cannot connect" in r.stderr and "sandfort login" not in r.stderr, r.stderr
    assert not os.path.exists(config_path(cli))
    # Other commands still point at login.
    r = cli.run("whoami", SANDFORT_API_KEY="sfk_" + "0" * 32)
    assert r.returncode == 1 and "run `sandfort login`" in r.stderr, r.stderr


def test_a_key_pasted_with_bearer_in_front_is_used_without_it(cli):
    r = cli.run("login", "--url", cli.base_url, "--api-key-stdin", input=f"Bearer {cli.api_key}\n",
                with_credentials=False)
    assert r.returncode == 0, r.stderr
    assert 'without the "Bearer "' in r.stderr
    with open(config_path(cli)) as f:
        assert json.load(f)["api_key"] == cli.api_key
    # The environment's key too.
    r = cli.run("whoami", "--json", SANDFORT_API_KEY=f"Bearer {cli.api_key}")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["auth"] == "api_key"


# --- quotas ----------------------------------------------------------------------------------------

@pytest.fixture
def limited_org(cli, tmp_path):
    """A Cli holding an admin key of a fresh organization that may run no sandbox and 0.5 CPUs."""
    api = Client(urllib.parse.urlsplit(cli.base_url).port, cli.api_key)
    r = api.post("/v1/orgs", {"name": "cli-msg-" + uuid.uuid4().hex[:8]})
    assert r.status == 201, r
    org_id = r.json()["id"]
    r = api.post(f"/v1/orgs/{org_id}/api-keys", {"name": "admin", "role": "admin"})
    assert r.status == 201, r
    home = tmp_path / "limited"
    home.mkdir()
    return org_id, Cli(home, cli.base_url, r.json()["key"])


def test_the_quota_hint_says_what_frees_that_quota(cli, limited_org):
    org_id, admin = limited_org
    cli.ok("org", "set-limits", org_id, "--max-sandboxes", "0")
    r = admin.run("sandbox", "create")
    assert r.returncode == 1 and "quota exceeded: sandboxes" in r.stderr, r.stderr
    hint = r.stderr[r.stderr.index("hint:"):]
    # Stopped sandboxes keep their place: only a delete makes room.
    assert "stopping one frees nothing" in hint and "sandfort sandbox rm" in hint, hint
    assert "delete or stop" not in hint
    cli.ok("org", "set-limits", org_id, "--reset", "max_sandboxes", "--max-cpus", "0.5")
    r = admin.run("sandbox", "create", "--cpus", "1")
    assert r.returncode == 1 and "quota exceeded: cpus" in r.stderr, r.stderr
    hint = r.stderr[r.stderr.index("hint:"):]
    assert "stop or delete" in hint and "--cpus" in hint, hint


# --- exec and run ----------------------------------------------------------------------------------

def test_exec_of_a_missing_program_says_why(cli, sandbox):
    r = cli.run("exec", sandbox, "sfa-no-such-program", "arg")
    assert r.returncode == 127
    assert r.stderr == "sandfort-agent: sfa-no-such-program: command not found\n", r.stderr


def test_run_says_when_the_shell_was_restarted(cli, sandbox):
    cli.ok("run", f"--id={sandbox}", "cd /tmp && export SFA_KEPT=1")
    r = cli.run("run", f"--id={sandbox}", "exit 7")
    assert r.returncode == 7
    assert re.search(rf"the shell of {sandbox} was restarted .*: the directory, variables and background jobs "
                     r"of earlier `run`s are gone", r.stderr), r.stderr
    r = cli.ok("run", f"--id={sandbox}", "echo x${SFA_KEPT}x")
    assert r.stdout == "xx\n" and "restarted" not in r.stderr, r.stderr


def test_run_background_prints_the_id_that_logs_takes(cli, sandbox):
    r = cli.run("run", f"--id={sandbox}", "--background", "echo out; echo err >&2; sleep 1; echo done; exit 3")
    assert r.returncode == 0, r.stderr
    command_id = r.stdout.strip()
    assert re.fullmatch(r"cmd-[0-9a-f]+", command_id) and r.stdout == command_id + "\n", r.stdout
    assert f"sandfort logs {sandbox} {command_id}" in r.stderr, r.stderr
    # Round trip: the printed command follows it to its end and exits with its status.
    follow = cli.run("logs", sandbox, command_id, "-f")
    assert follow.returncode == 3, follow.stderr
    assert follow.stdout == "out\ndone\n" and follow.stderr == "err\n"
    # The id alone names it in the current sandbox.
    os.makedirs(os.path.join(cli.home, "xdg", "sandfort"), exist_ok=True)
    with open(os.path.join(cli.home, "xdg", "sandfort", "current"), "w") as f:
        f.write(sandbox + "\n")
    r = cli.ok("logs", command_id)
    assert r.stdout == "out\ndone\n" and r.stderr == "err\n"
    # A server started this way gets its preview link, as with `run "… &"`.
    # The CLI looks for about a second: the listener is Python without its site imports, which
    # starts in a few milliseconds even on a loaded machine (http.server can take over a second).
    listener = ("import socket, time; s = socket.socket(); s.bind(('0.0.0.0', 8741)); s.listen(); "
                "time.sleep(600)")
    r = cli.run("run", "--background", f'echo $$ > /tmp/sfa-8741.pid; exec python3 -S -c "{listener}"')
    assert r.returncode == 0, r.stderr
    assert any(line.startswith("preview: port 8741: ") for line in r.stderr.splitlines()), r.stderr
    cli.ok("run", "kill $(cat /tmp/sfa-8741.pid)")
    # A background command has no timeout.
    r = cli.run("run", "--background", "--timeout", "5", "true")
    assert r.returncode == 2 and "--timeout excludes --background" in r.stderr, r.stderr
