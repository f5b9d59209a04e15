"""Snapshots against the real Docker engine: a running sandbox is committed without stopping,
a new sandbox from the snapshot has its files but none of its processes, a snapshot in use is not
deleted, and another organization can neither see, use nor guess its way into one."""

import json
import time
import urllib.parse

import pytest

from sandfort_harness import docker, new_org_member


def docker_images_of(snapshot_id):
    """The Docker images labelled with a sandfort snapshot id (there should be at most one)."""
    query = urllib.parse.quote(json.dumps({"label": [f"io.sandfort.snapshot={snapshot_id}"]}))
    status, body = docker("GET", "/images/json?filters=" + query)
    assert status == 200, body
    return body or []


@pytest.fixture(scope="module")
def rival(daemon):
    return new_org_member(daemon, "snapshot-rival")


def make_snapshot(client, sandbox_id, name):
    r = client.post("/v1/snapshots", {"sandbox_id": sandbox_id, "name": name})
    assert r.status == 201, r
    return r.json()


def counter(client, sandbox_id):
    r = client.exec(sandbox_id, command="cat /tmp/counter 2>/dev/null || echo 0")
    return int(r["stdout"].strip() or 0)


def wait_counter_past(client, sandbox_id, value, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = counter(client, sandbox_id)
        if now > value:
            return now
        time.sleep(0.2)
    raise AssertionError(f"the counter in {sandbox_id} stayed at {value}")


def test_a_running_sandbox_is_snapshotted_and_a_new_one_made_from_it(org, member):
    src = member.create_sandbox(env={"API_TOKEN": "s3cret-in-env"})
    made = []
    try:
        r = member.exec(src["id"], command=(
            "echo hello > /root/greeting && "
            "printf '#!/bin/sh\\necho installed-tool\\n' > /usr/local/bin/snaptool && chmod +x /usr/local/bin/snaptool"))
        assert r["exit_code"] == 0, r
        r = member.post(f"/v1/sandboxes/{src['id']}/commands", {
            "command": "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.2; done"})
        assert r.status == 201, r
        r = member.post(f"/v1/sandboxes/{src['id']}/commands", {"command": "exec sleep 1000"})
        assert r.status == 201, r
        before = wait_counter_past(member, src["id"], 0)

        snap = make_snapshot(member, src["id"], "base")
        made.append(snap)
        assert snap["id"].startswith("snap-") and snap["name"] == "base" and snap["state"] == "ready"
        assert snap["source_sandbox_id"] == src["id"] and snap["size_bytes"] > 0 and snap["created_at"]
        # The source keeps running, and so do its processes.
        assert member.get(f"/v1/sandboxes/{src['id']}").json()["state"] == "started"
        wait_counter_past(member, src["id"], before)
        assert member.get(f"/v1/sandboxes/{src['id']}").json()["state"] == "started"

        # On the engine the image says nothing of its organization or its name.
        [image] = docker_images_of(snap["id"])
        [tag] = image["RepoTags"]
        assert tag.startswith("sandfort-snap/") and tag.endswith(":latest") and "base" not in tag
        status, inspect = docker("GET", f"/images/{tag}/json")
        assert status == 200
        text = json.dumps(image["Labels"]) + tag + json.dumps(inspect["Config"].get("Labels"))
        assert org["org"]["id"] not in text and "acme" not in text
        # Nor does it keep the source's environment or its proxy credential, even by name
        # (attacks/test_snapshot_images.py reads every field).
        env = inspect["Config"].get("Env") or []
        assert not any("API_TOKEN" in e or "s3cret" in e or src["id"] in e for e in env), env

        assert member.get("/v1/snapshots/base").json()["id"] == snap["id"]
        assert member.get(f"/v1/snapshots/{snap['id']}").json()["name"] == "base"
        listed = [s for s in member.get("/v1/snapshots").json()["items"] if s["name"] == "base"]
        assert listed == [member.get("/v1/snapshots/base").json()]
        assert set(listed[0]) >= {"name", "size_bytes", "created_at", "source_sandbox_id", "state"}

        child = member.create_sandbox(snapshot="base")
        try:
            assert child["snapshot"] == "base" and child["state"] == "started"
            r = member.exec(child["id"], command="cat /root/greeting && snaptool && echo \"[$API_TOKEN]\"")
            assert r["exit_code"] == 0 and r["stdout"] == "hello\ninstalled-tool\n[]\n", r
            # Processes are not part of a snapshot.
            r = member.exec(child["id"], command="ps -eo args || ls /proc")
            assert "sleep 1000" not in r["stdout"] and "while true" not in r["stdout"], r
            c0 = counter(member, child["id"])
            time.sleep(1)
            assert counter(member, child["id"]) == c0
            # In use: not deleted.
            r = member.delete("/v1/snapshots/base")
            assert r.status == 409 and child["id"] in r.json()["error"]["message"], r
            # Also by id, the name shown is the one used.
            by_id = member.create_sandbox(snapshot=snap["id"])
            assert by_id["snapshot"] == snap["id"]
            assert member.delete(f"/v1/sandboxes/{by_id['id']}").status == 204
        finally:
            assert member.delete(f"/v1/sandboxes/{child['id']}").status == 204

        # A stopped sandbox can be snapshotted too.
        assert member.post(f"/v1/sandboxes/{src['id']}/stop").status == 200
        stopped = make_snapshot(member, src["id"], "from-stopped")
        made.append(stopped)
        assert member.get(f"/v1/sandboxes/{src['id']}").json()["state"] == "stopped"
        child = member.create_sandbox(snapshot="from-stopped")
        try:
            r = member.exec(child["id"], command="cat /root/greeting")
            assert r["stdout"] == "hello\n", r
        finally:
            assert member.delete(f"/v1/sandboxes/{child['id']}").status == 204
    finally:
        member.delete(f"/v1/sandboxes/{src['id']}")
    for s in made:
        assert member.delete(f"/v1/snapshots/{s['name']}").status == 204
        assert docker_images_of(s["id"]) == []
        assert member.get(f"/v1/snapshots/{s['name']}").status == 404
        assert member.delete(f"/v1/snapshots/{s['name']}").status == 404
    items = org["admin"].get("/v1/audit?limit=1000").json()["items"]
    for s in made:
        assert [e["action"] for e in items if e["target"] == s["id"]] == ["snapshot.create", "snapshot.delete"]


def test_another_organization_neither_sees_nor_uses_it(member, rival):
    src = member.create_sandbox()
    _, stranger = rival
    try:
        mine = make_snapshot(member, src["id"], "base")
        [image] = docker_images_of(mine["id"])
        [tag] = image["RepoTags"]
        for path in ("/v1/snapshots/base", f"/v1/snapshots/{mine['id']}"):
            assert stranger.get(path).status == 404
            assert stranger.delete(path).status == 404
        assert stranger.get("/v1/snapshots").json()["items"] == []
        # Its name is, for them, only an image reference (no such image: a failed pull).
        r = stranger.post("/v1/sandboxes", {"wait": True, "snapshot": "base"})
        assert r.status != 201, r
        # Its id is no image reference at all: unknown, before Docker is asked, and no sandbox is
        # left behind for the attempt.
        before = len(stranger.get("/v1/sandboxes").json()["items"])
        r = stranger.post("/v1/sandboxes", {"wait": True, "snapshot": mine["id"]})
        assert r.status == 404 and r.json()["error"]["code"] == "not_found", r
        assert len(stranger.get("/v1/sandboxes").json()["items"]) == before
        # The image's own name is refused before Docker is asked.
        for ref in (tag, tag.split(":")[0], "docker.io/" + tag):
            r = stranger.post("/v1/sandboxes", {"wait": True, "snapshot": ref})
            assert r.status == 404, (ref, r)
        # Nor can it snapshot another organization's sandbox.
        assert stranger.post("/v1/snapshots", {"sandbox_id": src["id"], "name": "x"}).status == 404
        # The owner cannot use the raw image name either: snapshots are used by name.
        r = member.post("/v1/sandboxes", {"wait": True, "snapshot": tag})
        assert r.status == 404, r
        # Its own `base` is its own.
        other_src = stranger.create_sandbox()
        try:
            theirs = make_snapshot(stranger, other_src["id"], "base")
            assert theirs["id"] != mine["id"]
            assert member.get("/v1/snapshots/base").json()["id"] == mine["id"]
            assert stranger.delete("/v1/snapshots/base").status == 204
            assert member.get("/v1/snapshots/base").status == 200
        finally:
            assert stranger.delete(f"/v1/sandboxes/{other_src['id']}").status == 204
    finally:
        member.delete("/v1/snapshots/base")
        member.delete(f"/v1/sandboxes/{src['id']}")


def test_names_and_roles(org, member):
    src = member.create_sandbox()
    try:
        for name in ("", "-x", ".x", "snap-0000000000000000", "a" * 64, "a b", "a/b"):
            r = member.post("/v1/snapshots", {"sandbox_id": src["id"], "name": name})
            assert r.status == 400, (name, r)
        assert member.post("/v1/snapshots", {"sandbox_id": src["id"], "name": "x", "paused": True}).status == 400
        assert member.post("/v1/snapshots", {"sandbox_id": "sbx-0000000000000000", "name": "x"}).status == 404
        viewer = org["viewer"]
        r = viewer.post("/v1/snapshots", {"sandbox_id": src["id"], "name": "by-viewer"})
        assert r.status == 403 and r.json()["error"]["code"] == "permission_denied", r
        make_snapshot(member, src["id"], "taken")
        assert member.post("/v1/snapshots", {"sandbox_id": src["id"], "name": "taken"}).status == 409
        assert viewer.delete("/v1/snapshots/taken").status == 403
        assert viewer.get("/v1/snapshots/taken").status == 200
        assert len(viewer.get("/v1/snapshots?limit=1").json()["items"]) == 1
        assert member.delete("/v1/snapshots/taken").status == 204
    finally:
        assert member.delete(f"/v1/sandboxes/{src['id']}").status == 204


def test_deleting_an_organization_deletes_its_snapshots(daemon):
    org, client = new_org_member(daemon, "snapshot-leaver")
    src = client.create_sandbox()
    snap = make_snapshot(client, src["id"], "base")
    child = client.create_sandbox(snapshot="base")
    assert len(docker_images_of(snap["id"])) == 1
    assert daemon.admin().delete(f"/v1/orgs/{org['id']}").status == 204
    assert docker_images_of(snap["id"]) == []
    assert child["snapshot"] == "base"
