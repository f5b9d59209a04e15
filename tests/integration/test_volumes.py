"""Volumes against the real Docker engine: data outlives the sandbox that wrote it, a mounted
volume cannot be deleted, another organization can neither see nor mount one, and a sandbox
running as a non-root user can write to its volume."""

import json
import urllib.parse

import pytest

from sandfort_harness import docker, docker_container, new_org_member


def docker_volumes_of(volume_id):
    """The Docker volumes labelled with a sandfort volume id (there should be at most one)."""
    query = urllib.parse.quote(json.dumps({"label": [f"io.sandfort.volume={volume_id}"]}))
    status, body = docker("GET", "/volumes?filters=" + query)
    assert status == 200, body
    return body.get("Volumes") or []


@pytest.fixture(scope="module")
def rival(daemon):
    return new_org_member(daemon, "volume-rival")


def make_volume(client, name):
    r = client.post("/v1/volumes", {"name": name})
    assert r.status == 201, r
    return r.json()


def test_data_outlives_its_sandbox_and_a_mounted_volume_is_not_deleted(org, member):
    vol = make_volume(member, "cache")
    assert vol["id"].startswith("vol-") and vol["name"] == "cache" and vol["size_mb"] is None
    # On the engine the volume says nothing of its organization or its name.
    [dv] = docker_volumes_of(vol["id"])
    assert dv["Name"].startswith("sandfort-vol-") and "cache" not in dv["Name"]
    assert org["org"]["id"] not in json.dumps(dv) and "acme" not in json.dumps(dv)
    assert member.get("/v1/volumes/cache").json()["id"] == vol["id"]
    assert member.get(f"/v1/volumes/{vol['id']}").json()["name"] == "cache"
    assert "cache" in [v["name"] for v in member.get("/v1/volumes").json()["items"]]

    a = member.create_sandbox(volumes=[{"name": "cache", "mount_path": "/data"}])
    try:
        assert a["volumes"] == [{"name": "cache", "mount_path": "/data", "read_only": False}]
        mounts = docker_container(a["id"])["Mounts"]
        assert [(m["Type"], m["Name"], m["Destination"]) for m in mounts if m["Type"] == "volume"] == \
            [("volume", dv["Name"], "/data")]
        r = member.exec(a["id"], command="echo hello > /data/greeting && cat /data/greeting")
        assert r["exit_code"] == 0 and r["stdout"] == "hello\n", r
        r = member.delete("/v1/volumes/cache")
        assert r.status == 409 and a["id"] in r.json()["error"]["message"], r
    finally:
        assert member.delete(f"/v1/sandboxes/{a['id']}").status == 204

    b = member.create_sandbox(volumes=[{"name": "cache", "mount_path": "/srv/cache", "read_only": True}])
    try:
        assert member.get(f"/v1/sandboxes/{b['id']}").json()["volumes"] == \
            [{"name": "cache", "mount_path": "/srv/cache", "read_only": True}]
        r = member.exec(b["id"], command="cat /srv/cache/greeting")
        assert r["exit_code"] == 0 and r["stdout"] == "hello\n", r
        # Read-only holds for root inside the sandbox too.
        r = member.exec(b["id"], command="echo x > /srv/cache/other")
        assert r["exit_code"] != 0 and "Read-only" in r["stderr"], r
        # A stopped sandbox still holds it: it would mount it again at start.
        assert member.post(f"/v1/sandboxes/{b['id']}/stop").status == 200
        assert member.delete("/v1/volumes/cache").status == 409
    finally:
        assert member.delete(f"/v1/sandboxes/{b['id']}").status == 204

    assert member.delete("/v1/volumes/cache").status == 204
    assert docker_volumes_of(vol["id"]) == []
    assert member.get("/v1/volumes/cache").status == 404
    assert member.delete("/v1/volumes/cache").status == 404
    # The name is free again.
    again = make_volume(member, "cache")
    assert again["id"] != vol["id"]
    assert member.delete("/v1/volumes/cache").status == 204


def test_another_organization_neither_sees_nor_mounts_it(member, rival):
    mine = make_volume(member, "shared-name")
    _, stranger = rival
    try:
        for path in ("/v1/volumes/shared-name", f"/v1/volumes/{mine['id']}"):
            assert stranger.get(path).status == 404
            assert stranger.delete(path).status == 404
        assert stranger.get("/v1/volumes").json()["items"] == []
        for name in ("shared-name", mine["id"]):
            r = stranger.post("/v1/sandboxes", {"wait": True, "volumes": [{"name": name, "mount_path": "/data"}]})
            assert r.status == 404 and name in r.json()["error"]["message"], r
        # Its own volume of the same name is its own.
        theirs = make_volume(stranger, "shared-name")
        assert theirs["id"] != mine["id"]
        assert member.get("/v1/volumes/shared-name").json()["id"] == mine["id"]
        assert stranger.delete("/v1/volumes/shared-name").status == 204
        assert member.get("/v1/volumes/shared-name").status == 200
    finally:
        member.delete("/v1/volumes/shared-name")


