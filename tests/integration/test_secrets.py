"""Organization secrets against a real daemon and a real SQLite file (docs/secrets.md).

The value is write-only: it is in no answer of any route, not in the audit chain (export), not in
the daemon's log, and not in the bytes of the database (main file and WAL) — it is sealed with
AES-256-GCM under the key file. The key file is handled like the audit signing key: a file others
may read stops the daemon at start, and so does a database sealed by another key. Roles, another
organization, rotation, the error shape and the interception CA are checked on the way."""

import json
import os
import sqlite3
import subprocess
import uuid

import pytest

from sandfort_harness import Daemon

ERROR_CODES = {400: "invalid_argument", 403: "permission_denied", 404: "not_found", 409: "conflict",
               413: "payload_too_large"}


def new_org(daemon, name):
    """A fresh organization with a key per role: {id, admin, member, viewer} (clients)."""
    su = daemon.admin()
    r = su.post("/v1/orgs", {"name": name})
    assert r.status == 201, r
    org = {"id": r.json()["id"]}
    for role in ("admin", "member", "viewer"):
        k = su.post(f"/v1/orgs/{org['id']}/api-keys", {"name": role, "role": role})
        assert k.status == 201, k
        org[role] = daemon.client(k.json()["key"])
    return org


def error_of(r, status):
    """The JSON error shape with the code of `status`."""
    assert r.status == status, r
    body = r.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == ERROR_CODES[status], body
    assert body["error"]["message"] and body["error"]["request_id"] == r.headers.get("X-Request-Id"), body
    return body["error"]["message"]


def secret_body(name, value, **placement):
    body = {"name": name, "value": value, "hosts": ["api.openai.com"]}
    body.update(placement or {"header": "Authorization", "format": "Bearer {value}"})
    return body


def state_bytes(daemon):
    """The database's bytes: the main file, its WAL and shared-memory files."""
    out = b""
    for suffix in ("", "-wal", "-shm"):
        path = os.path.join(daemon.state_dir, "sandfort.db" + suffix)
        if os.path.exists(path):
            with open(path, "rb") as f:
                out += f.read()
    return out


def audit_export(client):
    r = client.get("/v1/audit?format=jsonl&limit=100000")
    assert r.status == 200, r
    return r.body


@pytest.fixture(scope="module")
def acme(daemon):
    return new_org(daemon, f"secrets-{uuid.uuid4().hex[:8]}")


def test_roles_rotation_and_the_value_never_comes_back(acme):
    admin, member, viewer = acme["admin"], acme["member"], acme["viewer"]
    value = f"sk-roles-{uuid.uuid4().hex}"
    for who in (member, viewer):
        error_of(who.post("/v1/secrets", secret_body("openai", value)), 403)
    r = admin.post("/v1/secrets", secret_body("openai", value))
    assert r.status == 201, r
    made = r.json()
    assert made == {"name": "openai", "hosts": ["api.openai.com"],
                    "placement": {"type": "header", "header": "Authorization", "format": "Bearer {value}"},
                    "version": 1, "created_at": made["created_at"], "updated_at": made["created_at"]}
    error_of(admin.post("/v1/secrets", secret_body("openai", "other")), 409)

    # Every role reads the metadata; no answer carries the value.
    for who in (admin, member, viewer):
        listed = who.get("/v1/secrets")
        assert listed.status == 200 and [s["name"] for s in listed.json()["items"]] == ["openai"]
        assert listed.json()["next_cursor"] is None
        got = who.get("/v1/secrets/openai")
        assert got.status == 200 and got.json() == made
        for answer in (r, listed, got):
            assert value.encode() not in answer.body

    # Rotation: admin only; each one moves the version, the hosts change when given.
    for who in (member, viewer):
        error_of(who.request("PUT", "/v1/secrets/openai", {"value": "x"}), 403)
        error_of(who.delete("/v1/secrets/openai"), 403)
    new_value = f"sk-rotated-{uuid.uuid4().hex}"
    r = admin.request("PUT", "/v1/secrets/openai", {"value": new_value})
    assert r.status == 200 and r.json()["version"] == 2 and r.json()["hosts"] == ["api.openai.com"], r
    assert new_value.encode() not in r.body
    r = admin.request("PUT", "/v1/secrets/openai", {"hosts": ["api.openai.com", "*.openai.azure.com"]})
    assert r.status == 200 and r.json()["version"] == 3, r
    assert r.json()["hosts"] == ["api.openai.com", "*.openai.azure.com"]
    assert r.json()["created_at"] == made["created_at"]
    assert viewer.get("/v1/secrets/openai").json()["version"] == 3

    assert admin.delete("/v1/secrets/openai").status == 204
    error_of(admin.delete("/v1/secrets/openai"), 404)
    error_of(viewer.get("/v1/secrets/openai"), 404)
    assert admin.get("/v1/secrets").json()["items"] == []


