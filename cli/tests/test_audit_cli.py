"""`sandfort audit …` end to end: the real CLI against a real sandfortd and its real SQLite file.

An auditor without database access lists and exports the events, pins the public key, asks for a
checkpoint and verifies the chain through the API with the daemon's own verifier. Then the daemon
is stopped, its SQLite file edited the way an attacker of the database would (a field edited,
details that are no longer JSON, the tail cut with its checkpoints, a suffix rewritten and
re-hashed), the daemon restarted on it, and `sandfort audit verify` must exit 1 naming the first
bad seq; each test puts the original files back.

Needs the sandfort and sandfortd binaries (SANDFORT_BUILD_DIR), a Docker engine and root (the
daemon's harness), and the openssl CLI. It starts its own daemon.
"""

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest
from conftest import CLI, REPO, Cli

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from sandfort_harness import Daemon  # noqa: E402

GENESIS = "0" * 64
COLUMNS = ("org_id", "seq", "ts", "actor", "action", "target", "outcome", "request_id", "source", "details",
           "prev_hash", "hash")
# Exercises the canonical form: non-ASCII kept as UTF-8, quotes, backslashes and a control character escaped.
ODD_NAME = 'clé-ü✓ "quoted" back\\slash\ttab'
ORG_NAME = "cli-audit"


