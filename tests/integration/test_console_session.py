"""The console's sign-in (docs/console.md) against a real daemon: an API key becomes a session
cookie that stands for that key on every route and for nothing more; a change made with it needs
the session's CSRF token and an Origin of this host, a terminal's WebSocket that Origin; it ends
with its key, at sign-out, and when its key has signed in too often since."""

import socket

import pytest

from sandfort_harness import Client

SESSION = "/v1/console/session"


def cookie_of(response):
    """The session cookie's value and attributes from a Set-Cookie header."""
    raw = response.headers["Set-Cookie"]
    pairs = [p.strip() for p in raw.split(";")]
    name, value = pairs[0].split("=", 1)
    attributes = {p.split("=", 1)[0].lower(): (p.split("=", 1)[1] if "=" in p else True) for p in pairs[1:]}
    return name, value, attributes


def sign_in(daemon, key):
    r = daemon.client(key).post(SESSION)
    assert r.status == 201, r
    name, value, _ = cookie_of(r)
    assert name == "sandfort_session"
    return value, r.json()["csrf_token"]


class Browser:
    """Requests as the console's page makes them: the cookie, this host's Origin, the CSRF token."""

    def __init__(self, daemon, cookie, csrf=None, origin=None):
        self.client = Client(daemon.port)
        self.cookie, self.csrf = cookie, csrf
        self.origin = origin if origin is not None else f"http://127.0.0.1:{daemon.port}"

    def request(self, method, path, body=None, **extra):
        headers = {"Cookie": f"sandfort_session={self.cookie}"}
        if self.origin:
            headers["Origin"] = self.origin
        if self.csrf:
            headers["X-Sandfort-CSRF"] = self.csrf
        headers.update(extra)
        return self.client.request(method, path, body=body, headers=headers)


def test_a_key_signs_in_and_the_cookie_is_that_key_with_its_role(daemon, org):
    r = daemon.client(org["keys"]["member"]).post(SESSION)
    assert r.status == 201, r
    name, value, attributes = cookie_of(r)
    # HttpOnly (no script reads it), SameSite=Strict, this host only (no Domain), not cached.
    assert name == "sandfort_session" and len(value) == 64
    assert attributes.get("httponly") is True and attributes.get("samesite") == "Strict"
    assert attributes.get("path") == "/" and "domain" not in attributes and "secure" not in attributes
    assert 8 * 3600 - 60 < int(attributes["max-age"]) <= 8 * 3600
    assert r.headers.get("Cache-Control") == "no-store"
    body = r.json()
    assert body["role"] == "member" and body["org_id"] == org["org"]["id"] and body["auth"] == "api_key"
    assert len(body["csrf_token"]) == 32 and body["expires_at"]
    assert value not in r.body.decode()  # the secret is in the cookie only

    b = Browser(daemon, value)
    who = b.request("GET", "/v1/whoami")
    assert who.status == 200 and who.json()["principal"] == body["principal"], who
    again = b.request("GET", SESSION)
    assert again.status == 200 and again.json()["csrf_token"] == body["csrf_token"], again
    # The role is the key's: a viewer's session reads and changes nothing.
    viewer, viewer_csrf = sign_in(daemon, org["keys"]["viewer"])
    refused = Browser(daemon, viewer, viewer_csrf).request("POST", "/v1/sandboxes", {"wait": False})
    assert refused.status == 403 and refused.json()["error"]["code"] == "permission_denied", refused
    assert "role viewer" in refused.json()["error"]["message"]


