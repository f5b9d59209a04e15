"""Start-up reconciliation of volumes and snapshot images against the real Docker engine: a Docker
volume or image labelled with the daemon's instance and a volume or snapshot id that no row names
(what a crash between Docker's create and the row's insert leaves) is removed at the next start;
a real volume and snapshot made through the API survive it and stay usable, and what another
daemon labelled is left alone."""

import json
import os
import re
import sqlite3
import time
import urllib.parse

import pytest

from sandfort_harness import Daemon, docker

BASE_IMAGE = "sandfort/base:bookworm"


@pytest.fixture
def fresh():
    d = Daemon()
    yield d
    d.cleanup()


def instance_id_of(daemon):
    """The daemon's instance id, as its first migration wrote it into the meta table."""
    db = sqlite3.connect(f"file:{os.path.join(daemon.state_dir, 'sandfort.db')}?mode=ro", uri=True)
    try:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'instance_id'").fetchone()
        return value
    finally:
        db.close()


def labelled(kind, label):
    """Docker volumes (kind "volumes") or images ("images") carrying label."""
    query = urllib.parse.quote(json.dumps({"label": [label]}))
    path = "/volumes?filters=" if kind == "volumes" else "/images/json?filters="
    status, body = docker("GET", path + query)
    assert status == 200, body
    return (body.get("Volumes") or []) if kind == "volumes" else (body or [])


def make_volume(name, labels):
    status, body = docker("POST", "/volumes/create", {"Name": name, "Driver": "local", "Labels": labels})
    assert status == 201, body


def make_image(repo, labels):
    """A committed image of a container that never ran, carrying labels; returns its id."""
    status, made = docker("POST", "/containers/create", {"Image": BASE_IMAGE, "Cmd": ["true"],
                                                          "HostConfig": {"NetworkMode": "none"}})
    assert status == 201, made
    try:
        query = urllib.parse.urlencode({"container": made["Id"], "repo": repo, "tag": "latest"})
        status, body = docker("POST", "/commit?" + query, {"Labels": labels})
        assert status == 201, body
        return body["Id"]
    finally:
        docker("DELETE", f"/containers/{made['Id']}?force=true")


def test_orphaned_volumes_and_images_go_at_start_and_real_ones_stay(fresh):
    fresh.start()
    admin = fresh.admin()
    # mkdtemp's letters include '_', which may not end a Docker repository name (nor come three in a row).
    token = re.sub(r"[^a-z0-9]", "x", os.path.basename(fresh.state_dir)[3:].lower())
    made_volumes, made_images, sandboxes = [], [], []
    try:
        # The real ones, through the API: a volume with data in it, a snapshot with a file in it.
        r = admin.post("/v1/volumes", {"name": "kept"})
        assert r.status == 201, r
        vol = r.json()
        src = admin.create_sandbox(volumes=[{"name": "kept", "mount_path": "/data"}])
        sandboxes.append(src["id"])
        r = admin.exec(src["id"], command="echo in-volume > /data/greeting && echo in-image > /root/greeting")
        assert r["exit_code"] == 0, r
        r = admin.post("/v1/snapshots", {"sandbox_id": src["id"], "name": "kept"})
        assert r.status == 201, r
        snap = r.json()
        assert admin.delete(f"/v1/sandboxes/{src['id']}").status == 204
        sandboxes.remove(src["id"])
        fresh.stop()

        # What a daemon that died between Docker's create and the row's insert leaves: this
        # daemon's instance label and an id that no row has. And another daemon's, on the same engine.
        instance = instance_id_of(fresh)
        orphan_volume = f"sandfort-vol-orphan{token}"
        make_volume(orphan_volume, {"io.sandfort.instance": instance, "io.sandfort.volume": "vol-00000000000000f1"})
        made_volumes.append(orphan_volume)
        foreign_volume = f"sandfort-vol-foreign{token}"
        make_volume(foreign_volume, {"io.sandfort.instance": "another-daemon", "io.sandfort.volume": "vol-00000000000000f2"})
        made_volumes.append(foreign_volume)
        orphan_image = make_image(f"sandfort-snap/orphan{token}",
                                  {"io.sandfort.instance": instance, "io.sandfort.snapshot": "snap-00000000000000f1"})
        made_images.append(orphan_image)
        foreign_image = make_image(f"sandfort-snap/foreign{token}",
                                   {"io.sandfort.instance": "another-daemon", "io.sandfort.snapshot": "snap-00000000000000f2"})
        made_images.append(foreign_image)
        # Only what Docker made before the pass began is removed (a create in flight is younger):
        # Docker's times are in seconds.
        time.sleep(1.2)

        fresh.start()  # ready only once reconciliation has finished
        assert docker("GET", f"/volumes/{orphan_volume}")[0] == 404
        assert docker("GET", f"/images/{orphan_image}/json")[0] == 404
        assert docker("GET", f"/volumes/{foreign_volume}")[0] == 200
        assert docker("GET", f"/images/{foreign_image}/json")[0] == 200
        log = fresh.log()
        assert "removed Docker volume " + orphan_volume in log, log
        assert "of unknown snapshot 'snap-00000000000000f1'" in log, log

        # The real ones are still there, on the engine and in the API, and usable.
        assert [v["Name"] for v in labelled("volumes", f"io.sandfort.volume={vol['id']}")]
        assert labelled("images", f"io.sandfort.snapshot={snap['id']}")
        assert admin.get("/v1/volumes/kept").json()["state"] == "ready"
        assert admin.get("/v1/snapshots/kept").json()["state"] == "ready"
        r = admin.post("/v1/sandboxes", {"snapshot": "kept", "wait": True,
                                         "volumes": [{"name": "kept", "mount_path": "/data"}]})
        assert r.status == 201, r
        again = r.json()
        sandboxes.append(again["id"])
        r = admin.exec(again["id"], command="cat /data/greeting /root/greeting")
        assert r["exit_code"] == 0 and r["stdout"] == "in-volume\nin-image\n", r
        assert admin.delete(f"/v1/sandboxes/{again['id']}").status == 204
        sandboxes.remove(again["id"])
        assert admin.delete("/v1/snapshots/kept").status == 204
        assert admin.delete("/v1/volumes/kept").status == 204
    finally:
        if fresh.proc and fresh.proc.poll() is None:
            for sid in sandboxes:
                admin.delete(f"/v1/sandboxes/{sid}")
        for name in made_volumes:
            docker("DELETE", f"/volumes/{name}")
        for image in made_images:
            docker("DELETE", f"/images/{image}")
