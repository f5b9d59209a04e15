"""Organizations have a life cycle, and keys a history: against the real daemon, Docker and SQLite.

disable → its keys get 403 at once and its sandboxes stop; enable → back; delete → its keys are
revoked (401), its sandboxes and their containers are gone, the row stays (state deleted, name
still taken); the superadmin organization can be neither. Keys record when they were last used
and never appear in the daemon's log."""

import time

from sandfort_harness import docker_container


def make_org(daemon, name):
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": name})
    assert r.status == 201, r
    org = r.json()
    assert org["state"] == "active"
    keys = {}
    for role in ("admin", "member"):
        r = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": role, "role": role})
        assert r.status == 201, r
        keys[role] = r.json()["key"]
    return org, keys


def test_disable_refuses_keys_and_stops_sandboxes_enable_restores(daemon):
    org, keys = make_org(daemon, "lifecycle-disable")
    member = daemon.client(keys["member"])
    sbx = member.create_sandbox()
    admin = daemon.admin()

    r = admin.post(f"/v1/orgs/{org['name']}/disable")
    assert r.status == 200, r
    assert r.json()["state"] == "disabled"
    r = member.get("/v1/sandboxes")
    assert r.status == 403 and b"disabled" in r.body, r
    assert daemon.client(keys["admin"]).get("/v1/whoami").status == 403
    assert docker_container(sbx["id"])["State"]["Running"] is False
    # No new keys for a disabled organization.
    assert admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "x"}).status == 409

    r = admin.post(f"/v1/orgs/{org['id']}/enable")
    assert r.status == 200 and r.json()["state"] == "active", r
    r = member.get(f"/v1/sandboxes/{sbx['id']}")
    assert r.status == 200 and r.json()["state"] == "stopped", r
    assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204


def test_delete_removes_sandboxes_revokes_keys_and_keeps_the_row(daemon):
    org, keys = make_org(daemon, "lifecycle-delete")
    member = daemon.client(keys["member"])
    started = member.create_sandbox()
    stopped = member.create_sandbox()
    assert member.post(f"/v1/sandboxes/{stopped['id']}/stop").status == 200
    containers = [docker_container(s["id"])["Id"] for s in (started, stopped)]
    admin = daemon.admin()

    r = admin.delete(f"/v1/orgs/{org['id']}")
    assert r.status == 204, r
    for key in keys.values():
        assert daemon.client(key).get("/v1/whoami").status == 401
    for cid in containers:
        from sandfort_harness import docker
        status, _ = docker("GET", f"/containers/{cid}/json")
        assert status == 404, cid
    listed = admin.get("/v1/orgs").json()["items"]
    assert org["id"] not in [o["id"] for o in listed]
    # Gone for good: deleting again is 404, and the name stays taken.
    assert admin.delete(f"/v1/orgs/{org['id']}").status == 404
    assert admin.post("/v1/orgs", {"name": org["name"]}).status == 409
    # Another organization was not touched.
    assert daemon.admin().get("/v1/whoami").status == 200


def test_the_superadmin_organization_cannot_be_disabled_or_deleted(daemon):
    admin = daemon.admin()
    me = admin.get("/v1/whoami").json()
    assert admin.post(f"/v1/orgs/{me['org_id']}/disable").status == 409
    assert admin.delete(f"/v1/orgs/{me['org_id']}").status == 409
    assert admin.delete("/v1/orgs/org-0000000000000000").status == 404
    assert admin.get("/v1/whoami").status == 200


def test_keys_record_last_use_and_never_reach_the_log(daemon):
    org, keys = make_org(daemon, "lifecycle-keys")
    org_admin = daemon.client(keys["admin"])
    listed = {k["name"]: k for k in org_admin.get("/v1/api-keys").json()["items"]}
    assert listed["member"]["last_used_at"] is None
    assert listed["admin"]["last_used_at"] is not None  # the call above used it

    assert daemon.client(keys["member"]).get("/v1/sandboxes").status == 200
    listed = {k["name"]: k for k in org_admin.get("/v1/api-keys").json()["items"]}
    assert listed["member"]["last_used_at"] is not None

    # Revocation takes effect on the very next request.
    member_id = listed["member"]["id"]
    assert org_admin.delete(f"/v1/api-keys/{member_id}").status == 204
    assert daemon.client(keys["member"]).get("/v1/sandboxes").status == 401

    time.sleep(0.2)
    log = open(daemon.log_path).read()
    for secret in keys.values():
        assert secret not in log
        assert secret[4:] not in log
