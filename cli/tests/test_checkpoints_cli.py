"""docs/audit.md's remote recipe with the CLI alone: an auditor (an organization's admin key, no
access to the host) pins the public key, keeps the signed checkpoints in a file of its own with
`sandfort audit checkpoints -o FILE`, and `sandfort audit verify --checkpoints FILE` reads that
file: it passes while the file is as saved and fails once a line of it is tampered with."""

import json
import os
import uuid

import pytest
from conftest import Cli


@pytest.fixture
def auditor(cli, tmp_path):
    """A Cli with the admin key of a fresh organization (made with `org create`) whose chain has events."""
    name = "cli-cp-" + uuid.uuid4().hex[:8]
    admin = Cli(cli.home, cli.base_url, cli.ok("org", "create", name).stdout.strip())
    admin.ok("key", "create", "--name", "agent", "--role", "member")
    admin.pinned = str(tmp_path / "sandfort-audit.pem")
    admin.ok("audit", "public-key", "-o", admin.pinned)
    admin.org_id = admin.json("whoami")["org_id"]
    return admin


def lines_of(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def verify(auditor, path):
    return auditor.run("audit", "verify", "--public-key", auditor.pinned, "--checkpoints", path)


def test_saved_checkpoints_verify_and_new_ones_are_appended(auditor, tmp_path):
    path = str(tmp_path / "checkpoints.jsonl")
    first = auditor.json("audit", "checkpoint")
    r = auditor.ok("audit", "checkpoints", "-o", path)
    assert "1 new checkpoint(s)" in r.stderr and r.stdout == "", r
    assert lines_of(path) == [first]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    # Printed without -o: the same lines, the form of the daemon's audit.export_path.
    assert [json.loads(line) for line in auditor.ok("audit", "checkpoints").stdout.splitlines()] == [first]

    r = verify(auditor, path)
    assert r.returncode == 0 and f"{auditor.org_id} (" in r.stdout and " ok: " in r.stdout, r

    # Saving again adds nothing; a new checkpoint is appended after the kept lines.
    assert "0 new checkpoint(s)" in auditor.ok("audit", "checkpoints", "-o", path).stderr
    auditor.ok("key", "create", "--name", "later", "--role", "viewer")
    second = auditor.json("audit", "checkpoint")
    assert second["seq"] > first["seq"]
    assert "1 new checkpoint(s)" in auditor.ok("audit", "checkpoints", "--output", path).stderr
    assert lines_of(path) == [first, second]
    assert verify(auditor, path).returncode == 0


@pytest.mark.parametrize("field", ["head_hash", "signature"])
def test_a_tampered_line_fails_verify(auditor, tmp_path, field):
    path = str(tmp_path / "checkpoints.jsonl")
    auditor.ok("audit", "checkpoint")
    auditor.ok("audit", "checkpoints", "-o", path)
    assert verify(auditor, path).returncode == 0
    [kept] = lines_of(path)
    value = kept[field]
    kept[field] = value[:-2] + ("00" if not value.endswith("00") else "11")
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(kept) + "\n")
    r = verify(auditor, path)
    assert r.returncode == 1 and "BROKEN" in r.stdout, (r.returncode, r.stdout, r.stderr)
    # Saving again keeps the kept line as it is and says that the server's differs.
    r = auditor.run("audit", "checkpoints", "-o", path)
    assert r.returncode == 1 and "differs" in r.stderr, r
    assert lines_of(path) == [kept]


def test_an_event_export_is_named_for_what_it_is(auditor, tmp_path):
    events = str(tmp_path / "events.jsonl")
    auditor.ok("audit", "export", "-o", events)
    r = verify(auditor, events)
    assert r.returncode == 2 and "an audit event, not a checkpoint" in r.stderr, r
    assert "sandfort audit checkpoints" in r.stderr


def test_the_file_is_made_before_any_checkpoint_is_signed(auditor, tmp_path):
    path = str(tmp_path / "none-yet.jsonl")
    r = auditor.ok("audit", "checkpoints", "-o", path)
    assert os.path.isfile(path) and oct(os.stat(path).st_mode & 0o777) == "0o600", r
    assert verify(auditor, path).returncode == 0  # the cron line works from its first run