def test_the_value_is_in_no_log_no_audit_export_and_not_in_the_database_file(daemon, acme):
    admin = acme["admin"]
    first, second = f"sk-first-{uuid.uuid4().hex}", f"sk-second-{uuid.uuid4().hex}"
    assert admin.post("/v1/secrets", secret_body("leakcheck", first)).status == 201
    assert admin.request("PUT", "/v1/secrets/leakcheck", {"value": second}).status == 200
    # A bad request that carries a value: its error does not quote it either.
    bad = admin.post("/v1/secrets", {**secret_body("leakcheck2", first), "hosts": ["*"]})
    assert first not in error_of(bad, 400)
    ca = admin.get("/v1/interception-ca")
    assert ca.status == 200

    export = audit_export(admin)
    events = [json.loads(line) for line in export.decode().splitlines()]
    mine = [e for e in events if e["action"].startswith("secret.")]
    assert [e["action"] for e in mine][-2:] == ["secret.create", "secret.rotate"], mine
    assert mine[-2]["details"] == {"name": "leakcheck", "hosts": ["api.openai.com"]}
    assert mine[-1]["details"]["value_changed"] is True and mine[-1]["details"]["version"] == 2
    with open(daemon.log_path, "rb") as f:
        log = f.read()
    stored = state_bytes(daemon)
    assert b"leakcheck" in stored  # the row is there, and the search below reads the right bytes
    for value in (first, second):
        assert value.encode() not in export, "a secret's value is in the audit chain"
        assert value.encode() not in log, "a secret's value is in the daemon's log"
        assert value.encode() not in stored, "a secret's value is in the database file in the clear"
    # Nor is the interception CA's private key.
    assert b"PRIVATE KEY" not in stored
    assert admin.delete("/v1/secrets/leakcheck").status == 204
    last = [json.loads(line) for line in audit_export(admin).decode().splitlines()][-1]
    assert last["action"] == "secret.delete" and last["details"] == {"name": "leakcheck", "hosts": ["api.openai.com"]}


def test_another_organization_neither_sees_nor_changes_it(daemon, acme):
    assert acme["admin"].post("/v1/secrets", secret_body("shared-name", "acme-value")).status == 201
    other = new_org(daemon, f"secrets-other-{uuid.uuid4().hex[:8]}")
    assert other["admin"].get("/v1/secrets").json()["items"] == []
    error_of(other["viewer"].get("/v1/secrets/shared-name"), 404)
    error_of(other["admin"].request("PUT", "/v1/secrets/shared-name", {"value": "x"}), 404)
    error_of(other["admin"].delete("/v1/secrets/shared-name"), 404)
    # The same name is free in another organization, and each keeps its own.
    assert other["admin"].post("/v1/secrets", secret_body("shared-name", "other-value", query="key")).status == 201
    assert acme["viewer"].get("/v1/secrets/shared-name").json()["placement"]["type"] == "header"
    assert acme["viewer"].get("/v1/secrets/shared-name").json()["version"] == 1
    # Each organization has its own interception CA.
    a, b = acme["viewer"].get("/v1/interception-ca").json(), other["viewer"].get("/v1/interception-ca").json()
    assert a["certificate_pem"] != b["certificate_pem"]
    assert acme["admin"].delete("/v1/secrets/shared-name").status == 204

    # Deleting the organization removes its secrets and its CA.
    assert daemon.admin().delete(f"/v1/orgs/{other['id']}").status in (200, 204)
    db = sqlite3.connect(f"file:{os.path.join(daemon.state_dir, 'sandfort.db')}?mode=ro", uri=True)
    try:
        assert db.execute("SELECT count(*) FROM secrets WHERE org_id = ?", (other["id"],)).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM interception_cas WHERE org_id = ?", (other["id"],)).fetchone()[0] == 0
    finally:
        db.close()


