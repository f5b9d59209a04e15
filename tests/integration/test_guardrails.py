"""Guardrails against the real daemon and Docker (docs/guardrails.md): an agent loop creating
sandboxes until its organization's quota refuses it, an image outside the organization's policy,
an organization required to run gVisor, an idle sandbox stopped and later deleted, a TTL, and the
kill switch stopping a busy organization while another keeps working. Each decision is looked up
in the audit chain."""

import subprocess
import threading
import time

import pytest

from sandfort_harness import Daemon, docker_container, require_runsc


@pytest.fixture(scope="module")
def daemon():
    d = Daemon({"guardrails": {"max_sandboxes": 3, "delete_grace_s": 3}}).start()
    yield d
    d.stop()
    d.cleanup()


def new_org(daemon, name, role="admin"):
    admin = daemon.admin()
    org = admin.post("/v1/orgs", {"name": name}).json()
    key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "k", "role": role}).json()["key"]
    return org, daemon.client(key)


def events(client, action):
    return client.get(f"/v1/audit?action={action}&limit=1000").json()["items"]


def wait_for(predicate, timeout=30, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_an_agent_loop_creates_sandboxes_until_its_quota_refuses(daemon):
    org, client = new_org(daemon, "loop")
    made, refusal = [], None
    for _ in range(10):
        r = client.post("/v1/sandboxes", {"wait": False})
        if r.status != 201:
            refusal = r
            break
        made.append(r.json()["id"])
    assert len(made) == 3, made
    assert refusal.status == 429, refusal
    err = refusal.json()["error"]
    assert err["code"] == "quota_exceeded" and "sandboxes" in err["message"] and "3 of 3" in err["message"], err
    usage = client.get(f"/v1/orgs/{org['id']}/limits").json()
    assert usage["limits"]["max_sandboxes"] == 3 and usage["usage"]["sandboxes"] == 3, usage
    denied = events(client, "guardrail.quota_exceeded")
    assert len(denied) == 1 and denied[0]["outcome"] == "denied" and denied[0]["details"]["in_use"] == 3
    # Another organization is not affected; deleting one makes room.
    _, other = new_org(daemon, "loop-other")
    sbx = other.create_sandbox()
    other.delete(f"/v1/sandboxes/{sbx['id']}")
    assert client.delete(f"/v1/sandboxes/{made[0]}").status == 204
    r = client.post("/v1/sandboxes", {"wait": False})
    assert r.status == 201, r
    for sid in made[1:] + [r.json()["id"]]:
        client.delete(f"/v1/sandboxes/{sid}")


def test_the_operator_sets_limits_and_images_outside_the_policy_are_refused(daemon):
    org, client = new_org(daemon, "images")
    admin = daemon.admin()
    # Only the operator sets an organization's limits; its admin reads them.
    r = client.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"allowed_images": ["*"]})
    assert r.status == 403, r
    r = admin.request("PUT", f"/v1/orgs/{org['name']}/limits", body={"allowed_images": ["sandfort/*"], "max_cpus": 2})
    assert r.status == 200, r
    assert r.json()["limits"]["allowed_images"] == ["sandfort/*"] and set(r.json()["own"]) == {"allowed_images", "max_cpus"}
    for image in ("python:3.12-slim", "docker.io/sandfort/base:bookworm"):
        r = client.post("/v1/sandboxes", {"snapshot": image, "wait": False})
        assert r.status == 403 and r.json()["error"]["code"] == "image_not_allowed", r
    assert len(events(client, "guardrail.image_not_allowed")) == 2
    # CPUs: 2 allowed, 1.5 asked twice.
    sbx = client.create_sandbox(resources={"cpus": 1.5})
    r = client.post("/v1/sandboxes", {"resources": {"cpus": 1.5}, "wait": False})
    assert r.status == 429 and "cpus" in r.json()["error"]["message"], r
    # Two stopped sandboxes started at once, room for one: exactly one starts.
    second = client.create_sandbox(resources={"cpus": 0.5})
    for s in (sbx, second):
        assert client.post(f"/v1/sandboxes/{s['id']}/stop").status == 200
    r = admin.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"max_cpus": 1.5})
    assert r.status == 200, r
    answers = []
    starters = [threading.Thread(target=lambda s=s: answers.append(client.post(f"/v1/sandboxes/{s['id']}/start").status))
                for s in (sbx, second)]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    assert sorted(answers) == [200, 429], answers
    assert client.get(f"/v1/orgs/{org['id']}/limits").json()["usage"]["running"] == 1
    for s in (sbx, second):
        client.delete(f"/v1/sandboxes/{s['id']}")
    # null goes back to the configured default.
    r = admin.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"allowed_images": None})
    assert r.json()["limits"]["allowed_images"] == ["*"] and r.json()["own"] == ["max_cpus"], r
    r = admin.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"max_sandbox": 1})
    assert r.status == 400, r


