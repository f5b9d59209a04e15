"""Images that are not on the engine are pulled: a real registry (Debian's docker-registry) on
loopback stands in for Docker Hub, which this machine cannot reach. A loopback registry is refused
unless the operator lists it exactly in images.allowed_registries, so these tests run their own
daemon that does (a local mirror); the shared daemon refuses it."""

import os
import shutil
import subprocess
import tarfile
import tempfile
import time

import pytest

from sandfort_harness import Daemon, docker, docker_container, free_port

REGISTRY = "/usr/bin/docker-registry"


@pytest.fixture(scope="module")
def registry():
    assert os.path.exists(REGISTRY), "docker-registry is missing: run scripts/setup"
    root = tempfile.mkdtemp(prefix="sf-reg-")
    port = free_port()
    config = os.path.join(root, "config.yml")
    with open(config, "w") as f:
        f.write(f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\n"
                f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([REGISTRY, "serve", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        if subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}/v2/"], capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    # A one-file image is enough: the agent is bind-mounted and tini comes from the engine.
    rootfs = os.path.join(root, "rootfs")
    os.makedirs(rootfs)
    with open(os.path.join(rootfs, "hello.txt"), "w") as f:
        f.write("pulled\n")
    tar_path = os.path.join(root, "image.tar")
    with tarfile.open(tar_path, "w") as t:
        t.add(rootfs, arcname=".")
    ref = f"127.0.0.1:{port}/sandfort/tiny:1"
    subprocess.run(["docker", "import", tar_path, ref], check=True, capture_output=True)
    subprocess.run(["docker", "push", ref], check=True, capture_output=True)
    subprocess.run(["docker", "rmi", ref], check=True, capture_output=True)
    yield {"port": port, "ref": ref}
    subprocess.run(["docker", "rmi", "-f", ref], capture_output=True)
    proc.kill()
    proc.wait()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def mirror_member(registry):
    """A member key on a daemon whose operator allowed the local registry as a mirror."""
    d = Daemon({"images": {"allowed_registries": [f"127.0.0.1:{registry['port']}", "docker.io"]}}).start()
    try:
        admin = d.admin()
        r = admin.post("/v1/orgs", {"name": "mirrored"})
        assert r.status == 201, r
        r = admin.post(f"/v1/orgs/{r.json()['id']}/api-keys", {"name": "m", "role": "member"})
        assert r.status == 201, r
        yield d.client(r.json()["key"])
    finally:
        d.stop_and_cleanup()


def test_a_loopback_registry_not_listed_is_400_and_nothing_is_pulled(member, registry):
    r = member.post("/v1/sandboxes", {"snapshot": registry["ref"], "wait": True})
    assert r.status == 400, r
    assert "images.allowed_registries" in r.json()["error"]["message"]
    assert docker("GET", f"/images/{registry['ref']}/json")[0] == 404


def test_missing_image_is_pulled_then_started(mirror_member, registry):
    member = mirror_member
    ref = registry["ref"]
    assert docker("GET", f"/images/{ref}/json")[0] == 404
    r = member.post("/v1/sandboxes", {"snapshot": ref, "wait": True})
    assert r.status == 201, r
    sbx = r.json()
    try:
        assert sbx["state"] == "started" and sbx["snapshot"] == ref
        status, pulled = docker("GET", f"/images/{ref}/json")
        assert status == 200, pulled
        # Made from the pulled image by its id: Docker is handed no name to resolve its own way.
        assert docker_container(sbx["id"])["Config"]["Image"] == pulled["Id"]
        r = member.exec(sbx["id"], argv=["/.sandfort/agent", "--version"])
        assert r["exit_code"] == 0, r
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_image_missing_from_a_reachable_registry_is_404_naming_it(mirror_member, registry):
    member = mirror_member
    ref = f"127.0.0.1:{registry['port']}/sandfort/not-there:9"
    r = member.post("/v1/sandboxes", {"snapshot": ref, "wait": True})
    assert r.status == 404, r
    assert r.json()["error"]["code"] == "not_found"
    assert ref in r.json()["error"]["message"]
    status, containers = docker("GET", "/containers/json?all=true")
    assert all(c["Image"] != ref for c in containers)
    assert all(s["snapshot"] != ref for s in member.get("/v1/sandboxes?limit=1000").json()["items"])