@pytest.mark.parametrize("body,status,says", [
    ({"name": "Bad Name", "value": "v", "hosts": ["a.example"], "header": "X-Key"}, 400, "name"),
    ({"name": "n", "value": "", "hosts": ["a.example"], "header": "X-Key"}, 400, "value"),
    ({"name": "n", "value": "a\r\nX-Evil: 1", "hosts": ["a.example"], "header": "X-Key"}, 400, "CR or LF"),
    ({"name": "n", "value": "x" * 8193, "hosts": ["a.example"], "header": "X-Key"}, 413, "8192"),
    ({"name": "n", "value": "v", "hosts": [], "header": "X-Key"}, 400, "hosts"),
    ({"name": "n", "value": "v", "hosts": ["*"], "header": "X-Key"}, 400, "'*' is not allowed"),
    ({"name": "n", "value": "v", "hosts": ["a.*.example"], "header": "X-Key"}, 400, "hosts entry"),
    ({"name": "n", "value": "v", "hosts": ["a.example", "A.example."], "header": "X-Key"}, 400, "twice"),
    ({"name": "n", "value": "v", "hosts": [f"h{i}.example" for i in range(17)], "header": "X-Key"}, 400, "16"),
    ({"name": "n", "value": "v", "hosts": ["a.example"]}, 400, "exactly one"),
    ({"name": "n", "value": "v", "hosts": ["a.example"], "header": "X-Key", "query": "k"}, 400, "exactly one"),
    ({"name": "n", "value": "v", "hosts": ["a.example"], "header": "Host"}, 400, "cannot carry"),
    ({"name": "n", "value": "v", "hosts": ["a.example"], "header": "X-Key", "format": "Bearer"}, 400, "{value}"),
    ({"name": "n", "value": "v", "hosts": ["a.example"], "query": "k", "format": "{value}"}, 400, "goes with 'header' only"),
    ({"name": "n", "value": "v", "hosts": ["a.example"], "basic_auth": {"username": "a:b"}}, 400, "username"),
    ({"name": "n", "value": "v", "hosts": ["a.example"], "header": "X-Key", "secrets": ["x"]}, 400, "not known"),
    ({"name": "n", "value": 5, "hosts": ["a.example"], "header": "X-Key"}, 400, "value"),
])
def test_bad_input_gets_the_json_error_shape(acme, body, status, says):
    message = error_of(acme["admin"].post("/v1/secrets", body), status)
    assert says in message, message


def test_bad_rotations_get_the_json_error_shape(acme):
    admin = acme["admin"]
    assert admin.post("/v1/secrets", secret_body("rotate-me", "v1")).status == 201
    assert "needs 'value', 'hosts' or both" in error_of(admin.request("PUT", "/v1/secrets/rotate-me", {}), 400)
    error_of(admin.request("PUT", "/v1/secrets/rotate-me", {"placement": {"type": "query"}}), 400)
    error_of(admin.request("PUT", "/v1/secrets/rotate-me", {"hosts": ["*"]}), 400)
    error_of(admin.request("PUT", "/v1/secrets/none-such", {"value": "v"}), 404)
    assert admin.get("/v1/secrets/rotate-me").json()["version"] == 1  # nothing changed it
    assert admin.delete("/v1/secrets/rotate-me").status == 204


def test_the_interception_ca_is_a_sandfort_ca_limited_to_one_level(acme):
    pem = acme["viewer"].get("/v1/interception-ca").json()["certificate_pem"]
    assert acme["member"].get("/v1/interception-ca").json()["certificate_pem"] == pem  # made once
    text = subprocess.run(["openssl", "x509", "-noout", "-text"], input=pem.encode(), capture_output=True,
                          check=True).stdout.decode()
    assert "CA:TRUE, pathlen:0" in text, text
    assert "Certificate Sign" in text and "Digital Signature" not in text, text
    assert "Sandfort" in text and acme["id"] in text, text
    assert "prime256v1" in text or "P-256" in text, text


def test_a_key_file_others_may_read_or_a_lost_key_stops_the_daemon_at_start():
    d = Daemon()
    try:
        d.start()
        key_file = os.path.join(d.state_dir, "secrets.key")
        assert oct(os.stat(key_file).st_mode & 0o777) == "0o600"
        org = new_org(d, "keyfile")
        assert org["admin"].post("/v1/secrets", secret_body("kept", "kept-value")).status == 201
        assert d.stop() == 0

        os.chmod(key_file, 0o644)
        with pytest.raises(RuntimeError) as refused:
            d.start()
        said = str(refused.value)
        assert "secrets key file" in said and "mode 0644" in said and f"chmod 600 {key_file}" in said, said

        os.chmod(key_file, 0o600)
        d.start()
        assert org["viewer"].get("/v1/secrets/kept").json()["version"] == 1
        assert d.stop() == 0

        # A lost key: a new one would not open what the database holds, so the daemon says so.
        os.rename(key_file, key_file + ".away")
        with pytest.raises(RuntimeError) as refused:
            d.start()
        said = str(refused.value)
        assert "sealed with another key" in said and "put back the key file" in said, said
        os.replace(key_file + ".away", key_file)
        d.start()
        assert org["viewer"].get("/v1/secrets/kept").status == 200
    finally:
        d.stop_and_cleanup()