def containers_of_org(org_id):
    """Every container, running or not, labelled as the organization's (as `docker ps -a` lists them)."""
    r = subprocess.run(["docker", "ps", "-a", "-q", "--filter", f"label=io.sandfort.org={org_id}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def gvisor_only_org(daemon, name):
    """An organization the operator requires to run gVisor: (org, its admin, a member)."""
    org, admin = new_org(daemon, name)
    key = daemon.admin().post(f"/v1/orgs/{org['id']}/api-keys", {"name": "m", "role": "member"}).json()["key"]
    r = daemon.admin().request("PUT", f"/v1/orgs/{org['id']}/limits", body={"allowed_runtimes": ["gvisor"]})
    assert r.status == 200, r
    assert r.json()["limits"]["allowed_runtimes"] == ["gvisor"] and r.json()["own"] == ["allowed_runtimes"], r
    return org, admin, daemon.client(key)


def test_the_operator_requires_gvisor_and_a_runc_create_is_refused_with_nothing_made(daemon):
    org, admin = new_org(daemon, "runtimes")
    operator = daemon.admin()
    limits = admin.get(f"/v1/orgs/{org['id']}/limits").json()
    assert limits["limits"]["allowed_runtimes"] == ["runc", "gvisor"] and limits["own"] == [], limits
    # Only the operator sets it; an empty, unknown or repeated list is refused and changes nothing.
    r = admin.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"allowed_runtimes": ["runc"]})
    assert r.status == 403, r
    for bad in ([], ["kata"], ["gvisor", "gvisor"], "gvisor"):
        r = operator.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"allowed_runtimes": bad})
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", (bad, r)
    assert admin.get(f"/v1/orgs/{org['id']}/limits").json()["own"] == []

    org, admin, member = gvisor_only_org(daemon, "gvisor-only")
    shown = admin.get(f"/v1/orgs/{org['id']}/limits").json()
    assert shown["limits"]["allowed_runtimes"] == ["gvisor"] and shown["own"] == ["allowed_runtimes"], shown
    [change] = events(admin, "org.limits")
    assert change["details"]["allowed_runtimes"] == ["gvisor"], change
    for wait in (True, False):
        r = member.post("/v1/sandboxes", {"runtime": "runc", "wait": wait})
        assert r.status == 403, r
        err = r.json()["error"]
        rid = r.headers.get("X-Request-Id") or r.headers.get("x-request-id")
        assert err["code"] == "runtime_not_allowed" and err["request_id"] == rid, err
        assert "runtime runc is not allowed" in err["message"] and '["gvisor"]' in err["message"], err
    # Nothing was made: no container of the organization's, running or not, and no sandbox row.
    assert containers_of_org(org["id"]) == []
    assert member.get("/v1/sandboxes").json()["items"] == []
    assert admin.get(f"/v1/orgs/{org['id']}/limits").json()["usage"]["sandboxes"] == 0
    denied = events(admin, "guardrail.runtime_not_allowed")
    assert len(denied) == 2 and all(e["outcome"] == "denied" and e["details"]["runtime"] == "runc" and
                                    e["details"]["allowed"] == ["gvisor"] for e in denied), denied

    # null: back to the configured default, which allows runc again and names it for a bare create.
    r = operator.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"allowed_runtimes": None})
    assert r.status == 200 and r.json()["limits"]["allowed_runtimes"] == ["runc", "gvisor"] and r.json()["own"] == []
    sbx = member.create_sandbox(runtime="runc")
    try:
        assert sbx["runtime"] == "runc" and sbx["state"] == "started", sbx
        assert len(containers_of_org(org["id"])) == 1
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_a_create_naming_no_runtime_in_a_gvisor_only_organization_gets_gvisor(daemon):
    require_runsc()  # fails under CI when missing
    org, admin, member = gvisor_only_org(daemon, "gvisor-default")
    sbx = member.create_sandbox()  # the daemon's default_runtime is runc
    try:
        assert sbx["runtime"] == "gvisor" and sbx["state"] == "started", sbx
        assert docker_container(sbx["id"])["HostConfig"]["Runtime"] == "runsc"
        r = member.exec(sbx["id"], argv=["cat", "/proc/net/dev"])
        assert r["exit_code"] == 0 and "eth0" not in r["stdout"], r  # gVisor's: no interface but lo
        # Stopped and started again, it stays on gVisor, which the policy allows.
        assert member.post(f"/v1/sandboxes/{sbx['id']}/stop").status == 200
        assert member.post(f"/v1/sandboxes/{sbx['id']}/start").status == 200
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")
    assert containers_of_org(org["id"]) == []


