"""Signing in to the console through an identity provider (docs/console.md), against a real one:
oidc-provider (tests/oidc) on 127.0.0.1 and a real sandfortd configured with its client
`sandfort-console` (a confidential client, its secret in a file).

The authorization code flow is driven over HTTP as a browser would: the daemon's start route, the
provider's login and consent pages, the daemon's callback with the pre-login cookie. What must not
sign anyone in is refused with a short code on the redirect to the console: a state used twice, a
callback without the browser's pre-login cookie or with another one, a sign-in begun too long ago,
the provider's own refusal, an answer naming another issuer. A user of another organization's
mapping lands in that organization; the session is that user, with the role the provider's groups
map to, audited under the user's name, and ends at sign-out."""

import http.client
import os
import sqlite3
import tempfile
import urllib.parse

import pytest

from oidc_fixture import OidcProvider, issuer_config
from sandfort_harness import Daemon

ISSUERS = "/v1/console/oidc/issuers"
START = "/v1/console/oidc/start"
CLIENT_ID = "sandfort-console"


@pytest.fixture(scope="module")
def idp():
    p = OidcProvider().start()
    yield p
    p.cleanup()


@pytest.fixture(scope="module")
def secret_file(idp):
    fd, path = tempfile.mkstemp(prefix="sandfort-console-secret-")
    os.write(fd, (idp.client_secret(CLIENT_ID) + "\n").encode())
    os.close(fd)
    os.chmod(path, 0o600)
    yield path
    os.unlink(path)


@pytest.fixture(scope="module")
def daemon(idp, secret_file):
    d = Daemon({"oidc": {"issuers": [issuer_config(idp, console_client_id=CLIENT_ID,
                                                   console_client_secret_file=secret_file,
                                                   console_name="Test IdP")]}}).start()
    for name in ("acme", "other-org"):
        r = d.admin().post("/v1/orgs", {"name": name})
        assert r.status == 201, r
    yield d
    d.stop_and_cleanup()


def issuer_id(daemon):
    items = daemon.client().get(ISSUERS).json()["items"]
    assert len(items) == 1, items
    return items[0]["id"]


class Answer:
    """One HTTP answer with every Set-Cookie header kept (a dict would keep only the last)."""

    def __init__(self, r):
        self.status = r.status
        self.location = r.getheader("Location")
        self.headers = r.msg
        self.cookies = {}
        for raw in r.msg.get_all("Set-Cookie") or []:
            pairs = [p.strip() for p in raw.split(";")]
            name, value = pairs[0].split("=", 1)
            attributes = {p.split("=", 1)[0].lower(): (p.split("=", 1)[1] if "=" in p else True) for p in pairs[1:]}
            self.cookies[name] = (value, attributes)
        self.body = r.read()


def get(daemon, path, cookie=None, host=None):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=60)
    headers = {"Cookie": cookie} if cookie else {}
    if host:
        headers["Host"] = host
    conn.request("GET", path, headers=headers)
    out = Answer(conn.getresponse())
    conn.close()
    return out


def start(daemon, issuer=None):
    """The start route as a browser calls it: the provider's URL, and the pre-login cookie."""
    r = get(daemon, f"{START}?issuer={issuer or issuer_id(daemon)}")
    assert r.status == 302, (r.status, r.body)
    value, attributes = r.cookies["sandfort_login"]
    return r.location, value, attributes


def callback_of(url):
    """The path and query of the provider's redirect back to the daemon, and its parameters."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.path}?{parts.query}", dict(urllib.parse.parse_qsl(parts.query))


def come_back(daemon, url, login_cookie):
    path, _ = callback_of(url)
    return get(daemon, path, cookie=f"sandfort_login={login_cookie}" if login_cookie else None)


def refused_with(answer, code):
    assert answer.status == 302, (answer.status, answer.body)
    assert answer.location == f"/console/#/signin?error={code}", answer.location
    assert "sandfort_session" not in answer.cookies, "a refused sign-in made a session"
    assert answer.cookies["sandfort_login"][1]["max-age"] == "0"  # the pre-login cookie is cleared
    assert answer.body == b""


def sign_in(daemon, idp, username):
    """The whole flow for username; the session cookie's value."""
    location, login_cookie, _ = start(daemon)
    r = come_back(daemon, idp.authorization_code_approve(location, username), login_cookie)
    assert r.status == 302 and r.location == "/console/", (r.status, r.location, daemon.log()[-2000:])
    return r.cookies["sandfort_session"][0]


