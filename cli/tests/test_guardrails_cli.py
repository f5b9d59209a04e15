"""`sandfort org …` and the guardrail options of `sandbox create` end to end: the real binary against
the live daemon. The suite's key is the superadmin's: it sets a fresh organization's limits with
the CLI, and that organization's admin (its own key, its own HOME) runs into them: the sandbox
quota, the image policy, the kill switch. A rate-limited key runs against a daemon of the test's
own with a small rate limit."""

import os
import re
import subprocess
import sys
import urllib.parse
import uuid

import pytest
from conftest import CLI, REPO, Cli

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from sandfort_harness import Client, Daemon  # noqa: E402


def operator_api(base_url, key):
    return Client(urllib.parse.urlsplit(base_url).port, key)


@pytest.fixture
def org(cli, tmp_path):
    """(org id, org name, a Cli holding an admin key of a fresh organization)."""
    api = operator_api(cli.base_url, cli.api_key)
    name = "cli-gr-" + uuid.uuid4().hex[:8]
    r = api.post("/v1/orgs", {"name": name})
    assert r.status == 201, r
    org_id = r.json()["id"]
    r = api.post(f"/v1/orgs/{org_id}/api-keys", {"name": "admin", "role": "admin"})
    assert r.status == 201, r
    home = tmp_path / "org-admin"
    home.mkdir()
    admin = Cli(home, cli.base_url, r.json()["key"])
    yield org_id, name, admin
    for s in admin.json("sandbox", "ls")["items"]:
        admin.run("sandbox", "rm", s["id"])


def test_the_operator_sets_limits_and_the_admin_reads_them(cli, org):
    org_id, name, admin = org
    v = cli.json("org", "set-limits", name, "--max-sandboxes", "2", "--max-cpus", "1.5",
                 "--allowed-image", "sandfort/*", "--allowed-image", "docker.io/library/*")
    assert v["org_id"] == org_id
    assert v["limits"]["max_sandboxes"] == 2 and v["limits"]["max_cpus"] == 1.5
    assert v["limits"]["allowed_images"] == ["sandfort/*", "docker.io/library/*"]
    assert set(v["own"]) == {"max_sandboxes", "max_cpus", "allowed_images"}

    # No ORG: the caller's own organization.
    out = admin.ok("org", "limits").stdout
    assert f"org: {org_id}" in out
    assert re.search(r"^max_sandboxes\s+2\s+0\s+yes$", out, re.M), out
    assert re.search(r"^max_cpus\s+1\.5\s+0\s+yes$", out, re.M), out
    assert re.search(r"^max_memory_mb\s+\d+\s+0\s+no \(default\)$", out, re.M), out
    assert "kill switch: off" in out

    # --reset sends null: back to the configured default; what is not named stays.
    v = cli.json("org", "set-limits", org_id, "--reset", "allowed_images", "--reset", "max_cpus",
                 "--max-memory-mb", "4096")
    assert v["limits"]["allowed_images"] == ["*"] and v["limits"]["max_sandboxes"] == 2
    assert set(v["own"]) == {"max_sandboxes", "max_memory_mb"}
    assert admin.json("org", "limits", name)["limits"]["max_memory_mb"] == 4096

    # The volume and snapshot counts: set, shown with their use, reset.
    v = cli.json("org", "set-limits", name, "--max-volumes", "3", "--max-snapshots", "4")
    assert v["limits"]["max_volumes"] == 3 and v["limits"]["max_snapshots"] == 4
    assert set(v["own"]) == {"max_sandboxes", "max_memory_mb", "max_volumes", "max_snapshots"}
    out = admin.ok("org", "limits").stdout
    assert re.search(r"^max_volumes\s+3\s+0\s+yes$", out, re.M), out
    assert re.search(r"^max_snapshots\s+4\s+0\s+yes$", out, re.M), out
    got = admin.json("org", "limits")
    assert (got["usage"]["volumes"], got["usage"]["snapshots"]) == (0, 0)
    v = cli.json("org", "set-limits", org_id, "--reset", "max_volumes", "--reset", "max_snapshots")
    assert set(v["own"]) == {"max_sandboxes", "max_memory_mb"}
    assert v["limits"]["max_volumes"] != 3 and v["limits"]["max_snapshots"] != 4

    # The organization's admin may not raise its own limits.
    r = admin.run("org", "set-limits", org_id, "--max-sandboxes", "50")
    assert r.returncode == 1 and "permission_denied" in r.stderr and "request req-" in r.stderr, r.stderr
    # The daemon checks the values.
    r = cli.run("org", "set-limits", org_id, "--max-sandboxes", "-1")
    assert r.returncode == 1 and "invalid_argument" in r.stderr and "max_sandboxes" in r.stderr, r.stderr


