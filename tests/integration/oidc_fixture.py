"""A real OpenID provider for the tests: tests/oidc/provider.mjs (panva's oidc-provider) run by
node on 127.0.0.1, with the helpers a test needs to obtain real tokens (client credentials, the
device flow with a user's login and consent over HTTP) and a corpus of forged ones.
Standard library only. `npm ci` must have been run in tests/oidc (scripts/setup does it).

    oidc = OidcProvider().start(alg="RS256")
    token = oidc.client_credentials_token("sandfort-admin")
    ...
    oidc.rotate_keys(); oidc.restart()      # same issuer, new signing keys first
    oidc.stop(); oidc.cleanup()
"""

import base64
import html.parser
import http.cookiejar
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OIDC_DIR = os.path.join(REPO, "tests", "oidc")
PROVIDER = os.path.join(OIDC_DIR, "provider.mjs")
KEYS = os.path.join(OIDC_DIR, "keys.mjs")
FORGE = os.path.join(OIDC_DIR, "forge.mjs")
VERIFY = os.path.join(OIDC_DIR, "verify.mjs")

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
CLI_CLIENT_ID = "sandfort-cli"


class OidcError(Exception):
    """The provider refused a request or a flow did not end where it should."""


class OidcSetupError(OidcError):
    """node or the npm packages of tests/oidc are missing."""


def _node():
    node = shutil.which("node")
    if not node:
        raise OidcSetupError("node is not installed; the OIDC tests need Node.js >= 20")
    if not os.path.isfile(os.path.join(OIDC_DIR, "node_modules", "oidc-provider", "package.json")):
        raise OidcSetupError(
            f"{OIDC_DIR}/node_modules has no oidc-provider: run `npm ci` in tests/oidc "
            "(scripts/setup does it)")
    return node


def decode_jwt(token):
    """(header, payload) of a compact JWS, without verifying anything."""
    def part(segment):
        return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    header, payload, _ = token.split(".")
    return part(header), part(payload)