def as_browser(daemon, cookie, method="GET", path="/v1/whoami", csrf=None):
    headers = {"Cookie": f"sandfort_session={cookie}"}
    if method != "GET":
        headers["Origin"] = f"http://127.0.0.1:{daemon.port}"
    if csrf:
        headers["X-Sandfort-CSRF"] = csrf
    return daemon.client().request(method, path, headers=headers)


def test_the_issuers_offering_sign_in_are_listed_by_key_and_label_only(daemon, idp, secret_file):
    r = daemon.client().get(ISSUERS)
    assert r.status == 200, r
    (item,) = r.json()["items"]
    assert set(item) == {"id", "name"} and item["name"] == "Test IdP" and len(item["id"]) == 16, item
    # Nothing of the configuration beyond that: not the client, not its secret, not the issuer's URL.
    for secret in (idp.client_secret(CLIENT_ID), CLIENT_ID, idp.issuer, secret_file):
        assert secret.encode() not in r.body


def test_start_sends_the_browser_to_the_provider_with_pkce_and_a_lax_pre_login_cookie(daemon, idp):
    location, login_cookie, attributes = start(daemon)
    assert location.startswith(idp.discovery()["authorization_endpoint"] + "?"), location
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    assert query["response_type"] == "code" and query["client_id"] == CLIENT_ID and query["scope"] == "openid"
    assert query["redirect_uri"] == f"http://127.0.0.1:{daemon.port}/v1/console/oidc/callback"
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert len(query["state"]) == 64 and len(query["nonce"]) == 32
    assert "code_verifier" not in location and login_cookie not in location
    # HttpOnly, SameSite=Lax (the way back is a cross-site navigation), this host, five minutes;
    # and it is not the session cookie.
    assert len(login_cookie) == 64 and attributes.get("httponly") is True and attributes.get("samesite") == "Lax"
    assert attributes.get("path") == "/" and "domain" not in attributes and attributes.get("max-age") == "300"
    r = as_browser(daemon, login_cookie)
    assert r.status == 401, r
    # The callback goes where the browser came from (the Host it sent), and a Host that is no host
    # is refused rather than put into a redirect URI.
    moved = get(daemon, f"{START}?issuer={issuer_id(daemon)}", host=f"localhost:{daemon.port}")
    assert urllib.parse.quote(f"http://localhost:{daemon.port}/v1/console/oidc/callback", safe="") in moved.location
    bad = get(daemon, f"{START}?issuer={issuer_id(daemon)}", host="evil.example/x")
    assert bad.status == 400 and b"invalid_argument" in bad.body, bad.body
    unknown = get(daemon, f"{START}?issuer=ffffffffffffffff")
    assert unknown.status == 400 and b"invalid_argument" in unknown.body, unknown.body


def test_a_person_signs_in_through_the_provider_and_the_session_is_that_person(daemon, idp):
    cookie = sign_in(daemon, idp, "bob")
    who = as_browser(daemon, cookie)
    assert who.status == 200, who
    body = who.json()
    assert body["auth"] == "oidc" and body["principal"] == "bob" and body["issuer"] == idp.issuer, body
    assert body["role"] == "member" and body["org"] == "acme" and body["principal_name"] == "bob", body
    session = as_browser(daemon, cookie, path="/v1/console/session")
    assert session.status == 200 and len(session.json()["csrf_token"]) == 32, session
    csrf = session.json()["csrf_token"]
    # The session is worth bob's role, and the console's CSRF rule holds for it as for a key's.
    assert as_browser(daemon, cookie, "POST", "/v1/sandboxes").status == 403
    made = as_browser(daemon, cookie, "POST", "/v1/orgs", csrf=csrf)
    assert made.status == 403 and "role member" in made.json()["error"]["message"], made
    # Signing out ends it at once.
    assert as_browser(daemon, cookie, "DELETE", "/v1/console/session", csrf=csrf).status == 204
    assert as_browser(daemon, cookie).status == 401


def test_the_sign_in_is_audited_under_the_providers_user(daemon, idp):
    cookie = sign_in(daemon, idp, "alice")  # an admin of acme reads its chain
    r = as_browser(daemon, cookie, path="/v1/audit?action=console.sign_in")
    assert r.status == 200, r
    events = [e for e in r.json()["items"] if e["actor"] == f"oidc:alice@{idp.issuer}"]
    assert events, r.json()
    assert events[-1]["target"] == "alice" and events[-1]["details"]["issuer"] == idp.issuer, events[-1]
    assert events[-1]["details"]["role"] == "admin"
    assert cookie not in r.body.decode()


def test_a_state_is_good_for_one_callback(daemon, idp):
    location, login_cookie, _ = start(daemon)
    back = idp.authorization_code_approve(location, "carol")
    first = come_back(daemon, back, login_cookie)
    assert first.status == 302 and first.location == "/console/" and "sandfort_session" in first.cookies
    refused_with(come_back(daemon, back, login_cookie), "expired")


