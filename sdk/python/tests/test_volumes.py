"""Volumes: what one sandbox writes to a volume is there for the next that mounts it; a mounted
volume cannot be deleted (ConflictError); a deleted one is gone (NotFoundError)."""

import uuid

import pytest

from conftest import check_deleted, check_named
from sandfort_sdk import ConflictError, Volume


def test_volume_outlives_sandbox(client):
    name = f"sdk-vol-{uuid.uuid4().hex[:8]}"
    vol = client.create_volume(name)
    assert isinstance(vol, Volume) and vol.id.startswith("vol-") and vol.name == name
    assert vol.state == "ready" and vol.size_mb is None and vol.raw["name"] == name
    check_named(client, "volume", vol, name)
    with pytest.raises(ConflictError):
        client.create_volume(name)

    with client.create_sandbox(volumes=[{"name": name, "mount_path": "/data"}]) as a:
        assert a.info.volumes == [{"name": name, "mount_path": "/data", "read_only": False}]
        assert a.process_exec(command="echo kept > /data/note").ok
    with client.create_sandbox(volumes=[{"name": name, "mount_path": "/mnt/v", "read_only": True}]) as b:
        assert b.info.volumes[0]["read_only"] is True
        assert b.process_exec(command="cat /mnt/v/note").stdout == "kept\n"
        assert not b.process_exec(command="touch /mnt/v/other").ok
        with pytest.raises(ConflictError):
            client.delete_volume(name)

    check_deleted(client, "volume", name)
