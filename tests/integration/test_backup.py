"""`sandfortd backup --to DIR` while the daemon runs and writes, then `sandfortd restore` into a fresh
state directory (docs/operations.md): the organizations, keys and sandboxes are there, the keys
authenticate, the audit chain verifies, and the sandbox that was running still answers. On a host
that lost its Docker objects too, the restore brings back the volumes' files and the snapshot
images, and names the rows whose volume or image the backup could not hold."""

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import threading
import urllib.parse

from sandfort_harness import SANDFORTD, Daemon, docker, docker_containers_of


def backup(daemon, to, *extra):
    return subprocess.run([SANDFORTD, "backup", "--config", daemon.config_path, "--to", to, *extra],
                          capture_output=True, text=True, timeout=300)


def restore_into_fresh_state(d, backup_dir):
    """A daemon like d (its ports and network) on a new state directory, as on a new host:
    `sandfortd restore` from backup_dir, and d's audit signing key installed. Not started."""
    fresh = tempfile.mkdtemp(prefix="sf-", dir="/tmp")
    restored = Daemon.__new__(Daemon)
    restored.__dict__.update(d.__dict__)
    restored.state_dir = fresh
    restored.config = dict(d.config, state_dir=fresh)
    restored.config_path = os.path.join(fresh, "sandfort.json")
    restored.log_path = os.path.join(fresh, "sandfortd.log")
    restored.proc = None
    with open(restored.config_path, "w") as f:
        json.dump(restored.config, f)
    shutil.copy(os.path.join(d.state_dir, "audit-signing.key"), os.path.join(fresh, "audit-signing.key"))
    out = subprocess.run([SANDFORTD, "restore", "--config", restored.config_path, "--from", backup_dir],
                         capture_output=True, text=True, timeout=300)
    return restored, out


def instance_of(state_dir):
    db = sqlite3.connect(f"file:{os.path.join(state_dir, 'sandfort.db')}?mode=ro", uri=True)
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'instance_id'").fetchone()[0]
    finally:
        db.close()


def docker_objects_of(instance):
    """(volume names, image ids) labelled with this sandfortd instance."""
    query = urllib.parse.quote(json.dumps({"label": [f"io.sandfort.instance={instance}"]}))
    volumes = [v["Name"] for v in (docker("GET", "/volumes?filters=" + query)[1] or {}).get("Volumes") or []]
    images = [i["Id"] for i in docker("GET", "/images/json?filters=" + query)[1] or []]
    return volumes, images