def test_a_callback_without_the_pre_login_cookie_or_with_another_is_refused(daemon, idp):
    # Login CSRF: the attacker's own code and state, planted in a victim's browser, which holds no
    # pre-login cookie of that sign-in (or one of its own).
    location, _, _ = start(daemon)
    refused_with(come_back(daemon, idp.authorization_code_approve(location, "bob"), None), "wrong_browser")
    location, _, _ = start(daemon)
    _, victims_cookie, _ = start(daemon)
    refused_with(come_back(daemon, idp.authorization_code_approve(location, "bob"), victims_cookie), "wrong_browser")
    # Either way the state is spent: the right cookie afterwards opens nothing.
    location, mine, _ = start(daemon)
    back = idp.authorization_code_approve(location, "bob")
    refused_with(come_back(daemon, back, "0" * 64), "wrong_browser")
    refused_with(come_back(daemon, back, mine), "expired")


def test_a_sign_in_begun_too_long_ago_is_refused(daemon, idp):
    location, login_cookie, _ = start(daemon)
    back = idp.authorization_code_approve(location, "bob")
    # Five minutes pass: the row's expiry is moved into the past rather than the test waiting.
    _, params = callback_of(back)
    db = sqlite3.connect(os.path.join(daemon.state_dir, "sandfort.db"), timeout=30)
    with db:
        n = db.execute("UPDATE console_logins SET expires_at = '2000-01-01T00:00:00.000Z'").rowcount
    db.close()
    assert n >= 1 and len(params["state"]) == 64
    refused_with(come_back(daemon, back, login_cookie), "expired")


def test_the_providers_refusal_and_an_answer_naming_another_issuer(daemon, idp):
    location, login_cookie, _ = start(daemon)
    refused_with(come_back(daemon, idp.authorization_code_approve(location, "bob", approve=False), login_cookie),
                 "cancelled")
    # Mix-up (RFC 9207): the provider names itself in `iss`; an answer naming another issuer is
    # refused before its code is sent anywhere.
    location, login_cookie, _ = start(daemon)
    path, params = callback_of(idp.authorization_code_approve(location, "bob"))
    forged = path.replace(urllib.parse.quote(idp.issuer, safe=""), urllib.parse.quote("http://127.0.0.1:1", safe=""))
    assert forged != path
    refused_with(get(daemon, forged, cookie=f"sandfort_login={login_cookie}"), "issuer_mismatch")
    # A code that is not the provider's (injected), with a state and cookie of ours.
    location, login_cookie, _ = start(daemon)
    path, params = callback_of(idp.authorization_code_approve(location, "bob"))
    injected = path.replace(f"code={params['code']}", "code=not-a-code")
    refused_with(get(daemon, injected, cookie=f"sandfort_login={login_cookie}"), "token_exchange")
    # No state at all, or one that was never ours.
    refused_with(get(daemon, "/v1/console/oidc/callback?code=x"), "bad_callback")
    refused_with(get(daemon, "/v1/console/oidc/callback?code=x&state=" + "a" * 64), "expired")
    # Nothing the provider wrote reaches the page.
    out = get(daemon, "/v1/console/oidc/callback?error=%3Cscript%3E&error_description=%3Cb%3Ehi&state=" + "b" * 64)
    assert "script" not in out.location and out.body == b""


def test_a_user_of_another_organizations_mapping_lands_in_that_organization(daemon, idp):
    cookie = sign_in(daemon, idp, "erin")
    who = as_browser(daemon, cookie).json()
    assert who["org"] == "other-org" and who["role"] == "member" and who["principal"] == "erin", who
    # Mallory's provider grants her no role there: no session at all.
    location, login_cookie, _ = start(daemon)
    refused_with(come_back(daemon, idp.authorization_code_approve(location, "mallory"), login_cookie), "no_access")


def test_the_session_ends_when_its_organization_is_disabled(daemon, idp):
    cookie = sign_in(daemon, idp, "erin")
    admin = daemon.admin()
    org = next(o for o in admin.get("/v1/orgs").json()["items"] if o["name"] == "other-org")
    assert admin.post(f"/v1/orgs/{org['id']}/disable").status == 200
    try:
        assert as_browser(daemon, cookie).status == 403
        location, login_cookie, _ = start(daemon)
        refused_with(come_back(daemon, idp.authorization_code_approve(location, "erin"), login_cookie), "no_access")
    finally:
        assert admin.post(f"/v1/orgs/{org['id']}/enable").status == 200
    assert as_browser(daemon, cookie).status == 200
