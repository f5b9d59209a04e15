"""The Sandfort client: ``Client`` → ``Sandbox`` → ``sandbox.process`` / ``sandbox.fs`` / ``sandbox.git``.

This module is the entry point only: where the client's server and credentials come from
(``_config``), the identity calls, and the resource calls mixed in from one module per resource
(``sandboxes``, ``volumes``, ``snapshots``, ``guardrails``; ``client.audit`` is ``audit.Audit``, ``client.secrets`` ``secrets.Secrets``)."""

from __future__ import annotations

from typing import Iterable, List, Optional

from . import _config
from ._resource import clean, seg
from ._transport import TokenProvider, Transport
from .audit import Audit
from .commands import Command
from .events import EventStream
from .files import FileSystem
from .git import Git
from .guardrails import GuardrailsMixin
from .models import ApiKey, Organization, WhoAmI
from .processes import Process
from .secrets import Secrets
from .webhooks import Webhooks
from .sandboxes import Sandbox, SandboxesMixin, SandboxPage
from .sessions import Session
from .snapshots import SnapshotsMixin
from .volumes import VolumesMixin

# The handles stay importable from here, where they were defined before the SDK's split.
__all__ = ["Client", "Sandbox", "SandboxPage", "Process", "Session", "Command", "FileSystem", "Git"]


class Client(SandboxesMixin, VolumesMixin, SnapshotsMixin, GuardrailsMixin):
    """Entry point. ``base_url`` and ``api_key`` default to ``SANDFORT_BASE_URL`` and
    ``SANDFORT_API_KEY``, then to the ``sandfort`` CLI's stored login (``sandfort login``:
    ``$XDG_CONFIG_HOME/sandfort/config.json``, else ``~/.config/sandfort/config.json``), whose key
    is only sent to its own URL; ``timeout`` is the socket timeout in seconds for ordinary calls (calls
    that run commands wait longer: their own ``timeout_s`` plus 30 s).

    Instead of an API key, ``token_provider`` is a callable returning a bearer token (an OIDC
    access token): it is called before every request, so it should cache the token until it
    nears its expiry; after a 401 it is called once more and the request is sent again, once
    (a request whose body is an iterator cannot be sent twice and is not repeated)."""

    def __init__(self, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: Optional[float] = 60.0, *, token_provider: Optional[TokenProvider] = None) -> None:
        base_url, api_key, token_provider = _config.resolve(base_url, api_key, token_provider)
        self._t = Transport(base_url, api_key, timeout if timeout is not None else 60.0, token_provider)
        self.base_url = self._t.base_url
        self.timeout = timeout
        self.audit = Audit(self)
        self.secrets = Secrets(self)
        self.webhooks = Webhooks(self)

    def __repr__(self) -> str:
        return f"Client(base_url={self.base_url!r})"

    # --- identity ---------------------------------------------------------------------------
    def whoami(self) -> WhoAmI:
        return WhoAmI.from_json(self._t.call("GET", "/v1/whoami"))

    def create_api_key(self, name: str, role: str = "member", expires_in_s: Optional[int] = None,
                       org: Optional[str] = None) -> ApiKey:
        """Creates a key (``org``: superadmin only, an org id or name). ``.key`` is the secret."""
        path = f"/v1/orgs/{seg(org)}/api-keys" if org else "/v1/api-keys"
        body = clean({"name": name, "role": role, "expires_in_s": expires_in_s})
        return ApiKey.from_json(self._t.call("POST", path, json_body=body))

    def list_api_keys(self) -> List[ApiKey]:
        return [ApiKey.from_json(k) for k in self._t.call("GET", "/v1/api-keys")["items"]]

    def revoke_api_key(self, key_id: str) -> None:
        self._t.call("DELETE", f"/v1/api-keys/{seg(key_id)}")

    def create_org(self, name: str) -> Organization:
        return Organization.from_json(self._t.call("POST", "/v1/orgs", json_body={"name": name}))

    def list_orgs(self) -> List[Organization]:
        return [Organization.from_json(o) for o in self._t.call("GET", "/v1/orgs")["items"]]

    # --- life-cycle events ------------------------------------------------------------------
    def events(self, after: Optional[int] = None, types: Optional[Iterable[str]] = None, *,
               org: Optional[str] = None) -> EventStream:
        """The organization's life-cycle events (docs/events.md), an iterator of
        :class:`LifecycleEvent` that waits for new ones and reconnects by itself after a
        dropped connection, resuming after the last event it gave. ``after``: start after the
        event with this seq (default: from the first); ``types``: only these
        (``["sandbox.stopped"]``); ``org``: another organization's (superadmin). Nothing is
        sent until the first ``next()``; ``close()`` ends it."""
        return EventStream(self._t, after=after, types=list(types) if types is not None else None, org=org)
