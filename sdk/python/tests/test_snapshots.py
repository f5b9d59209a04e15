"""Snapshots: a file one sandbox wrote is in a sandbox created from its snapshot; a snapshot in
use cannot be deleted (ConflictError); an unknown or deleted one is NotFoundError."""

import uuid

import pytest

from conftest import check_deleted, check_named
from sandfort_sdk import ConflictError, NotFoundError, Snapshot


def test_snapshot_keeps_files(client):
    name = f"sdk-snap-{uuid.uuid4().hex[:8]}"
    with client.create_sandbox() as src:
        assert src.process_exec(command="echo kept > /root/note").ok
        snap = client.create_snapshot(src, name)
        assert isinstance(snap, Snapshot) and snap.id.startswith("snap-") and snap.name == name
        assert snap.state == "ready" and snap.source_sandbox_id == src.id and snap.raw["name"] == name
        assert isinstance(snap.size_bytes, int) and snap.size_bytes > 0
        with pytest.raises(ConflictError):
            client.create_snapshot(src.id, name)
    check_named(client, "snapshot", snap, name)

    with client.create_sandbox(snapshot=name) as copy:
        assert copy.info.snapshot == name
        assert copy.process_exec(command="cat /root/note").stdout == "kept\n"
        with pytest.raises(ConflictError):
            client.delete_snapshot(name)

    check_deleted(client, "snapshot", name)


def test_snapshot_unknown_names(client):
    with pytest.raises(NotFoundError):
        client.get_snapshot(f"no-such-{uuid.uuid4().hex[:8]}")
    with pytest.raises(NotFoundError):
        client.create_snapshot(f"no-such-{uuid.uuid4().hex[:8]}", f"sdk-snap-{uuid.uuid4().hex[:8]}")
