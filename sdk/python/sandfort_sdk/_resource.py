"""What the resource modules share: a path segment, a body without its unset fields, and one
helper for the organization's named resources.

Volumes and snapshots are twins on the wire: ``POST /v1/{kind}`` creates one, ``GET /v1/{kind}``
lists them by name a page at a time, ``GET`` and ``DELETE /v1/{kind}/{name or id}`` read and
delete one. Only the body of a create and the record's own fields differ, so each is a
:class:`NamedResources` with its own path and record type (``volumes.py``, ``snapshots.py``); the
fields every record has are read in one place (``models._named``)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, TypeVar
from urllib.parse import quote

from ._transport import Transport

__all__ = ["seg", "clean", "NamedResources"]

T = TypeVar("T")


def seg(value: str) -> str:
    """``value`` as one path segment (``/`` and every other reserved character escaped)."""
    return quote(str(value), safe="")


def clean(d: Mapping[str, Any]) -> Dict[str, Any]:
    """``d`` without the fields left None (the daemon's defaults apply to them)."""
    return {k: v for k, v in d.items() if v is not None}


class NamedResources(Generic[T]):
    """One collection of the organization's named resources at ``path`` (``/v1/volumes``),
    whose records ``from_json`` reads. Stateless: each call is given the client's transport."""

    def __init__(self, path: str, from_json: Callable[[Dict[str, Any]], T]) -> None:
        self.path = path
        self.from_json = from_json

    def create(self, t: Transport, body: Mapping[str, Any], *, timeout: Optional[float] = -1.0) -> T:
        return self.from_json(t.call("POST", self.path, json_body=dict(body), timeout=timeout))

    def list(self, t: Transport, *, limit: Optional[int] = None) -> List[T]:
        """Every one of them, by name (follows ``next_cursor``)."""
        out: List[T] = []
        cursor: Optional[str] = None
        while True:
            page = t.call("GET", self.path, query=clean({"limit": limit, "cursor": cursor}))
            out.extend(self.from_json(v) for v in page.get("items", []))
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def get(self, t: Transport, name: str) -> T:
        return self.from_json(t.call("GET", f"{self.path}/{seg(name)}"))

    def delete(self, t: Transport, name: str, *, timeout: Optional[float] = -1.0) -> None:
        t.call("DELETE", f"{self.path}/{seg(name)}", timeout=timeout)
