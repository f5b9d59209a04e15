import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from sandfort_harness import Daemon  # noqa: E402


@pytest.fixture(scope="session")
def daemon():
    # The suite's shared keys call at test speed (hundreds of requests a second, walking the role
    # table): per-key and per-organization rate limits are off here and tested on daemons of their
    # own (test_guardrails_limits.py, test_admission.py). So is host memory admission: the whole
    # suite's idle sandboxes of 1 GiB share this daemon, and the admission is tested on a daemon
    # sized to this host (test_admission.py). Every other default is the shipped one.
    unlimited = {"rate_per_s": 0, "burst": 0}
    d = Daemon({"guardrails": {"rate_limits": {"viewer": unlimited, "member": unlimited, "admin": unlimited,
                                               "org": unlimited}},
                "host": {"memory_overcommit": 8}}).start()
    yield d
    d.stop_and_cleanup()


@pytest.fixture(scope="session")
def org(daemon):
    """A fresh organization with one key per role (not the superadmin's)."""
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": "acme"})
    assert r.status == 201, r
    org = r.json()
    keys = {}
    for role in ("admin", "member", "viewer"):
        r = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": f"{role}-key", "role": role})
        assert r.status == 201, r
        keys[role] = r.json()["key"]
    return {"org": org, "keys": keys,
            "admin": daemon.client(keys["admin"]), "member": daemon.client(keys["member"]),
            "viewer": daemon.client(keys["viewer"])}


@pytest.fixture(scope="session")
def member(org):
    return org["member"]


@pytest.fixture(scope="session")
def sandbox(member):
    """One started sandbox shared by the tests that only run commands in it."""
    sbx = member.create_sandbox(name="shared")
    yield sbx
    member.delete(f"/v1/sandboxes/{sbx['id']}")