def test_a_non_root_user_can_write_to_its_volume(member):
    vol = make_volume(member, "home")
    try:
        sbx = member.create_sandbox(user="1000", volumes=[{"name": "home", "mount_path": "/home/work"}])
        try:
            r = member.exec(sbx["id"], command="id -u; stat -c %a /home/work; echo mine > /home/work/f; "
                                               "stat -c %u /home/work/f")
            assert r["exit_code"] == 0 and r["stdout"] == "1000\n1777\n1000\n", r
        finally:
            assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
        # Root in the next sandbox reads it.
        sbx = member.create_sandbox(volumes=[{"name": "home", "mount_path": "/mnt/h"}])
        try:
            assert member.exec(sbx["id"], command="cat /mnt/h/f")["stdout"] == "mine\n"
        finally:
            assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    finally:
        assert member.delete("/v1/volumes/home").status == 204
    assert docker_volumes_of(vol["id"]) == []


@pytest.mark.parametrize("mount_path", [
    "relative", "/", "/proc", "/proc/x", "/sys/fs", "/dev/shm", "/run/sandfort", "/run/sandfort/x", "/run",
    "/.sandfort", "/.sandfort/agent", "/a/../b", "/a/./b", "/a/", "/a//b", "/a/..", "/a:b", "/a,b", "",
])
def test_bad_mount_paths_are_refused(member, mount_path):
    existing = member.get("/v1/volumes/paths")
    if existing.status == 404:
        make_volume(member, "paths")
    r = member.post("/v1/sandboxes", {"wait": True, "volumes": [{"name": "paths", "mount_path": mount_path}]})
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", (mount_path, r)


def test_bad_volume_lists_are_refused(member):
    if member.get("/v1/volumes/lists").status == 404:
        make_volume(member, "lists")
    if member.get("/v1/volumes/lists2").status == 404:
        make_volume(member, "lists2")
    bad = [
        [{"name": "lists", "mount_path": "/a"}, {"name": "lists2", "mount_path": "/a"}],
        [{"name": "lists", "mount_path": "/a"}, {"name": "lists", "mount_path": "/b"}],
        [{"name": "lists", "mount_path": "/a"}, {"name": "lists2", "mount_path": "/a/b"}],
        [{"name": f"v{i}", "mount_path": f"/m{i}"} for i in range(9)],
        [{"name": "lists"}],
        [{"name": "lists", "mount_path": "/a", "bind": "/etc"}],
        {"name": "lists"},
        ["lists"],
    ]
    for volumes in bad:
        r = member.post("/v1/sandboxes", {"wait": True, "volumes": volumes})
        assert r.status == 400, (volumes, r)
    r = member.post("/v1/sandboxes", {"wait": True, "volumes": [{"name": "nope", "mount_path": "/a"}]})
    assert r.status == 404 and "nope" in r.json()["error"]["message"], r
    assert member.delete("/v1/volumes/lists").status == 204
    assert member.delete("/v1/volumes/lists2").status == 204
    member.delete("/v1/volumes/paths")


def test_names_sizes_and_roles(org, member):
    for name in ("", "-x", ".x", "vol-0000000000000000", "a" * 64, "a b", "a/b"):
        r = member.post("/v1/volumes", {"name": name})
        assert r.status == 400, (name, r)
    r = member.post("/v1/volumes", {"name": "sized", "size_mb": 100})
    assert r.status == 400 and "not enforced" in r.json()["error"]["message"], r
    assert member.get("/v1/volumes/sized").status == 404
    assert member.post("/v1/volumes", {"name": "x", "driver": "nfs"}).status == 400

    make_volume(member, "taken")
    try:
        assert member.post("/v1/volumes", {"name": "taken"}).status == 409
        viewer = org["viewer"]
        r = viewer.post("/v1/volumes", {"name": "by-viewer"})
        assert r.status == 403 and r.json()["error"]["code"] == "permission_denied", r
        assert viewer.delete("/v1/volumes/taken").status == 403
        assert viewer.get("/v1/volumes/taken").status == 200
        page = viewer.get("/v1/volumes?limit=1").json()
        assert len(page["items"]) == 1
    finally:
        assert member.delete("/v1/volumes/taken").status == 204


def test_paging_and_audit(org, member):
    names = ["page-a", "page-b", "page-c"]
    made = [make_volume(member, n) for n in names]
    try:
        seen, cursor = [], None
        while True:
            r = member.get("/v1/volumes?limit=2" + (f"&cursor={cursor}" if cursor else ""))
            assert r.status == 200, r
            seen += [v["name"] for v in r.json()["items"]]
            cursor = r.json()["next_cursor"]
            if cursor is None:
                break
        assert [n for n in seen if n.startswith("page-")] == names
    finally:
        for n in names:
            assert member.delete(f"/v1/volumes/{n}").status == 204
    items = org["admin"].get("/v1/audit?limit=1000").json()["items"]
    for v in made:
        actions = [e["action"] for e in items if e["target"] == v["id"]]
        assert actions == ["volume.create", "volume.delete"], actions


def test_deleting_an_organization_deletes_its_volumes(daemon):
    org, client = new_org_member(daemon, "volume-leaver")
    vol = make_volume(client, "cache")
    sbx = client.create_sandbox(volumes=[{"name": "cache", "mount_path": "/data"}])
    assert len(docker_volumes_of(vol["id"])) == 1
    assert daemon.admin().delete(f"/v1/orgs/{org['id']}").status == 204
    assert docker_container(sbx["id"]) is None
    assert docker_volumes_of(vol["id"]) == []
