"""Admission beyond one organization's quotas, against a real daemon and Docker (docs/limits.md,
docs/guardrails.md):

- Host memory: a daemon whose host can hold two sandboxes of MEMORY_MB (its reserve sized from
  this machine's MemTotal) refuses the third with 503 host_full — for every organization, with
  nothing made — and a stop or a delete makes room again; a start of a stopped sandbox is
  checked like a create.
- API keys: an organization's working keys are capped (429 quota_exceeded); revoked and expired
  ones do not count.
- The organization's rate limit: many keys of one organization together get the organization's
  bucket, not one bucket each; another organization is unaffected.
"""

import time
import uuid

import pytest

from sandfort_harness import Daemon, docker_containers_of

MEMORY_MB = 128


def mem_total_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


def new_org(daemon, *roles, **key_options):
    """An organization made by the operator and one key per role asked for: (org id, [client])."""
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": "adm-" + uuid.uuid4().hex[:8]})
    assert r.status == 201, r
    org_id = r.json()["id"]
    clients = []
    for i, role in enumerate(roles):
        r = admin.post(f"/v1/orgs/{org_id}/api-keys", {"name": f"{role}-{i}", "role": role, **key_options})
        assert r.status == 201, r
        clients.append(daemon.client(r.json()["key"]))
    return org_id, clients


def assert_error(r, status, code):
    assert r.status == status, r
    err = r.json()["error"]
    assert err["code"] == code and err["message"] and err["request_id"] == r.headers["X-Request-Id"], r
    return err


def audit_events(client, action):
    r = client.get(f"/v1/audit?action={action}&limit=1000")
    assert r.status == 200, r
    return r.json()["items"]


# ---------------------------------------------------------------- host memory

@pytest.fixture(scope="module")
def small_host():
    # What this host gives sandboxes: (MemTotal − reserve) × 1.0 = two and a half sandboxes.
    reserve = mem_total_mb() - (5 * MEMORY_MB) // 2
    d = Daemon({"host": {"memory_reserve_mb": reserve, "memory_overcommit": 1.0}}).start()
    yield d
    assert d.stop() == 0, d.log()
    d.cleanup()


def create(client, **spec):
    body = {"wait": True, "resources": {"memory_mb": MEMORY_MB, "cpus": 0.5, "pids": 64}, "idle_timeout_s": 0}
    body.update(spec)
    return client.post("/v1/sandboxes", body)


def test_the_host_admits_what_its_memory_holds_and_refuses_the_rest_with_host_full(small_host):
    _, [a, admin_a] = new_org(small_host, "member", "admin")
    _, [b] = new_org(small_host, "member")
    first, second = create(a), create(a)
    assert first.status == 201 and second.status == 201, (first, second)

    refused = create(a, name="third")
    err = assert_error(refused, 503, "host_full")
    assert f"{MEMORY_MB} MiB" in err["message"] and "retry" in err["message"], err
    # The host is full for every organization: the point is the host, not fairness.
    assert_error(create(b), 503, "host_full")
    # Refused before anything was made: no row (the name is free), no container.
    names = [s["name"] for s in a.get("/v1/sandboxes").json()["items"]]
    assert "third" not in names and len(names) == 2
    assert len(docker_containers_of(small_host)) == 2
    events = audit_events(admin_a, "guardrail.host_full")
    assert len(events) == 1 and events[0]["outcome"] == "denied"
    assert events[0]["details"]["memory_mb"] == MEMORY_MB

    # A stopped sandbox holds no memory: its room goes to another create ...
    sid = first.json()["id"]
    assert a.post(f"/v1/sandboxes/{sid}/stop").status == 200
    third = create(b)
    assert third.status == 201, third
    # ... so it cannot start again until something else makes room.
    assert_error(a.post(f"/v1/sandboxes/{sid}/start"), 503, "host_full")
    assert a.get(f"/v1/sandboxes/{sid}").json()["state"] == "stopped"
    assert a.delete(f"/v1/sandboxes/{second.json()['id']}").status == 204
    started = a.post(f"/v1/sandboxes/{sid}/start")
    assert started.status == 200 and started.json()["state"] == "started", started
    r = a.post(f"/v1/sandboxes/{sid}/exec", {"command": "echo alive"})
    assert r.status == 200 and r.json()["stdout"] == "alive\n", r


# ---------------------------------------------------------------- API keys and the organization's rate

@pytest.fixture(scope="module")
def capped():
    d = Daemon({"audit": {"summary_interval_s": 1},
                "guardrails": {"max_api_keys": 4,
                               "rate_limits": {"member": {"rate_per_s": 1, "burst": 5},
                                               "admin": {"rate_per_s": 1, "burst": 20},
                                               "org": {"rate_per_s": 1, "burst": 12}}}}).start()
    yield d
    assert d.stop() == 0, d.log()
    d.cleanup()


def test_an_organization_has_at_most_max_api_keys_working_keys(capped):
    org_id, [admin] = new_org(capped, "admin")
    made = []
    for i in range(3):
        r = admin.post("/v1/api-keys", {"name": f"k{i}", "role": "member"})
        assert r.status == 201, r
        made.append(r.json()["id"])
    err = assert_error(admin.post("/v1/api-keys", {"name": "one-too-many", "role": "member"}), 429, "quota_exceeded")
    assert "api_keys" in err["message"] and "4 of 4" in err["message"], err
    # The operator is held to the organization's cap too.
    assert_error(capped.admin().post(f"/v1/orgs/{org_id}/api-keys", {"name": "op", "role": "member"}),
                 429, "quota_exceeded")
    assert "one-too-many" not in [k["name"] for k in admin.get("/v1/api-keys").json()["items"]]
    # A revoked key does not count.
    assert admin.delete(f"/v1/api-keys/{made[0]}").status == 204
    r = admin.post("/v1/api-keys", {"name": "short-lived", "role": "viewer", "expires_in_s": 1})
    assert r.status == 201, r
    assert_error(admin.post("/v1/api-keys", {"name": "still-full", "role": "member"}), 429, "quota_exceeded")
    # Nor does an expired one.
    time.sleep(1.2)
    assert admin.post("/v1/api-keys", {"name": "after-expiry", "role": "member"}).status == 201
    refusals = audit_events(admin, "guardrail.quota_exceeded")
    assert [e["details"]["quota"] for e in refusals] == ["api_keys"] * 3, refusals


def test_many_keys_of_one_organization_share_its_rate_limit_and_another_is_unaffected(capped):
    _, flooders = new_org(capped, "member", "member", "member", "member")
    _, [calm] = new_org(capped, "member")
    t = time.monotonic()
    allowed, refusals = 0, []
    for _ in range(5):  # round-robin: each key stays within its own burst of 5
        for key in flooders:
            r = key.get("/v1/whoami")
            if r.status == 200:
                allowed += 1
            else:
                refusals.append(r)
    # Four keys' own buckets would allow 20: the organization's allows its burst of 12 (plus what
    # refilled at one per second meanwhile).
    assert 12 <= allowed <= 12 + int(time.monotonic() - t) + 1, allowed
    err = assert_error(refusals[0], 429, "rate_limited")
    assert "organization" in err["message"], err
    assert int(refusals[0].headers["Retry-After"]) >= 1
    # Another organization's key has its whole burst.
    assert [calm.get("/v1/whoami").status for _ in range(5)] == [200] * 5
