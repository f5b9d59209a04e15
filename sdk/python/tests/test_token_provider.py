"""Client(token_provider=...): OIDC access tokens instead of an API key, against a real sandfortd
that trusts a real OpenID provider (oidc-provider, tests/oidc) issuing machine tokens through the
client-credentials grant. Starts its own daemon and provider (needs SANDFORT_BUILD_DIR's
sandfortd, node with tests/oidc's packages, Docker and root); the body-replay rules run against
a small local HTTP server.
"""

import http.server
import io
import os
import sys
import threading

import pytest

from sandfort_sdk import AuthenticationError, Client, ConfigurationError
from sandfort_sdk._transport import Transport

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from oidc_fixture import OidcProvider, daemon_trusting, issuer_config  # noqa: E402


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


@pytest.fixture
def base_url(daemon):
    return f"http://127.0.0.1:{daemon.port}"


class MachineTokens:
    """A token provider as an application would write one: a client-credentials token, cached
    and fetched again only when told it went stale. `script` puts given tokens first."""

    def __init__(self, provider, client_id, script=()):
        self.provider = provider
        self.client_id = client_id
        self.script = list(script)
        self.calls = 0
        self.fetched = 0
        self.token = None

    def __call__(self):
        self.calls += 1
        if self.script:
            return self.script.pop(0)
        if self.token is None:
            self.token = self.provider.client_credentials_token(self.client_id)
            self.fetched += 1
        return self.token


def test_machine_token_identifies_the_client_and_its_role(provider, base_url):
    tokens = MachineTokens(provider, "sandfort-admin")
    client = Client(base_url, token_provider=tokens)
    who = client.whoami()
    assert who.auth == "oidc" and who.role == "admin" and who.org == "acme"
    assert who.raw["principal"] == "sandfort-admin" and who.raw["issuer"] == provider.issuer
    client.list_sandboxes()
    assert tokens.calls == 2 and tokens.fetched == 1  # asked per request; it caches

    member = Client(base_url, token_provider=MachineTokens(provider, "sandfort-member"))
    assert member.whoami().role == "member"


def test_a_stale_token_is_replaced_and_the_request_repeated_once(provider, base_url):
    stale = provider.client_credentials_token("sandfort-admin")[:-8] + "AAAAAAAA"
    tokens = MachineTokens(provider, "sandfort-admin", script=[stale])
    client = Client(base_url, token_provider=tokens)
    assert client.whoami().role == "admin"
    assert tokens.calls == 2

    # A request with a JSON body is repeated too, and the refused attempt did nothing.
    tokens.script = ["garbage"]
    key = client.create_api_key("made-after-a-401", role="viewer")
    assert key.key.startswith("sfk_")
    assert [k.name for k in client.list_api_keys()].count("made-after-a-401") == 1
    assert tokens.calls == 2 + 2 + 1


def test_a_provider_whose_tokens_are_always_refused_raises_authentication_error(base_url):
    calls = []

    def bad():
        calls.append(1)
        return f"not-a-token-{len(calls)}"

    client = Client(base_url, token_provider=bad)
    with pytest.raises(AuthenticationError) as e:
        client.whoami()
    assert e.value.status == 401 and e.value.code == "unauthenticated" and e.value.request_id
    assert len(calls) == 2  # the first try and the one retry, no more


def test_the_pty_handshake_retries_with_the_next_token(provider, base_url):
    tokens = MachineTokens(provider, "sandfort-member")
    client = Client(base_url, token_provider=tokens)
    with client.create_sandbox() as sbx:
        tokens.script = ["stale-token"]
        with sbx.pty(command="sh") as term:
            term.send("echo pty-$((6*7))\nexit 5\n")
            assert b"pty-42" in term.read_until(b"pty-42", timeout=20)
            assert term.wait(timeout=20) == 5


def test_configuration_errors(base_url):
    with pytest.raises(ConfigurationError):
        Client(base_url, api_key="sfk_x", token_provider=lambda: "t")
    with pytest.raises(ConfigurationError):
        Client(base_url, token_provider="not callable")
    with pytest.raises(ConfigurationError, match="token_provider returned"):
        Client(base_url, token_provider=lambda: None).whoami()


# --- which bodies can be sent twice ---------------------------------------------------------------

class RefusesFirstToken:
    """An HTTP server answering 401 to the token "first" and echoing the body to any other."""

    def __init__(self):
        self.seen = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_PUT(self):
                if self.headers.get("Transfer-Encoding") == "chunked":
                    body = b""
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        chunk = self.rfile.read(size + 2)[:size]
                        if size == 0:
                            break
                        body += chunk
                else:
                    body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                auth = self.headers.get("Authorization")
                outer.seen.append((auth, body))
                status = 401 if auth == "Bearer first" else 200
                answer = (b'{"error":{"code":"unauthenticated","message":"no"}}' if status == 401
                          else b'{"body":"' + body + b'"}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def refusing():
    s = RefusesFirstToken()
    yield s
    s.close()


def tokens_in_order():
    queue = ["first", "second", "third"]
    return lambda: queue.pop(0)


def test_a_seekable_body_is_sent_again_from_its_start(refusing):
    t = Transport(refusing.url, None, 10, tokens_in_order())
    data = io.BytesIO(b"skip:payload")
    data.read(5)
    assert t.call("PUT", "/f", body=data) == {"body": "payload"}
    assert refusing.seen == [("Bearer first", b"payload"), ("Bearer second", b"payload")]


def test_an_iterator_body_is_not_repeated(refusing):
    t = Transport(refusing.url, None, 10, tokens_in_order())
    with pytest.raises(AuthenticationError):
        t.call("PUT", "/f", body=iter([b"pay", b"load"]))
    assert refusing.seen == [("Bearer first", b"payload")]


def test_an_api_key_is_never_retried(refusing):
    t = Transport(refusing.url, "first", 10)
    with pytest.raises(AuthenticationError):
        t.call("PUT", "/f", body=b"x")
    assert len(refusing.seen) == 1
