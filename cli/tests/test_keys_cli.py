"""`sandfort org create` and `sandfort key create|ls|revoke` end to end: the real binary against the
live daemon, whose suite key is the superadmin's. The superadmin makes an organization and gets its
admin key from the CLI; that admin gives an agent its own key, lists it and revokes it, and the
agent's key works and then stops working, all without curl."""

import subprocess
import uuid

import pytest
from conftest import CLI, Cli


def fresh_name():
    return "cli-keys-" + uuid.uuid4().hex[:8]


def as_key(cli, key):
    return Cli(cli.home, cli.base_url, key)


@pytest.fixture
def org_admin(cli):
    """(org name, org id, a Cli with the organization's admin key made by `org create`)."""
    name = fresh_name()
    r = cli.ok("org", "create", name)
    secret = r.stdout.strip()
    assert secret.startswith("sfk_") and "\n" not in secret, r.stdout
    admin = as_key(cli, secret)
    who = admin.json("whoami")
    assert who["org"] == name and who["role"] == "admin" and who["principal_name"] == "admin", who
    assert who["org_id"] in r.stderr and "shown only now" in r.stderr, r.stderr
    return name, who["org_id"], admin


def test_org_create_prints_the_org_and_its_admin_key(cli):
    name = fresh_name()
    made = cli.json("org", "create", name, "--key-name", "first-admin")
    assert made["org"]["name"] == name and made["org"]["state"] == "active", made
    key = made["admin_key"]
    assert key["role"] == "admin" and key["name"] == "first-admin" and key["org_id"] == made["org"]["id"], key
    assert as_key(cli, key["key"]).json("whoami")["org_id"] == made["org"]["id"]
    # A taken name is the API's 409, and nothing else is made.
    r = cli.run("org", "create", name)
    assert r.returncode == 1 and "conflict" in r.stderr and r.stdout == "", r


def test_org_create_is_the_superadmins(org_admin):
    _, _, admin = org_admin
    r = admin.run("org", "create", fresh_name())
    assert r.returncode == 1 and "permission_denied" in r.stderr and r.stdout == "", r


def test_an_admin_gives_an_agent_its_own_key_and_revokes_it(org_admin):
    _, org_id, admin = org_admin
    r = admin.ok("key", "create", "--name", "agent-1", "--role", "member")
    secret = r.stdout.strip()
    assert secret.startswith("sfk_") and "\n" not in secret, r.stdout
    assert "agent-1" in r.stderr and "member" in r.stderr, r.stderr
    agent = as_key(admin, secret)
    who = agent.json("whoami")
    assert (who["org_id"], who["role"], who["principal_name"]) == (org_id, "member", "agent-1"), who
    key_id = who["principal"]

    listed = admin.json("key", "ls")["items"]
    mine = [k for k in listed if k["id"] == key_id]
    assert len(mine) == 1 and mine[0]["name"] == "agent-1" and mine[0]["revoked_at"] is None, listed
    assert all("key" not in k for k in listed), "a listing never carries a secret"
    table = admin.ok("key", "list").stdout.splitlines()
    assert table[0].split()[:4] == ["ID", "NAME", "ROLE", "CREATED"]
    assert any(line.split()[:3] == [key_id, "agent-1", "member"] for line in table[1:]), table
    assert secret not in admin.ok("key", "ls").stdout

    # The agent (a member) manages no keys.
    r = agent.run("key", "create", "--name", "escalate", "--role", "admin")
    assert r.returncode == 1 and "permission_denied" in r.stderr and r.stdout == "", r

    assert admin.ok("key", "revoke", key_id).stdout.strip() == f"revoked {key_id}"
    r = agent.run("whoami")
    assert r.returncode != 0 and "unauthenticated" in r.stderr, r
    assert [k["revoked_at"] for k in admin.json("key", "ls")["items"] if k["id"] == key_id] != [None]
    r = admin.run("key", "revoke", key_id)
    assert r.returncode == 1 and "not_found" in r.stderr, r


def test_key_create_options(cli, org_admin):
    name, org_id, admin = org_admin
    made = admin.json("key", "create", "--name", "reader", "--role", "viewer", "--expires-in", "3600")
    assert made["role"] == "viewer" and made["expires_at"] is not None and made["key"].startswith("sfk_"), made
    assert admin.json("key", "create", "--name", "default-role")["role"] == "member"  # the server's default
    # The superadmin issues a key in another organization, named by its name.
    other = cli.json("key", "create", "--org", name, "--name", "ops", "--role", "admin")
    assert other["org_id"] == org_id and other["role"] == "admin", other
    # An organization's admin cannot reach another one.
    r = admin.run("key", "create", "--name", "x", "--org", "some-other-org")
    assert r.returncode == 1 and "permission_denied" in r.stderr, r
    for bad in ([], ["--role", "owner"], ["--expires-in", "0"], ["--nme", "x"]):
        r = admin.run("key", "create", *(["--name", "x"] if bad and bad[0] != "--nme" else []), *bad)
        assert r.returncode == 2 and r.stdout == "", (bad, r)
    assert admin.run("key", "revoke").returncode == 2


def test_completion_knows_the_key_commands(cli):
    def complete(*words):
        script = (f'eval "$({CLI} completion bash)"; COMP_WORDS=({" ".join(words)}); '
                  f'COMP_CWORD={len(words) - 1}; _sandfort; printf "%s\\n" "${{COMPREPLY[@]}}"')
        r = subprocess.run(["bash", "-c", script], env=cli.env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert complete("sandfort", "ke") == ["key"]
    assert complete("sandfort", "key", "''") == ["create", "ls", "revoke", "--help"]
    assert complete("sandfort", "key", "create", "--role", "m") == ["member"]
    assert complete("sandfort", "org", "cr") == ["create"]


def test_help_names_the_commands(cli):
    out = cli.ok("key", "--help").stdout
    assert "create" in out and "revoke" in out
    assert "first admin key" in cli.ok("org", "create", "--help").stdout