def test_a_stopped_runc_sandbox_is_not_started_once_gvisor_is_required(daemon):
    org, admin = new_org(daemon, "runc-then-gvisor")
    sbx = admin.create_sandbox(runtime="runc")
    operator = daemon.admin()
    try:
        assert admin.post(f"/v1/sandboxes/{sbx['id']}/stop").status == 200
        r = operator.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"allowed_runtimes": ["gvisor"]})
        assert r.status == 200, r
        r = admin.post(f"/v1/sandboxes/{sbx['id']}/start")
        assert r.status == 403 and r.json()["error"]["code"] == "runtime_not_allowed", r
        assert sbx["id"] in r.json()["error"]["message"], r
        assert admin.get(f"/v1/sandboxes/{sbx['id']}").json()["state"] == "stopped"
        [denied] = events(admin, "guardrail.runtime_not_allowed")
        assert denied["target"] == sbx["id"], denied
        r = operator.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"allowed_runtimes": ["runc", "gvisor"]})
        assert r.status == 200, r
        assert admin.post(f"/v1/sandboxes/{sbx['id']}/start").status == 200
    finally:
        admin.delete(f"/v1/sandboxes/{sbx['id']}")


def test_an_idle_sandbox_is_stopped_then_deleted_and_a_used_one_is_not(daemon):
    org, client = new_org(daemon, "idle")
    idle = client.create_sandbox(idle_timeout_s=2)
    used = client.create_sandbox(idle_timeout_s=2)
    assert idle["idle_timeout_s"] == 2
    stop_using = threading.Event()

    def keep_using():
        while not stop_using.is_set():
            client.exec(used["id"], argv=["true"])
            time.sleep(0.5)

    user = threading.Thread(target=keep_using)
    user.start()
    try:
        stopped = wait_for(lambda: (s := client.get(f"/v1/sandboxes/{idle['id']}").json())["state"] == "stopped" and s,
                           what="the idle sandbox to stop")
        assert "idle for" in stopped["error_message"], stopped
        assert client.get(f"/v1/sandboxes/{used['id']}").json()["state"] == "started"
    finally:
        stop_using.set()
        user.join()
    wait_for(lambda: client.get(f"/v1/sandboxes/{idle['id']}").status == 404, what="the idle sandbox to be deleted")
    stops = [e for e in events(client, "sandbox.stop") if e["target"] == idle["id"]]
    assert len(stops) == 1 and stops[0]["actor"] == "system" and "delete_after" in stops[0]["details"], stops
    deletes = [e for e in events(client, "sandbox.delete") if e["target"] == idle["id"]]
    assert len(deletes) == 1 and deletes[0]["actor"] == "system", deletes
    # PATCH changes it; 0 means never.
    r = client.request("PATCH", f"/v1/sandboxes/{used['id']}", body={"idle_timeout_s": 0})
    assert r.status == 200 and r.json()["idle_timeout_s"] == 0, r
    client.delete(f"/v1/sandboxes/{used['id']}")


