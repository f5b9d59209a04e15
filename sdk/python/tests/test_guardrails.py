"""Guardrails through the SDK against the live daemon: the superadmin sets an organization's
limits, its admin creates sandboxes until the quota refuses (QuotaExceededError), an image
outside the policy (ImageNotAllowedError), a runtime outside the policy (RuntimeNotAllowedError) and
the disk quota, the kill switch (stop_all, ConflictError, lift),
idle_timeout_s and ttl_s round trips, and a rate limit (RateLimitedError with retry_after) on a
daemon of the test's own with small rate limits."""

import os
import sys
import time
import uuid

import pytest

from sandfort_sdk import (APIError, Client, ConflictError, ImageNotAllowedError, InvalidArgumentError, OrgLimits,
                          PermissionDeniedError, QuotaExceededError, RateLimitedError, RuntimeNotAllowedError,
                          StopAllReport)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture
def org(client, env):
    """A fresh organization and a client holding an admin key of it (the env key is the superadmin's)."""
    o = client.create_org("sdk-gr-" + uuid.uuid4().hex[:8])
    key = client.create_api_key("admin", role="admin", org=o.id)
    admin = Client(base_url=env["url"], api_key=key.key)
    yield o, admin
    for s in admin.list_sandboxes():
        try:
            s.delete()
        except APIError:
            pass


def test_creating_until_the_quota_refuses(client, org):
    o, admin = org
    limits = client.set_org_limits(o.name, max_sandboxes=2)
    assert isinstance(limits, OrgLimits)
    assert limits.org_id == o.id and limits.limits.max_sandboxes == 2 and limits.own == ["max_sandboxes"]
    made, refusal = [], None
    for _ in range(5):
        try:
            made.append(admin.create_sandbox(wait=False))
        except QuotaExceededError as e:
            refusal = e
            break
    assert len(made) == 2, made
    assert refusal is not None and refusal.status == 429 and refusal.code == "quota_exceeded"
    assert "sandboxes" in refusal.message and "2 of 2" in refusal.message, refusal.message
    assert refusal.request_id and refusal.request_id.startswith("req-")
    # Its own organization when no org is named; the use counts every sandbox not deleted.
    mine = admin.org_limits()
    assert mine.org_id == o.id and mine.usage.sandboxes == 2 and mine.limits.max_sandboxes == 2
    assert mine.stopped is None and not mine.is_stopped
    made[0].delete()
    made.append(admin.create_sandbox(wait=False))
    assert admin.org_limits(o.id).usage.sandboxes == 2


def test_images_outside_the_policy_and_who_sets_limits(client, org):
    o, admin = org
    limits = client.set_org_limits(o.id, allowed_images=("sandfort/*",), max_cpus=2)
    assert limits.limits.allowed_images == ["sandfort/*"] and limits.limits.max_cpus == 2.0
    assert set(limits.own) == {"allowed_images", "max_cpus"}
    with pytest.raises(ImageNotAllowedError) as ei:
        admin.create_sandbox("python:3.12-slim", wait=False)
    e = ei.value
    assert isinstance(e, PermissionDeniedError) and e.status == 403 and e.code == "image_not_allowed"
    assert "python:3.12-slim" in e.message and "sandfort/*" in e.message, e.message
    # The organization's admin reads its limits but may not raise them.
    with pytest.raises(PermissionDeniedError) as ei:
        admin.set_org_limits(o.id, allowed_images=["*"])
    assert ei.value.code == "permission_denied" and not isinstance(ei.value, ImageNotAllowedError)
    # None resets a field to the configured default; the fields not given stay as they were.
    limits = client.set_org_limits(o.id, allowed_images=None)
    assert limits.limits.allowed_images == ["*"] and limits.own == ["max_cpus"] and limits.limits.max_cpus == 2.0
    # The volume and snapshot counts: set, read by the organization's admin with their use, reset.
    limits = client.set_org_limits(o.id, max_volumes=1, max_snapshots=3)
    assert limits.limits.max_volumes == 1 and limits.limits.max_snapshots == 3
    assert set(limits.own) == {"max_cpus", "max_volumes", "max_snapshots"}
    vol = admin.create_volume("gr-" + uuid.uuid4().hex[:8])
    try:
        mine = admin.org_limits()
        assert mine.limits.max_volumes == 1 and mine.limits.max_snapshots == 3
        assert mine.usage.volumes == 1 and mine.usage.snapshots == 0
        with pytest.raises(QuotaExceededError) as ei:
            admin.create_volume("gr-" + uuid.uuid4().hex[:8])
        assert "volumes" in ei.value.message and "1 of 1" in ei.value.message, ei.value.message
    finally:
        admin.delete_volume(vol.name)
    limits = client.set_org_limits(o.id, max_volumes=None, max_snapshots=None)
    assert limits.own == ["max_cpus"] and limits.limits.max_volumes > 1 and limits.limits.max_snapshots > 3
    # Fields newer than the SDK pass through; the daemon refuses what it does not know.
    with pytest.raises(InvalidArgumentError) as ei:
        client.set_org_limits(o.id, max_sandbox=1)
    assert "max_sandbox" in ei.value.message
    with pytest.raises(TypeError):
        client.set_org_limits(o.id, allowed_images="sandfort/*")


