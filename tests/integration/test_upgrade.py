"""Upgrades: today's sandfortd starts on the database release 0.1.0 left (tests/data, schema
version 9), migrates it forward if its schema is older, and serves what was there: the keys
authenticate, the organization, its sandbox (labels included) and its volume are listed, and the
audit chain still verifies. A database newer than the binary is refused, its rows untouched."""

import os
import shutil
import sqlite3

import pytest

from sandfort_harness import REPO, Daemon

DUMP = os.path.join(REPO, "tests", "data", "sandfort-0.1.0.sql")
# Its audit signing key: the checkpoints in the dump are signed with it (kept with backups too).
SIGNING_KEY = os.path.join(REPO, "tests", "data", "sandfort-0.1.0-audit-signing.key")
# The keys whose hashes the dump holds (made for this fixture only).
SUPERADMIN_KEY = "sfk_d39d0bae8a3f3bd8e2778cc6301cad28"
ORG_KEY = "sfk_53bd6ac865e1d08f14cc941ff420805e"
ORG_ID = "org-6018adca3cff98b9"
SANDBOX_ID = "sbx-3b54ebb80b046d07"


def daemon_on(dump_sql, user_version=None):
    """A daemon whose database is the dump (its own bootstrap's database replaced)."""
    d = Daemon()
    db = os.path.join(d.state_dir, "sandfort.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    conn = sqlite3.connect(db)
    conn.executescript(dump_sql)
    if user_version is not None:
        conn.execute(f"PRAGMA user_version={user_version}")
    conn.commit()
    conn.close()
    shutil.copy(SIGNING_KEY, os.path.join(d.state_dir, "audit-signing.key"))
    os.chmod(os.path.join(d.state_dir, "audit-signing.key"), 0o600)
    d.admin_key = SUPERADMIN_KEY
    return d


def contents(db_path):
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0], list(conn.iterdump())
    finally:
        conn.close()


def test_the_previous_release_database_is_served_after_the_upgrade():
    d = daemon_on(open(DUMP).read())
    try:
        d.start()
        org = d.client(ORG_KEY)
        who = org.get("/v1/whoami").json()
        assert who["org_id"] == ORG_ID and who["role"] == "admin"
        assert any(o["id"] == ORG_ID for o in d.admin().get("/v1/orgs").json()["items"])
        sbx = org.get("/v1/sandboxes/old-one").json()
        assert sbx["id"] == SANDBOX_ID and sbx["labels"] == {"team": "a"}
        # Its container is not on this machine: reconciliation says so instead of pretending.
        assert sbx["state"] == "error"
        assert [v["name"] for v in org.get("/v1/volumes").json()["items"]] == ["data"]
        verify = org.get("/v1/audit/verify").json()
        assert verify["ok"] is True and verify["events"] > 0, verify
        # And it is a working database: a new sandbox in the old organization, the old one deleted.
        fresh = org.create_sandbox(name="after-upgrade")
        assert fresh["state"] == "started"
        assert org.delete(f"/v1/sandboxes/{fresh['id']}").status == 204
        assert org.delete(f"/v1/sandboxes/{SANDBOX_ID}").status == 204
        db = sqlite3.connect(os.path.join(d.state_dir, "sandfort.db"))
        assert db.execute("PRAGMA user_version").fetchone()[0] >= 9
        db.close()
    finally:
        d.cleanup()


def test_a_database_newer_than_the_binary_is_refused_untouched():
    d = daemon_on(open(DUMP).read(), user_version=999)
    try:
        db_path = os.path.join(d.state_dir, "sandfort.db")
        before = contents(db_path)
        with pytest.raises(RuntimeError) as refused:
            d.start()
        assert "newer than this build supports" in str(refused.value)
        # Nothing migrated, nothing written (the journal mode it opened with aside).
        assert contents(db_path) == before
    finally:
        d.cleanup()
