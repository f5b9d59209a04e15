"""`sandfort snapshot …` and `--snapshot NAME` end to end: the real binary against a live
sandfortd."""

import uuid

from conftest import check_deleted, check_named


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
    got = check_named(cli, "snapshot", sid, name, ["ID", "NAME", "STATE", "SIZE", "SOURCE", "CREATED"])
    assert got["source_sandbox_id"] == src and got["size_bytes"] > 0

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

    check_deleted(cli, "snapshot", name)


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
        top, sub, names, sandboxes = cli.complete("sandfort snap", "sandfort snapshot r",
                                                  "sandfort snapshot get cli-snap", "sandfort snapshot create sbx-")
        assert top == ["snapshot"] and sub == ["rm"] and name in names and sandbox in sandboxes
    finally:
        cli.ok("snapshot", "rm", name)
