"""`sandfort volume …` and `--volume NAME:/path[:ro]` end to end: the real binary against a live
sandfortd."""

import uuid

from conftest import check_deleted, check_named


def test_volume_outlives_the_sandbox_that_wrote_it(cli):
    name = f"cli-vol-{uuid.uuid4().hex[:8]}"
    vid = cli.ok("volume", "create", name).stdout.strip()
    assert vid.startswith("vol-"), vid
    assert cli.run("volume", "create", name).returncode == 1
    check_named(cli, "volume", vid, name, ["ID", "NAME", "STATE", "CREATED"])

    a = cli.ok("sandbox", "create", "--wait", "--volume", f"{name}:/data").stdout.strip()
    try:
        assert cli.json("sandbox", "get", a)["volumes"] == [{"name": name, "mount_path": "/data", "read_only": False}]
        assert cli.run("exec", a, "sh", "-c", "echo kept > /data/note").returncode == 0
    finally:
        cli.ok("sandbox", "rm", a)

    b = cli.ok("new", "--volume", f"{name}:/mnt/v:ro").stdout.strip()
    try:
        assert cli.json("sandbox", "get", b)["volumes"][0]["read_only"] is True
        r = cli.run("run", "cat /mnt/v/note")
        assert r.returncode == 0 and r.stdout == "kept\n", r.stderr
        assert cli.run("run", "touch /mnt/v/other").returncode != 0
        r = cli.run("volume", "rm", name)
        assert r.returncode == 1 and "conflict" in r.stderr, r.stderr
    finally:
        cli.ok("rm")

    check_deleted(cli, "volume", name)


def test_volume_flag_usage_errors_exit_2(cli):
    for spec in ["cache", ":/data", "cache:", "cache:/data:rx"]:
        r = cli.run("sandbox", "create", "--volume", spec)
        assert r.returncode == 2 and "NAME:/path[:ro]" in r.stderr, (spec, r.stderr)
    assert cli.run("volume", "create").returncode == 2
    assert cli.run("volume").returncode == 2


def test_bash_completion_offers_volume_commands_and_names(cli):
    name = f"cli-vol-{uuid.uuid4().hex[:8]}"
    cli.ok("volume", "create", name)
    try:
        top, sub, names, flag = cli.complete("sandfort vol", "sandfort volume r", "sandfort volume get cli-vol",
                                             "sandfort new --vol")
        assert top == ["volume"] and sub == ["rm"] and name in names and flag == ["--volume"]
    finally:
        cli.ok("volume", "rm", name)
