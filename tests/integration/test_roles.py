"""Walks the role table of docs/api.md ("Roles, route by route") route by route, with a key of
each role, against the real daemon: the table is the contract and this test keeps the code to it.
The table is first compared with the daemon's route registry (`sandfortd routes --json`): the same
routes, each with the role the registry declares for it.

A role below the route's is refused with 403 even on a real sandbox (the check comes first and
nothing happens). A role at or above it passes the check: it is sent to an id that does not
exist (404) or a body that is invalid (400), so walking the table changes nothing."""

import http.client
import os
import re

import pytest

import test_openapi

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "api.md")
RANK = {"none": 0, "viewer": 1, "member": 2, "admin": 3, "superadmin": 4}
MISSING = {"id": "sbx-0000000000000000", "org": "org-0000000000000000", "cmd": "cmd-0000000000000000",
           "name": "no-such-session", "port": "8080", "ctx": "ctx-0000000000000000",
           "webhook": "whk-0000000000000000"}
# Bodies that pass the role check and then fail validation, for routes without an id to miss.
INVALID_BODY = {("POST", "/v1/orgs"): {"name": ""}, ("POST", "/v1/api-keys"): {"name": ""},
                ("POST", "/v1/sandboxes"): {"resources": {"cpus": -1}}}
# Queries that pass the role check and then fail validation, for routes that would otherwise
# answer with a stream that never ends.
INVALID_QUERY = {("GET", "/v1/events"): "?types=none"}


def role_table():
    rows = []
    text = open(DOCS).read()
    section = text[text.index("## Roles, route by route"):]
    section = section[:section.index("\n## ", 3)] if "\n## " in section[3:] else section
    for m in re.finditer(r"^\| (GET|POST|PUT|PATCH|DELETE) \| `([^`]+)` \| (\w+) \|$", section, re.M):
        rows.append((m.group(1), m.group(2), m.group(3)))
    return rows


ROWS = role_table()


def test_the_table_lists_every_route_family():
    assert len(ROWS) >= 40, ROWS
    paths = {p for _, p, _ in ROWS}
    for must in ("/v1/sandboxes/{id}/pty", "/v1/sandboxes/{id}/files", "/v1/orgs/{org}", "/v1/api-keys/{id}"):
        assert must in paths


def test_the_table_is_the_registry():
    served = test_openapi.served_routes()
    table = {(m, test_openapi.normalise(p)): (role, p) for m, p, role in ROWS}
    assert len(table) == len(ROWS), "a route twice in the table"
    missing = sorted(set(served) - set(table))
    extra = sorted(set(table) - set(served))
    assert not missing, "served but not in docs/api.md's role table:\n  " + "\n  ".join(f"{m} {p}" for m, p in missing)
    assert not extra, "in docs/api.md's role table but not served:\n  " + "\n  ".join(f"{m} {p}" for m, p in extra)
    wrong = [f"{m} {table[(m, p)][1]}: the table says {table[(m, p)][0]}, the registry {role}"
             for (m, p), (role, _) in sorted(served.items()) if table[(m, p)][0] != role]
    assert not wrong, "\n".join(wrong)


# Public routes that answer something other than 200 when called bare: the console's sign-in
# through an identity provider (no issuer named: 400; a callback without its state: a redirect
# back to the sign-in page).
PUBLIC_BARE = {("GET", "/v1/console/oidc/start"): 400, ("GET", "/v1/console/oidc/callback"): 302}


def fill(path, values):
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


def call(port, key, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = dict(headers or {})
    if key:
        h["Authorization"] = "Bearer " + key
    data = None
    if body is not None:
        import json
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    elif method in ("POST", "PUT", "PATCH"):
        data = b"{}"
        h["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=h)
    r = conn.getresponse()
    out = (r.status, r.read())
    conn.close()
    return out


def variants(method, path):
    """The ways a route is reached: WebSocket upgrades and event streams are separate code paths."""
    if path.endswith("/pty"):
        return [{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                 "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}]
    if path.endswith("/process/exec") or path.endswith("/process/code-run"):
        return [{}, {"Accept": "text/event-stream"}]
    return [{}]


@pytest.fixture(scope="module")
def principals(daemon, org):
    return {"viewer": org["keys"]["viewer"], "member": org["keys"]["member"], "admin": org["keys"]["admin"],
            "superadmin": daemon.admin_key}


@pytest.mark.parametrize("method,path,needs", ROWS, ids=[f"{m} {p}" for m, p, _ in ROWS])
def test_route_enforces_its_role(daemon, org, sandbox, principals, method, path, needs):
    real = {"id": sandbox["id"], "org": org["org"]["id"], "cmd": "cmd-0000000000000000",
            "name": "default", "port": "8080", "ctx": "ctx-0000000000000000", "webhook": "whk-0000000000000000"}
    checked = 0
    for headers in variants(method, path):
        if needs == "none":
            status, body = call(daemon.port, None, method, path, headers=headers)
            assert status == PUBLIC_BARE.get((method, path), 200), (path, status, body)
            continue
        status, _ = call(daemon.port, None, method, fill(path, real), headers=headers)
        assert status == 401, (method, path, "no key", status)
        for who, key in principals.items():
            allowed = RANK[who] >= RANK[needs]
            if allowed:
                body = INVALID_BODY.get((method, path))
                target = fill(path, MISSING) + INVALID_QUERY.get((method, path), "")
                status, text = call(daemon.port, key, method, target, body=body, headers=headers)
                assert status not in (401, 403), (method, path, who, status, text[:200])
            else:
                status, text = call(daemon.port, key, method, fill(path, real), headers=headers)
                assert status == 403, (method, path, who, status, text[:200])
                assert b"permission_denied" in text
            checked += 1
    assert needs == "none" or checked >= 4
    # Walking the table left the shared sandbox as it was.
    assert call(daemon.port, principals["viewer"], "GET", f"/v1/sandboxes/{sandbox['id']}")[0] == 200