def test_a_long_command_or_an_open_terminal_keeps_a_sandbox_busy(daemon):
    _, client = new_org(daemon, "busy")
    direct = client.create_sandbox(idle_timeout_s=2)
    session = client.create_sandbox(idle_timeout_s=2)
    results = {}
    runs = [threading.Thread(target=lambda: results.update(direct=client.post(
                f"/v1/sandboxes/{direct['id']}/process/exec", {"command": "sleep 9; echo done", "timeout_s": 30}))),
            threading.Thread(target=lambda: results.update(session=client.post(
                f"/v1/sandboxes/{session['id']}/sessions/default/exec", {"command": "sleep 9; echo done", "timeout_s": 30})))]
    for t in runs:
        t.start()
    for t in runs:
        t.join(60)
    # 9 s of one command each, past two reaper rounds and a 2 s idle timeout: not stopped.
    assert results["direct"].status == 200 and results["direct"].json()["stdout"] == "done\n", results["direct"]
    assert results["session"].status == 200 and results["session"].json()["stdout"] == "done\n", results["session"]
    for s in (direct, session):
        assert client.get(f"/v1/sandboxes/{s['id']}").json()["state"] == "started"
        client.delete(f"/v1/sandboxes/{s['id']}")


def test_a_sandbox_past_its_ttl_is_stopped_then_deleted(daemon):
    _, client = new_org(daemon, "ttl")
    sbx = client.create_sandbox(ttl_s=2, idle_timeout_s=0)
    wait_for(lambda: client.get(f"/v1/sandboxes/{sbx['id']}").status == 404, what="the TTL deletion")
    # With a 3 s grace and the reaper's 5 s round, it may be stopped first or deleted at once.
    stops = [e for e in events(client, "sandbox.stop") if e["target"] == sbx["id"]]
    assert all(e["actor"] == "system" and "TTL reached" in e["details"]["message"] for e in stops), stops
    deletes = [e for e in events(client, "sandbox.delete") if e["target"] == sbx["id"]]
    assert len(deletes) == 1 and deletes[0]["actor"] == "system", deletes


def test_the_kill_switch_stops_a_busy_organization_while_another_keeps_working(daemon):
    org, client = new_org(daemon, "killed")
    _, other = new_org(daemon, "bystander")
    busy = [client.create_sandbox(idle_timeout_s=0) for _ in range(2)]
    bystander = other.create_sandbox(idle_timeout_s=0)
    # One of them is running a long command when the switch is thrown.
    long_run = {}
    runner = threading.Thread(target=lambda: long_run.update(
        r=client.post(f"/v1/sandboxes/{busy[0]['id']}/process/exec", {"command": "sleep 60", "timeout_s": 90})))
    runner.start()
    time.sleep(1)
    t = time.time()
    r = client.post(f"/v1/orgs/{org['id']}/stop-all")
    took = time.time() - t
    assert r.status == 200 and sorted(r.json()["stopped"]) == sorted(s["id"] for s in busy), r
    runner.join(30)
    assert not runner.is_alive(), "the long command outlived the kill switch"
    assert took < 30, took
    for s in busy:
        assert client.get(f"/v1/sandboxes/{s['id']}").json()["state"] == "stopped"
    r = client.post("/v1/sandboxes", {"wait": False})
    assert r.status == 409 and "kill switch" in r.json()["error"]["message"], r
    assert client.post(f"/v1/sandboxes/{busy[1]['id']}/start").status == 409
    # The other organization keeps working throughout.
    assert other.exec(bystander["id"], argv=["echo", "fine"])["stdout"] == "fine\n"
    extra = other.create_sandbox(idle_timeout_s=0)
    limits = client.get(f"/v1/orgs/{org['id']}/limits").json()
    assert limits["stopped"]["by_superadmin"] is False, limits
    # Lifted by the organization's admin (who set it), sandboxes may start again.
    assert client.delete(f"/v1/orgs/{org['id']}/stop-all").status == 204
    assert client.post(f"/v1/sandboxes/{busy[1]['id']}/start").status == 200
    assert [e["action"] for e in events(client, "org.stop_all")] == ["org.stop_all"]
    assert len(events(client, "guardrail.org_stopped")) == 2
    assert len(events(client, "org.stop_all_lifted")) == 1
    for s in busy:
        client.delete(f"/v1/sandboxes/{s['id']}")
    for s in (bystander, extra):
        other.delete(f"/v1/sandboxes/{s['id']}")