def test_runtimes_outside_the_policy_and_the_disk_quota(client, org):
    o, admin = org
    # gVisor required of the organization: refused before any container, so runsc is not needed here.
    limits = client.set_org_limits(o.id, allowed_runtimes=("gvisor",), max_disk_mb=16)
    assert limits.limits.allowed_runtimes == ["gvisor"] and limits.limits.max_disk_mb == 16
    assert set(limits.own) == {"allowed_runtimes", "max_disk_mb"}
    mine = admin.org_limits()  # its admin reads the policy in force
    assert mine.limits.allowed_runtimes == ["gvisor"] and mine.limits.max_disk_mb == 16 and mine.usage.disk_mb == 0
    with pytest.raises(RuntimeNotAllowedError) as ei:
        admin.create_sandbox(runtime="runc", wait=False)
    e = ei.value
    assert isinstance(e, PermissionDeniedError) and e.status == 403 and e.code == "runtime_not_allowed"
    assert "runtime runc is not allowed" in e.message and '["gvisor"]' in e.message, e.message
    assert admin.org_limits().usage.sandboxes == 0
    with pytest.raises(PermissionDeniedError) as ei:
        admin.set_org_limits(o.id, allowed_runtimes=["runc"])
    assert ei.value.code == "permission_denied" and not isinstance(ei.value, RuntimeNotAllowedError)
    with pytest.raises(TypeError):
        client.set_org_limits(o.id, allowed_runtimes="gvisor")
    # None: back to the configured default (both runtimes); the disk quota of 16 MiB still refuses
    # a sandbox of the default disk_mb.
    limits = client.set_org_limits(o.id, allowed_runtimes=None)
    assert limits.limits.allowed_runtimes == ["runc", "gvisor"] and limits.own == ["max_disk_mb"]
    with pytest.raises(QuotaExceededError) as ei:
        admin.create_sandbox(runtime="runc", wait=False)
    assert "disk_mb" in ei.value.message, ei.value.message
    limits = client.set_org_limits(o.id, max_disk_mb=None)
    assert limits.own == [] and limits.limits.max_disk_mb > 16
    # The disk_mb asked for is the sandbox's, typed, and the organization's use.
    sbx = admin.create_sandbox(runtime="runc", wait=False, resources={"disk_mb": 2048})
    assert sbx.info.resources.disk_mb == 2048 and admin.get_sandbox(sbx.id).info.resources.disk_mb == 2048
    assert admin.org_limits().usage.disk_mb == 2048


def test_the_kill_switch_stops_refuses_and_is_lifted(client, org):
    o, admin = org
    sbx = admin.create_sandbox(idle_timeout_s=0)
    report = admin.stop_all()
    assert isinstance(report, StopAllReport)
    assert report.org_id == o.id and report.stopped == [sbx.id] and report.failed == {} and report.ok
    assert sbx.refresh().state == "stopped"
    state = admin.org_limits()
    assert state.is_stopped and state.stopped.by_superadmin is False and state.stopped.since
    with pytest.raises(ConflictError) as ei:
        admin.create_sandbox(wait=False)
    assert ei.value.status == 409 and "kill switch" in ei.value.message, ei.value.message
    with pytest.raises(ConflictError):
        sbx.start()
    admin.lift_stop_all()
    assert admin.org_limits().stopped is None
    assert sbx.start().state == "started"

    # One the superadmin throws only the superadmin lifts; nothing was running, nothing stopped.
    sbx.stop()
    report = client.stop_all(o.name)
    assert report.stopped == [] and report.failed == {}
    assert admin.org_limits().stopped.by_superadmin is True
    with pytest.raises(PermissionDeniedError):
        admin.lift_stop_all()
    client.lift_stop_all(o.id)
    assert not admin.org_limits().is_stopped


def test_idle_timeout_and_ttl_round_trip(org):
    _, admin = org
    with admin.create_sandbox(idle_timeout_s=120, ttl_s=3600) as sbx:
        assert sbx.info.idle_timeout_s == 120 and sbx.info.ttl_s == 3600 and sbx.info.expires_at
        assert sbx.update(idle_timeout_s=0).info.idle_timeout_s == 0
        assert sbx.info.ttl_s == 3600  # not given: unchanged
        got = admin.get_sandbox(sbx.id).info
        assert got.idle_timeout_s == 0 and got.ttl_s == 3600
        sbx.update(ttl_s=60, idle_timeout_s=45)
        got = admin.get_sandbox(sbx.id).info
        assert (got.ttl_s, got.idle_timeout_s) == (60, 45)
        with pytest.raises(InvalidArgumentError):
            sbx.update(idle_timeout_s=-1)
    # Without one, the daemon's default applies (and is reported); no TTL unless asked.
    with admin.create_sandbox(wait=False) as plain:
        assert isinstance(plain.info.idle_timeout_s, int) and plain.info.idle_timeout_s > 0
        assert plain.info.ttl_s is None and plain.info.expires_at is None


@pytest.fixture(scope="module")
def limited_daemon():
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    from sandfort_harness import Daemon
    d = Daemon({"log_level": "warn",
                "guardrails": {"rate_limits": {"member": {"rate_per_s": 1, "burst": 2}}}}).start()
    yield d
    d.stop()
    d.cleanup()


def test_a_rate_limited_key_gets_retry_after(limited_daemon):
    url = f"http://127.0.0.1:{limited_daemon.port}"
    operator = Client(base_url=url, api_key=limited_daemon.admin_key)
    o = operator.create_org("sdk-rate-" + uuid.uuid4().hex[:8])
    member = Client(base_url=url, api_key=operator.create_api_key("m", role="member", org=o.id).key)
    member.whoami()
    member.whoami()
    with pytest.raises(RateLimitedError) as ei:
        member.whoami()
    e = ei.value
    assert e.status == 429 and e.code == "rate_limited" and "requests per second" in e.message
    assert e.retry_after is not None and 1 <= e.retry_after <= 5, e.retry_after
    time.sleep(e.retry_after + 0.1)
    assert member.whoami().org_id == o.id
