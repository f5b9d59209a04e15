"""The organization's snapshots (``client.create_snapshot`` …): a sandbox's filesystem committed
as an image that ``create_sandbox(snapshot=name)`` starts from. docs/api.md, "Snapshots", has the
routes."""

from __future__ import annotations

from typing import List, Optional, Union

from ._resource import NamedResources
from ._transport import Transport
from .models import Snapshot
from .sandboxes import Sandbox

__all__ = ["SnapshotsMixin"]

_SNAPSHOTS: NamedResources[Snapshot] = NamedResources("/v1/snapshots", Snapshot.from_json)


class SnapshotsMixin:
    """The snapshot calls of :class:`~sandfort_sdk.Client`."""

    _t: Transport
    timeout: Optional[float]

    def create_snapshot(self, sandbox: Union[str, Sandbox], name: str) -> Snapshot:
        """Commits a sandbox's filesystem (by id, name or object; started, paused or stopped) as a
        snapshot of the organization called ``name``; ``create_sandbox(snapshot=name)`` creates
        from it. Memory and processes are not kept, nor mounted volumes. A taken name, or a
        sandbox in another state, raises ConflictError; an unknown sandbox NotFoundError."""
        sid = sandbox.id if isinstance(sandbox, Sandbox) else sandbox
        return _SNAPSHOTS.create(self._t, {"sandbox_id": sid, "name": name}, timeout=max(self.timeout or 60, 600))

    def list_snapshots(self, *, limit: Optional[int] = None) -> List[Snapshot]:
        """Every snapshot of the organization by name (follows ``next_cursor``)."""
        return _SNAPSHOTS.list(self._t, limit=limit)

    def get_snapshot(self, name: str) -> Snapshot:
        """A snapshot by name or id."""
        return _SNAPSHOTS.get(self._t, name)

    def delete_snapshot(self, name: str) -> None:
        """Deletes a snapshot (by name or id). ConflictError while a sandbox that is not deleted
        was created from it; a second delete raises NotFoundError."""
        _SNAPSHOTS.delete(self._t, name, timeout=max(self.timeout or 60, 120))