def test_set_limits_usage_errors_exit_2(cli):
    r = cli.run("org", "set-limits", "some-org")
    assert r.returncode == 2 and "nothing to set" in r.stderr, r.stderr
    r = cli.run("org", "set-limits", "some-org", "--reset", "max_cpus", "--max-cpus", "2")
    assert r.returncode == 2 and "--reset max_cpus" in r.stderr, r.stderr
    r = cli.run("org", "set-limits", "some-org", "--max-volumes", "2", "--reset", "max_volumes")
    assert r.returncode == 2 and "--reset max_volumes" in r.stderr, r.stderr
    r = cli.run("org", "set-limits", "some-org", "--reset", "max_sandbox")
    assert r.returncode == 2 and "max_sandbox" in r.stderr, r.stderr
    r = cli.run("org", "set-limits")
    assert r.returncode == 2


def test_creating_until_the_quota_refuses(cli, org):
    org_id, name, admin = org
    cli.ok("org", "set-limits", name, "--max-sandboxes", "2")
    made, refused = [], None
    for _ in range(5):
        r = admin.run("sandbox", "create")
        if r.returncode != 0:
            refused = r
            break
        made.append(r.stdout.strip())
    assert len(made) == 2 and all(s.startswith("sbx-") for s in made), made
    assert refused.returncode == 1
    assert "quota_exceeded" in refused.stderr and "2 of 2" in refused.stderr, refused.stderr
    assert "request req-" in refused.stderr and "hint:" in refused.stderr and "org limits" in refused.stderr
    assert admin.json("org", "limits")["usage"]["sandboxes"] == 2
    admin.ok("sandbox", "rm", made[0])
    admin.ok("sandbox", "create")


def test_an_image_outside_the_policy_is_refused(cli, org):
    _, name, admin = org
    cli.ok("org", "set-limits", name, "--allowed-image", "sandfort/*")
    r = admin.run("sandbox", "create", "--snapshot", "python:3.12-slim")
    assert r.returncode == 1, r
    assert "image_not_allowed" in r.stderr and "python:3.12-slim" in r.stderr, r.stderr
    assert "hint:" in r.stderr
    assert admin.json("org", "limits")["usage"]["sandboxes"] == 0


def test_the_operator_requires_gvisor_and_a_stopped_runc_sandbox_is_refused_its_start(cli, org):
    org_id, name, admin = org
    sbx = admin.ok("sandbox", "create", "--wait").stdout.strip()  # runc: the daemon's default
    admin.ok("sandbox", "stop", sbx)
    v = cli.json("org", "set-limits", name, "--allowed-runtime", "gvisor")
    assert v["limits"]["allowed_runtimes"] == ["gvisor"] and v["own"] == ["allowed_runtimes"], v
    out = admin.ok("org", "limits").stdout
    assert re.search(r'^allowed_runtimes\s+\["gvisor"\]\s+-\s+yes$', out, re.M), out
    r = admin.run("sandbox", "start", sbx)
    assert r.returncode == 1 and "runtime_not_allowed" in r.stderr and sbx in r.stderr, r.stderr
    assert "hint:" in r.stderr and "org limits" in r.stderr, r.stderr
    # Only runc and gvisor are runtimes; --reset goes back to the default, which allows both.
    r = cli.run("org", "set-limits", name, "--allowed-runtime", "kata")
    assert r.returncode == 2 and "kata" in r.stderr, r.stderr
    v = cli.json("org", "set-limits", org_id, "--reset", "allowed_runtimes")
    assert v["limits"]["allowed_runtimes"] == ["runc", "gvisor"] and v["own"] == [], v
    admin.ok("sandbox", "start", sbx)


def test_the_kill_switch_stops_refuses_and_is_lifted(cli, org):
    org_id, name, admin = org
    sid = admin.ok("sandbox", "create", "--wait", "--idle-timeout", "0").stdout.strip()
    r = admin.ok("org", "stop-all")
    assert f"kill switch on for {org_id}: stopped 1 sandbox(es)" in r.stdout, r.stdout
    assert f"stopped {sid}" in r.stdout
    assert admin.json("sandbox", "get", sid)["state"] == "stopped"
    assert "kill switch: on since" in admin.ok("org", "limits").stdout
    r = admin.run("sandbox", "create")
    assert r.returncode == 1 and "conflict" in r.stderr and "kill switch" in r.stderr, r.stderr
    r = admin.run("sandbox", "start", sid)
    assert r.returncode == 1 and "conflict" in r.stderr, r.stderr
    assert "kill switch lifted" in admin.ok("org", "lift").stdout
    assert "kill switch: off" in admin.ok("org", "limits").stdout
    assert admin.ok("sandbox", "start", sid).stdout.strip() == f"{sid} started"

    # Thrown by the superadmin (by name), it is the superadmin's to lift.
    admin.ok("sandbox", "stop", sid)
    report = cli.json("org", "stop-all", name)
    assert report == {"org_id": org_id, "stopped": [], "failed": {}}
    assert "only the superadmin lifts it" in admin.ok("org", "limits").stdout
    r = admin.run("org", "lift")
    assert r.returncode == 1 and "permission_denied" in r.stderr, r.stderr
    cli.ok("org", "lift", org_id)
    assert admin.json("org", "limits")["stopped"] is None


