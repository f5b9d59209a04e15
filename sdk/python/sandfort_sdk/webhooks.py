"""``client.webhooks`` and :func:`verify`: an organization's webhooks (docs/events.md, "Webhooks").

sandfortd POSTs each life-cycle event of the organization to every webhook whose ``types`` take it
(all types when empty), as the same JSON object ``client.events()`` yields, with

- ``Sandfort-Webhook-Id``: the webhook,
- ``Sandfort-Event-Id``: ``<org id>:<seq>``, the idempotency key, the same on every retry,
- ``Sandfort-Event-Type``: the event's type,
- ``Sandfort-Signature``: ``t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>``.

A receiver checks the signature over the body's raw bytes (before parsing it) with :func:`verify`::

    event = sandfort_sdk.webhooks.verify(body, headers["Sandfort-Signature"], secret)

The signing secret (``whsec_…``) is shown once: in what :meth:`Webhooks.create` and
:meth:`Webhooks.rotate_secret` return. Every webhook call needs an admin key."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ._resource import clean, seg

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["Webhooks", "Webhook", "WebhookDelivery", "WebhookDeliveryPage", "WebhookSignatureError", "verify",
           "sign"]

DEFAULT_TOLERANCE_S = 300


class WebhookSignatureError(ValueError):
    """The signature header is missing or malformed, does not match, or its time is outside the tolerance."""


def sign(payload: bytes, secret: str, timestamp: Optional[int] = None) -> str:
    """The ``Sandfort-Signature`` value sandfortd would send for ``payload`` (for a receiver's tests)."""
    t = int(time.time()) if timestamp is None else int(timestamp)
    mac = hmac.new(secret.encode(), str(t).encode() + b"." + payload, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verify(payload: bytes, header: str, secret: str, tolerance_s: int = DEFAULT_TOLERANCE_S,
           now: Optional[float] = None) -> Dict[str, Any]:
    """Checks ``header`` (``Sandfort-Signature``) over ``payload``, the request body's raw bytes, and
    returns the event, parsed. Raises :class:`WebhookSignatureError` when the header is malformed,
    no ``v1`` signature matches (compared in constant time), or ``t`` is more than ``tolerance_s``
    seconds from now (a replayed delivery). A receiver should also keep the ``Sandfort-Event-Id``
    of what it handled: retries carry the same id."""
    if isinstance(payload, str):
        payload = payload.encode()
    if not header:
        raise WebhookSignatureError("no Sandfort-Signature header")
    t: Optional[int] = None
    signatures: List[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            if not value.isdigit():
                raise WebhookSignatureError("the signature's timestamp is not a number")
            t = int(value)
        elif key == "v1":
            signatures.append(value)
    if t is None or not signatures:
        raise WebhookSignatureError("the signature header has no t= or no v1=")
    current = time.time() if now is None else now
    if tolerance_s is not None and abs(current - t) > tolerance_s:
        raise WebhookSignatureError(f"the signature's timestamp is {int(current - t)} s away (tolerance {tolerance_s} s)")
    expected = hmac.new(secret.encode(), str(t).encode() + b"." + payload, hashlib.sha256).hexdigest()
    if not any(hmac.compare_digest(expected, s) for s in signatures):
        raise WebhookSignatureError("no signature matches the payload with this secret")
    try:
        return json.loads(payload)
    except ValueError as e:
        raise WebhookSignatureError(f"the payload is not JSON: {e}") from None


@dataclass
class Webhook:
    """A webhook as the API shows it. ``secret`` only in what create and rotate-secret return."""
    id: str
    url: str
    types: List[str]
    description: str = ""
    enabled: bool = True
    cursor: int = 0
    created_at: str = ""
    updated_at: str = ""
    secret: Optional[str] = field(default=None, repr=False)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Webhook":
        return cls(id=d["id"], url=d["url"], types=list(d.get("types", [])), description=d.get("description", ""),
                   enabled=bool(d.get("enabled", True)), cursor=int(d.get("cursor", 0)),
                   created_at=d.get("created_at", ""), updated_at=d.get("updated_at", ""), secret=d.get("secret"),
                   raw=d)


@dataclass
class WebhookDelivery:
    """One event taken by a webhook: ``pending`` (being tried), ``delivered`` or ``failed``."""
    seq: int
    event_id: str
    type: str
    state: str
    attempts: int
    last_status: Optional[int] = None
    last_error: str = ""
    next_attempt_at: Optional[str] = None
    created_at: str = ""
    delivered_at: Optional[str] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "WebhookDelivery":
        return cls(seq=int(d["seq"]), event_id=d["event_id"], type=d["type"], state=d["state"],
                   attempts=int(d.get("attempts", 0)), last_status=d.get("last_status"),
                   last_error=d.get("last_error", ""), next_attempt_at=d.get("next_attempt_at"),
                   created_at=d.get("created_at", ""), delivered_at=d.get("delivered_at"))


@dataclass
class WebhookDeliveryPage:
    items: List[WebhookDelivery]
    next_cursor: Optional[str]


class Webhooks:
    """The webhook calls of :class:`~sandfort_sdk.Client` (``client.webhooks``)."""

    def __init__(self, client: "Client") -> None:
        self._client = client

    def create(self, url: str, *, types: Optional[List[str]] = None, description: Optional[str] = None) -> Webhook:
        """Registers ``url`` (refused with 400 when its host is or resolves to a loopback, private,
        link-local… address the operator did not allow). ``.secret`` is the signing secret, shown once."""
        body = clean({"url": url, "types": list(types) if types is not None else None, "description": description})
        return Webhook.from_json(self._client._t.call("POST", "/v1/webhooks", json_body=body))

    def list(self) -> List[Webhook]:
        return [Webhook.from_json(w) for w in self._client._t.call("GET", "/v1/webhooks")["items"]]

    def get(self, webhook_id: str) -> Webhook:
        return Webhook.from_json(self._client._t.call("GET", f"/v1/webhooks/{seg(webhook_id)}"))

    def update(self, webhook_id: str, *, url: Optional[str] = None, types: Optional[List[str]] = None,
               description: Optional[str] = None, enabled: Optional[bool] = None) -> Webhook:
        body = clean({"url": url, "types": list(types) if types is not None else None, "description": description,
                      "enabled": enabled})
        return Webhook.from_json(self._client._t.call("PATCH", f"/v1/webhooks/{seg(webhook_id)}", json_body=body))

    def delete(self, webhook_id: str) -> None:
        self._client._t.call("DELETE", f"/v1/webhooks/{seg(webhook_id)}")

    def rotate_secret(self, webhook_id: str, *, keep_previous_s: Optional[int] = None) -> Webhook:
        """A new signing secret (``.secret``), used from the next attempt on; with ``keep_previous_s``
        the previous one also signs (a second ``v1=``) for that many seconds (at most a day)."""
        body = clean({"keep_previous_s": keep_previous_s})
        return Webhook.from_json(self._client._t.call("POST", f"/v1/webhooks/{seg(webhook_id)}/rotate-secret",
                                                      json_body=body))

    def deliveries(self, webhook_id: str, *, limit: Optional[int] = None,
                   cursor: Optional[str] = None) -> WebhookDeliveryPage:
        """The delivery log, newest first; ``next_cursor`` continues it."""
        page = self._client._t.call("GET", f"/v1/webhooks/{seg(webhook_id)}/deliveries",
                                    query=clean({"limit": limit, "cursor": cursor}))
        return WebhookDeliveryPage([WebhookDelivery.from_json(d) for d in page["items"]], page.get("next_cursor"))
