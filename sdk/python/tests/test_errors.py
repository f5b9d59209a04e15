"""API errors are typed exceptions with code and request id; a non-zero exit is a value."""

import pytest

from sandfort_sdk import (APIError, AuthenticationError, Client, ConflictError, InsufficientStorageError,
                          InvalidArgumentError, NotFoundError, PermissionDeniedError, SandfortError)
from sandfort_sdk.errors import error_from_response


def test_bad_key_is_an_authentication_error(env):
    bad = Client(base_url=env["url"], api_key="sfk_not_a_real_key")
    with pytest.raises(AuthenticationError) as ei:
        bad.whoami()
    e = ei.value
    assert isinstance(e, APIError) and isinstance(e, SandfortError)
    assert e.status == 401 and e.code == "unauthenticated"
    assert e.request_id and e.request_id.startswith("req-")
    assert e.request_id in str(e)


def test_unknown_sandbox_is_not_found(client):
    with pytest.raises(NotFoundError) as ei:
        client.get_sandbox("sbx-0000000000000000")
    assert ei.value.status == 404 and ei.value.code == "not_found" and ei.value.request_id.startswith("req-")
    with pytest.raises(NotFoundError):
        client.delete("sbx-0000000000000000")


def test_invalid_arguments_and_conflicts(client):
    with pytest.raises(InvalidArgumentError) as ei:
        client.create_sandbox(name="sbx-reserved")
    assert ei.value.code == "invalid_argument" and ei.value.status == 400
    with client.create_sandbox() as sbx:
        with pytest.raises(InvalidArgumentError):
            sbx.process_exec(command="true", cwd="/does/not/exist")
        sbx.stop()
        assert sbx.state == "stopped"
        with pytest.raises(ConflictError) as ei:
            sbx.process_exec(command="true")
        assert ei.value.code == "conflict"
        sbx.start()
        assert sbx.state == "started"
        assert sbx.process_exec(command="echo back").stdout == "back\n"


def test_viewer_key_is_permission_denied(client, env):
    key = client.create_api_key("sdk-viewer", role="viewer")
    assert key.key and key.key.startswith("sfk_") and key.role == "viewer"
    try:
        viewer = Client(base_url=env["url"], api_key=key.key)
        assert viewer.whoami().role == "viewer"
        with pytest.raises(PermissionDeniedError) as ei:
            viewer.create_sandbox()
        assert ei.value.code == "permission_denied" and ei.value.status == 403
        assert any(k.id == key.id for k in client.list_api_keys())
    finally:
        client.revoke_api_key(key.id)
    with pytest.raises(AuthenticationError):
        viewer.whoami()


def test_exit_codes_are_values(client):
    with client.create_sandbox() as sbx:
        assert sbx.process_exec(command="exit 3").exit_code == 3
        assert sbx.process.exec(argv=["sh", "-c", "echo out; echo err >&2; exit 5"]).exit_code == 5
        r = sbx.process.exec(argv=["no-such-binary"])
        assert r.exit_code == 127
        r = sbx.process.exec("sleep 10", timeout_s=1)
        assert r.exit_code == 124 and r.timed_out
        r = sbx.process.exec("cat; echo \"$A\"", stdin="in\n", env={"A": "1"})
        assert r.stdout == "in\n1\n" and r.ok
        r = sbx.process.exec("printf '\\377ok'", binary=True)
        assert r.stdout_bytes == b"\xffok"
        with pytest.raises(ValueError):
            sbx.process.exec()


def test_a_full_state_disk_is_insufficient_storage():
    body = (b'{"error": {"code": "insufficient_storage", "message": "the state directory\'s disk is full", '
            b'"request_id": "req-0123456789abcdef"}}')
    e = error_from_response(507, {"X-Request-Id": "req-0123456789abcdef"}, body)
    assert isinstance(e, InsufficientStorageError)
    assert e.status == 507 and e.code == "insufficient_storage" and e.request_id == "req-0123456789abcdef"
    # A proxy's own 507 without the JSON shape maps by status.
    assert isinstance(error_from_response(507, {}, b"Insufficient Storage"), InsufficientStorageError)


def test_host_full_is_a_typed_unavailable_error():
    """503 host_full (docs/api.md): the host's memory is taken; a caller catching 503s still does."""
    from sandfort_sdk import HostFullError, UnavailableError
    from sandfort_sdk.errors import error_from_response
    body = (b'{"error": {"code": "host_full", "message": "host full: this host cannot hold 1024 MiB more",'
            b' "request_id": "req-00000000000000ab"}}')
    e = error_from_response(503, {"X-Request-Id": "req-00000000000000ab"}, body)
    assert isinstance(e, HostFullError) and isinstance(e, UnavailableError)
    assert e.status == 503 and e.code == "host_full" and e.request_id == "req-00000000000000ab"
    assert "1024 MiB" in e.message
    plain = error_from_response(503, {}, b'{"error": {"code": "unavailable", "message": "docker down"}}')
    assert type(plain) is UnavailableError