def test_ttl_and_idle_timeout_on_create(org):
    _, _, admin = org
    sbx = admin.json("sandbox", "create", "--ttl", "3600", "--idle-timeout", "120")
    assert sbx["ttl_s"] == 3600 and sbx["idle_timeout_s"] == 120 and sbx["expires_at"]
    out = admin.ok("sandbox", "get", sbx["id"]).stdout
    assert "ttl_s: 3600\n" in out and "idle_timeout_s: 120\n" in out, out
    plain = admin.json("sandbox", "create", "--idle-timeout", "0")
    assert plain["idle_timeout_s"] == 0 and plain["ttl_s"] is None
    sid = admin.ok("new", "--ttl", "600", "--idle-timeout", "30").stdout.strip()
    got = admin.json("sandbox", "get", sid)
    assert (got["ttl_s"], got["idle_timeout_s"]) == (600, 30)
    # Out of range: the server says which field and why.
    r = admin.run("sandbox", "create", "--ttl", "0")
    assert r.returncode == 1 and "invalid_argument" in r.stderr and "ttl_s" in r.stderr, r.stderr


def _complete(cli, words):
    script = (f'eval "$({CLI} completion bash)"; PATH="{os.path.dirname(CLI)}:$PATH"; '
              f'COMP_WORDS=({" ".join(words)}); COMP_CWORD={len(words) - 1}; _sandfort; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run(["bash", "-c", script], env=cli.env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_completion_knows_the_org_commands(cli):
    assert "org" in _complete(cli, ["sandfort", "o"])
    assert _complete(cli, ["sandfort", "org", "''"]) == ["limits", "set-limits", "stop-all", "lift", "create", "--help"]
    assert _complete(cli, ["sandfort", "org", "set-limits", "acme", "--max"]) == [
        "--max-sandboxes", "--max-cpus", "--max-memory-mb", "--max-volumes", "--max-snapshots"]
    assert _complete(cli, ["sandfort", "org", "set-limits", "acme", "--reset", "max_c"]) == ["max_cpus"]
    assert _complete(cli, ["sandfort", "org", "set-limits", "acme", "--reset", "max_s"]) == [
        "max_sandboxes", "max_snapshots"]
    assert _complete(cli, ["sandfort", "sandbox", "create", "--i"]) == ["--idle-timeout"]
    assert _complete(cli, ["sandfort", "new", "--tt"]) == ["--ttl"]


@pytest.fixture(scope="module")
def limited():
    d = Daemon({"log_level": "warn",
                "guardrails": {"rate_limits": {"member": {"rate_per_s": 1, "burst": 2}}}}).start()
    yield d
    d.stop()
    d.cleanup()


def test_a_rate_limited_key_is_told_when_to_retry(limited, tmp_path):
    api = limited.admin()
    org_id = api.post("/v1/orgs", {"name": "cli-rate"}).json()["id"]
    key = api.post(f"/v1/orgs/{org_id}/api-keys", {"name": "m", "role": "member"}).json()["key"]
    member = Cli(tmp_path, f"http://127.0.0.1:{limited.port}", key)
    member.ok("whoami")
    member.ok("whoami")
    r = member.run("whoami")
    assert r.returncode == 1, r
    assert "rate_limited" in r.stderr and "requests per second" in r.stderr, r.stderr
    m = re.search(r"hint: too many requests with these credentials; retry in (\d+) s", r.stderr)
    assert m and 1 <= int(m.group(1)) <= 5, r.stderr


def test_a_full_host_is_told_with_what_to_do(tmp_path):
    # A daemon whose host gives sandboxes 100 MiB: a create of 128 is refused before anything is made.
    with open("/proc/meminfo") as f:
        total_mb = next(int(line.split()[1]) // 1024 for line in f if line.startswith("MemTotal:"))
    d = Daemon({"log_level": "warn", "host": {"memory_reserve_mb": total_mb - 100}}).start()
    try:
        cli = Cli(tmp_path, f"http://127.0.0.1:{d.port}", d.admin_key)
        r = cli.run("sandbox", "create", "--memory", "128")
        assert r.returncode == 1, r
        assert "host_full" in r.stderr and "128 MiB" in r.stderr, r.stderr
        assert "hint: the host's memory is taken by running sandboxes" in r.stderr, r.stderr
        assert cli.json("sandbox", "ls")["items"] == []
    finally:
        d.stop()
        d.cleanup()
