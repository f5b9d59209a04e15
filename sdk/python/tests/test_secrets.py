"""client.secrets: a value goes in and never comes out; rotation bumps the version; a viewer reads
the metadata and cannot change it; bad input raises the SDK's error classes."""

import uuid

import pytest

from sandfort_sdk import Client, ConflictError, InvalidArgumentError, NotFoundError, PermissionDeniedError, Secret


@pytest.fixture(scope="module")
def admin(client, env):
    org = client.create_org(f"secrets-py-{uuid.uuid4().hex[:8]}")
    key = client.create_api_key("secrets-admin", role="admin", org=org.id)
    return Client(base_url=env["url"], api_key=key.key)


def test_create_list_get_rotate_delete_never_return_the_value(admin):
    value = f"sk-py-{uuid.uuid4().hex}"
    s = admin.secrets.create("openai", value, ["api.openai.com"], header="Authorization", format="Bearer {value}")
    assert isinstance(s, Secret) and s.name == "openai" and s.version == 1
    assert s.hosts == ["api.openai.com"]
    assert s.placement == {"type": "header", "header": "Authorization", "format": "Bearer {value}"}
    assert value not in repr(s.raw)
    with pytest.raises(ConflictError):
        admin.secrets.create("openai", "x", ["api.openai.com"], header="Authorization")

    q = admin.secrets.create("maps", "k", ["*.maps.example.com"], query="key")
    assert q.placement == {"type": "query", "query": "key"}
    b = admin.secrets.create("registry", "pw", ["registry.example.com"], basic_auth_username="deploy")
    assert b.placement == {"type": "basic_auth", "username": "deploy"}

    assert [x.name for x in admin.secrets.list()] == ["maps", "openai", "registry"]
    assert all(value not in repr(x.raw) for x in admin.secrets.list())
    got = admin.secrets.get("openai")
    assert got.version == 1 and value not in repr(got.raw)

    rotated = admin.secrets.rotate("openai", value=f"sk-new-{uuid.uuid4().hex}")
    assert rotated.version == 2 and rotated.hosts == ["api.openai.com"]
    rehosted = admin.secrets.rotate("openai", hosts=["api.openai.com", "*.openai.azure.com"])
    assert rehosted.version == 3 and rehosted.hosts == ["api.openai.com", "*.openai.azure.com"]

    for name in ("openai", "maps", "registry"):
        admin.secrets.delete(name)
    with pytest.raises(NotFoundError):
        admin.secrets.get("openai")
    with pytest.raises(NotFoundError):
        admin.secrets.delete("openai")
    assert admin.secrets.list() == []


def test_a_viewer_reads_but_cannot_change(admin, env):
    admin.secrets.create("viewer-check", "v", ["example.com"], header="X-Api-Key")
    viewer = Client(base_url=env["url"], api_key=admin.create_api_key("viewer", role="viewer").key)
    assert [s.name for s in viewer.secrets.list()] == ["viewer-check"]
    with pytest.raises(PermissionDeniedError):
        viewer.secrets.create("nope", "v", ["example.com"], header="X-Api-Key")
    with pytest.raises(PermissionDeniedError):
        viewer.secrets.rotate("viewer-check", value="w")
    with pytest.raises(PermissionDeniedError):
        viewer.secrets.delete("viewer-check")
    admin.secrets.delete("viewer-check")


def test_bad_input_and_the_interception_ca(admin):
    with pytest.raises(InvalidArgumentError):
        admin.secrets.create("Bad Name", "v", ["example.com"], header="X-Api-Key")
    with pytest.raises(InvalidArgumentError):
        admin.secrets.create("any-host", "v", ["*"], header="X-Api-Key")
    with pytest.raises(InvalidArgumentError):
        admin.secrets.create("two-places", "v", ["example.com"], header="X-Api-Key", query="key")
    with pytest.raises(InvalidArgumentError):
        admin.secrets.rotate("whatever")
    pem = admin.secrets.interception_ca()
    assert pem.startswith("-----BEGIN CERTIFICATE-----")
    assert admin.secrets.interception_ca() == pem
