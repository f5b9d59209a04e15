"""Sandboxes: the client's calls that create, find, list and delete them (:class:`SandboxesMixin`)
and the handle on one (:class:`Sandbox`: its lifecycle, settings, metrics, ports and previews;
``sandbox.process``, ``sandbox.fs``, ``sandbox.git`` and ``sandbox.pty()`` are in their own modules)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Mapping, Optional, Sequence, Union

from ._resource import clean, seg
from ._transport import Transport, socket_timeout_for
from .errors import NotFoundError
from .files import FileSystem
from .code import Code
from .git import Git
from .models import ExecResult, Metrics, PortInfo, PreviewLink, SandboxInfo
from .processes import Process
from .pty import PtySession

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["SandboxesMixin", "SandboxPage", "Sandbox"]


class SandboxesMixin:
    """The sandbox calls of :class:`~sandfort_sdk.Client`."""

    _t: Transport
    timeout: Optional[float]

    def create_sandbox(self, snapshot: Optional[str] = None, *, name: Optional[str] = None,
                       wait: bool = True, env: Optional[Mapping[str, str]] = None,
                       labels: Optional[Mapping[str, str]] = None,
                       resources: Optional[Mapping[str, Any]] = None,
                       egress_allowlist: Optional[Sequence[str]] = None, ttl_s: Optional[int] = None,
                       idle_timeout_s: Optional[int] = None,
                       egress_deny: Optional[Sequence[str]] = None,
                       egress_rules: Optional[Sequence[Mapping[str, Any]]] = None,
                       user: Optional[str] = None, workdir: Optional[str] = None,
                       public_preview: Optional[bool] = None,
                       volumes: Optional[Sequence[Mapping[str, Any]]] = None,
                       runtime: Optional[Literal["runc", "gvisor"]] = None,
                       secrets: Optional[Sequence[Union[str, Mapping[str, str]]]] = None,
                       timeout: Optional[float] = 600.0,
                       **extra: Any) -> "Sandbox":
        """Creates a sandbox. ``snapshot`` is one of the organization's snapshots by name or id
        (:meth:`create_snapshot`), else an image reference (the daemon's default image when
        omitted). With ``wait=True`` it returns once the sandbox is started (a pull may take a
        while: ``timeout`` is the socket timeout for this call). ``ttl_s``: stopped that long from
        now, deleted later; ``idle_timeout_s``: stopped after that long unused (0 never; the
        daemon's default when omitted). ``volumes``: ``[{"name": "cache", "mount_path": "/cache",
        "read_only": False}]``, volumes of the organization to mount (:meth:`create_volume`).
        ``runtime``: ``"runc"``, or ``"gvisor"``: a kernel of the sandbox's own (gVisor's runsc),
        stronger isolation for slower system calls, and no network interface (egress through the
        proxy only); when omitted, the daemon's ``default_runtime``, or the first runtime the
        organization's ``allowed_runtimes`` allows when that one is not allowed. Any other value is
        the API's ``InvalidArgumentError``, a daemon that does not offer gVisor raises
        ``UnavailableError``. Extra keyword arguments are sent as they are, for fields newer than this
        SDK. The organization's guardrails may refuse: ``QuotaExceededError``, ``ImageNotAllowedError``,
        ``RuntimeNotAllowedError`` (a ``runtime`` its policy does not allow), ``ConflictError`` while
        its kill switch is on. ``egress_deny`` and ``egress_rules`` (``[{"host": "api.github.com",
        "methods": ["GET"], "paths": ["/repos/acme/*"]}]``) add to ``egress_allowlist``
        (docs/egress.md); with none of the three, the organization's egress defaults apply.
        ``secrets``: the organization's secrets by name, or ``{"name": …, "env": …}``: the sandbox
        gets a placeholder in that variable and the egress proxy puts the value into HTTPS requests
        to the secret's hosts (docs/secrets.md); ``info.secrets`` lists them."""
        body = clean({"snapshot": snapshot, "name": name, "wait": wait,
                      "env": dict(env) if env is not None else None,
                      "labels": dict(labels) if labels is not None else None,
                      "resources": dict(resources) if resources is not None else None,
                      "egress_allowlist": list(egress_allowlist) if egress_allowlist is not None else None,
                      "egress_deny": list(egress_deny) if egress_deny is not None else None,
                      "egress_rules": [dict(r) for r in egress_rules] if egress_rules is not None else None,
                      "ttl_s": ttl_s, "idle_timeout_s": idle_timeout_s, "user": user, "workdir": workdir,
                      "public_preview": public_preview, "runtime": runtime,
                      "volumes": [clean(v) for v in volumes] if volumes is not None else None,
                      "secrets": [a if isinstance(a, str) else dict(a) for a in secrets]
                      if secrets is not None else None})
        body.update(extra)
        data = self._t.call("POST", "/v1/sandboxes", json_body=body, timeout=timeout)
        return self._handle(SandboxInfo.from_json(data))

    def get_sandbox(self, sandbox_id: str, *, wait_for: Optional[str] = None,
                    timeout_s: Optional[int] = None) -> "Sandbox":
        """A sandbox by id or name; ``wait_for="started"`` blocks up to ``timeout_s`` (≤ 300)."""
        q = clean({"wait_for": wait_for, "timeout_s": timeout_s})
        data = self._t.call("GET", f"/v1/sandboxes/{seg(sandbox_id)}", query=q,
                            timeout=socket_timeout_for(self.timeout, timeout_s) if wait_for else -1.0)
        return self._handle(SandboxInfo.from_json(data))

    def sandbox(self, sandbox_id: str) -> "Sandbox":
        """A handle on a sandbox by id or name **without a request** (``info`` holds only the id,
        state ``"unknown"``): its calls address it as given, and the first one raises
        NotFoundError if it does not exist. ``get_sandbox`` fetches it instead; ``refresh()``
        fills ``info``."""
        if not isinstance(sandbox_id, str) or not sandbox_id:
            raise ValueError("sandbox_id must be a non-empty string (an id or a name)")
        return self._handle(SandboxInfo(id=sandbox_id, state="unknown", raw={"id": sandbox_id}))

    def list_sandboxes_page(self, *, state: Optional[str] = None,
                            labels: Optional[Union[Mapping[str, str], str]] = None,
                            limit: Optional[int] = None, cursor: Optional[str] = None) -> "SandboxPage":
        """One page of the organization's sandboxes: ``SandboxPage(items, next_cursor)``; pass
        ``next_cursor`` as ``cursor`` for the next page (None: last page). ``labels`` is a mapping
        or the API's ``"k:v,k2:v2"`` string; ``limit`` the page size (daemon's default 100)."""
        if labels is not None and not isinstance(labels, str):
            labels = ",".join(f"{k}:{v}" for k, v in labels.items()) or None
        page = self._t.call("GET", "/v1/sandboxes",
                            query=clean({"state": state, "label": labels or None, "limit": limit, "cursor": cursor}))
        items = [self._handle(SandboxInfo.from_json(s)) for s in page.get("items", [])]
        return SandboxPage(items=items, next_cursor=page.get("next_cursor") or None)

    def list_sandboxes(self, *, state: Optional[str] = None, labels: Optional[Mapping[str, str]] = None,
                       limit: Optional[int] = None) -> List["Sandbox"]:
        """Every sandbox of the organization (follows ``next_cursor``), optionally filtered."""
        out: List[Sandbox] = []
        cursor: Optional[str] = None
        while True:
            page = self.list_sandboxes_page(state=state, labels=labels, limit=limit, cursor=cursor)
            out.extend(page.items)
            cursor = page.next_cursor
            if not cursor:
                return out

    def delete(self, sandbox: Union[str, "Sandbox"]) -> None:
        """Deletes a sandbox (by id, name or object). A second delete raises NotFoundError."""
        sid = sandbox.id if isinstance(sandbox, Sandbox) else sandbox
        self._t.call("DELETE", f"/v1/sandboxes/{seg(sid)}", timeout=max(self.timeout or 60, 120))

    delete_sandbox = delete

    def _handle(self, info: SandboxInfo) -> "Sandbox":
        return Sandbox(self, info)  # type: ignore[arg-type]  # only Client mixes this in


