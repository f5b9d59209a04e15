"""The organization's volumes (``client.create_volume`` …): named storage mounted into sandboxes
(``create_sandbox(volumes=[…])``) that outlives them. docs/api.md, "Volumes", has the routes."""

from __future__ import annotations

from typing import List, Optional

from ._resource import NamedResources
from ._transport import Transport
from .models import Volume

__all__ = ["VolumesMixin"]

_VOLUMES: NamedResources[Volume] = NamedResources("/v1/volumes", Volume.from_json)


class VolumesMixin:
    """The volume calls of :class:`~sandfort_sdk.Client`."""

    _t: Transport

    def create_volume(self, name: str) -> Volume:
        """Creates a named volume of the organization (a taken name raises ConflictError)."""
        return _VOLUMES.create(self._t, {"name": name})

    def list_volumes(self, *, limit: Optional[int] = None) -> List[Volume]:
        """Every volume of the organization by name (follows ``next_cursor``)."""
        return _VOLUMES.list(self._t, limit=limit)

    def get_volume(self, name: str) -> Volume:
        """A volume by name or id."""
        return _VOLUMES.get(self._t, name)

    def delete_volume(self, name: str) -> None:
        """Deletes a volume and its data (by name or id). ConflictError while a sandbox that is not
        deleted mounts it; a second delete raises NotFoundError."""
        _VOLUMES.delete(self._t, name)