def test_a_change_needs_the_csrf_token_and_this_hosts_origin(daemon, org):
    cookie, csrf = sign_in(daemon, org["keys"]["member"])
    forged = {
        "no token": Browser(daemon, cookie),
        "a wrong token": Browser(daemon, cookie, "0" * 32),
        "no Origin": Browser(daemon, cookie, csrf, origin=""),
        "another site's Origin": Browser(daemon, cookie, csrf, origin="https://evil.example"),
        "a preview's Origin": Browser(daemon, cookie, csrf,
                                      origin=f"http://8080-sbx-0123456789abcdef.preview.localhost:{daemon.preview_port}"),
    }
    for label, b in forged.items():
        r = b.request("POST", "/v1/sandboxes", {"wait": False, "labels": {"forged": "yes"}})
        assert r.status == 403 and r.json()["error"]["code"] == "permission_denied", (label, r)
    # A cross-site HTML form: urlencoded body, the other site's Origin, no token.
    form = Browser(daemon, cookie, origin="https://evil.example").request(
        "POST", "/v1/sandboxes", None, **{"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status == 403, form
    listed = daemon.client(org["keys"]["member"]).get("/v1/sandboxes?label=forged:yes").json()["items"]
    assert listed == []  # nothing was made

    made = Browser(daemon, cookie, csrf).request("POST", "/v1/sandboxes", {"wait": False, "labels": {"by": "console"}})
    assert made.status == 201, made
    sid = made.json()["id"]
    # Audited as the key it stands for.
    key_id = org["member"].get("/v1/whoami").json()["principal"]
    events = org["admin"].get(f"/v1/audit?limit=1000&target={sid}&action=sandbox.create").json()["items"]
    assert [e["actor"] for e in events] == [f"key:{key_id}"], events
    gone = Browser(daemon, cookie, csrf).request("DELETE", f"/v1/sandboxes/{sid}")
    assert gone.status == 204, gone


def pty_status(daemon, sandbox_id, cookie, origin):
    s = socket.create_connection(("127.0.0.1", daemon.port), timeout=30)
    try:
        s.sendall((f"GET /v1/sandboxes/{sandbox_id}/pty?cols=80&rows=24 HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\n"
                   f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                   f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nCookie: sandfort_session={cookie}\r\n"
                   + (f"Origin: {origin}\r\n" if origin else "") + "\r\n").encode())
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        return int(head.split(b" ", 2)[1])
    finally:
        s.close()


def test_a_terminal_opens_from_this_hosts_origin_only(daemon, org):
    member = org["member"]
    sbx = member.create_sandbox()
    try:
        cookie, _ = sign_in(daemon, org["keys"]["member"])
        # A file's bytes (relayed from the agent) and a JSON answer never run as a script in a page
        # that loads them with the cookie.
        raw = Browser(daemon, cookie).request("GET", f"/v1/sandboxes/{sbx['id']}/files?path=/etc/hostname")
        assert raw.status == 200 and raw.headers.get("X-Content-Type-Options") == "nosniff", raw.headers
        assert Browser(daemon, cookie).request("GET", "/v1/whoami").headers.get("X-Content-Type-Options") == "nosniff"
        assert pty_status(daemon, sbx["id"], cookie, f"http://127.0.0.1:{daemon.port}") == 101
        for origin in ("https://evil.example", f"http://8080-{sbx['id']}.preview.localhost:{daemon.preview_port}", ""):
            assert pty_status(daemon, sbx["id"], cookie, origin) == 403, origin
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_the_session_ends_with_its_key_and_at_sign_out(daemon, org):
    admin = org["admin"]
    k = admin.post("/v1/api-keys", {"name": "console-temp", "role": "member"}).json()
    cookie, csrf = sign_in(daemon, k["key"])
    assert Browser(daemon, cookie).request("GET", "/v1/whoami").status == 200
    assert admin.delete(f"/v1/api-keys/{k['id']}").status == 204
    r = Browser(daemon, cookie).request("GET", "/v1/whoami")
    assert r.status == 401 and r.json()["error"]["code"] == "unauthenticated", r

    cookie, csrf = sign_in(daemon, org["keys"]["member"])
    # Signing out is a change: without the token it is refused and the session lives on.
    assert Browser(daemon, cookie).request("DELETE", SESSION).status == 403
    out = Browser(daemon, cookie, csrf).request("DELETE", SESSION)
    assert out.status == 204, out
    name, value, attributes = cookie_of(out)
    assert name == "sandfort_session" and value == "" and attributes["max-age"] == "0"
    assert Browser(daemon, cookie).request("GET", "/v1/whoami").status == 401
    actions = [e["action"] for e in org["admin"].get("/v1/audit?limit=1000").json()["items"]]
    assert "console.sign_in" in actions and "console.sign_out" in actions


def test_bad_cookies_and_other_credentials_open_nothing(daemon, org):
    for bad in ("", "x" * 64, "A" * 64, "0" * 63):
        r = Browser(daemon, bad).request("GET", "/v1/whoami")
        assert r.status == 401, (bad, r)
    # The session routes want a key, and a session for GET/DELETE.
    r = daemon.client(org["keys"]["member"]).get(SESSION)
    assert r.status == 404 and "without the console's cookie" in r.json()["error"]["message"], r
    r = daemon.client("sfk_" + "0" * 32).post(SESSION)
    assert r.status == 401, r
    cookie, csrf = sign_in(daemon, org["keys"]["member"])
    r = Browser(daemon, cookie, csrf).request("POST", SESSION)
    assert r.status == 400 and "Authorization" in r.json()["error"]["message"], r
    # An Authorization header wins over the cookie: a bad one is not rescued by a good cookie.
    r = Browser(daemon, cookie).request("GET", "/v1/whoami", Authorization="Bearer sfk_" + "1" * 32)
    assert r.status == 401, r


def test_a_key_holds_twenty_sessions_and_the_oldest_ends(daemon, org):
    admin = org["admin"]
    k = admin.post("/v1/api-keys", {"name": "console-many", "role": "viewer"}).json()
    cookies = [sign_in(daemon, k["key"])[0] for _ in range(21)]
    assert Browser(daemon, cookies[0]).request("GET", "/v1/whoami").status == 401
    assert all(Browser(daemon, c).request("GET", "/v1/whoami").status == 200 for c in cookies[1:])
    admin.delete(f"/v1/api-keys/{k['id']}")
