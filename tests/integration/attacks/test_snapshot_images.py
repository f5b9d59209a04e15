"""Attack: another organization's snapshot by image-ID prefix, and secrets kept in snapshot images
(issue 30, sections 1 and 4).

Organization A writes a secret into a sandbox created with a secret in its environment and
snapshots it. Organization B, knowing nothing of A, asks for `sha256:2`: Docker reads that as
repository "sha256", tag "2", and falls back to matching local image ids by prefix, so sixteen
requests reached every image on the host. Every spelling of A's image (and of an image from a
registry outside images.allowed_registries) is tried from B, end to end against Docker; each must
be refused before a row or a container exists. A's snapshot image itself must hold A's files and
nothing of the sandbox's configuration (environment, proxy credential, labels, history)."""

import io
import json
import os
import sys
import tarfile
import hashlib
import http.client
import socket
import urllib.parse

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandfort_harness import DOCKER_SOCK, docker, docker_container, docker_containers_of, new_org_member  # noqa: E402

SECRET_FILE = "TOPSECRET-A"
SECRET_ENV = "hunter2-7c1e"
SANDFORTD_LABELS = {"io.sandfort.sandbox", "io.sandfort.org", "io.sandfort.instance"}


def docker_raw(method, path, body=b"", content_type="application/x-tar"):
    """A Docker call with a raw body (an image archive): returns (status, bytes)."""
    class Conn(http.client.HTTPConnection):
        def connect(self):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(DOCKER_SOCK)
    conn = Conn("localhost", timeout=120)
    conn.request(method, path, body=body, headers={"Content-Type": content_type})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def load_image_beside(base_ref, tag, env, labels):
    """Loads, without any layer in the archive, an image with base_ref's layers and a config of
    our own (its own id) named `tag`: an image present on the host that nobody pulled."""
    status, base = docker("GET", f"/images/{base_ref}/json")
    assert status == 200, base
    config = {"architecture": base["Architecture"], "os": base["Os"], "created": base["Created"],
              "config": {"Env": env, "Labels": labels},
              "rootfs": {"type": "layers", "diff_ids": base["RootFS"]["Layers"]}, "history": []}
    raw = json.dumps(config).encode()
    name = hashlib.sha256(raw).hexdigest() + ".json"
    manifest = json.dumps([{"Config": name, "RepoTags": [tag],
                            "Layers": [f"{i}/layer.tar" for i in range(len(base["RootFS"]["Layers"]))]}]).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for n, data in ((name, raw), ("manifest.json", manifest)):
            info = tarfile.TarInfo(n)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    status, answer = docker_raw("POST", "/images/load?quiet=1", buf.getvalue())
    assert status == 200 and b"error" not in answer, answer
    status, img = docker("GET", f"/images/{tag}/json")
    assert status == 200, img
    return img


def images_labelled(label):
    query = urllib.parse.quote(json.dumps({"label": [label]}))
    status, body = docker("GET", "/images/json?all=true&filters=" + query)
    assert status == 200, body
    return body or []


@pytest.fixture(scope="module")
def orgs(daemon):
    a_org, a = new_org_member(daemon, "snapshot-owner")
    b_org, b = new_org_member(daemon, "snapshot-thief")
    return {"a_org": a_org, "a": a, "b_org": b_org, "b": b}


@pytest.fixture(scope="module")
def snap_a(daemon, orgs):
    """A's sandbox (a secret in its environment and one in a file) and A's snapshot `snapA`."""
    a = orgs["a"]
    src = a.create_sandbox(env={"MYSECRET": SECRET_ENV})
    r = a.exec(src["id"], command=f"echo {SECRET_FILE} > /root/secret.txt && echo $HTTP_PROXY")
    assert r["exit_code"] == 0, r
    proxy_url = r["stdout"].strip()
    credential = proxy_url.split("//", 1)[1].split("@", 1)[0].split(":", 1)[1]
    assert len(credential) >= 16, proxy_url
    r = a.post("/v1/snapshots", {"sandbox_id": src["id"], "name": "snapA"})
    assert r.status == 201, r
    snap = r.json()
    [image] = images_labelled(f"io.sandfort.snapshot={snap['id']}")
    [tag] = image["RepoTags"]
    added = []  # tags this module adds to A's image: removed again
    yield {"src": src, "snap": snap, "image_id": image["Id"], "tag": tag, "credential": credential,
           "container_id": docker_container(src["id"])["Id"], "added_tags": added}
    for t in added:
        docker("DELETE", f"/images/{t}")
    a.delete(f"/v1/sandboxes/{src['id']}")
    a.delete("/v1/snapshots/snapA")


