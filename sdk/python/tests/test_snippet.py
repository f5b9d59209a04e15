"""The issue's example, line by line, with the default image."""

import pytest

from sandfort_sdk import Client, ExecResult, NotFoundError, Sandbox


def test_the_issue_snippet(env):
    URL, KEY = env["url"], env["key"]
    source = "print('hello from main')\n"
    client = Client(base_url=URL, api_key=KEY)
    sbx = client.create_sandbox(wait=True)
    try:
        assert isinstance(sbx, Sandbox) and sbx.id.startswith("sbx-") and sbx.state == "started"
        r = sbx.process_exec(command="echo build; exit 7")
        assert isinstance(r, ExecResult)
        assert r.exit_code == 7 and r.stdout == "build\n" and not r.ok
        run = sbx.process.code_run("python", "print(21 * 2)")
        assert run.stdout == "42\n"  # the SDK does not strip
        assert run.stdout.strip() == "42" and run.exit_code == 0
        up = sbx.fs.upload_file("/work/main.py", source)
        assert up.path == "/work/main.py" and up.size == len(source)
        assert sbx.process_exec(command="python3 /work/main.py").stdout == "hello from main\n"
    finally:
        client.delete(sbx.id)
    with pytest.raises(NotFoundError):
        client.get_sandbox(sbx.id)


def test_client_from_environment(env, monkeypatch):
    monkeypatch.setenv("SANDFORT_BASE_URL", env["url"])
    monkeypatch.setenv("SANDFORT_API_KEY", env["key"])
    me = Client().whoami()
    assert me.role == "admin" and me.auth == "api_key" and me.principal.startswith("key-")


def test_client_without_configuration_is_an_error(monkeypatch, tmp_path):
    from sandfort_sdk import ConfigurationError
    monkeypatch.setenv("HOME", str(tmp_path))  # no stored login of the sandfort CLI either
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("SANDFORT_BASE_URL", raising=False)
    monkeypatch.delenv("SANDFORT_API_KEY", raising=False)
    with pytest.raises(ConfigurationError):
        Client()
    with pytest.raises(ConfigurationError):
        Client(base_url="http://127.0.0.1:1")


def test_context_manager_deletes_the_sandbox(client):
    with client.create_sandbox(labels={"t": "ctx"}) as sbx:
        assert sbx.info.labels == {"t": "ctx"}
        assert client.get_sandbox(sbx.id).state == "started"
        assert any(s.id == sbx.id for s in client.list_sandboxes(labels={"t": "ctx"}))
    with pytest.raises(NotFoundError):
        client.get_sandbox(sbx.id)
    assert not any(s.id == sbx.id for s in client.list_sandboxes())


def test_create_without_wait_then_wait_until_started(client):
    with client.create_sandbox(wait=False, name="sdk-nowait", env={"FOO": "bar"}) as sbx:
        assert sbx.state in ("creating", "pulling", "started")
        sbx.wait_until("started", timeout_s=120)
        assert sbx.state == "started" and sbx.info.env_keys == ["FOO"]
        assert client.get_sandbox("sdk-nowait").id == sbx.id
        assert sbx.process_exec(command="echo $FOO").stdout == "bar\n"