@dataclass
class SandboxPage:
    """One page of :meth:`Client.list_sandboxes_page`: ``items`` and the ``next_cursor`` to ask for
    the next one (None on the last page)."""
    items: List["Sandbox"]
    next_cursor: Optional[str] = None


class Sandbox:
    """A sandbox handle. ``with client.create_sandbox() as sbx:`` deletes it on exit."""

    def __init__(self, client: "Client", info: SandboxInfo) -> None:
        self._client = client
        self._t = client._t
        self.info = info
        self.process = Process(self)
        self.fs = FileSystem(self)
        self.git = Git(self)
        self.code = Code(self)

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, state={self.state!r})"

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def name(self) -> Optional[str]:
        return self.info.name

    @property
    def state(self) -> str:
        return self.info.state

    @property
    def runtime(self) -> Optional[str]:
        """``"runc"`` or ``"gvisor"``; None on a handle from :meth:`Client.sandbox` until ``refresh()``."""
        return self.info.runtime

    @property
    def _base(self) -> str:
        return f"/v1/sandboxes/{seg(self.id)}"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.delete()
        except NotFoundError:
            pass

    # --- lifecycle --------------------------------------------------------------------------
    def _set(self, data: Dict[str, Any]) -> "Sandbox":
        self.info = SandboxInfo.from_json(data)
        return self

    def refresh(self) -> "Sandbox":
        return self._set(self._t.call("GET", self._base))

    def wait_until(self, state: str = "started", timeout_s: float = 60.0) -> "Sandbox":
        """Blocks until the sandbox reaches ``state`` (``started`` also returns on ``error``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = max(1, min(300, int(deadline - time.monotonic())))
            data = self._t.call("GET", self._base, query={"wait_for": state, "timeout_s": left},
                                timeout=socket_timeout_for(self._client.timeout, left))
            self._set(data)
            if self.state == state or self.state == "error" or time.monotonic() >= deadline:
                return self

    def stop(self) -> "Sandbox":
        return self._set(self._t.call("POST", f"{self._base}/stop", timeout=max(self._client.timeout or 60, 120)))

    def start(self) -> "Sandbox":
        return self._set(self._t.call("POST", f"{self._base}/start", timeout=max(self._client.timeout or 60, 300)))

    def pause(self) -> "Sandbox":
        """Freezes every process (memory kept): state ``paused``; exec, files and sessions then raise
        ConflictError until ``resume()``. Already paused: unchanged; not started: ConflictError."""
        return self._set(self._t.call("POST", f"{self._base}/pause", timeout=max(self._client.timeout or 60, 120)))

    def resume(self) -> "Sandbox":
        """Lets the processes of a paused sandbox carry on where they were: state ``started``.
        Already started: unchanged; not paused: ConflictError."""
        return self._set(self._t.call("POST", f"{self._base}/resume", timeout=max(self._client.timeout or 60, 120)))

    def delete(self) -> None:
        self._client.delete(self.id)

    def update(self, *, labels: Optional[Mapping[str, str]] = None, ttl_s: Optional[int] = None,
               egress_allowlist: Optional[Sequence[str]] = None,
               idle_timeout_s: Optional[int] = None,
               egress_deny: Optional[Sequence[str]] = None,
               egress_rules: Optional[Sequence[Mapping[str, Any]]] = None) -> "Sandbox":
        """PATCH: only the fields given change. ``egress_allowlist=[]`` forbids all egress;
        ``ttl_s`` counts from now; ``idle_timeout_s=0`` never stops it for being idle. The egress
        fields apply to the proxy's next request (docs/egress.md)."""
        body = clean({"labels": dict(labels) if labels is not None else None, "ttl_s": ttl_s,
                      "idle_timeout_s": idle_timeout_s,
                      "egress_allowlist": list(egress_allowlist) if egress_allowlist is not None else None,
                      "egress_deny": list(egress_deny) if egress_deny is not None else None,
                      "egress_rules": [dict(r) for r in egress_rules] if egress_rules is not None else None})
        return self._set(self._t.call("PATCH", self._base, json_body=body))

    def set_egress_allowlist(self, hosts: Sequence[str]) -> "Sandbox":
        """Replaces the egress allowlist; applies to the proxy's next connection."""
        return self.update(egress_allowlist=hosts)

    def metrics(self) -> Metrics:
        return Metrics.from_json(self._t.call("GET", f"{self._base}/metrics"))

    def preview_link(self, port: int) -> PreviewLink:
        d = self._t.call("GET", f"{self._base}/preview/{int(port)}")
        return PreviewLink(url=d["url"], token=d.get("token"), port=int(port), link=d.get("link"))

    def ports(self) -> List[PortInfo]:
        """TCP ports listening inside the sandbox."""
        return [PortInfo.from_json(p) for p in self._t.call("GET", f"{self._base}/ports")["items"]]

    # --- shortcuts ----------------------------------------------------------------------------
    def process_exec(self, command: Optional[str] = None, **kw: Any) -> ExecResult:
        """Same as ``sandbox.process.exec``."""
        return self.process.exec(command, **kw)

    def pty(self, *, cols: int = 80, rows: int = 24, command: Optional[str] = None,
            cwd: Optional[str] = None, timeout: Optional[float] = 30.0) -> "PtySession":
        """Opens an interactive terminal (WebSocket); close it, or use ``with``."""
        return PtySession.open(self._t, self.id, cols=cols, rows=rows, command=command, cwd=cwd, timeout=timeout)
