"""`sandfort login --oidc`: the device authorization grant against a real OpenID provider
(oidc-provider, tests/oidc) and a real sandfortd that accepts its tokens; silent refresh; logout.
The polling protocol's edge cases (slow_down, expiry, an issuer that lies in its discovery
document, a token the daemon refuses) run against a small scripted issuer in this file.

Needs the sandfort and sandfortd binaries (SANDFORT_BUILD_DIR), node with tests/oidc's packages,
a Docker engine and root (the daemon's harness). It starts its own daemon and provider.
"""

import http.server
import json
import os
import queue
import re
import stat
import subprocess
import sys
import threading
import time

import pytest
from conftest import CLI, REPO

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from oidc_fixture import OidcError, OidcProvider, daemon_trusting, decode_jwt, issuer_config  # noqa: E402

CLIENT_ID = "sandfort-cli"


@pytest.fixture(scope="module")
def provider():
    p = OidcProvider().start()
    yield p
    p.cleanup()


@pytest.fixture(scope="module")
def daemon(provider):
    d = daemon_trusting(issuer_config(provider), jwks_min_refresh_s=1)
    yield d
    d.stop()
    d.cleanup()


class Home:
    """A user's HOME for the CLI, with no SANDFORT_* variables from the test's environment."""

    def __init__(self, path, base_url):
        os.makedirs(path, exist_ok=True)
        self.path = str(path)
        self.base_url = base_url
        self.config = os.path.join(self.path, "xdg", "sandfort", "config.json")

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SANDFORT_")}
        env.update(HOME=self.path, XDG_CONFIG_HOME=os.path.join(self.path, "xdg"), **extra)
        return env

    def run(self, *args, timeout=120, **extra):
        return subprocess.run([CLI, *args], env=self.env(**extra), capture_output=True, text=True,
                              timeout=timeout, cwd=self.path)

    def ok(self, *args, **extra):
        r = self.run(*args, **extra)
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
        return r

    def whoami(self, **extra):
        return json.loads(self.ok("whoami", "--json", **extra).stdout)

    def stored(self):
        with open(self.config) as f:
            return json.load(f)

    def store(self, config):
        with open(self.config, "w") as f:
            json.dump(config, f)

    def start_login(self, issuer, *extra_args, client_id=CLIENT_ID):
        return LoginRun(self, [CLI, "login", "--oidc", issuer, "--client-id", client_id,
                               "--base-url", self.base_url, *extra_args])


