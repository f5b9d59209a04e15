"""``client.secrets``: the organization's secrets (docs/secrets.md).

A secret's value is write-only: :meth:`Secrets.create` and :meth:`Secrets.rotate` send it, and
nothing ever returns it — :class:`Secret` holds the name, the hosts it is bound to, where a request
to those hosts will carry it (``placement``), its ``version`` and times. Creating, rotating and
deleting need an admin key; any role reads.

Only storage is built so far: the egress proxy does not yet put a secret into requests, and a
sandbox cannot be created with secrets yet."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ._resource import clean, seg

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["Secrets", "Secret"]


@dataclass
class Secret:
    """A secret as the API shows it: never its value."""
    name: str
    hosts: List[str]
    placement: Dict[str, Any]
    version: int
    created_at: str = ""
    updated_at: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Secret":
        return cls(name=d["name"], hosts=list(d.get("hosts", [])), placement=dict(d.get("placement", {})),
                   version=int(d.get("version", 0)), created_at=d.get("created_at", ""),
                   updated_at=d.get("updated_at", ""), raw=d)


class Secrets:
    """The secret calls of :class:`~sandfort_sdk.Client` (``client.secrets``)."""

    def __init__(self, client: "Client") -> None:
        self._client = client

    def create(self, name: str, value: str, hosts: List[str], *, header: Optional[str] = None,
               format: Optional[str] = None, query: Optional[str] = None,
               basic_auth_username: Optional[str] = None) -> Secret:
        """Stores ``value`` sealed, bound to ``hosts`` (exact names or ``*.suffix``). Exactly one
        placement: ``header`` (with ``format``, default ``"{value}"``, e.g. ``"Bearer {value}"``),
        ``query`` (a query parameter's name), or ``basic_auth_username`` (the value is the password)."""
        body: Dict[str, Any] = {"name": name, "value": value, "hosts": list(hosts)}
        if header is not None:
            body.update(clean({"header": header, "format": format}))
        elif format is not None:
            body["format"] = format  # the daemon says it goes with a header only
        if query is not None:
            body["query"] = query
        if basic_auth_username is not None:
            body["basic_auth"] = {"username": basic_auth_username}
        return Secret.from_json(self._client._t.call("POST", "/v1/secrets", json_body=body))

    def list(self) -> List[Secret]:
        """Every secret of the organization, by name."""
        return [Secret.from_json(s) for s in self._client._t.call("GET", "/v1/secrets")["items"]]

    def get(self, name: str) -> Secret:
        return Secret.from_json(self._client._t.call("GET", f"/v1/secrets/{seg(name)}"))

    def rotate(self, name: str, *, value: Optional[str] = None, hosts: Optional[List[str]] = None) -> Secret:
        """A new value, new hosts, or both; ``version`` goes up by one."""
        body = clean({"value": value, "hosts": list(hosts) if hosts is not None else None})
        return Secret.from_json(self._client._t.call("PUT", f"/v1/secrets/{seg(name)}", json_body=body))

    def delete(self, name: str) -> None:
        self._client._t.call("DELETE", f"/v1/secrets/{seg(name)}")

    def interception_ca(self) -> str:
        """The PEM certificate of the organization's interception CA (made on first need)."""
        return self._client._t.call("GET", "/v1/interception-ca")["certificate_pem"]
