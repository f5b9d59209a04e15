"""The Sandfort client: ``Client`` → ``Sandbox`` → ``sandbox.process`` / ``sandbox.fs`` / ``sandbox.git``."""

from __future__ import annotations

import os
import tarfile
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union
from urllib.parse import quote

from .audit import Audit
from ._cli_login import config_path, same_server, stored_login
from .errors import ConfigurationError, NotFoundError, SandfortError, SessionRestartedWarning
from .git import Git
from .guardrails import UNSET, Guardrails, OrgLimits, StopAllReport
from .pty import PtySession
from ._transport import ExecStream, OutputCallback, TokenProvider, Transport, socket_timeout_for
from .models import (ApiKey, ArchiveResult, CommandInfo, CommandLogs, ExecResult, FileInfo, Metrics,
                     Organization, PortInfo, PreviewLink, SandboxInfo, SessionInfo, Snapshot, UploadResult,
                     Volume, WhoAmI)

__all__ = ["Client", "Sandbox", "SandboxPage", "Process", "Session", "Command", "FileSystem", "Git"]

PathLike = Union[str, "os.PathLike[str]"]
FileData = Union[bytes, bytearray, memoryview, str, BinaryIO, "os.PathLike[str]"]


def _seg(value: str) -> str:
    return quote(str(value), safe="")


