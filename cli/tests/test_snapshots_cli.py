"""`sandfort snapshot …` and `--snapshot NAME` end to end: the real binary against a live
sandfortd."""

import os
import subprocess
import uuid

from conftest import CLI


def test_sandbox_from_snapshot_has_the_files_of_its_source(cli):
    name = f"cli-snap-{uuid.uuid4().hex[:8]}"
    src = cli.ok("sandbox", "create", "--wait").stdout.strip()
    try:
        assert cli.run("exec", src, "sh", "-c", "echo kept > /root/note").returncode == 0
        sid = cli.ok("snapshot", "create", src, name).stdout.strip()
        assert sid.startswith("snap-"), sid
        r = cli.run("snapshot", "create", src, name)
        assert r.returncode == 1 and "conflict" in r.stderr, r.stderr
    finally:
        cli.ok("sandbox", "rm", src)
    got = cli.json("snapshot", "get", name)
    assert got["id"] == sid and got["name"] == name and got["state"] == "ready"
    assert got["source_sandbox_id"] == src and got["size_bytes"] > 0
    assert f"id: {sid}" in cli.ok("snapshot", "get", sid).stdout
    table = cli.ok("snapshot", "ls").stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "STATE", "SIZE", "SOURCE", "CREATED"]
    assert any(line.split()[:2] == [sid, name] for line in table[1:])
    assert name in [s["name"] for s in cli.json("snapshot", "ls")["items"]]

    a = cli.ok("sandbox", "create", "--wait", "--snapshot", name).stdout.strip()
    try:
        assert cli.json("sandbox", "get", a)["snapshot"] == name
        r = cli.run("exec", a, "cat", "/root/note")
        assert r.returncode == 0 and r.stdout == "kept\n", r.stderr
        r = cli.run("snapshot", "rm", name)
        assert r.returncode == 1 and "conflict" in r.stderr, r.stderr
    finally:
        cli.ok("sandbox", "rm", a)

    b = cli.ok("new", "--snapshot", sid).stdout.strip()
    try:
        r = cli.run("run", "cat /root/note")
        assert r.returncode == 0 and r.stdout == "kept\n", r.stderr
    finally:
        cli.ok("rm")
    assert b.startswith("sbx-"), b

    assert cli.ok("snapshot", "rm", name).stdout == f"deleted {name}\n"
    r = cli.run("snapshot", "get", name)
    assert r.returncode == 1 and "not_found" in r.stderr, r.stderr
    assert cli.run("snapshot", "rm", name).returncode == 1


def test_snapshot_unknown_names_and_usage_errors(cli):
    missing = f"no-such-{uuid.uuid4().hex[:8]}"
    r = cli.run("snapshot", "get", missing)
    assert r.returncode == 1 and "not_found" in r.stderr, r.stderr
    r = cli.run("snapshot", "create", missing, f"cli-snap-{uuid.uuid4().hex[:8]}")
    assert r.returncode == 1 and "not_found" in r.stderr, r.stderr
    assert cli.run("snapshot", "create", "only-one-arg").returncode == 2
    assert cli.run("snapshot").returncode == 2


def test_bash_completion_offers_snapshot_commands_and_names(cli, sandbox):
    name = f"cli-snap-{uuid.uuid4().hex[:8]}"
    cli.ok("snapshot", "create", sandbox, name)
    try:
        script = (f'eval "$({CLI} completion bash)"; PATH="{os.path.dirname(CLI)}:$PATH"; '
                  'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _sandfort; '
                  'printf "%s\\n" "${COMPREPLY[@]}"; echo ---; }; '
                  'complete_words sandfort snap; complete_words sandfort snapshot r; '
                  'complete_words sandfort snapshot get cli-snap; complete_words sandfort snapshot create sbx-')
        r = subprocess.run(["bash", "-c", script], env=cli.env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        top, sub, names, sandboxes = [part.split() for part in r.stdout.split("---")[:4]]
        assert top == ["snapshot"] and sub == ["rm"] and name in names and sandbox in sandboxes
    finally:
        cli.ok("snapshot", "rm", name)