def test_the_operators_kill_switch_is_lifted_only_by_the_operator(daemon):
    org, client = new_org(daemon, "operator-stop")
    admin = daemon.admin()
    assert admin.post(f"/v1/orgs/{org['id']}/stop-all").status == 200
    assert client.get(f"/v1/orgs/{org['id']}/limits").json()["stopped"]["by_superadmin"] is True
    assert client.delete(f"/v1/orgs/{org['id']}/stop-all").status == 403
    assert admin.delete(f"/v1/orgs/{org['id']}/stop-all").status == 204
    # Another organization's admin cannot even see it.
    _, stranger = new_org(daemon, "stranger")
    assert stranger.post(f"/v1/orgs/{org['id']}/stop-all").status == 404
    assert stranger.get(f"/v1/orgs/{org['id']}/limits").status == 404


def test_volume_and_snapshot_quotas_refuse_before_docker_and_a_delete_makes_room(daemon):
    org, client = new_org(daemon, "storage-quota")
    admin = daemon.admin()
    # Defaults until the operator sets the organization's own; its admin cannot.
    limits = client.get(f"/v1/orgs/{org['id']}/limits").json()
    assert limits["limits"]["max_volumes"] == 20 and limits["limits"]["max_snapshots"] == 20, limits
    assert limits["usage"]["volumes"] == 0 and limits["usage"]["snapshots"] == 0, limits
    assert client.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"max_volumes": 100}).status == 403
    r = admin.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"max_volumes": 2, "max_snapshots": 1})
    assert r.status == 200, r
    assert r.json()["limits"]["max_volumes"] == 2 and r.json()["limits"]["max_snapshots"] == 1, r.json()
    assert set(r.json()["own"]) == {"max_volumes", "max_snapshots"}, r.json()

    for name in ("one", "two"):
        r = client.post("/v1/volumes", {"name": name})
        assert r.status == 201, r
    r = client.post("/v1/volumes", {"name": "three"})
    assert r.status == 429, r
    err = r.json()["error"]
    assert err["code"] == "quota_exceeded" and "volumes" in err["message"] and "2 of 2" in err["message"], err
    assert client.get("/v1/volumes/three").status == 404
    assert client.get(f"/v1/orgs/{org['id']}/limits").json()["usage"]["volumes"] == 2
    denied = events(client, "guardrail.quota_exceeded")
    assert len(denied) == 1 and denied[0]["outcome"] == "denied", denied
    assert denied[0]["details"]["quota"] == "volumes" and denied[0]["details"]["in_use"] == 2, denied
    assert client.delete("/v1/volumes/one").status == 204
    r = client.post("/v1/volumes", {"name": "three"})
    assert r.status == 201, r

    sbx = client.create_sandbox(idle_timeout_s=0)
    try:
        r = client.post("/v1/snapshots", {"sandbox_id": sbx["id"], "name": "first"})
        assert r.status == 201, r
        r = client.post("/v1/snapshots", {"sandbox_id": sbx["id"], "name": "second"})
        assert r.status == 429, r
        err = r.json()["error"]
        assert err["code"] == "quota_exceeded" and "snapshots" in err["message"] and "1 of 1" in err["message"], err
        assert client.get("/v1/snapshots/second").status == 404
        usage = client.get(f"/v1/orgs/{org['id']}/limits").json()["usage"]
        assert usage["snapshots"] == 1 and usage["volumes"] == 2, usage
        assert client.delete("/v1/snapshots/first").status == 204
        r = client.post("/v1/snapshots", {"sandbox_id": sbx["id"], "name": "second"})
        assert r.status == 201, r
        assert client.delete("/v1/snapshots/second").status == 204
    finally:
        client.delete(f"/v1/sandboxes/{sbx['id']}")
    assert len(events(client, "guardrail.quota_exceeded")) == 2

    # null goes back to the configured default.
    r = admin.request("PUT", f"/v1/orgs/{org['id']}/limits", body={"max_volumes": None})
    assert r.status == 200 and r.json()["limits"]["max_volumes"] == 20 and r.json()["own"] == ["max_snapshots"], r
    for name in ("two", "three"):
        assert client.delete(f"/v1/volumes/{name}").status == 204
