"""Sandbox lifecycle against the real Docker engine."""

import os
import time

from sandfort_harness import IMAGE, docker, docker_container


def test_create_wait_exec_delete_walkthrough(daemon, member):
    sbx = member.create_sandbox(snapshot=IMAGE)
    assert sbx["state"] == "started"
    assert sbx["id"].startswith("sbx-") and len(sbx["id"]) == 20
    container = docker_container(sbx["id"])
    assert container["State"]["Running"]
    # Nothing of the sandbox lives on the host: its agent socket is in a tmpfs of its own.
    assert container["HostConfig"]["Tmpfs"] == {"/run/sandfort": "rw,nosuid,nodev,noexec,size=1048576,nr_inodes=256,mode=1777"}
    assert not os.path.exists(os.path.join(daemon.state_dir, "sandboxes"))

    r = member.exec(sbx["id"], command="echo build; exit 7")
    assert r["exit_code"] == 7 and r["stdout"] == "build\n" and r["stderr"] == ""

    r = member.post(f"/v1/sandboxes/{sbx['id']}/process/code-run", {"language": "python", "code": "print(21 * 2)"})
    assert r.status == 200, r
    assert r.json()["exit_code"] == 0 and r.json()["stdout"] == "42\n"

    assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    assert docker_container(sbx["id"]) is None
    r = member.delete(f"/v1/sandboxes/{sbx['id']}")
    assert r.status == 404 and r.json()["error"]["code"] == "not_found"
    assert member.get(f"/v1/sandboxes/{sbx['id']}").status == 404


def test_create_without_wait_then_wait_for_started(member):
    r = member.post("/v1/sandboxes", {"wait": False})
    assert r.status == 201, r
    sbx = r.json()
    assert sbx["state"] in ("creating", "pulling")
    r = member.get(f"/v1/sandboxes/{sbx['id']}?wait_for=started&timeout_s=60")
    assert r.status == 200 and r.json()["state"] == "started", r
    assert member.exec(sbx["id"], command="true")["exit_code"] == 0
    assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204


def test_default_snapshot_and_requested_resources_apply(member):
    sbx = member.create_sandbox(resources={"cpus": 0.5, "memory_mb": 256, "pids": 128}, labels={"team": "x"},
                                env={"GREETING": "hello"}, workdir="/work")
    try:
        assert sbx["snapshot"] == IMAGE
        assert sbx["resources"] == {"cpus": 0.5, "memory_mb": 256, "pids": 128, "disk_mb": 10240}
        assert sbx["labels"] == {"team": "x"}
        host = docker_container(sbx["id"])["HostConfig"]
        assert host["NanoCpus"] == 500_000_000
        assert host["Memory"] == 256 << 20 and host["MemorySwap"] == 256 << 20
        assert host["PidsLimit"] == 128
        r = member.exec(sbx["id"], command="echo $GREETING; pwd")
        assert r["stdout"] == "hello\n/work\n"
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_resources_beyond_maxima_are_400_and_create_nothing(daemon, member):
    before = len(member.get("/v1/sandboxes?limit=1000").json()["items"])
    for resources in ({"cpus": 64}, {"memory_mb": 1 << 20}, {"pids": 10 ** 6}, {"cpus": 0}, {"memory_mb": 1},
                      {"disk_mb": 8}, {"disk_mb": 1 << 30}):
        r = member.post("/v1/sandboxes", {"resources": resources})
        assert r.status == 400, (resources, r)
        assert r.json()["error"]["code"] == "invalid_argument"
    assert len(member.get("/v1/sandboxes?limit=1000").json()["items"]) == before


def test_bad_fields_are_400(member):
    cases = [{"name": "has space"}, {"name": "sbx-looks-like-an-id"}, {"snapshot": "bad image!"},
             {"env": {"1BAD": "x"}}, {"env": {"A": 1}}, {"labels": "x"}, {"ttl_s": -5},
             {"egress_allowlist": ["not a host"]}, {"workdir": "relative"}, {"volumes": [{"name": "v"}]},
             {"resources": {"disk_mb": "100"}}]
    for body in cases:
        r = member.post("/v1/sandboxes", body)
        assert r.status == 400, (body, r)


def test_unknown_fields_are_refused_not_ignored(member):
    before = len(member.get("/v1/sandboxes?limit=1000").json()["items"])
    for body, named in (({"cpus": 0.5}, "'cpus'"), ({"image": "python:3.12"}, "'image'"),
                        ({"resources": {"cpu": 2}}, "'cpu'")):
        r = member.post("/v1/sandboxes", body)
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", (body, r)
        assert named in r.json()["error"]["message"], r
    assert len(member.get("/v1/sandboxes?limit=1000").json()["items"]) == before


def test_unknown_image_is_a_clear_error_and_leaves_nothing(daemon, member):
    # Docker Hub is unreachable here, so the engine's answer is "unavailable" (503); against a
    # reachable registry a missing image is 404 (test_image_pull.py).
    image = "sandfort/no-such-image:0"
    r = member.post("/v1/sandboxes", {"snapshot": image, "wait": True})
    assert r.status in (404, 503), r
    err = r.json()["error"]
    assert image.split(":")[0] in err["message"], err
    items = member.get("/v1/sandboxes?limit=1000").json()["items"]
    assert all(s["snapshot"] != image for s in items)
    status, body = docker("GET", "/containers/json?all=true")
    assert all(c["Image"] != image for c in body)


