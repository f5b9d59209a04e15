"""A Client given no URL or key uses the sandfort CLI's stored login, after the environment
variables: the login is made by the real CLI binary (`sandfort login --api-key-stdin`) in a
temporary HOME / XDG_CONFIG_HOME, as a user would. The stored key only goes to its own URL and
never appears in a message."""

import json
import os
import subprocess
import time

import pytest

from sandfort_sdk import Client, ConfigurationError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.environ.get("SANDFORT_CLI",
                     os.path.join(os.environ.get("SANDFORT_BUILD_DIR", os.path.join(REPO, "build")), "cli", "sandfort"))


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HOME of the test's own, no XDG_CONFIG_HOME and no SANDFORT_* variables."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("SANDFORT_BASE_URL", raising=False)
    monkeypatch.delenv("SANDFORT_API_KEY", raising=False)
    return tmp_path


def cli_login(url, key):
    """`sandfort login` as a user runs it, with this process's HOME / XDG_CONFIG_HOME."""
    assert os.access(CLI, os.X_OK), f"no sandfort binary at {CLI} (set SANDFORT_BUILD_DIR or SANDFORT_CLI)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDFORT_")}
    r = subprocess.run([CLI, "login", "--url", url, "--api-key-stdin"], input=key, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)


@pytest.fixture(scope="module")
def viewer_key(env):
    key = Client(env["url"], env["key"]).create_api_key("sdk-cli-login-viewer", role="viewer")
    return key.key


def test_the_cli_login_is_used_when_nothing_is_given(env, home):
    cli_login(env["url"], env["key"])
    assert os.path.isfile(home / ".config" / "sandfort" / "config.json")
    client = Client()
    assert client.base_url == env["url"].rstrip("/")
    me = client.whoami()
    assert me.role == "admin" and me.auth == "api_key"
    assert env["key"] not in repr(client)


def test_xdg_config_home_is_where_the_cli_keeps_it(env, home, monkeypatch, viewer_key):
    cli_login(env["url"], env["key"])  # under HOME/.config
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    with pytest.raises(ConfigurationError):
        Client()  # the CLI would not read HOME/.config now either
    cli_login(env["url"], viewer_key)
    assert os.path.isfile(home / "xdg" / "sandfort" / "config.json")
    assert Client().whoami().role == "viewer"


def test_the_environment_comes_first(env, home, monkeypatch, viewer_key):
    cli_login(env["url"], env["key"])
    monkeypatch.setenv("SANDFORT_API_KEY", viewer_key)
    assert Client().whoami().role == "viewer"
    assert Client(api_key=env["key"]).whoami().role == "admin"  # and an argument before it
    monkeypatch.delenv("SANDFORT_API_KEY")
    monkeypatch.setenv("SANDFORT_BASE_URL", env["url"] + "/")
    assert Client().whoami().role == "admin"  # the same server: its stored key is used


def test_the_stored_key_goes_only_to_its_own_server(env, home, monkeypatch):
    cli_login(env["url"], env["key"])
    for given in (lambda: Client("http://127.0.0.1:1"),
                  lambda: (monkeypatch.setenv("SANDFORT_BASE_URL", "http://127.0.0.1:1"), Client())):
        with pytest.raises(ConfigurationError) as ei:
            given()
        assert "no stored login for http://127.0.0.1:1" in str(ei.value)
        assert env["key"] not in str(ei.value)


def test_no_login_and_a_broken_file_are_configuration_errors(home):
    with pytest.raises(ConfigurationError, match="no stored login"):
        Client()
    path = home / ".config" / "sandfort" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ConfigurationError):
        Client()


def write_oidc_login(home, url, token, expires_at):
    path = home / ".config" / "sandfort" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # The shape `sandfort login --oidc` stores (cli/config.cpp); the daemon takes an API key as a
    # bearer token as well, so one stands in for the issuer's access token here.
    path.write_text(json.dumps({"base_url": url, "oidc": {
        "issuer": "https://issuer.example", "client_id": "sandfort-cli", "token_endpoint": "https://issuer.example/t",
        "revocation_endpoint": "", "scope": "openid", "resource": "", "audience": "",
        "access_token": token, "refresh_token": "r", "expires_at": expires_at}}))


def test_an_oidc_sign_in_gives_its_current_access_token(env, home, viewer_key):
    write_oidc_login(home, env["url"], viewer_key, int(time.time()) + 3600)
    client = Client()
    assert client.whoami().role == "viewer"
    # The CLI renews the token in place: the next request reads the new one.
    write_oidc_login(home, env["url"], env["key"], int(time.time()) + 3600)
    assert client.whoami().role == "admin"
    write_oidc_login(home, env["url"], env["key"], int(time.time()) - 10)
    with pytest.raises(ConfigurationError, match="sandfort whoami") as ei:
        client.whoami()
    assert env["key"] not in str(ei.value)