def canonical_text(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(prev_hash, event):
    """hash = SHA-256(prev_hash || canonical JSON of the event), as include/sandfort/audit/chain.hpp says."""
    obj = {k: event[k] for k in COLUMNS if k != "hash"}
    obj["details"] = json.loads(event["details"]) if isinstance(event["details"], str) else event["details"]
    return hashlib.sha256(prev_hash.encode() + canonical_text(obj).encode()).hexdigest()


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """A daemon that exports its checkpoints, and an organization whose chain has a checkpoint in
    the middle: keys made (one with an odd name), one revoked, then more keys after the checkpoint."""
    work = tmp_path_factory.mktemp("audit-cli")
    export = str(work / "checkpoints.jsonl")
    d = Daemon({"audit": {"export_path": export, "checkpoint_interval_s": 3600}}).start()
    try:
        r = d.admin().post("/v1/orgs", {"name": ORG_NAME})
        assert r.status == 201, r
        org = r.json()["id"]
        r = d.admin().post(f"/v1/orgs/{org}/api-keys", {"name": "auditor", "role": "admin"})
        assert r.status == 201, r
        admin = d.client(r.json()["key"])
        odd = admin.post("/v1/api-keys", {"name": ODD_NAME, "role": "viewer"})
        assert odd.status == 201, odd
        doomed = admin.post("/v1/api-keys", {"name": "doomed", "role": "member"})
        assert doomed.status == 201, doomed
        assert admin.delete(f"/v1/api-keys/{doomed.json()['id']}").status == 204
        r = admin.post("/v1/audit/checkpoints")
        assert r.status == 201, r
        middle = r.json()["seq"]
        for i in range(3):
            assert admin.post("/v1/api-keys", {"name": f"late-{i}", "role": "viewer"}).status == 201
        yield {"daemon": d, "export": export, "org": org, "admin": admin, "admin_key": admin.key,
               "viewer_key": odd.json()["key"], "middle": middle, "work": work,
               "url": f"http://127.0.0.1:{d.port}"}
    finally:
        d.stop()
        d.cleanup()


@pytest.fixture
def auditor(chain, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return Cli(home, chain["url"], chain["admin_key"])


@pytest.fixture(scope="module")
def pinned(chain):
    """The public key pinned while the server was trusted, by the CLI itself."""
    path = str(chain["work"] / "pinned.pem")
    home = chain["work"] / "pin-home"
    home.mkdir()
    Cli(home, chain["url"], chain["admin_key"]).ok("audit", "public-key", "-o", path)
    return path


def api_events(chain):
    r = chain["admin"].get("/v1/audit?limit=1000")
    assert r.status == 200 and r.json()["next_cursor"] is None, r
    return r.json()["items"]


def intact_line(out, org, events):
    m = re.search(rf"^{org} \({ORG_NAME}\) ok: {events} events, (\d+) checkpoints", out, re.M)
    assert m, out
    return int(m.group(1))


def assert_broken(r, org, seq, reason):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    m = re.search(rf"^{org} \({ORG_NAME}\) BROKEN at seq (\d+): (.*)$", r.stdout, re.M)
    assert m, r.stdout
    assert int(m.group(1)) == seq, r.stdout
    assert reason in m.group(2), r.stdout


# --- reading ------------------------------------------------------------------------------------

def test_public_key_is_printed_and_saved_for_pinning(chain, auditor, tmp_path):
    served = chain["admin"].get("/v1/audit/public-key").json()
    assert auditor.ok("audit", "public-key").stdout == served["public_key_pem"]
    assert auditor.json("audit", "public-key") == served
    path = str(tmp_path / "pin.pem")
    r = auditor.ok("audit", "public-key", "-o", path)
    assert open(path).read() == served["public_key_pem"] and served["key_id"] in r.stderr
    # A pinned key is never replaced by accident.
    open(path, "w").write("kept")
    r = auditor.run("audit", "public-key", "-o", path)
    assert r.returncode == 1 and "--force" in r.stderr and open(path).read() == "kept", r
    auditor.ok("audit", "public-key", "-o", path, "--force")
    assert open(path).read() == served["public_key_pem"]


def test_list_pages_filters_and_table(chain, auditor):
    events = api_events(chain)
    assert len(events) >= 8
    assert auditor.json("audit", "list") == {"items": events, "next_cursor": None}
    first = auditor.json("audit", "list", "--limit", "2")
    assert first == {"items": events[:2], "next_cursor": "2"}
    assert auditor.json("audit", "list", "--limit", "2", "--since-seq", "2")["items"] == events[2:4]
    assert auditor.json("audit", "list", "--limit", "2", "--all") == {"items": events, "next_cursor": None}
    revoked = auditor.json("audit", "list", "--action", "api_key.revoke")["items"]
    assert [e["action"] for e in revoked] == ["api_key.revoke"]
    key_id = revoked[0]["target"]
    assert [e["action"] for e in auditor.json("audit", "list", "--target", key_id)["items"]] == \
        ["api_key.create", "api_key.revoke"]
    assert auditor.json("audit", "list", "--since", "2000-01-01T00:00:00Z", "--until", "2000-01-02T00:00:00Z") == \
        {"items": [], "next_cursor": None}

    r = auditor.ok("audit", "list", "--limit", "3")
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["SEQ", "TS", "ACTOR", "ACTION", "TARGET", "OUTCOME", "DETAILS"]
    assert len(lines) == 4 and lines[1].startswith("1 ") and "org.create" in lines[1]
    assert "--since-seq 3" in r.stderr and "--all" in r.stderr
    assert 'clé-ü✓ \\"quoted\\"' in auditor.ok("audit", "list").stdout  # UTF-8 as is, in the details column

    r = auditor.run("audit", "list", "--since", "yesterday")
    assert r.returncode == 1 and "invalid_argument" in r.stderr, r
    assert auditor.run("audit", "list", "--limit", "0").returncode == 2


def test_export_writes_json_lines_across_responses(chain, auditor, tmp_path):
    events = api_events(chain)
    assert [json.loads(line) for line in auditor.ok("audit", "export").stdout.splitlines()] == events
    out = str(tmp_path / "events.jsonl")
    # Two events per response: the cursor in X-Next-Cursor is followed to the end.
    r = auditor.ok("audit", "export", "-o", out, "--page-size", "2")
    with open(out, encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == events
    assert f"{len(events)} events written" in r.stderr
    assert oct(os.stat(out).st_mode & 0o777) == "0o600"
    assert not os.path.exists(out + ".partial")
    only = auditor.ok("audit", "export", "--action", "api_key.create", "--page-size", "1").stdout.splitlines()
    assert [json.loads(line)["seq"] for line in only] == [e["seq"] for e in events if e["action"] == "api_key.create"]
    # An export that fails leaves no file behind.
    bad = str(tmp_path / "bad.jsonl")
    r = auditor.run("audit", "export", "-o", bad, "--org", "no-such-org")
    assert r.returncode == 1 and "not found" in r.stderr, r
    assert not os.path.exists(bad) and not os.path.exists(bad + ".partial")


def test_checkpoint_on_demand(chain, auditor):
    assert chain["admin"].post("/v1/api-keys", {"name": "before-checkpoint", "role": "viewer"}).status == 201
    head = api_events(chain)[-1]
    r = auditor.ok("audit", "checkpoint")
    assert r.stdout.startswith(f"signed: {chain['org']} at seq {head['seq']}\n"), r.stdout
    assert f"head_hash: {head['hash']}" in r.stdout
    again = auditor.json("audit", "checkpoint")
    assert again["seq"] == head["seq"] and again["head_hash"] == head["hash"]
    assert auditor.ok("audit", "checkpoint").stdout.startswith("unchanged")
    # The superadmin signs another organization's head by name.
    superadmin = Cli(auditor.home, chain["url"], chain["daemon"].admin_key)
    assert superadmin.json("audit", "checkpoint", "--org", ORG_NAME) == again


# --- verify -------------------------------------------------------------------------------------

def test_verify_passes_on_an_intact_chain(chain, auditor, pinned):
    events = api_events(chain)
    # The odd name is in the chain, so the canonical form of non-ASCII, quotes and backslashes counts.
    assert any(e["details"].get("name") == ODD_NAME for e in events)
    prev = GENESIS
    for e in events:
        assert chain_hash(prev, e) == e["hash"]
        prev = e["hash"]

    r = auditor.ok("audit", "verify", "--public-key", pinned)
    checkpoints = intact_line(r.stdout, chain["org"], len(events))
    assert checkpoints >= 1
    assert f"head_hash: {events[-1]['hash']}" in r.stdout
    report = auditor.json("audit", "verify", "--public-key", pinned, "--page-size", "3")
    key_id = chain["admin"].get("/v1/audit/public-key").json()["key_id"]
    assert report["ok"] is True and report["org_id"] == chain["org"] and report["org"] == ORG_NAME
    assert report["events"] == len(events) and report["head_hash"] == events[-1]["hash"]
    assert report["checkpoints"] == checkpoints and report["key_id"] == key_id
    assert "first_bad_seq" not in report
    # The exported checkpoints are the server's: nothing is only in the file.
    r = auditor.ok("audit", "verify", "--public-key", pinned, "--checkpoints", chain["export"])
    intact_line(r.stdout, chain["org"], len(events))
    assert "not on the server" not in r.stderr
    # The superadmin verifies another organization, named by name or by id.
    superadmin = Cli(auditor.home, chain["url"], chain["daemon"].admin_key)
    for org in (ORG_NAME, chain["org"]):
        intact_line(superadmin.ok("audit", "verify", "--public-key", pinned, "--org", org).stdout, chain["org"],
                    len(events))


def test_verify_against_another_key_fails_naming_the_key(chain, auditor, tmp_path):
    assert subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", "other.pem"], cwd=tmp_path,
                          capture_output=True).returncode == 0
    assert subprocess.run(["openssl", "pkey", "-in", "other.pem", "-pubout", "-out", "other.pub"], cwd=tmp_path,
                          capture_output=True).returncode == 0
    r = auditor.run("audit", "verify", "--public-key", str(tmp_path / "other.pub"))
    assert_broken(r, chain["org"], chain["middle"], "not the trusted key")
    served = chain["admin"].get("/v1/audit/public-key").json()["key_id"]
    assert f"names key {served}" in r.stdout


def test_verify_usage_and_connection_errors_exit_2(chain, auditor, pinned, tmp_path):
    r = auditor.run("audit", "verify")
    assert r.returncode == 2 and "--public-key" in r.stderr, r
    help_text = auditor.ok("audit", "verify", "--help").stdout
    assert "Required" in help_text and "prove nothing" in help_text
    r = auditor.run("audit", "verify", "--public-key", str(tmp_path / "missing.pem"))
    assert r.returncode == 2 and "missing.pem" in r.stderr, r
    (tmp_path / "garbage.pem").write_text("not a key\n")
    assert auditor.run("audit", "verify", "--public-key", str(tmp_path / "garbage.pem")).returncode == 2
    (tmp_path / "garbage.jsonl").write_text("{not json\n")
    r = auditor.run("audit", "verify", "--public-key", pinned, "--checkpoints", str(tmp_path / "garbage.jsonl"))
    assert r.returncode == 2 and "garbage.jsonl:1" in r.stderr, r
    r = auditor.run("audit", "verify", "--public-key", pinned, SANDFORT_BASE_URL="http://127.0.0.1:1")
    assert r.returncode == 2 and "cannot connect" in r.stderr, r
    r = auditor.run("audit", "verify", "--public-key", pinned, SANDFORT_API_KEY=chain["viewer_key"])
    assert r.returncode == 2 and "permission_denied" in r.stderr, r
    r = auditor.run("audit", "verify", "--public-key", pinned, "--org", "no-such-org")
    assert r.returncode == 2 and "no-such-org" in r.stderr, r


def test_bash_completion_knows_the_audit_commands(auditor):
    def complete(*words):
        script = (f'eval "$({CLI} completion bash)"; COMP_WORDS=({" ".join(words)}); '
                  f'COMP_CWORD={len(words) - 1}; _sandfort; printf "%s\\n" "${{COMPREPLY[@]}}"')
        r = subprocess.run(["bash", "-c", script], env=auditor.env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert complete("sandfort", "au") == ["audit"]
    assert complete("sandfort", "audit", "v") == ["verify"]
    assert complete("sandfort", "audit", "verify", "--pu") == ["--public-key"]
    assert {"--all", "--since-seq", "--action"} <= set(complete("sandfort", "audit", "list", "--"))


# --- tampering with the daemon's database --------------------------------------------------------

class Tampering:
    """Stops the daemon, saves its database and the checkpoint export, lets the test edit the
    database, restarts the daemon on it; on exit puts the saved files back and restarts again."""

    FILES = ("sandfort.db", "sandfort.db-wal", "sandfort.db-shm")

    def __init__(self, chain):
        self.chain = chain
        self.daemon = chain["daemon"]
        self.org = chain["org"]
        self.saved = tempfile.mkdtemp(prefix="sf-audit-cli-")

    def _paths(self):
        return [(os.path.join(self.daemon.state_dir, name), os.path.join(self.saved, name)) for name in self.FILES] + \
            [(self.chain["export"], os.path.join(self.saved, "export.jsonl"))]

    def __enter__(self):
        assert self.daemon.stop() == 0, self.daemon.log()
        for live, copy in self._paths():
            if os.path.exists(live):
                shutil.copy2(live, copy)
        self.db = sqlite3.connect(os.path.join(self.daemon.state_dir, "sandfort.db"))
        return self

    def sql(self, statement, *args):
        self.db.execute(statement, args)
        self.db.commit()

    def events(self):
        rows = self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM audit_events WHERE org_id = ? ORDER BY seq",
                               (self.org,))
        return [dict(zip(COLUMNS, row)) for row in rows]

    def checkpoint_seqs(self):
        return [s for (s,) in self.db.execute("SELECT seq FROM audit_checkpoints WHERE org_id = ? ORDER BY seq",
                                              (self.org,))]

    def rehash(self, from_seq):
        prev = GENESIS
        for e in self.events():
            if e["seq"] >= from_seq:
                e["prev_hash"] = prev
                e["hash"] = chain_hash(prev, e)
                self.sql("UPDATE audit_events SET prev_hash = ?, hash = ? WHERE org_id = ? AND seq = ?",
                         e["prev_hash"], e["hash"], self.org, e["seq"])
            prev = e["hash"]

    def restart(self):
        self.db.close()
        self.daemon.start()

    def __exit__(self, *exc):
        self.db.close()
        self.daemon.stop()
        for live, copy in self._paths():
            if os.path.exists(copy):
                shutil.copy2(copy, live)
            elif os.path.exists(live):
                os.remove(live)
        shutil.rmtree(self.saved, ignore_errors=True)
        self.daemon.start()
        return False


def odd_event_seq(t):
    for e in t.events():
        if e["action"] == "api_key.create" and json.loads(e["details"]).get("name") == ODD_NAME:
            return e["seq"]
    raise AssertionError("no api_key.create event for the odd name")


def test_an_edited_detail_or_actor_is_found(chain, auditor, pinned):
    with Tampering(chain) as t:
        seq = odd_event_seq(t)
        details = json.loads(t.events()[seq - 1]["details"])
        details["name"] = ODD_NAME.replace("✓", "✗")
        # Still canonical text: only the hash can tell.
        t.sql("UPDATE audit_events SET details = ? WHERE org_id = ? AND seq = ?", canonical_text(details), t.org, seq)
        t.restart()
        assert_broken(auditor.run("audit", "verify", "--public-key", pinned), t.org, seq, "does not match its content")
        report = json.loads(auditor.run("audit", "verify", "--public-key", pinned, "--json").stdout)
        assert report["ok"] is False and report["first_bad_seq"] == seq and report["events"] == seq - 1
    with Tampering(chain) as t:
        t.sql("UPDATE audit_events SET actor = 'key:key-0000000000000000' WHERE org_id = ? AND seq = 2", t.org)
        t.restart()
        assert_broken(auditor.run("audit", "verify", "--public-key", pinned), t.org, 2, "does not match its content")
    assert auditor.run("audit", "verify", "--public-key", pinned).returncode == 0


def test_details_that_are_no_longer_json_are_found(chain, auditor, pinned):
    with Tampering(chain) as t:
        t.sql("UPDATE audit_events SET details = '{\"name\": oops' WHERE org_id = ? AND seq = 3", t.org)
        t.restart()
        assert chain["admin"].get("/v1/audit?since_seq=2&limit=1").json()["items"][0]["details"] == '{"name": oops'
        assert_broken(auditor.run("audit", "verify", "--public-key", pinned), t.org, 3, "no canonical form")


def test_a_tail_cut_with_its_checkpoints_is_found_with_the_exported_checkpoints(chain, auditor, pinned):
    with Tampering(chain) as t:
        signed = t.checkpoint_seqs()
        head = t.events()[-1]["seq"]
        assert len(signed) >= 2 and signed[-1] == head, (signed, head)
        cut = signed[-2]
        t.sql("DELETE FROM audit_events WHERE org_id = ? AND seq > ?", t.org, cut)
        t.sql("DELETE FROM audit_checkpoints WHERE org_id = ? AND seq > ?", t.org, cut)
        t.restart()
        # The server's own view, and the CLI without checkpoints of its own: nothing to see.
        assert chain["admin"].get("/v1/audit/verify").json()["ok"] is True
        r = auditor.run("audit", "verify", "--public-key", pinned)
        assert r.returncode == 0, r
        intact_line(r.stdout, t.org, cut)
        # The checkpoints kept outside the server still bind the deleted tail.
        r = auditor.run("audit", "verify", "--public-key", pinned, "--checkpoints", chain["export"])
        assert_broken(r, t.org, cut + 1, "tail was cut off")
        assert "not on the server" in r.stderr


def test_a_rewritten_and_rehashed_suffix_is_found_with_the_exported_checkpoints(chain, auditor, pinned):
    with Tampering(chain) as t:
        middle = chain["middle"]
        head = t.events()[-1]["seq"]
        assert head >= middle + 2
        with open(chain["export"]) as f:
            exported = [c["seq"] for c in map(json.loads, f) if c["org_id"] == t.org]
        first_covering = min(s for s in exported if s >= middle + 2)
        t.sql("UPDATE audit_events SET actor = 'key:key-0000000000000000' WHERE org_id = ? AND seq = ?", t.org,
              middle + 2)
        t.rehash(middle + 2)
        t.sql("DELETE FROM audit_checkpoints WHERE org_id = ? AND seq > ?", t.org, middle)
        # At start the daemon even signs the forged tail: it extends the latest checkpoint it has.
        t.restart()
        assert auditor.run("audit", "verify", "--public-key", pinned).returncode == 0
        r = auditor.run("audit", "verify", "--public-key", pinned, "--checkpoints", chain["export"])
        assert_broken(r, t.org, first_covering, "rewritten")
    assert auditor.run("audit", "verify", "--public-key", pinned, "--checkpoints", chain["export"]).returncode == 0