def test_unknown_image_without_wait_ends_in_error_state(member):
    r = member.post("/v1/sandboxes", {"snapshot": "sandfort/no-such-image:1", "wait": False})
    assert r.status == 201, r
    sid = r.json()["id"]
    r = member.get(f"/v1/sandboxes/{sid}?wait_for=started&timeout_s=60")
    assert r.json()["state"] == "error"
    assert "sandfort/no-such-image" in r.json()["error_message"]
    assert docker_container(sid) is None
    assert member.delete(f"/v1/sandboxes/{sid}").status == 204


def test_names_address_sandboxes_and_are_unique_per_org(daemon, org, member):
    sbx = member.create_sandbox(name="by-name")
    try:
        r = member.get("/v1/sandboxes/by-name")
        assert r.status == 200 and r.json()["id"] == sbx["id"]
        r = member.post("/v1/sandboxes", {"name": "by-name"})
        assert r.status == 409 and r.json()["error"]["code"] == "conflict"
        assert member.exec("by-name", command="echo ok")["stdout"] == "ok\n"
    finally:
        assert member.delete("/v1/sandboxes/by-name").status == 204


def test_another_orgs_sandbox_is_404(daemon, org, sandbox):
    admin = daemon.admin()
    other = admin.post("/v1/orgs", {"name": "intruders"}).json()
    key = admin.post(f"/v1/orgs/{other['id']}/api-keys", {"name": "k", "role": "admin"}).json()["key"]
    intruder = daemon.client(key)
    sid = sandbox["id"]
    for method, path, body in [("GET", f"/v1/sandboxes/{sid}", None), ("GET", "/v1/sandboxes/shared", None),
                               ("POST", f"/v1/sandboxes/{sid}/process/exec", {"command": "id"}),
                               ("POST", f"/v1/sandboxes/{sid}/stop", None),
                               ("DELETE", f"/v1/sandboxes/{sid}", None)]:
        r = intruder.request(method, path, body=body)
        assert r.status == 404, (method, path, r)
        assert r.json()["error"]["code"] == "not_found"
    assert intruder.get("/v1/sandboxes").json()["items"] == []
    assert docker_container(sid)["State"]["Running"]


def test_stop_then_exec_is_409_then_start_works(member):
    sbx = member.create_sandbox()
    sid = sbx["id"]
    try:
        member.exec(sid, command="echo kept > /root/file")
        r = member.post(f"/v1/sandboxes/{sid}/stop")
        assert r.status == 200 and r.json()["state"] == "stopped", r
        assert not docker_container(sid)["State"]["Running"]
        r = member.post(f"/v1/sandboxes/{sid}/process/exec", {"command": "true"})
        assert r.status == 409 and r.json()["error"]["code"] == "conflict", r
        r = member.post(f"/v1/sandboxes/{sid}/start")
        assert r.status == 200 and r.json()["state"] == "started", r
        assert member.exec(sid, command="cat /root/file")["stdout"] == "kept\n"
    finally:
        member.delete(f"/v1/sandboxes/{sid}")


def test_list_filters_and_pages(member):
    made = [member.create_sandbox(wait=False, labels={"batch": "list-test", "n": str(i)}) for i in range(3)]
    try:
        r = member.get("/v1/sandboxes?label=batch:list-test&limit=2")
        assert r.status == 200, r
        page = r.json()
        assert len(page["items"]) == 2 and page["next_cursor"]
        r2 = member.get(f"/v1/sandboxes?label=batch:list-test&limit=2&cursor={page['next_cursor']}").json()
        ids = {s["id"] for s in page["items"]} | {s["id"] for s in r2["items"]}
        assert ids == {s["id"] for s in made}
        r = member.get("/v1/sandboxes?label=batch:list-test,n:1").json()
        assert [s["id"] for s in r["items"]] == [made[1]["id"]]
        assert member.get("/v1/sandboxes?limit=0").status == 400
    finally:
        for s in made:
            member.get(f"/v1/sandboxes/{s['id']}?wait_for=started&timeout_s=60")
            member.delete(f"/v1/sandboxes/{s['id']}")


def test_ttl_stops_the_sandbox_and_says_when_it_goes(member):
    # Deletion after guardrails.delete_grace_s (1 h here) is test_guardrails.py's, on a short grace.
    sbx = member.create_sandbox(ttl_s=1)
    assert sbx["expires_at"] and sbx["ttl_s"] == 1
    deadline = time.time() + 30
    while time.time() < deadline and member.get(f"/v1/sandboxes/{sbx['id']}").json()["state"] != "stopped":
        time.sleep(0.5)
    stopped = member.get(f"/v1/sandboxes/{sbx['id']}").json()
    assert stopped["state"] == "stopped", stopped
    assert "TTL reached" in stopped["error_message"] and "deleted at" in stopped["error_message"], stopped
    assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    assert docker_container(sbx["id"]) is None


def test_viewer_reads_but_cannot_act(org, sandbox):
    viewer = org["viewer"]
    assert viewer.get(f"/v1/sandboxes/{sandbox['id']}").status == 200
    r = viewer.post(f"/v1/sandboxes/{sandbox['id']}/process/exec", {"command": "true"})
    assert r.status == 403 and r.json()["error"]["code"] == "permission_denied"
    assert viewer.delete(f"/v1/sandboxes/{sandbox['id']}").status == 403


def test_a_non_root_user_runs_the_sandbox(member):
    sbx = member.create_sandbox(user="nobody", workdir="/tmp")
    try:
        r = member.exec(sbx["id"], command="id -un; pwd")
        assert r["stdout"] == "nobody\n/tmp\n", r
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")