def _clean(d: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Client:
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
        base_url = base_url or os.environ.get("SANDFORT_BASE_URL")
        if token_provider is None:
            api_key = api_key or os.environ.get("SANDFORT_API_KEY")
        login = stored_login() if not base_url or not (api_key or token_provider) else None
        if not base_url:
            if login is None:
                raise ConfigurationError("no base_url given, SANDFORT_BASE_URL is not set and the sandfort CLI has "
                                         f"no stored login ({config_path() or 'HOME is not set'})")
            base_url = login.base_url
        if token_provider is not None:
            if api_key:
                raise ConfigurationError("give api_key or token_provider, not both")
            if not callable(token_provider):
                raise ConfigurationError("token_provider must be a callable returning a bearer token")
        elif not api_key:
            if login is None or not same_server(login.base_url, base_url):
                raise ConfigurationError(
                    "no api_key (or token_provider) given, SANDFORT_API_KEY is not set and the sandfort CLI has no "
                    "stored login " + ("for " + base_url if login is not None else f"({config_path() or 'HOME is not set'})"))
            if login.api_key:
                api_key = login.api_key
            else:
                token_provider = login.token_provider()
        self._t = Transport(base_url, api_key, timeout if timeout is not None else 60.0, token_provider)
        self.base_url = self._t.base_url
        self.timeout = timeout
        self.audit = Audit(self)
        self._guardrails = Guardrails(self)

    def __repr__(self) -> str:
        return f"Client(base_url={self.base_url!r})"

    # --- identity ---------------------------------------------------------------------------
    def whoami(self) -> WhoAmI:
        return WhoAmI.from_json(self._t.call("GET", "/v1/whoami"))

    def create_api_key(self, name: str, role: str = "member", expires_in_s: Optional[int] = None,
                       org: Optional[str] = None) -> ApiKey:
        """Creates a key (``org``: superadmin only, an org id or name). ``.key`` is the secret."""
        path = f"/v1/orgs/{_seg(org)}/api-keys" if org else "/v1/api-keys"
        body = _clean({"name": name, "role": role, "expires_in_s": expires_in_s})
        return ApiKey.from_json(self._t.call("POST", path, json_body=body))

    def list_api_keys(self) -> List[ApiKey]:
        return [ApiKey.from_json(k) for k in self._t.call("GET", "/v1/api-keys")["items"]]

    def revoke_api_key(self, key_id: str) -> None:
        self._t.call("DELETE", f"/v1/api-keys/{_seg(key_id)}")

    def create_org(self, name: str) -> Organization:
        return Organization.from_json(self._t.call("POST", "/v1/orgs", json_body={"name": name}))

    def list_orgs(self) -> List[Organization]:
        return [Organization.from_json(o) for o in self._t.call("GET", "/v1/orgs")["items"]]

    # --- guardrails (sandfort_sdk.guardrails) -------------------------------------------------
    def org_limits(self, org: Optional[str] = None) -> OrgLimits:
        """The organization's limits, their use and its kill switch (admin; ``org``: an id or a
        name, None for your own; another organization: superadmin only)."""
        return self._guardrails.limits(org)

    def set_org_limits(self, org: str, *, max_sandboxes: Any = UNSET, max_cpus: Any = UNSET,
                       max_memory_mb: Any = UNSET, allowed_images: Any = UNSET, max_volumes: Any = UNSET,
                       max_snapshots: Any = UNSET, **extra: Any) -> OrgLimits:
        """Superadmin: sets an organization's limits. Only the fields given change; ``None`` resets
        a field to the daemon's configured default. Returns the limits as ``org_limits`` does."""
        return self._guardrails.set_limits(org, max_sandboxes=max_sandboxes, max_cpus=max_cpus,
                                           max_memory_mb=max_memory_mb, allowed_images=allowed_images,
                                           max_volumes=max_volumes, max_snapshots=max_snapshots, **extra)

    def stop_all(self, org: Optional[str] = None) -> StopAllReport:
        """The kill switch: stops every started sandbox of the organization at once and refuses
        new and restarted ones (``ConflictError``) until :meth:`lift_stop_all`."""
        return self._guardrails.stop_all(org)

    def lift_stop_all(self, org: Optional[str] = None) -> None:
        """Lifts the kill switch (one the superadmin threw: superadmin only, else
        ``PermissionDeniedError``). Stopped sandboxes stay stopped until started."""
        self._guardrails.lift_stop_all(org)

    # --- sandboxes --------------------------------------------------------------------------
    def create_sandbox(self, snapshot: Optional[str] = None, *, name: Optional[str] = None,
                       wait: bool = True, env: Optional[Mapping[str, str]] = None,
                       labels: Optional[Mapping[str, str]] = None,
                       resources: Optional[Mapping[str, Any]] = None,
                       egress_allowlist: Optional[Sequence[str]] = None, ttl_s: Optional[int] = None,
                       idle_timeout_s: Optional[int] = None,
                       user: Optional[str] = None, workdir: Optional[str] = None,
                       public_preview: Optional[bool] = None,
                       volumes: Optional[Sequence[Mapping[str, Any]]] = None,
                       timeout: Optional[float] = 600.0,
                       **extra: Any) -> "Sandbox":
        """Creates a sandbox. ``snapshot`` is one of the organization's snapshots by name or id
        (:meth:`create_snapshot`), else an image reference (the daemon's default image when
        omitted). With ``wait=True`` it returns once the sandbox is started (a pull may take a
        while: ``timeout`` is the socket timeout for this call). ``ttl_s``: stopped that long from
        now, deleted later; ``idle_timeout_s``: stopped after that long unused (0 never; the
        daemon's default when omitted). ``volumes``: ``[{"name": "cache", "mount_path": "/cache",
        "read_only": False}]``, volumes of the organization to mount (:meth:`create_volume`). Extra
        keyword arguments are sent as they are, for fields newer than this SDK. The organization's
        guardrails may refuse: ``QuotaExceededError``, ``ImageNotAllowedError``, ``ConflictError``
        while its kill switch is on."""
        body = _clean({"snapshot": snapshot, "name": name, "wait": wait,
                       "env": dict(env) if env is not None else None,
                       "labels": dict(labels) if labels is not None else None,
                       "resources": dict(resources) if resources is not None else None,
                       "egress_allowlist": list(egress_allowlist) if egress_allowlist is not None else None,
                       "ttl_s": ttl_s, "idle_timeout_s": idle_timeout_s, "user": user, "workdir": workdir,
                       "public_preview": public_preview,
                       "volumes": [_clean(v) for v in volumes] if volumes is not None else None})
        body.update(extra)
        data = self._t.call("POST", "/v1/sandboxes", json_body=body, timeout=timeout)
        return Sandbox(self, SandboxInfo.from_json(data))

    def get_sandbox(self, sandbox_id: str, *, wait_for: Optional[str] = None,
                    timeout_s: Optional[int] = None) -> "Sandbox":
        """A sandbox by id or name; ``wait_for="started"`` blocks up to ``timeout_s`` (≤ 300)."""
        q = _clean({"wait_for": wait_for, "timeout_s": timeout_s})
        data = self._t.call("GET", f"/v1/sandboxes/{_seg(sandbox_id)}", query=q,
                            timeout=socket_timeout_for(self.timeout, timeout_s) if wait_for else -1.0)
        return Sandbox(self, SandboxInfo.from_json(data))

    def sandbox(self, sandbox_id: str) -> "Sandbox":
        """A handle on a sandbox by id or name **without a request** (``info`` holds only the id,
        state ``"unknown"``): its calls address it as given, and the first one raises
        NotFoundError if it does not exist. ``get_sandbox`` fetches it instead; ``refresh()``
        fills ``info``."""
        if not isinstance(sandbox_id, str) or not sandbox_id:
            raise ValueError("sandbox_id must be a non-empty string (an id or a name)")
        return Sandbox(self, SandboxInfo(id=sandbox_id, state="unknown", raw={"id": sandbox_id}))

    def list_sandboxes_page(self, *, state: Optional[str] = None,
                            labels: Optional[Union[Mapping[str, str], str]] = None,
                            limit: Optional[int] = None, cursor: Optional[str] = None) -> "SandboxPage":
        """One page of the organization's sandboxes: ``SandboxPage(items, next_cursor)``; pass
        ``next_cursor`` as ``cursor`` for the next page (None: last page). ``labels`` is a mapping
        or the API's ``"k:v,k2:v2"`` string; ``limit`` the page size (daemon's default 100)."""
        if labels is not None and not isinstance(labels, str):
            labels = ",".join(f"{k}:{v}" for k, v in labels.items()) or None
        page = self._t.call("GET", "/v1/sandboxes",
                            query=_clean({"state": state, "label": labels or None, "limit": limit, "cursor": cursor}))
        items = [Sandbox(self, SandboxInfo.from_json(s)) for s in page.get("items", [])]
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
        self._t.call("DELETE", f"/v1/sandboxes/{_seg(sid)}", timeout=max(self.timeout or 60, 120))

    delete_sandbox = delete

    # --- volumes ----------------------------------------------------------------------------
    def create_volume(self, name: str) -> Volume:
        """Creates a named volume of the organization (a taken name raises ConflictError)."""
        return Volume.from_json(self._t.call("POST", "/v1/volumes", json_body={"name": name}))

    def list_volumes(self, *, limit: Optional[int] = None) -> List[Volume]:
        """Every volume of the organization by name (follows ``next_cursor``)."""
        out: List[Volume] = []
        cursor: Optional[str] = None
        while True:
            page = self._t.call("GET", "/v1/volumes", query=_clean({"limit": limit, "cursor": cursor}))
            out.extend(Volume.from_json(v) for v in page.get("items", []))
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def get_volume(self, name: str) -> Volume:
        """A volume by name or id."""
        return Volume.from_json(self._t.call("GET", f"/v1/volumes/{_seg(name)}"))

    def delete_volume(self, name: str) -> None:
        """Deletes a volume and its data (by name or id). ConflictError while a sandbox that is not
        deleted mounts it; a second delete raises NotFoundError."""
        self._t.call("DELETE", f"/v1/volumes/{_seg(name)}")

    # --- snapshots --------------------------------------------------------------------------
    def create_snapshot(self, sandbox: Union[str, "Sandbox"], name: str) -> Snapshot:
        """Commits a sandbox's filesystem (by id, name or object; started, paused or stopped) as a
        snapshot of the organization called ``name``; ``create_sandbox(snapshot=name)`` creates
        from it. Memory and processes are not kept, nor mounted volumes. A taken name, or a
        sandbox in another state, raises ConflictError; an unknown sandbox NotFoundError."""
        sid = sandbox.id if isinstance(sandbox, Sandbox) else sandbox
        data = self._t.call("POST", "/v1/snapshots", json_body={"sandbox_id": sid, "name": name},
                            timeout=max(self.timeout or 60, 600))
        return Snapshot.from_json(data)

    def list_snapshots(self, *, limit: Optional[int] = None) -> List[Snapshot]:
        """Every snapshot of the organization by name (follows ``next_cursor``)."""
        out: List[Snapshot] = []
        cursor: Optional[str] = None
        while True:
            page = self._t.call("GET", "/v1/snapshots", query=_clean({"limit": limit, "cursor": cursor}))
            out.extend(Snapshot.from_json(v) for v in page.get("items", []))
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def get_snapshot(self, name: str) -> Snapshot:
        """A snapshot by name or id."""
        return Snapshot.from_json(self._t.call("GET", f"/v1/snapshots/{_seg(name)}"))

    def delete_snapshot(self, name: str) -> None:
        """Deletes a snapshot (by name or id). ConflictError while a sandbox that is not deleted
        was created from it; a second delete raises NotFoundError."""
        self._t.call("DELETE", f"/v1/snapshots/{_seg(name)}", timeout=max(self.timeout or 60, 120))


@dataclass
class SandboxPage:
    """One page of :meth:`Client.list_sandboxes_page`: ``items`` and the ``next_cursor`` to ask for
    the next one (None on the last page)."""
    items: List["Sandbox"]
    next_cursor: Optional[str] = None


class Sandbox:
    """A sandbox handle. ``with client.create_sandbox() as sbx:`` deletes it on exit."""

    def __init__(self, client: Client, info: SandboxInfo) -> None:
        self._client = client
        self._t = client._t
        self.info = info
        self.process = Process(self)
        self.fs = FileSystem(self)
        self.git = Git(self)

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
    def _base(self) -> str:
        return f"/v1/sandboxes/{_seg(self.id)}"

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
               idle_timeout_s: Optional[int] = None) -> "Sandbox":
        """PATCH: only the fields given change. ``egress_allowlist=[]`` forbids all egress;
        ``ttl_s`` counts from now; ``idle_timeout_s=0`` never stops it for being idle."""
        body = _clean({"labels": dict(labels) if labels is not None else None, "ttl_s": ttl_s,
                       "idle_timeout_s": idle_timeout_s,
                       "egress_allowlist": list(egress_allowlist) if egress_allowlist is not None else None})
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


