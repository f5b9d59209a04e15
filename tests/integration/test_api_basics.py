"""Health, the error shape, request ids, body limits and authentication."""

import socket


def assert_error(r, status, code):
    assert r.status == status, r
    body = r.json()
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    assert body["error"]["request_id"] == r.headers["X-Request-Id"]


def test_health_and_ready_need_no_key(daemon):
    c = daemon.client()
    r = c.get("/healthz")
    assert r.status == 200 and r.json()["status"] == "ok" and r.json()["version"]
    assert r.headers["X-Request-Id"].startswith("req-")
    r = c.get("/readyz")
    assert r.status == 200, r


def test_every_response_has_a_distinct_request_id(daemon):
    c = daemon.client()
    ids = {c.get("/healthz").headers["X-Request-Id"] for _ in range(5)}
    assert len(ids) == 5


def test_missing_and_wrong_keys_are_401(daemon):
    assert_error(daemon.client().get("/v1/sandboxes"), 401, "unauthenticated")
    assert_error(daemon.client("sfk_" + "0" * 32).get("/v1/sandboxes"), 401, "unauthenticated")
    assert_error(daemon.client("garbage").get("/v1/whoami"), 401, "unauthenticated")
    r = daemon.client().request("GET", "/v1/whoami", headers={"Authorization": "Basic abc"})
    assert_error(r, 401, "unauthenticated")


def test_a_key_without_its_scheme_is_told_the_form_and_not_echoed(daemon):
    # `curl -H "Authorization: $KEY"` is the usual slip: the answer names the form it needs.
    r = daemon.client().request("GET", "/v1/whoami", headers={"Authorization": daemon.admin_key})
    assert_error(r, 401, "unauthenticated")
    message = r.json()["error"]["message"]
    assert message == 'the Authorization header must be "Bearer <API key>"', message
    assert daemon.admin_key not in r.body.decode()


def test_unknown_route_is_404_and_wrong_verb_405(daemon):
    assert_error(daemon.admin().get("/v1/nothing-here"), 404, "not_found")
    r = daemon.admin().request("PUT", "/healthz")
    assert r.status == 405, r


def test_malformed_json_is_400(daemon, member):
    r = member.request("POST", "/v1/sandboxes", raw=b"{not json", headers={"Content-Type": "application/json"})
    assert_error(r, 400, "invalid_argument")
    r = member.request("POST", "/v1/sandboxes", raw=b"[1,2]")
    assert_error(r, 400, "invalid_argument")
    r = member.post("/v1/sandboxes", {"snapshot": 5})
    assert_error(r, 400, "invalid_argument")
    assert "snapshot" in r.json()["error"]["message"]


def test_oversized_body_is_413(daemon, member):
    # The default limit is 16 MiB; the daemon answers from the headers, before reading the body.
    r = member.request("POST", "/v1/sandboxes", raw=b"x" * (17 << 20))
    assert_error(r, 413, "payload_too_large")
    # The daemon is still fine afterwards.
    assert daemon.client().get("/healthz").status == 200


def test_malformed_http_gets_400_and_daemon_survives(daemon):
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=5) as s:
        s.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        data = s.recv(4096)
    assert data.startswith(b"HTTP/1.1 400"), data
    assert daemon.client().get("/healthz").status == 200


def test_keep_alive_serves_several_requests_on_one_connection(daemon):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=5)
    for _ in range(3):
        conn.request("GET", "/healthz")
        r = conn.getresponse()
        assert r.status == 200
        r.read()
    conn.close()


def test_whoami(daemon, org):
    r = org["member"].get("/v1/whoami")
    assert r.status == 200, r
    me = r.json()
    assert me["org"] == "acme" and me["role"] == "member" and me["auth"] == "api_key"
    assert me["org_id"] == org["org"]["id"] and me["principal"].startswith("key-")
    su = daemon.admin().get("/v1/whoami").json()
    assert su["superadmin"] is True and su["role"] == "admin"


def test_orgs_are_superadmin_business(daemon, org):
    assert_error(org["admin"].post("/v1/orgs", {"name": "evil"}), 403, "permission_denied")
    assert_error(daemon.admin().post("/v1/orgs", {"name": "acme"}), 409, "conflict")
    assert_error(daemon.admin().post("/v1/orgs", {}), 400, "invalid_argument")
    everything = daemon.admin().get("/v1/orgs").json()["items"]
    assert {"superadmin", "acme"} <= {o["name"] for o in everything}
    own = org["member"].get("/v1/orgs").json()["items"]
    assert [o["name"] for o in own] == ["acme"]


def test_api_key_lifecycle_and_roles(daemon, org):
    admin = org["admin"]
    r = admin.post("/v1/api-keys", {"name": "ci", "role": "viewer"})
    assert r.status == 201, r
    created = r.json()
    assert created["key"].startswith("sfk_") and created["role"] == "viewer"
    listed = admin.get("/v1/api-keys").json()["items"]
    assert created["id"] in [k["id"] for k in listed]
    assert all("key" not in k for k in listed), "secrets must never be listed"

    viewer = daemon.client(created["key"])
    assert viewer.get("/v1/sandboxes").status == 200
    assert_error(viewer.post("/v1/sandboxes", {}), 403, "permission_denied")
    assert_error(org["member"].post("/v1/api-keys", {"name": "x", "role": "admin"}), 403, "permission_denied")
    assert_error(admin.post("/v1/api-keys", {"name": "x", "role": "owner"}), 400, "invalid_argument")

    assert admin.delete(f"/v1/api-keys/{created['id']}").status == 204
    assert_error(viewer.get("/v1/sandboxes"), 401, "unauthenticated")
    assert_error(admin.delete(f"/v1/api-keys/{created['id']}"), 404, "not_found")


def test_another_orgs_key_cannot_be_revoked(daemon, org):
    other = daemon.admin().post("/v1/orgs", {"name": "other-keys"}).json()
    k = daemon.admin().post(f"/v1/orgs/{other['id']}/api-keys", {"name": "a", "role": "admin"}).json()
    assert_error(org["admin"].delete(f"/v1/api-keys/{k['id']}"), 404, "not_found")
    assert daemon.client(k["key"]).get("/v1/whoami").status == 200