def lose_docker_objects(daemon, instance):
    """What a lost host loses besides its state: the daemon's containers, volumes and images."""
    for c in docker_containers_of(daemon):
        docker("DELETE", f"/containers/{c['Id']}?force=true")
    volumes, images = docker_objects_of(instance)
    for v in volumes:
        assert docker("DELETE", f"/volumes/{v}")[0] == 204
    for i in images:
        assert docker("DELETE", f"/images/{i}?force=true")[0] == 200
    assert docker_objects_of(instance) == ([], [])


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
            target = os.path.join(out_dir, "sandfort-backup")
            b = backup(d, target)
        finally:
            stop.set()
            writer.join()
        assert b.returncode == 0, b.stderr
        # The backup now also asks Docker after the copy: a longer run may meet the organization's
        # rate limit (429, refused whole), never a half write.
        assert 201 in writes and set(writes) <= {201, 429}, writes
        assert "organizations" in b.stdout and "signing key" in b.stdout
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(os.path.join(target, "sandfort.db")).st_mode) == 0o600
        assert sorted(os.listdir(out_dir)) == ["sandfort-backup"]  # no temporary file left
        assert sorted(os.listdir(target)) == ["manifest.json", "sandfort.db"]  # no volume, no snapshot

        copy = sqlite3.connect(os.path.join(target, "sandfort.db"))
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one self-contained file
        names = {row[0] for row in copy.execute("SELECT name FROM orgs")}
        assert "backed-up" in names
        assert copy.execute("SELECT count(*) FROM sandboxes WHERE id = ?", (sbx["id"],)).fetchone()[0] == 1
        copy.close()

        # An existing backup is not replaced unless asked; a missing directory leaves nothing behind.
        before = open(os.path.join(target, "sandfort.db"), "rb").read()
        again = backup(d, target)
        assert again.returncode == 2 and "--force" in again.stderr
        assert open(os.path.join(target, "sandfort.db"), "rb").read() == before
        assert backup(d, target, "--force").returncode == 0
        missing_dir = os.path.join(out_dir, "no", "such", "dir", "b")
        assert backup(d, missing_dir).returncode != 0
        assert sorted(os.listdir(out_dir)) == ["sandfort-backup"]
        # --database-only: the database alone, in one self-contained file.
        only = os.path.join(out_dir, "only.db")
        b = backup(d, only, "--database-only")
        assert b.returncode == 0 and "not in it (--database-only)" in b.stdout, b
        assert sqlite3.connect(only).execute("PRAGMA journal_mode").fetchone()[0] == "delete"

        # Restore: the daemon is gone; a fresh state directory gets the copy and the signing key.
        assert d.stop() == 0
        restored, r = restore_into_fresh_state(d, target)
        assert r.returncode == 0, r
        assert "0 snapshot images loaded" in r.stdout and "0 volumes restored" in r.stdout, r.stdout
        # A database in place is not replaced unless asked.
        again = subprocess.run([SANDFORTD, "restore", "--config", restored.config_path, "--from", target],
                               capture_output=True, text=True, timeout=60)
        assert again.returncode == 2 and "--force" in again.stderr, again
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
                            "--to", os.path.join(out_dir, "b")], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "not a sandfortd database" in r.stderr
        r = subprocess.run([SANDFORTD, "backup", "--config", d.config_path, "--set",
                            f"database={out_dir}/missing.db", "--to", os.path.join(out_dir, "b")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "no database" in r.stderr
        assert sorted(os.listdir(out_dir)) == ["other.db"]
        r = subprocess.run([SANDFORTD, "restore", "--config", d.config_path, "--from", out_dir],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "not a sandfortd backup directory" in r.stderr, r
    finally:
        d.cleanup()
        shutil.rmtree(out_dir, ignore_errors=True)


def test_a_lost_host_comes_back_with_its_volumes_and_snapshot_images():
    """Backup, then the host loses its database and Docker objects; the restore on that clean engine
    brings back a volume's files (a new sandbox mounts it and reads them) and a snapshot's image (a
    new sandbox is made from it). A row whose volume or image was already gone when the backup ran
    is named by the backup and by the restore, which exits 3; a volume of another sandfortd under that
name is left alone."""
    d = Daemon().start()
    restored = gone_docker = None
    out_dir = tempfile.mkdtemp(prefix="sf-backup-")
    instance = instance_of(d.state_dir)
    try:
        admin = d.admin()
        org = admin.post("/v1/orgs", {"name": "lost-host"}).json()
        key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "k", "role": "admin"}).json()["key"]
        acme = d.client(key)
        kept = acme.post("/v1/volumes", {"name": "kept"}).json()
        gone = acme.post("/v1/volumes", {"name": "gone"}).json()
        src = acme.create_sandbox(name="src", volumes=[{"name": "kept", "mount_path": "/data"}])
        wrote = acme.exec(src["id"], argv=["sh", "-c", "mkdir -p /data/sub && echo in the volume > /data/sub/note "
                                           "&& chmod 640 /data/sub/note && echo in the snapshot > /srv/proof"])
        assert wrote["exit_code"] == 0, wrote
        r = acme.post("/v1/snapshots", {"sandbox_id": src["id"], "name": "snap"})
        assert r.status == 201, r
        snap = r.json()
        r = acme.post("/v1/snapshots", {"sandbox_id": src["id"], "name": "lost-snap"})
        assert r.status == 201, r
        lost_snap = r.json()
        # Gone from Docker behind the daemon's back before the backup runs.
        [gone_docker] = [v for v in docker_objects_of(instance)[0]
                         if docker("GET", f"/volumes/{v}")[1]["Labels"].get("io.sandfort.volume") == gone["id"]]
        assert docker("DELETE", f"/volumes/{gone_docker}")[0] == 204
        lost_ref = sqlite3.connect(os.path.join(d.state_dir, "sandfort.db")).execute(
            "SELECT image_ref FROM snapshots WHERE id = ?", (lost_snap["id"],)).fetchone()[0]
        assert docker("DELETE", f"/images/{lost_ref}")[0] == 200

        target = os.path.join(out_dir, "backup")
        b = backup(d, target)
        assert b.returncode == 3, b
        assert "1 of 2 volumes and 1 of 2 snapshot images" in b.stdout, b.stdout
        assert (f"not in the backup: volume {gone['id']} ('gone', org {org['id']}): no Docker volume {gone_docker} "
                "in the engine") in b.stderr, b.stderr
        assert f"not in the backup: snapshot {lost_snap['id']} ('lost-snap', org {org['id']}): no image {lost_ref}" \
            in b.stderr, b.stderr
        manifest = json.load(open(os.path.join(target, "manifest.json")))
        assert manifest["instance_id"] == instance
        assert [v["name"] for v in manifest["volumes"]] == ["kept"]
        assert [s["name"] for s in manifest["snapshots"]] == ["snap"]
        assert sorted(m["name"] for m in manifest["missing"]) == ["gone", "lost-snap"]
        assert sorted(os.listdir(target)) == ["manifest.json", "sandfort.db", "snapshots.tar", "volumes"]

        # The host is lost: the daemon, its database, its containers, volumes and images.
        assert d.stop() == 0
        lose_docker_objects(d, instance)
        # The new host's engine has a volume of that name that another sandfortd made.
        foreign = {"io.sandfort.instance": "another-instance", "io.sandfort.volume": gone["id"]}
        assert docker("POST", "/volumes/create", {"Name": gone_docker, "Labels": foreign})[0] == 201

        restored, r = restore_into_fresh_state(d, target)
        assert r.returncode == 3, r
        assert "1 snapshot images loaded, 0 already there; 1 volumes restored, 0 already there" in r.stdout, r.stdout
        assert f"missing: volume {gone['id']} ('gone', org {org['id']}): the engine's volume {gone_docker} is not " \
            "this instance's: left alone, not replaced" in r.stderr, r.stderr
        assert docker("GET", f"/volumes/{gone_docker}")[1]["Labels"] == foreign
        assert f"missing: snapshot {lost_snap['id']} ('lost-snap', org {org['id']}): image {lost_ref} is neither " \
            "in the engine nor in the backup" in r.stderr, r.stderr
        assert "2 rows point at a volume or image that is not there" in r.stderr
        # Only the rows' own objects came back, labelled as the daemon made them.
        volumes, images = docker_objects_of(instance)
        assert len(volumes) == 1 and len(images) == 1, (volumes, images)
        restored.start()

        acme = restored.client(key)
        reader = acme.create_sandbox(volumes=[{"name": "kept", "mount_path": "/mnt/kept"}])
        ran = acme.exec(reader["id"], argv=["sh", "-c", "cat /mnt/kept/sub/note && stat -c %a /mnt/kept/sub/note"])
        assert ran["exit_code"] == 0 and ran["stdout"] == "in the volume\n640\n", ran
        child = acme.create_sandbox(snapshot="snap")
        assert child["state"] == "started", child
        ran = acme.exec(child["id"], argv=["cat", "/srv/proof"])
        assert ran["exit_code"] == 0 and ran["stdout"] == "in the snapshot\n", ran
        assert acme.get(f"/v1/snapshots/{snap['id']}").json()["name"] == "snap"
        assert acme.get(f"/v1/volumes/{kept['id']}").json()["name"] == "kept"
    finally:
        if restored is not None:
            restored.cleanup()
        d.cleanup()
        for v in docker_objects_of(instance)[0]:
            docker("DELETE", f"/volumes/{v}?force=true")
        for i in docker_objects_of(instance)[1]:
            docker("DELETE", f"/images/{i}?force=true")
        if gone_docker:
            docker("DELETE", f"/volumes/{gone_docker}?force=true")
        shutil.rmtree(out_dir, ignore_errors=True)