class Process:
    """``sandbox.process``: one-off commands, code runs, sessions and background commands."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sbx = sandbox

    @property
    def _t(self) -> Transport:
        return self._sbx._t

    def _run(self, path: str, body: Dict[str, Any], timeout_s: Optional[float],
             on_stdout: Optional[OutputCallback], on_stderr: Optional[OutputCallback]) -> ExecResult:
        sock_timeout = socket_timeout_for(self._sbx._client.timeout, timeout_s)
        if on_stdout is None and on_stderr is None:
            return ExecResult.from_json(self._t.call("POST", path, json_body=body, timeout=sock_timeout))
        return self._stream(path, body, timeout_s, on_stdout, on_stderr).wait()

    def _stream(self, path: str, body: Dict[str, Any], timeout_s: Optional[float],
                on_stdout: Optional[OutputCallback] = None,
                on_stderr: Optional[OutputCallback] = None,
                on_exit: Optional[Callable[[ExecResult], None]] = None) -> ExecStream:
        resp = self._t.open("POST", path, json_body=body, headers={"Accept": "text/event-stream"},
                            timeout=socket_timeout_for(self._sbx._client.timeout, timeout_s))
        return ExecStream(resp, on_stdout, on_stderr, on_exit)

    @staticmethod
    def _exec_body(command: Optional[str], argv: Optional[Sequence[str]], cwd: Optional[str],
                   env: Optional[Mapping[str, str]], stdin: Optional[Union[str, bytes]],
                   timeout_s: Optional[float], binary: bool) -> Dict[str, Any]:
        if (command is None) == (argv is None):
            raise ValueError("give exactly one of command and argv")
        if isinstance(stdin, bytes):
            stdin = stdin.decode("utf-8")
        return _clean({"command": command, "argv": list(argv) if argv is not None else None, "cwd": cwd,
                       "env": dict(env) if env is not None else None, "stdin": stdin,
                       "timeout_s": timeout_s, "binary": True if binary else None})

    def exec(self, command: Optional[str] = None, *, argv: Optional[Sequence[str]] = None,
             cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             stdin: Optional[Union[str, bytes]] = None, timeout_s: Optional[float] = None,
             binary: bool = False, on_stdout: Optional[OutputCallback] = None,
             on_stderr: Optional[OutputCallback] = None) -> ExecResult:
        """Runs ``command`` (``/bin/sh -c``) or ``argv`` in a fresh process. A non-zero exit is
        returned in ``exit_code``, never raised. With ``on_stdout``/``on_stderr`` the output is
        streamed to the callbacks as it is produced and the full result still returned."""
        body = self._exec_body(command, argv, cwd, env, stdin, timeout_s, binary)
        return self._run(f"{self._sbx._base}/process/exec", body, timeout_s, on_stdout, on_stderr)

    def exec_stream(self, command: Optional[str] = None, *, argv: Optional[Sequence[str]] = None,
                    cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                    stdin: Optional[Union[str, bytes]] = None, timeout_s: Optional[float] = None,
                    binary: bool = False) -> ExecStream:
        """Like :meth:`exec` but returns an iterator of :class:`StreamEvent` (the last is ``exit``)."""
        body = self._exec_body(command, argv, cwd, env, stdin, timeout_s, binary)
        return self._stream(f"{self._sbx._base}/process/exec", body, timeout_s)

    def code_run(self, language: str, code: str, *, argv: Optional[Sequence[str]] = None,
                 env: Optional[Mapping[str, str]] = None, timeout_s: Optional[float] = None,
                 on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None) -> ExecResult:
        """Runs ``code`` with ``python`` (python3 -c), ``node``, ``bash`` or ``sh``."""
        body = _clean({"language": language, "code": code, "argv": list(argv) if argv is not None else None,
                       "env": dict(env) if env is not None else None, "timeout_s": timeout_s})
        return self._run(f"{self._sbx._base}/process/code-run", body, timeout_s, on_stdout, on_stderr)

    def code_run_stream(self, language: str, code: str, *, argv: Optional[Sequence[str]] = None,
                        env: Optional[Mapping[str, str]] = None,
                        timeout_s: Optional[float] = None) -> ExecStream:
        body = _clean({"language": language, "code": code, "argv": list(argv) if argv is not None else None,
                       "env": dict(env) if env is not None else None, "timeout_s": timeout_s})
        return self._stream(f"{self._sbx._base}/process/code-run", body, timeout_s)

    # --- sessions -----------------------------------------------------------------------------
    def create_session(self, name: str) -> "Session":
        info = SessionInfo.from_json(self._t.call("POST", f"{self._sbx._base}/sessions", json_body={"name": name}))
        return Session(self._sbx, name, info)

    def session(self, name: str = "default") -> "Session":
        """A handle on an existing session (``default`` always exists) without a call."""
        return Session(self._sbx, name)

    def list_sessions(self) -> List[SessionInfo]:
        return [SessionInfo.from_json(s) for s in self._t.call("GET", f"{self._sbx._base}/sessions")["items"]]

    def delete_session(self, name: str) -> None:
        self._t.call("DELETE", f"{self._sbx._base}/sessions/{_seg(name)}")

    # --- background commands ------------------------------------------------------------------
    def start(self, command: str, *, cwd: Optional[str] = None,
              env: Optional[Mapping[str, str]] = None) -> "Command":
        """Starts a background command and returns at once."""
        body = _clean({"command": command, "cwd": cwd, "env": dict(env) if env is not None else None})
        info = CommandInfo.from_json(self._t.call("POST", f"{self._sbx._base}/commands", json_body=body))
        return Command(self._sbx, info)

    start_command = start

    def get_command(self, command_id: str) -> "Command":
        info = CommandInfo.from_json(self._t.call("GET", f"{self._sbx._base}/commands/{_seg(command_id)}"))
        return Command(self._sbx, info)

    def list_commands(self) -> List[CommandInfo]:
        data = self._t.call("GET", f"{self._sbx._base}/commands")
        items = data["items"] if isinstance(data, dict) else data
        return [CommandInfo.from_json(c) for c in items]


class Session:
    """A persistent shell: cwd, exported variables, functions and jobs persist between calls."""

    def __init__(self, sandbox: Sandbox, name: str, info: Optional[SessionInfo] = None) -> None:
        self._sbx = sandbox
        self.name = name
        self.info = info

    def __repr__(self) -> str:
        return f"Session(name={self.name!r}, sandbox={self._sbx.id!r})"

    @property
    def _path(self) -> str:
        return f"{self._sbx._base}/sessions/{_seg(self.name)}/exec"

    def exec(self, command: str, *, timeout_s: Optional[float] = None,
             on_stdout: Optional[OutputCallback] = None,
             on_stderr: Optional[OutputCallback] = None) -> ExecResult:
        """Runs ``command`` in this shell. ``exit N`` ends the shell: the result has
        ``session_restarted`` and a :class:`SessionRestartedWarning` is issued."""
        body = _clean({"command": command, "timeout_s": timeout_s})
        result = self._sbx.process._run(self._path, body, timeout_s, on_stdout, on_stderr)
        self._warn_if_restarted(result, stacklevel=3)
        return result

    def exec_stream(self, command: str, *, timeout_s: Optional[float] = None) -> ExecStream:
        body = _clean({"command": command, "timeout_s": timeout_s})
        return self._sbx.process._stream(self._path, body, timeout_s,
                                         on_exit=lambda r: self._warn_if_restarted(r, stacklevel=4))

    def _warn_if_restarted(self, result: ExecResult, stacklevel: int) -> None:
        # The shell's state is what a session is for: losing it must not pass unnoticed.
        if result.session_restarted:
            warnings.warn(f"the shell of session {self.name!r} in {self._sbx.id} was restarted (a command ended it, "
                          "e.g. `exit`): the working directory, variables and background jobs of earlier commands "
                          "are gone", SessionRestartedWarning, stacklevel=stacklevel)

    def delete(self) -> None:
        """Ends the shell and every job it started."""
        self._sbx.process.delete_session(self.name)


class Command:
    """A background command started with ``sandbox.process.start``."""

    def __init__(self, sandbox: Sandbox, info: CommandInfo) -> None:
        self._sbx = sandbox
        self.info = info

    def __repr__(self) -> str:
        return f"Command(id={self.id!r}, state={self.info.state!r})"

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def _path(self) -> str:
        return f"{self._sbx._base}/commands/{_seg(self.id)}"

    @property
    def exit_code(self) -> Optional[int]:
        return self.info.exit_code

    def refresh(self) -> CommandInfo:
        self.info = CommandInfo.from_json(self._sbx._t.call("GET", self._path))
        return self.info

    def logs(self) -> CommandLogs:
        """The buffered output so far (newest 1 MiB per stream)."""
        return CommandLogs.from_json(self._sbx._t.call("GET", f"{self._path}/logs"))

    def follow(self, on_stdout: Optional[OutputCallback] = None,
               on_stderr: Optional[OutputCallback] = None, timeout: Optional[float] = None) -> ExecStream:
        """Streams the logs: what is buffered, then new output, then ``exit``. Iterate it, or call
        ``.wait()`` for the result (its exit code is the command's)."""
        resp = self._sbx._t.open("GET", f"{self._path}/logs", query={"follow": True},
                                 headers={"Accept": "text/event-stream"}, timeout=timeout)
        return ExecStream(resp, on_stdout, on_stderr)

    def send_stdin(self, data: Union[str, bytes], *, eof: bool = False) -> None:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        self._sbx._t.call("POST", f"{self._path}/stdin", body=raw, query={"eof": True} if eof else None)

    def close_stdin(self) -> None:
        self.send_stdin(b"", eof=True)

    def kill(self, signal: Union[str, int] = "TERM") -> None:
        """Sends ``signal`` to its process group; an exited command raises ConflictError."""
        self._sbx._t.call("POST", f"{self._path}/kill", json_body={"signal": signal})

    def wait(self, timeout: float = 60.0, interval: float = 0.2) -> CommandInfo:
        """Polls until the command has exited; raises TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.refresh()
            if info.state != "running":
                return info
            if time.monotonic() >= deadline:
                raise TimeoutError(f"command {self.id} still running after {timeout} s")
            time.sleep(interval)


class FileSystem:
    """``sandbox.fs``: files inside the sandbox (absolute paths)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sbx = sandbox

    @property
    def _t(self) -> Transport:
        return self._sbx._t

    @property
    def _base(self) -> str:
        return f"{self._sbx._base}/files"

    def _big_timeout(self) -> Optional[float]:
        t = self._sbx._client.timeout
        return None if t is None else max(t, 600)

    def upload_file(self, path: str, data: FileData, *, mode: Optional[Union[int, str]] = None) -> UploadResult:
        """Writes ``data`` to ``path`` (parents created, atomic rename). ``data`` is ``bytes``,
        a ``str`` (the *content*, encoded as UTF-8), a binary file object (streamed) or an
        ``os.PathLike`` naming a local file to send. ``mode`` is an int (``0o755``) or ``"0755"``."""
        mode_s = (format(mode, "04o") if isinstance(mode, int) else mode) if mode is not None else None
        q = _clean({"path": path, "mode": mode_s})
        if isinstance(data, os.PathLike):
            with open(os.fspath(data), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                return UploadResult.from_json(self._t.call("PUT", self._base, query=q, body=f,
                                                           headers={"Content-Length": str(size)},
                                                           timeout=self._big_timeout()))
        if isinstance(data, str):
            data = data.encode("utf-8")
        return UploadResult.from_json(self._t.call("PUT", self._base, query=q, body=data,  # type: ignore[arg-type]
                                                   timeout=self._big_timeout()))

    write_file = upload_file

    def download_file(self, path: str, dest: Optional[Union[BinaryIO, "os.PathLike[str]"]] = None, *,
                      max_bytes: Optional[int] = None) -> Optional[bytes]:
        """Returns the file's bytes; with ``dest`` (a binary file object or a local path) streams
        into it instead and returns None. ``max_bytes``: read at most that many bytes (the first
        ones) and close the connection, so the rest is never transferred; to learn whether the
        file was longer, ask for one byte more than you keep."""
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0):
            raise ValueError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        resp = self._t.open("GET", self._base, query={"path": path}, timeout=self._big_timeout())
        if dest is None:
            if max_bytes is None:
                return resp.read()
            return b"".join(_limited(resp, max_bytes))
        if isinstance(dest, os.PathLike):
            with open(os.fspath(dest), "wb") as f:
                for chunk in _limited(resp, max_bytes):
                    f.write(chunk)
        else:
            for chunk in _limited(resp, max_bytes):
                dest.write(chunk)
        return None

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        data = self.download_file(path)
        assert data is not None
        return data.decode(encoding)

    def list_files(self, path: str) -> List[FileInfo]:
        return [FileInfo.from_json(i) for i in self._t.call("GET", f"{self._base}/list", query={"path": path})["items"]]

    def stat(self, path: str) -> FileInfo:
        return FileInfo.from_json(self._t.call("GET", f"{self._base}/stat", query={"path": path}))

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFoundError:
            return False

    def mkdir(self, path: str, *, parents: bool = False, mode: Optional[Union[int, str]] = None) -> FileInfo:
        mode_s = (format(mode, "04o") if isinstance(mode, int) else mode) if mode is not None else None
        body = _clean({"path": path, "parents": parents or None, "mode": mode_s})
        return FileInfo.from_json(self._t.call("POST", f"{self._base}/mkdir", json_body=body))

    def move(self, src: str, dst: str, *, overwrite: bool = False) -> FileInfo:
        body = {"from": src, "to": dst, "overwrite": overwrite}
        return FileInfo.from_json(self._t.call("POST", f"{self._base}/move", json_body=body))

    def remove(self, path: str, *, recursive: bool = False) -> None:
        self._t.call("DELETE", self._base, query=_clean({"path": path, "recursive": recursive or None}))

    delete = remove

    def upload_archive(self, path: str, tar: Union[bytes, BinaryIO]) -> ArchiveResult:
        """Extracts a tar (bytes or a binary file object) into ``path``."""
        return ArchiveResult.from_json(self._t.call("PUT", f"{self._base}/archive", query={"path": path},
                                                    body=tar, headers={"Content-Type": "application/x-tar"},
                                                    timeout=self._big_timeout()))

    def download_archive(self, path: str, dest: Optional[BinaryIO] = None) -> Optional[bytes]:
        """A tar of ``path``: its bytes, or streamed into ``dest``."""
        resp = self._t.open("GET", f"{self._base}/archive", query={"path": path}, timeout=self._big_timeout())
        if dest is None:
            return resp.read()
        for chunk in resp.iter_bytes():
            dest.write(chunk)
        return None

    def upload_dir(self, local_dir: PathLike, remote_dir: str) -> ArchiveResult:
        """Sends the contents of ``local_dir`` into ``remote_dir`` as one tar (spooled to disk
        past 32 MiB, so big trees are not held in memory)."""
        local = os.fspath(local_dir)
        if not os.path.isdir(local):
            raise NotADirectoryError(local)
        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as spool:
            with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for entry in sorted(os.listdir(local)):
                    tar.add(os.path.join(local, entry), arcname=entry)
            size = spool.tell()
            spool.seek(0)
            return ArchiveResult.from_json(self._t.call(
                "PUT", f"{self._base}/archive", query={"path": remote_dir}, body=spool,  # type: ignore[arg-type]
                headers={"Content-Type": "application/x-tar", "Content-Length": str(size)},
                timeout=self._big_timeout()))

    def download_dir(self, remote_dir: str, local_dir: PathLike) -> List[str]:
        """Fetches ``remote_dir`` as a tar and extracts it under ``local_dir`` (created). Entries
        that would land outside ``local_dir``, device files and links pointing out are refused
        (:class:`SandfortError`). Returns the extracted member names."""
        local = os.path.abspath(os.fspath(local_dir))
        os.makedirs(local, exist_ok=True)
        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as spool:
            self.download_archive(remote_dir, spool)  # type: ignore[arg-type]
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r:") as tar:  # type: ignore[call-overload]
                members = tar.getmembers()
                names = [_check_member(m, local) for m in members]
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(local, members=members, filter="data")
                else:  # pragma: no cover - Python < 3.11.4 without extraction filters
                    tar.extractall(local, members=members)
        return names


def _limited(resp: Any, max_bytes: Optional[int]) -> Iterator[bytes]:
    """The answer's chunks, stopping (and closing it) after ``max_bytes`` bytes."""
    if max_bytes is None:
        yield from resp.iter_bytes()
        return
    left = max_bytes
    chunks = resp.iter_bytes()
    try:
        while left > 0:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            if len(chunk) > left:
                chunk = chunk[:left]
            left -= len(chunk)
            yield chunk
    finally:
        chunks.close()
        resp.close()


def _check_member(m: tarfile.TarInfo, root: str) -> str:
    target = os.path.realpath(os.path.join(root, m.name))
    if not (target == root or target.startswith(root + os.sep)) or os.path.isabs(m.name):
        raise SandfortError(f"tar entry {m.name!r} would land outside {root}")
    if m.isdev():
        raise SandfortError(f"tar entry {m.name!r} is a device")
    if m.issym() or m.islnk():
        base = os.path.dirname(target) if m.issym() else root
        link = os.path.realpath(os.path.join(base, m.linkname))
        if os.path.isabs(m.linkname) or not (link == root or link.startswith(root + os.sep)):
            raise SandfortError(f"tar link {m.name!r} -> {m.linkname!r} points outside {root}")
    return m.name

