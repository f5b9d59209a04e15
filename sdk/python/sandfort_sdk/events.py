"""The organization's life-cycle events (``GET /v1/events``, docs/events.md): ``client.events()``
is an iterator of :class:`LifecycleEvent` that follows the stream for as long as it is iterated,
and reconnects by itself after a dropped connection, resuming exactly after the last event it
gave (the event's ``seq`` is the stream's ``Last-Event-ID``)::

    for e in client.events(types=["sandbox.stopped"]):
        print(e.target, e.reason)   # "sbx-…", "idle_timeout"
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, Optional

from ._transport import Response, Transport
from .errors import APIConnectionError, QuotaExceededError, UnavailableError

__all__ = ["LifecycleEvent", "EventStream"]

# A quiet stream carries a heartbeat every 15 s: a read that waits longer than this is a dead link.
READ_TIMEOUT_S = 45.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 15.0


@dataclass
class LifecycleEvent:
    """One event. ``reason`` is set on ``sandbox.stopped`` only: ``request``, ``idle_timeout``,
    ``ttl``, ``oom``, ``kill_switch``, ``daemon_restart``, ``error``, ``exited`` or ``disk_quota``."""

    seq: int
    type: str
    ts: str
    org_id: str
    target: str
    actor: str
    outcome: str
    action: str
    reason: Optional[str] = None
    details: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "LifecycleEvent":
        return cls(seq=int(d["seq"]), type=d.get("type", ""), ts=d.get("ts", ""), org_id=d.get("org_id", ""),
                   target=d.get("target", ""), actor=d.get("actor", ""), outcome=d.get("outcome", ""),
                   action=d.get("action", ""), reason=d.get("reason"), details=d.get("details") or {})


class EventStream:
    """An iterator of :class:`LifecycleEvent`; ``close()`` (or leaving a ``with`` block) ends it,
    from any thread. ``last_id`` is the seq of the last event given. A refusal the daemon means
    (a bad cursor or type: :class:`InvalidArgumentError`; a key that may not read) is raised; a
    dropped connection, a restarting daemon (503) or too many streams (429) is retried, with a
    backoff, from ``last_id``."""

    def __init__(self, transport: Transport, after: Optional[int] = None, types: Optional[Iterable[str]] = None,
                 org: Optional[str] = None) -> None:
        self._t = transport
        self.last_id: int = int(after) if after is not None else 0
        self._types = ",".join(types) if types is not None else None
        self._org = org
        self._resp: Optional[Response] = None
        self._closed = False
        self._lock = threading.Lock()
        self.reconnects = 0  # how many times the stream was opened again after a drop

    def __iter__(self) -> "EventStream":
        return self

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            resp, self._resp = self._resp, None
        if resp is not None:
            resp.shutdown()
            resp.close()

    def _open(self) -> Response:
        query = {"types": self._types, "org": self._org}
        headers = {"Accept": "text/event-stream", "Last-Event-ID": str(self.last_id)}
        return self._t.open("GET", "/v1/events", query=query, headers=headers, timeout=READ_TIMEOUT_S)

    def _drop(self) -> None:
        """Ends the current connection as a network failure would (tests use it)."""
        with self._lock:
            resp = self._resp
        if resp is not None:
            resp.shutdown()

    def __next__(self) -> LifecycleEvent:
        backoff = FIRST_BACKOFF_S
        while not self._closed:
            if self._resp is None:
                try:
                    resp = self._open()
                except (APIConnectionError, UnavailableError, QuotaExceededError):
                    if self._closed:
                        break
                    time.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
                    self.reconnects += 1
                    continue
                with self._lock:
                    if self._closed:
                        resp.close()
                        break
                    self._resp = resp
            event = self._read_event()
            if event is not None:
                return event
            # The stream ended or broke: open it again after the last event given.
            with self._lock:
                resp, self._resp = self._resp, None
            if resp is not None:
                resp.close()
            if not self._closed:
                self.reconnects += 1
        raise StopIteration

    def _read_event(self) -> Optional[LifecycleEvent]:
        """The next event of the open stream, or None when it ended or broke."""
        resp = self._resp
        if resp is None:
            return None
        event_id: Optional[str] = None
        data = []
        while True:
            try:
                line = resp.raw.readline()
            except (OSError, ValueError, AttributeError, http.client.HTTPException):
                return None
            if not line:
                return None
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text == "":
                if data:
                    e = LifecycleEvent.from_json(json.loads("\n".join(data)))
                    if event_id is not None:
                        e.seq = int(event_id)
                    self.last_id = e.seq
                    return e
                event_id, data = None, []
                continue
            if text.startswith(":"):
                continue
            name, _, value = text.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "id":
                event_id = value
            elif name == "data":
                data.append(value)
