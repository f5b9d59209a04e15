"""`sandfortd backup --to FILE` while the daemon runs and writes, then a restore into a fresh state
directory (docs/operations.md): the organizations, keys and sandboxes are there, the keys
authenticate, the audit chain verifies, and the sandbox that was running still answers."""

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import threading

from sandfort_harness import SANDFORTD, Daemon


def backup(daemon, to, *extra):
    return subprocess.run([SANDFORTD, "backup", "--config", daemon.config_path, "--to", to, *extra],
                          capture_output=True, text=True, timeout=120)


def test_online_backup_and_restore_into_a_fresh_state_directory():
    d = Daemon().start()
    restored = None
    out_dir = tempfile.mkdtemp(prefix="sf-backup-")
    try:
        admin = d.admin()
        r = admin.post("/v1/orgs", {"name": "backed-up"})
        assert r.status == 201, r
        org = r.json()
        r = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "k", "role": "admin"})
        assert r.status == 201, r
        key = r.json()["key"]
        acme = d.client(key)
        sbx = acme.create_sandbox(name="kept")
        assert acme.exec(sbx["id"], argv=["sh", "-c", "echo survived > /tmp/proof"])["exit_code"] == 0

        # Writes go on while the copy is taken: each one is in the copy or after it, never half.
        stop = threading.Event()
        writes = []

        def keep_writing():
            while not stop.is_set():
                w = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": f"w{len(writes)}", "role": "viewer"})
                writes.append(w.status)

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            target = os.path.join(out_dir, "sandfort-backup.db")
            b = backup(d, target)
        finally:
            stop.set()
            writer.join()
        assert b.returncode == 0, b.stderr
        assert writes and set(writes) == {201}
        assert "organizations" in b.stdout and "signing key" in b.stdout
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
        assert sorted(os.listdir(out_dir)) == ["sandfort-backup.db"]  # no temporary file left

        copy = sqlite3.connect(target)
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one self-contained file
        names = {row[0] for row in copy.execute("SELECT name FROM orgs")}
        assert "backed-up" in names
        assert copy.execute("SELECT count(*) FROM sandboxes WHERE id = ?", (sbx["id"],)).fetchone()[0] == 1
        copy.close()

        # An existing file is not replaced unless asked; a missing directory leaves nothing behind.
        before = open(target, "rb").read()
        again = backup(d, target)
        assert again.returncode == 2 and "--force" in again.stderr
        assert open(target, "rb").read() == before
        assert backup(d, target, "--force").returncode == 0
        missing_dir = os.path.join(out_dir, "no", "such", "dir", "b.db")
        assert backup(d, missing_dir).returncode != 0
        assert sorted(os.listdir(out_dir)) == ["sandfort-backup.db"]

        # Restore: the daemon is gone; a fresh state directory gets the copy and the signing key.
        assert d.stop() == 0
        fresh = tempfile.mkdtemp(prefix="sf-", dir="/tmp")
        shutil.copy(target, os.path.join(fresh, "sandfort.db"))
        shutil.copy(os.path.join(d.state_dir, "audit-signing.key"), os.path.join(fresh, "audit-signing.key"))
        config = dict(d.config, state_dir=fresh)
        restored = Daemon.__new__(Daemon)
        restored.__dict__.update(d.__dict__)
        restored.state_dir = fresh
        restored.config = config
        restored.config_path = os.path.join(fresh, "sandfort.json")
        restored.log_path = os.path.join(fresh, "sandfortd.log")
        restored.proc = None
        with open(restored.config_path, "w") as f:
            json.dump(config, f)
        restored.start()

        acme = restored.client(key)
        assert acme.get("/v1/whoami").json()["org_id"] == org["id"]
        assert restored.admin().get("/v1/whoami").status == 200
        got = acme.get(f"/v1/sandboxes/{sbx['id']}").json()
        assert got["name"] == "kept" and got["state"] == "started"
        ran = acme.exec(sbx["id"], argv=["cat", "/tmp/proof"])
        assert ran["exit_code"] == 0 and ran["stdout"] == "survived\n"
        verify = acme.get("/v1/audit/verify").json()
        assert verify["ok"] is True and verify["events"] > 0
    finally:
        if restored is not None:
            restored.cleanup()
        d.cleanup()
        shutil.rmtree(out_dir, ignore_errors=True)


def test_backup_refuses_what_is_not_a_database():
    d = Daemon()  # bootstrapped, not started: the database exists
    out_dir = tempfile.mkdtemp(prefix="sf-backup-")
    try:
        not_ours = os.path.join(out_dir, "other.db")
        sqlite3.connect(not_ours).execute("CREATE TABLE t (x)").connection.commit()
        r = subprocess.run([SANDFORTD, "backup", "--config", d.config_path, "--set", f"database={not_ours}",
                            "--to", os.path.join(out_dir, "b.db")], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "not a sandfortd database" in r.stderr
        r = subprocess.run([SANDFORTD, "backup", "--config", d.config_path, "--set",
                            f"database={out_dir}/missing.db", "--to", os.path.join(out_dir, "b.db")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "no database" in r.stderr
        assert sorted(os.listdir(out_dir)) == ["other.db"]
    finally:
        d.cleanup()
        shutil.rmtree(out_dir, ignore_errors=True)