@pytest.fixture(scope="module")
def outside_image():
    """An image from a registry outside images.allowed_registries, present on the host."""
    img = load_image_beside("sandfort/base:bookworm", "quay.io/sandfort-attack/outside:1",
                            ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "OUTSIDE=1"], {})
    yield img
    docker("DELETE", "/images/quay.io/sandfort-attack/outside:1")


def assert_refused(daemon, client, snapshot, statuses=(400, 404)):
    """Refused for both wait modes, with the API's error shape, and nothing made."""
    before_rows = client.get("/v1/sandboxes?limit=1000").json()["items"]
    before_containers = len(docker_containers_of(daemon))
    for wait in (True, False):
        r = client.post("/v1/sandboxes", {"snapshot": snapshot, "wait": wait})
        assert r.status in statuses, (snapshot, wait, r)
        err = r.json()["error"]
        assert err["code"] == {400: "invalid_argument", 404: "not_found"}[r.status], (snapshot, err)
        assert SECRET_FILE not in r.body.decode()
    assert client.get("/v1/sandboxes?limit=1000").json()["items"] == before_rows, snapshot
    assert len(docker_containers_of(daemon)) == before_containers, snapshot
    return r


def test_the_reproduction_sha256_prefixes_reach_no_image(daemon, orgs, snap_a):
    b = orgs["b"]
    # Sixteen one-digit prefixes, one of them A's, then one more digit: every image on the host.
    for digit in "0123456789abcdef":
        assert_refused(daemon, b, f"sha256:{digit}", statuses=(400,))
    hex_id = snap_a["image_id"].split(":", 1)[1]
    for snapshot in (f"sha256:{hex_id[:2]}", f"sha256:{hex_id[:12]}", f"sha256:{hex_id}", hex_id[:12], hex_id,
                     hex_id[:1], f"sha512:{hex_id[:4]}", f"docker.io/library/sha256:{hex_id[:4]}"):
        assert_refused(daemon, b, snapshot, statuses=(400,))


def test_a_snapshot_image_under_any_name_is_404(daemon, orgs, snap_a):
    b = orgs["b"]
    tag, hex_id = snap_a["tag"], snap_a["image_id"].split(":", 1)[1]
    repo = tag.split(":")[0]
    for snapshot in (tag, repo, "docker.io/" + tag, f"{repo}@sha256:{hex_id}", snap_a["snap"]["id"], "snapA"):
        r = assert_refused(daemon, b, snapshot)
        assert r.status in (400, 404), r
    # A tag someone added on the host (docker tag): still A's snapshot, still not B's.
    status, body = docker("POST", f"/images/{snap_a['image_id']}/tag?repo=innocent-looking&tag=v1")
    assert status == 201, body
    snap_a["added_tags"].append("innocent-looking:v1")
    for snapshot in ("innocent-looking:v1", "docker.io/library/innocent-looking:v1"):
        assert_refused(daemon, b, snapshot, statuses=(404,))
    # A's snapshot stays A's to delete: no sandbox of B's holds it.
    assert orgs["a"].get("/v1/snapshots/snapA").json()["state"] == "ready"


def test_an_image_outside_the_allowed_registries_by_id_is_refused(daemon, orgs, outside_image):
    b = orgs["b"]
    hex_id = outside_image["Id"].split(":", 1)[1]
    for snapshot in (outside_image["Id"], f"sha256:{hex_id[:12]}", hex_id[:12], hex_id,
                     "quay.io/sandfort-attack/outside:1"):
        assert_refused(daemon, b, snapshot, statuses=(400,))