def run_node(script, *args, stdin=None, timeout=60):
    """Run one of the tests/oidc scripts; its stdout, or OidcError with its stderr."""
    proc = subprocess.run([_node(), script, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, cwd=OIDC_DIR)
    if proc.returncode != 0:
        raise OidcError(f"{os.path.basename(script)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def generate_keys(path):
    """A fresh keys file (RS256, ES256 and EdDSA private keys)."""
    run_node(KEYS, "generate", path)
    return path


def rotate_keys(path, drop_old=False):
    """New keys first in the keys file; the old ones stay after them unless drop_old."""
    run_node(KEYS, "rotate", path, *(["--drop-old"] if drop_old else []))
    return path


class _Form:
    def __init__(self, attrs):
        self.id = attrs.get("id")
        self.action = attrs.get("action", "")
        self.method = (attrs.get("method") or "get").lower()
        self.fields = {}


class _FormParser(html.parser.HTMLParser):
    """Forms (with their hidden and text inputs) and the error/success markers of a page."""

    def __init__(self):
        super().__init__()
        self.forms = []
        self.markers = {}
        self._form = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self._form = _Form(a)
            self.forms.append(self._form)
        elif tag == "input" and self._form is not None and a.get("name"):
            self._form.fields[a["name"]] = a.get("value") or ""
        if a.get("id") in ("error", "success"):
            self.markers[a["id"]] = a

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None


class _Page:
    def __init__(self, url, status, body):
        self.url = url
        self.status = status
        self.body = body
        parser = _FormParser()
        parser.feed(body)
        self.forms = {f.id: f for f in parser.forms}
        self.markers = parser.markers


class _Browser:
    """A user agent with a cookie jar that follows redirects, as a browser would."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def open(self, url, fields=None):
        data = urllib.parse.urlencode(fields).encode() if fields is not None else None
        try:
            with self.opener.open(urllib.request.Request(url, data=data), timeout=self.timeout) as r:
                return _Page(r.geturl(), r.status, r.read().decode())
        except urllib.error.HTTPError as e:
            return _Page(e.geturl(), e.code, e.read().decode(errors="replace"))

    def submit(self, page, form_id, **values):
        form = page.forms[form_id]
        return self.open(urllib.parse.urljoin(page.url, form.action), {**form.fields, **values})


class _StopLeaving(urllib.request.HTTPRedirectHandler):
    """Follows redirects within one origin; one that leaves it (to a client's redirect URI) is
    noted in `left` and not followed."""

    def __init__(self, origin):
        self.origin = origin
        self.left = None

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not newurl.startswith(self.origin + "/"):
            self.left = newurl
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class OidcProvider:
    """tests/oidc/provider.mjs as a subprocess. Issuer http://127.0.0.1:<port>."""

    def __init__(self, workdir=None, timeout=30):
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="sandfort-oidc-")
        self.timeout = timeout
        self.proc = None
        self.info = None
        self.port = None
        self.keys_path = None
        self._options = {}
        self._log = None

    # --- process ---------------------------------------------------------------------------------

    def start(self, alg="RS256", keys_path=None, port=0, audience="sandfort", resource=None,
              token_ttl=600, jwks_max_age=None, clients_path=None, device_interval=1):
        """Start the provider; keys_path is created with new keys when missing.
        alg: RS256, ES256 or EdDSA, for the access tokens of the default resource (aud=audience).
        token_ttl: lifetime of access tokens in seconds. jwks_max_age: Cache-Control of /jwks
        (none by default). device_interval: the polling interval the device flow advertises."""
        if self.proc is not None:
            raise OidcError("the provider is already running")
        node = _node()
        self.keys_path = keys_path or self.keys_path or os.path.join(self.workdir, "keys.json")
        self._options = dict(alg=alg, audience=audience, resource=resource, token_ttl=token_ttl,
                             jwks_max_age=jwks_max_age, clients_path=clients_path,
                             device_interval=device_interval)
        args = [node, PROVIDER, "--keys", self.keys_path, "--port", str(port), "--alg", alg,
                "--audience", audience, "--token-ttl", str(token_ttl),
                "--device-interval", str(device_interval)]
        if resource:
            args += ["--resource", resource]
        if jwks_max_age is not None:
            args += ["--jwks-max-age", str(jwks_max_age)]
        if clients_path:
            args += ["--clients", clients_path]
        self._log = open(os.path.join(self.workdir, "provider.log"), "ab")
        self.proc = subprocess.Popen(args, cwd=OIDC_DIR, stdout=subprocess.PIPE, stderr=self._log,
                                     stdin=subprocess.DEVNULL)
        line = self._ready_line()
        self.info = json.loads(line)
        self.port = self.info["port"]
        return self

    def _ready_line(self):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                if sel.select(timeout=0.2):
                    line = self.proc.stdout.readline().decode()
                    if line.strip():
                        return line
                if self.proc.poll() is not None:
                    break
        finally:
            sel.close()
        self.stop()
        raise OidcError(f"the OpenID provider did not start:\n{self.log()}")

    def stop(self):
        """Stop the provider (SIGTERM, then SIGKILL after 5 s); its exit code."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        self._log.close()
        return proc.returncode

    def restart(self, **changes):
        """Stop and start again on the same port (so the same issuer), with the same keys file
        and options unless changed: stage a key rotation with rotate_keys() first."""
        options = {**self._options, "keys_path": self.keys_path, **changes}
        port = self.port
        self.stop()
        return self.start(port=port, **options)

    def rotate_keys(self, drop_old=False):
        """A new key per algorithm, first in the keys file; effective at the next restart()."""
        return rotate_keys(self.keys_path, drop_old)

    def cleanup(self):
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log(self):
        try:
            with open(os.path.join(self.workdir, "provider.log"), encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()

    # --- endpoints -------------------------------------------------------------------------------

    @property
    def issuer(self):
        return self.info["issuer"]

    @property
    def jwks_uri(self):
        return self.issuer + "/jwks"

    @property
    def discovery_url(self):
        return self.issuer + "/.well-known/openid-configuration"

    @property
    def token_endpoint(self):
        return self.issuer + "/token"

    @property
    def device_authorization_endpoint(self):
        return self.issuer + "/device/auth"

    @property
    def clients(self):
        """{client_id: metadata} as the provider loaded them (with client_secret, org, groups)."""
        return {c["client_id"]: c for c in self.info["clients"]}

    @property
    def accounts(self):
        """{username: {name, org, groups}} of the users who can sign in through the device flow."""
        return self.info["accounts"]

    def client_secret(self, client_id):
        return self.clients[client_id]["client_secret"]

    def _request(self, method, url, fields=None, headers=None):
        data = urllib.parse.urlencode(fields).encode() if fields is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def _json(self, method, url, fields=None, headers=None):
        status, _, body = self._request(method, url, fields, headers)
        try:
            value = json.loads(body) if body else None
        except ValueError:
            raise OidcError(f"{method} {url}: HTTP {status}, not JSON: {body[:300]!r}") from None
        return status, value

    def discovery(self):
        status, doc = self._json("GET", self.discovery_url)
        if status != 200:
            raise OidcError(f"discovery: HTTP {status} {doc}")
        return doc

    def jwks(self):
        status, doc = self._json("GET", self.jwks_uri)
        if status != 200:
            raise OidcError(f"jwks: HTTP {status} {doc}")
        return doc

    def stats(self):
        """Requests per endpoint since start: {"jwks": n, "discovery": n, "token": n, ...}."""
        return self._json("GET", self.issuer + "/_test/stats")[1]

    def fail(self, jwks=None, discovery=None):
        """Make /jwks and/or discovery answer 503 (True) or serve again (False)."""
        query = {k: "1" if v else "0" for k, v in (("jwks", jwks), ("discovery", discovery)) if v is not None}
        return self._json("POST", self.issuer + "/_test/fail?" + urllib.parse.urlencode(query))[1]

    def resource_for(self, audience=None, alg=None):
        """The resource indicator of real tokens with another `aud` and/or signing algorithm."""
        if audience is None and alg is None:
            return None
        query = {k: v for k, v in (("aud", audience), ("alg", alg)) if v is not None}
        return "urn:sandfort-test?" + urllib.parse.urlencode(query)

    # --- tokens ----------------------------------------------------------------------------------

    def token_request(self, fields, client_id, secret=None, auth=None):
        """POST /token; (status, JSON). auth: "basic", "post" or None (from the client's metadata)."""
        headers = {}
        fields = dict(fields)
        if auth is None:
            method = self.clients.get(client_id, {}).get("token_endpoint_auth_method") or "client_secret_basic"
            auth = {"client_secret_basic": "basic", "client_secret_post": "post"}.get(method, "none")
        if auth == "basic":
            secret = secret if secret is not None else self.client_secret(client_id)
            pair = (urllib.parse.quote(client_id, safe="") + ":" + urllib.parse.quote(secret, safe=""))
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        elif auth == "post":
            fields.update(client_id=client_id,
                          client_secret=secret if secret is not None else self.client_secret(client_id))
        else:
            fields["client_id"] = client_id
        return self._json("POST", self.token_endpoint, fields, headers)

    def client_credentials_token(self, client_id, secret=None, resource=None, audience=None, alg=None,
                                 scope=None, auth=None):
        """A machine access token (JWT) of a client-credentials client. Without resource/audience/alg
        it is for the provider's default resource (aud "sandfort" unless started otherwise)."""
        fields = {"grant_type": "client_credentials"}
        resource = resource or self.resource_for(audience, alg)
        if resource:
            fields["resource"] = resource
        if scope:
            fields["scope"] = scope
        status, body = self.token_request(fields, client_id, secret, auth)
        if status != 200:
            raise OidcError(f"client_credentials for {client_id}: HTTP {status} {body}")
        return body["access_token"]

    def device_authorization(self, client_id=CLI_CLIENT_ID, scope="openid offline_access", resource=None):
        """Start the device flow as a CLI would: {device_code, user_code, verification_uri, ...}."""
        fields = {"client_id": client_id, "scope": scope}
        if resource:
            fields["resource"] = resource
        status, body = self._json("POST", self.device_authorization_endpoint, fields)
        if status != 200:
            raise OidcError(f"device authorization: HTTP {status} {body}")
        return body

    def device_token(self, device_code, client_id=CLI_CLIENT_ID):
        """One poll of the token endpoint: (status, JSON), e.g. 400 authorization_pending."""
        return self._json("POST", self.token_endpoint,
                          {"grant_type": DEVICE_GRANT, "device_code": device_code, "client_id": client_id})

    def refresh(self, refresh_token, client_id=CLI_CLIENT_ID):
        status, body = self._json("POST", self.token_endpoint, {
            "grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id})
        if status != 200:
            raise OidcError(f"refresh: HTTP {status} {body}")
        return body

    def device_flow_approve(self, user_code, username, approve=True, verification_uri=None):
        """The user's part of the device flow in a browser: open the verification URI, enter the
        user code, confirm it, sign in as username, then allow (or deny, approve=False).
        OidcError names the step that failed (unknown user code, unknown user, ...)."""
        browser = _Browser(self.timeout)
        steps = [("enter the user code", "op.deviceInputForm", {"user_code": user_code}),
                 ("confirm the device", "op.deviceConfirmForm", {}),
                 (f"sign in as {username}", "login", {"login": username}),
                 ("allow" if approve else "deny", "consent" if approve else "abort", {})]
        page = browser.open(verification_uri or self.issuer + "/device")
        done = "open the verification page"
        for step, form_id, values in steps:
            if form_id not in page.forms:
                error = page.markers.get("error", {})
                raise OidcError(f"device flow, {done}: {page.url} answered HTTP {page.status} "
                                f"with error {error.get('data-error')!r}: {page.body[:300]!r}")
            page = browser.submit(page, form_id, **values)
            done = step
        outcome = "success" if approve else "error"
        if outcome not in page.markers:
            raise OidcError(f"device flow for {username} did not end in {outcome} "
                            f"(HTTP {page.status}): {page.body[:500]}")

    def device_flow_login(self, username, client_id=CLI_CLIENT_ID, scope="openid offline_access"):
        """The whole device flow for username: the token response (access and refresh token)."""
        grant = self.device_authorization(client_id, scope)
        self.device_flow_approve(grant["user_code"], username,
                                 verification_uri=grant.get("verification_uri"))
        status, body = self.device_token(grant["device_code"], client_id)
        if status != 200:
            raise OidcError(f"device token for {username}: HTTP {status} {body}")
        return body

    def authorization_code_approve(self, authorize_url, username, approve=True):
        """The user's part of the authorization code flow in a browser of its own: open the
        authorization URL (a client's request, e.g. where sandfortd's console sends the browser),
        sign in as username, then allow (or deny, approve=False). Returns the URL the provider
        sends the browser back to (the redirect URI with code and state, or with error), without
        opening it. OidcError names the step that failed."""
        stop = _StopLeaving(self.issuer)
        browser = _Browser(self.timeout)
        browser.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), stop)
        page = browser.open(authorize_url)
        done = "open the authorization URL"
        for _ in range(4):
            if stop.left:
                return stop.left
            if "login" in page.forms:
                page, done = browser.submit(page, "login", login=username), f"sign in as {username}"
            elif "consent" in page.forms:
                form = "consent" if approve else "abort"
                page, done = browser.submit(page, form), "allow" if approve else "deny"
            else:
                break
        if stop.left:
            return stop.left
        error = page.markers.get("error", {})
        raise OidcError(f"authorization code flow, {done}: {page.url} answered HTTP {page.status} "
                        f"with error {error.get('data-error')!r}: {page.body[:300]!r}")

    # --- forged tokens ---------------------------------------------------------------------------

    def forged_tokens(self, real_token, other_keys_path=None, attacker_url=None):
        """{name: token} from forge.mjs: "valid" plus at least 20 forged or malformed tokens.
        other_keys_path: another issuer's keys file, for the kid-of-another-issuer entry."""
        args = ["--token", real_token, "--keys", self.keys_path, "--jwks-url", self.jwks_uri]
        if other_keys_path:
            args += ["--other-keys", other_keys_path]
        if attacker_url:
            args += ["--attacker-url", attacker_url]
        return json.loads(run_node(FORGE, *args))

    def verify_tokens(self, tokens, audience=None):
        """The reference verifier (verify.mjs) over {name: token}: {name: {ok, reason, signature_ok,
        header, payload}}, against the JWKS this provider serves."""
        return json.loads(run_node(VERIFY, "--jwks-url", self.jwks_uri, "--issuer", self.issuer,
                                   "--audience", audience or self.info["audience"],
                                   stdin=json.dumps(tokens)))


# --- a daemon that trusts providers -------------------------------------------------------------

ROLE_MAP = {"sandfort-admins": "admin", "sandfort-developers": "member", "sandfort-viewers": "viewer"}


def issuer_config(provider, **overrides):
    """sandfortd's oidc.issuers entry for a provider: org from the `org` claim, roles from `groups`."""
    return {"issuer": provider.issuer, "audience": "sandfort", "org_claim": "org", "role_claim": "groups",
            "role_map": ROLE_MAP, **overrides}


def daemon_trusting(*issuers, orgs=("acme",), **oidc_options):
    """A started sandfortd (tests/integration/sandfort_harness.Daemon) whose oidc.issuers are
    `issuers` (issuer_config() entries), with the organizations their tokens name created.
    The caller stops and cleans it up."""
    from sandfort_harness import Daemon
    d = Daemon({"oidc": {"issuers": list(issuers), **oidc_options}}).start()
    for name in orgs:
        r = d.admin().post("/v1/orgs", {"name": name})
        assert r.status == 201, r
    return d