class LoginRun:
    """`sandfort login --oidc` running: its stderr is read as it comes, to find the user code."""

    def __init__(self, home, argv):
        self.proc = subprocess.Popen(argv, env=home.env(), cwd=home.path, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.stderr = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def user_code(self, timeout=30):
        """The code the CLI tells the user to check, and the URL it tells them to open."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.stderr.append(line)
            m = re.search(r"the code (\S+?)[ .)]", line) or re.search(r"the code (\S+)$", line.strip())
            if m:
                url = re.search(r"open (\S+)", "".join(self.stderr))
                return m.group(1), url.group(1) if url else None
        self.proc.kill()
        raise AssertionError("the CLI printed no user code:\n" + "".join(self.stderr))

    def finish(self, timeout=60):
        out = self.proc.stdout.read()
        self.proc.wait(timeout)
        self.reader.join(10)
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.stderr.append(line)
        self.proc.stdout.close()
        return self.proc.returncode, out, "".join(self.stderr)


@pytest.fixture
def home(tmp_path, daemon):
    return Home(tmp_path / "home", f"http://127.0.0.1:{daemon.port}")


@pytest.fixture
def offline_home(tmp_path):
    """For what fails before the daemon is asked: its URL leads nowhere."""
    return Home(tmp_path / "home", "http://127.0.0.1:9")


def login(home, provider, username):
    run = home.start_login(provider.issuer)
    code, url = run.user_code()
    assert url and url.startswith(provider.issuer + "/device"), url
    provider.device_flow_approve(code, username)
    rc, out, err = run.finish()
    assert rc == 0, (out, err)
    return out, err


def token_requests(provider):
    return provider.stats().get("token", 0)


# --- the device flow against the real provider ----------------------------------------------------

def test_login_whoami_and_the_stored_sign_in(home, provider):
    out, err = login(home, provider, "alice")
    assert "Logged in to " + home.base_url in out and "admin in acme" in out and provider.issuer in out
    assert "To sign in, open " + provider.issuer + "/device" in err

    who = home.whoami()
    assert who["auth"] == "oidc" and who["role"] == "admin" and who["org"] == "acme"
    assert who["principal"] == "alice" and who["issuer"] == provider.issuer
    text = home.ok("whoami").stdout
    for line in ("auth: oidc", "role: admin", "org: acme", "principal: alice"):
        assert line in text.splitlines(), text

    assert stat.S_IMODE(os.stat(home.config).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(home.config)).st_mode) == 0o700
    saved = home.stored()
    assert "api_key" not in saved and saved["base_url"] == home.base_url
    s = saved["oidc"]
    assert s["issuer"] == provider.issuer and s["client_id"] == CLIENT_ID
    assert s["refresh_token"] and s["token_endpoint"] == provider.token_endpoint
    header, claims = decode_jwt(s["access_token"])
    assert claims["sub"] == "alice" and claims["aud"] == "sandfort" and header["typ"] == "at+jwt"
    assert abs(s["expires_at"] - claims["exp"]) <= 5


def test_roles_come_from_the_issuers_groups(home, provider):
    login(home, provider, "carol")
    who = home.whoami()
    assert who["role"] == "viewer" and who["principal"] == "carol"
    r = home.run("sandbox", "create", "--json")
    assert r.returncode == 1 and "permission_denied" in r.stderr, r.stderr


def test_expired_access_token_is_refreshed_silently(home, provider):
    login(home, provider, "bob")
    before = home.stored()["oidc"]
    asked = token_requests(provider)

    # Two minutes left: no refresh.
    home.store({**home.stored(), "oidc": {**before, "expires_at": int(time.time()) + 120}})
    assert home.whoami()["role"] == "member"
    assert token_requests(provider) == asked and home.stored()["oidc"]["access_token"] == before["access_token"]

    # Expired: the next command refreshes first, stores the new tokens, and succeeds.
    home.store({**home.stored(), "oidc": {**before, "expires_at": int(time.time()) - 10}})
    who = home.whoami()
    assert who["role"] == "member" and who["principal"] == "bob"
    after = home.stored()["oidc"]
    assert token_requests(provider) == asked + 1
    assert after["access_token"] != before["access_token"]
    assert after["refresh_token"] != before["refresh_token"]  # oidc-provider rotates them
    assert after["expires_at"] > time.time() + 300
    assert stat.S_IMODE(os.stat(home.config).st_mode) == 0o600

    # Within the 30 s margin counts as expired too.
    home.store({**home.stored(), "oidc": {**after, "expires_at": int(time.time()) + 20}})
    home.whoami()
    assert token_requests(provider) == asked + 2
    assert home.stored()["oidc"]["access_token"] != after["access_token"]


def test_a_refused_token_is_renewed_once_and_the_request_repeated(home, provider):
    login(home, provider, "bob")
    s = home.stored()["oidc"]
    home.store({**home.stored(), "oidc": {**s, "access_token": s["access_token"][:-8] + "AAAAAAAA"}})
    asked = token_requests(provider)
    assert home.whoami()["principal"] == "bob"
    assert token_requests(provider) == asked + 1
    decode_jwt(home.stored()["oidc"]["access_token"])  # a real token again


def test_concurrent_commands_redeem_the_refresh_token_once(home, provider):
    # oidc-provider rotates refresh tokens and revokes the whole sign-in when an old one comes
    # back: without the lock, parallel commands would log the user out.
    login(home, provider, "alice")
    s = home.stored()["oidc"]
    home.store({**home.stored(), "oidc": {**s, "expires_at": 1}})
    asked = token_requests(provider)
    procs = [subprocess.Popen([CLI, "whoami", "--json"], env=home.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(5)]
    results = [(p.wait(60), p.stdout.read(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    for rc, out, err in results:
        assert rc == 0, err
        assert json.loads(out)["principal"] == "alice"
    assert token_requests(provider) == asked + 1
    assert home.whoami()["principal"] == "alice"


def test_denied_sign_in_fails_clearly_and_stores_nothing(home, provider):
    run = home.start_login(provider.issuer)
    code, _ = run.user_code()
    provider.device_flow_approve(code, "alice", approve=False)
    rc, out, err = run.finish()
    assert rc == 1, (out, err)
    assert "denied" in err and "access_denied" in err, err
    assert not os.path.exists(home.config)


def test_logout_forgets_and_revokes_the_refresh_token(home, provider):
    login(home, provider, "alice")
    refresh_token = home.stored()["oidc"]["refresh_token"]
    r = home.ok("logout")
    assert "Revoked the refresh token" in r.stdout, (r.stdout, r.stderr)
    assert not os.path.exists(home.config)
    with pytest.raises(OidcError, match="invalid_grant"):
        provider.refresh(refresh_token)
    r = home.run("whoami")
    assert r.returncode == 1 and "not logged in" in r.stderr


def test_an_api_key_in_the_environment_takes_precedence(home, provider, daemon):
    login(home, provider, "carol")
    who = home.whoami(SANDFORT_API_KEY=daemon.admin_key)
    assert who["auth"] == "api_key" and who["principal_name"] == "bootstrap"


def test_a_revoked_sign_in_says_to_log_in_again(home, provider):
    login(home, provider, "bob")
    s = home.stored()["oidc"]
    provider.refresh(s["refresh_token"])  # spent elsewhere: the stored one is now an old one
    home.store({**home.stored(), "oidc": {**s, "expires_at": 1}})
    r = home.run("whoami")
    assert r.returncode == 1
    assert "invalid_grant" in r.stderr and f"sandfort login --oidc {provider.issuer}" in r.stderr, r.stderr


def test_the_pty_and_streams_renew_a_refused_token(home, provider):
    login(home, provider, "bob")

    def spoil():
        s = home.stored()["oidc"]
        home.store({**home.stored(), "oidc": {**s, "access_token": s["access_token"][:-8] + "AAAAAAAA"}})

    sid = home.ok("sandbox", "create", "--wait").stdout.strip()
    try:
        spoil()
        r = home.run("exec", sid, "sh", "-c", "echo streamed")
        assert r.returncode == 0 and r.stdout == "streamed\n", r.stderr
        spoil()
        r = subprocess.run([CLI, "shell", sid, "-c", "sh"], input="echo through-the-pty\nexit 4\n",
                           env=home.env(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 4 and "through-the-pty" in r.stdout, r.stderr
    finally:
        home.run("sandbox", "rm", sid)


# --- what the CLI refuses before anything reaches a provider --------------------------------------

def test_plain_http_only_to_loopback(offline_home):
    r = offline_home.run("login", "--oidc", "http://idp.example.com", "--client-id", CLIENT_ID,
                         "--base-url", offline_home.base_url)
    assert r.returncode == 1 and "https://" in r.stderr, r.stderr


def test_oidc_options_need_each_other(offline_home):
    url = offline_home.base_url
    assert offline_home.run("login", "--oidc", "https://idp.example.com", "--base-url", url).returncode == 2
    assert offline_home.run("login", "--client-id", CLIENT_ID, "--base-url", url).returncode == 2


# --- the polling protocol, against a scripted issuer ----------------------------------------------

class ScriptedIssuer:
    """Discovery, device authorization and a token endpoint that answers from a script."""

    def __init__(self, token_answers, interval=1, expires_in=600, issuer_claim=None):
        self.token_answers = list(token_answers)
        self.polls = []
        self.forms = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path != "/.well-known/openid-configuration":
                    return self.answer(404, {})
                self.answer(200, {"issuer": issuer_claim or outer.issuer, "token_endpoint": outer.issuer + "/token",
                                  "device_authorization_endpoint": outer.issuer + "/device/auth"})

            def do_POST(self):
                form = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                outer.forms.append((self.path, form))
                if self.path == "/device/auth":
                    return self.answer(200, {"device_code": "dc-1", "user_code": "WXYZ-1234",
                                             "verification_uri": outer.issuer + "/device",
                                             "expires_in": expires_in, "interval": interval})
                outer.polls.append(time.monotonic())
                status, body = outer.token_answers.pop(0) if outer.token_answers else (
                    400, {"error": "authorization_pending"})
                self.answer(status, body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    made = []

    def make(*args, **kw):
        made.append(ScriptedIssuer(*args, **kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


def test_polling_honours_interval_and_slow_down_then_expired_token(offline_home, scripted):
    idp = scripted([(400, {"error": "authorization_pending"}), (400, {"error": "slow_down"}),
                    (400, {"error": "authorization_pending"}), (400, {"error": "expired_token"})])
    run = offline_home.start_login(idp.issuer, "--scope", "openid offline_access", "--resource", "urn:sandfort")
    code, url = run.user_code()
    assert code == "WXYZ-1234" and url == idp.issuer + "/device"
    rc, out, err = run.finish()
    assert rc == 1 and "expired" in err and "WXYZ-1234" in err, err
    assert not os.path.exists(offline_home.config)
    gaps = [b - a for a, b in zip(idp.polls, idp.polls[1:])]
    assert len(idp.polls) == 4, idp.polls
    assert 0.9 <= gaps[0] < 3, gaps  # interval 1
    assert gaps[1] >= 5.9 and gaps[2] >= 5.9, gaps  # slow_down: +5 s, and it stays
    device_form = dict(p.split("=", 1) for p in idp.forms[0][1].split("&"))
    assert device_form == {"client_id": CLIENT_ID, "scope": "openid%20offline_access", "resource": "urn%3Asandfort"}
    token_form = dict(p.split("=", 1) for p in idp.forms[1][1].split("&"))
    assert token_form["grant_type"] == "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code"
    assert token_form["device_code"] == "dc-1" and token_form["client_id"] == CLIENT_ID


def test_the_code_expires_on_the_cli_side_too(offline_home, scripted):
    idp = scripted([], interval=1, expires_in=2)
    run = offline_home.start_login(idp.issuer)
    run.user_code()
    rc, _, err = run.finish()
    assert rc == 1 and "expired before the sign-in was completed" in err, err
    assert len(idp.polls) <= 2


def test_a_discovery_document_for_another_issuer_is_refused(offline_home, scripted):
    idp = scripted([], issuer_claim="https://evil.example")
    r = offline_home.run("login", "--oidc", idp.issuer, "--client-id", CLIENT_ID,
                         "--base-url", offline_home.base_url)
    assert r.returncode == 1 and "names the issuer" in r.stderr, r.stderr
    assert idp.forms == []


def test_a_token_the_daemon_refuses_is_not_saved(home, scripted):
    idp = scripted([(200, {"access_token": "not-a-jwt", "token_type": "Bearer", "expires_in": 600,
                           "refresh_token": "rt"})])
    run = home.start_login(idp.issuer)
    run.user_code()
    rc, _, err = run.finish()
    assert rc == 1 and "does not accept the token" in err and "nothing was saved" in err, err
    assert not os.path.exists(home.config)