def test_a_containers_labels_are_sandfortds_own(daemon, orgs):
    """An image carrying sandfort's label keys (a public image may say anything) gives them to
    no container: each one sandfortd does not set is blanked."""
    b = orgs["b"]
    path = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    labels = {"io.sandfort.pool": "1", "io.sandfort.network": "1", "io.sandfort.volume": "vol-x",
              "io.sandfort.sandbox": "sbx-00000000000000bb", "org.example.other": "x"}
    try:
        load_image_beside("sandfort/base:bookworm", "sandfort-attack/labelled:1", path, labels)
        # One that says it is a snapshot is none to use.
        load_image_beside("sandfort/base:bookworm", "sandfort-attack/snapshot-like:1", path,
                          {"io.sandfort.snapshot": "snap-00000000000000aa"})
        assert_refused(daemon, b, "sandfort-attack/snapshot-like:1", statuses=(404,))
        sbx = b.create_sandbox(snapshot="sandfort-attack/labelled:1")
        try:
            got = docker_container(sbx["id"])["Config"]["Labels"]
            assert got["io.sandfort.sandbox"] == sbx["id"] and got["io.sandfort.org"] == orgs["b_org"]["id"]
            inherited = {k: v for k, v in got.items() if k not in SANDFORTD_LABELS and v != ""}
            assert inherited == {}, got
        finally:
            assert b.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    finally:
        docker("DELETE", "/images/sandfort-attack/labelled:1")
        docker("DELETE", "/images/sandfort-attack/snapshot-like:1")


def test_the_owner_reaches_its_snapshot_by_id_and_name_only(daemon, orgs, snap_a):
    a = orgs["a"]
    for snapshot in ("snapA", snap_a["snap"]["id"]):
        child = a.create_sandbox(snapshot=snapshot)
        try:
            r = a.exec(child["id"], command='cat /root/secret.txt; echo "[$MYSECRET]"')
            assert r["stdout"] == f"{SECRET_FILE}\n[]\n", r
            got = docker_container(child["id"])["Config"]["Labels"]
            assert {k: v for k, v in got.items() if k not in SANDFORTD_LABELS and v != ""} == {}, got
            assert got["io.sandfort.snapshot"] == "", got
        finally:
            assert a.delete(f"/v1/sandboxes/{child['id']}").status == 204
    # The image's own name is no way in, for its owner either.
    assert_refused(daemon, a, snap_a["tag"], statuses=(404,))


def test_a_snapshot_image_keeps_nothing_of_the_sandbox(orgs, snap_a):
    status, inspect = docker("GET", f"/images/{snap_a['image_id']}/json")
    assert status == 200, inspect
    status, history = docker("GET", f"/images/{snap_a['image_id']}/history")
    assert status == 200, history
    text = json.dumps(inspect) + json.dumps(history)
    src_id = snap_a["src"]["id"]
    for needle in (SECRET_ENV, "MYSECRET", snap_a["credential"], src_id, src_id[4:], orgs["a_org"]["id"],
                   snap_a["container_id"], snap_a["container_id"][:12], "HTTP_PROXY", "http_proxy",
                   "/.sandfort/agent", "snapA", "snapshot-owner"):
        assert needle not in text, (needle, text)
    assert inspect["Config"]["Labels"] == {"io.sandfort.instance": inspect["Config"]["Labels"]["io.sandfort.instance"],
                                           "io.sandfort.snapshot": snap_a["snap"]["id"]}
    assert inspect["Container"] == "" and inspect["Comment"] == "" and inspect["Author"] == ""
    assert not inspect["ContainerConfig"].get("Env") and not inspect["ContainerConfig"].get("Labels")
    assert inspect["ContainerConfig"].get("Hostname", "") == ""
    # The commit's own image (which held all of that) is gone.
    assert images_labelled(f"io.sandfort.snapshot={snap_a['snap']['id']}.commit") == []


def test_the_owner_deletes_its_snapshot_after_the_attempts(orgs, snap_a):
    a = orgs["a"]
    for t in snap_a["added_tags"]:
        docker("DELETE", f"/images/{t}")
    snap_a["added_tags"].clear()
    r = a.delete("/v1/snapshots/snapA")
    assert r.status == 204, r
    assert images_labelled(f"io.sandfort.snapshot={snap_a['snap']['id']}") == []
