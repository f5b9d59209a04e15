"""Result types: plain dataclasses built from the API's JSON.

Every dataclass keeps the whole JSON object it came from in ``raw`` so fields added by a newer
daemon stay reachable.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _b64(value: Any) -> Optional[bytes]:
    return base64.b64decode(value) if isinstance(value, str) else None


@dataclass
class Resources:
    cpus: Optional[float] = None
    memory_mb: Optional[int] = None
    pids: Optional[int] = None
    disk_mb: Optional[int] = None  # the writable layer plus mounted volumes (docs/api.md)

    @classmethod
    def from_json(cls, d: Optional[Dict[str, Any]]) -> "Resources":
        d = d or {}
        return cls(cpus=d.get("cpus"), memory_mb=d.get("memory_mb"), pids=d.get("pids"), disk_mb=d.get("disk_mb"))


@dataclass
class SandboxInfo:
    """The sandbox object of the API."""
    id: str
    state: str
    name: Optional[str] = None
    snapshot: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    expires_at: Optional[str] = None
    ttl_s: Optional[int] = None
    idle_timeout_s: Optional[int] = None
    resources: Resources = field(default_factory=Resources)
    egress_allowlist: List[str] = field(default_factory=list)
    labels: Dict[str, str] = field(default_factory=dict)
    env_keys: List[str] = field(default_factory=list)
    user: Optional[str] = None
    workdir: Optional[str] = None
    public_preview: bool = False
    volumes: List[Dict[str, Any]] = field(default_factory=list)
    preview_url_template: Optional[str] = None
    error_message: Optional[str] = None
    # After the older fields: a SandboxInfo built positionally before it existed still is.
    #: ``"runc"``, or ``"gvisor"``: gVisor's kernel, no network interface (docs/gvisor.md).
    runtime: Optional[str] = None
    #: Host patterns refused whatever allows them (docs/egress.md).
    egress_deny: List[str] = field(default_factory=list)
    #: ``[{"host": …, "methods": […], "paths": […]}]``: allows by host, method and path (docs/egress.md).
    egress_rules: List[Dict[str, Any]] = field(default_factory=list)
    #: ``[{"name": …, "env": …, "placeholder": "sfph_…"}]``: the organization's secrets attached at
    #: create; the sandbox holds only the placeholders, the proxy injects the values (docs/secrets.md).
    secrets: List[Dict[str, Any]] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SandboxInfo":
        return cls(id=d["id"], state=d.get("state", ""), name=d.get("name"), snapshot=d.get("snapshot"),
                   runtime=d.get("runtime"), created_at=d.get("created_at"), updated_at=d.get("updated_at"),
                   expires_at=d.get("expires_at"), ttl_s=d.get("ttl_s"), idle_timeout_s=d.get("idle_timeout_s"),
                   resources=Resources.from_json(d.get("resources")),
                   egress_allowlist=list(d.get("egress_allowlist") or []),
                   egress_deny=list(d.get("egress_deny") or []),
                   egress_rules=[dict(r) for r in d.get("egress_rules") or []],
                   secrets=[dict(a) for a in d.get("secrets") or []],
                   labels=dict(d.get("labels") or {}), env_keys=list(d.get("env_keys") or []),
                   user=d.get("user"), workdir=d.get("workdir"),
                   public_preview=bool(d.get("public_preview", False)),
                   volumes=[dict(v) for v in d.get("volumes") or []],
                   preview_url_template=d.get("preview_url_template"),
                   error_message=d.get("error_message"), raw=d)


def _named(d: Dict[str, Any]) -> Dict[str, Any]:
    """The fields every named resource's record has (:class:`Volume`, :class:`Snapshot`;
    ``_resource.NamedResources`` reads both)."""
    return {"id": d["id"], "name": d.get("name", ""), "state": d.get("state", ""),
            "created_at": d.get("created_at"), "updated_at": d.get("updated_at"), "raw": d}


@dataclass
class Volume:
    """A named volume of the organization: what a sandbox writes there outlives the sandbox."""
    id: str
    name: str
    state: str = ""
    size_mb: Optional[int] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Volume":
        return cls(size_mb=d.get("size_mb"), **_named(d))


@dataclass
class Snapshot:
    """A snapshot of the organization: a sandbox's filesystem committed as an image new sandboxes
    can be created from (files and installed packages; not memory nor processes, not volumes)."""
    id: str
    name: str
    state: str = ""
    size_bytes: Optional[int] = None
    source_sandbox_id: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Snapshot":
        return cls(size_bytes=d.get("size_bytes"), source_sandbox_id=d.get("source_sandbox_id"), **_named(d))


@dataclass
class ExecResult:
    """The result of a command. A non-zero ``exit_code`` is a value, never an exception.

    ``stdout``/``stderr`` are exactly what the command wrote (UTF-8, invalid bytes replaced by
    U+FFFD) — the SDK does not strip the trailing newline: ``print(42)`` gives ``"42\\n"``.
    ``stdout_bytes``/``stderr_bytes`` hold the exact bytes when ``binary=True`` was asked for.
    """
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    duration_ms: Optional[int] = None
    timed_out: bool = False
    truncated: bool = False
    session_restarted: Optional[bool] = None
    stdout_bytes: Optional[bytes] = field(default=None, repr=False)
    stderr_bytes: Optional[bytes] = field(default=None, repr=False)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ExecResult":
        return cls(exit_code=int(d.get("exit_code", -1)), stdout=d.get("stdout", "") or "",
                   stderr=d.get("stderr", "") or "", duration_ms=d.get("duration_ms"),
                   timed_out=bool(d.get("timed_out", False)), truncated=bool(d.get("truncated", False)),
                   session_restarted=d.get("session_restarted"),
                   stdout_bytes=_b64(d.get("stdout_b64")), stderr_bytes=_b64(d.get("stderr_b64")), raw=d)


@dataclass
class StreamEvent:
    """One server-sent event: ``type`` is ``stdout``, ``stderr``, ``exit`` or ``error``.

    For ``stdout``/``stderr`` ``data`` is the text chunk (``data_bytes`` the exact bytes when the
    server sent ``data_b64``); for ``exit`` ``result`` is the final :class:`ExecResult` (its
    stdout/stderr hold everything streamed); ``payload`` is the decoded JSON of the event.
    """
    type: str
    data: str = ""
    data_bytes: Optional[bytes] = field(default=None, repr=False)
    result: Optional[ExecResult] = None
    payload: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class SessionInfo:
    name: str
    created_at: Optional[str] = None
    pid: Optional[int] = None
    busy: Optional[bool] = None
    waiting: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SessionInfo":
        return cls(name=d["name"], created_at=d.get("created_at"), pid=d.get("pid"),
                   busy=d.get("busy"), waiting=d.get("waiting"), raw=d)


@dataclass
class CommandInfo:
    """A background command: ``state`` is ``running`` or ``exited``."""
    id: str
    state: str
    pid: Optional[int] = None
    command: Optional[str] = None
    exit_code: Optional[int] = None
    started_at: Optional[str] = None
    ended_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CommandInfo":
        return cls(id=d["id"], state=d.get("state", ""), pid=d.get("pid"), command=d.get("command"),
                   exit_code=d.get("exit_code"), started_at=d.get("started_at"),
                   ended_at=d.get("ended_at"), raw=d)


@dataclass
class CommandLogs:
    stdout: str = ""
    stderr: str = ""
    dropped_bytes: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CommandLogs":
        dropped = d.get("dropped_bytes", 0)
        if isinstance(dropped, dict):  # tolerate a per-stream form
            dropped = sum(int(v or 0) for v in dropped.values())
        return cls(stdout=d.get("stdout", "") or "", stderr=d.get("stderr", "") or "",
                   dropped_bytes=int(dropped or 0), raw=d)


@dataclass
class FileInfo:
    """An entry of a listing or a stat: ``type`` is ``file``, ``dir``, ``symlink`` or ``other``."""
    name: str
    path: str
    type: str
    size: int = 0
    mode: Optional[str] = None
    mtime: Optional[Any] = None
    target: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileInfo":
        return cls(name=d.get("name", ""), path=d.get("path", ""), type=d.get("type", ""),
                   size=int(d.get("size") or 0), mode=d.get("mode"), mtime=d.get("mtime"),
                   target=d.get("target"), raw=d)


@dataclass
class WatchEvent:
    """One event of a directory watch (``sandbox.fs.watch``). ``type`` is ``create``, ``write``,
    ``remove``, ``rename``, ``chmod``, ``overflow`` (events were dropped: ``dropped`` of them,
    0 when the kernel's queue overflowed; re-list the directory), ``limit`` (a new subdirectory
    beyond the bounds is not watched) or ``end`` (the directory itself went; nothing follows).
    ``name`` is relative to the watched directory; ``entry`` is there with ``include_entry``."""
    type: str
    name: str = ""
    is_dir: bool = False
    entry: Optional[FileInfo] = None
    dropped: int = 0
    message: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "WatchEvent":
        entry = d.get("entry")
        return cls(type=str(d.get("type", "")), name=str(d.get("name", "")), is_dir=bool(d.get("is_dir", False)),
                   entry=FileInfo.from_json(entry) if isinstance(entry, dict) else None,
                   dropped=int(d.get("dropped") or 0), message=str(d.get("message", "")), raw=d)


@dataclass
class UploadResult:
    path: str
    size: int
    mode: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "UploadResult":
        return cls(path=d.get("path", ""), size=int(d.get("size") or 0), mode=d.get("mode"), raw=d)


@dataclass
class ArchiveResult:
    """What a tar upload extracted: ``entries`` written, ``skipped`` (device entries) listed."""
    path: str
    entries: int = 0
    skipped: List[Any] = field(default_factory=list)
    skipped_count: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ArchiveResult":
        return cls(path=d.get("path", ""), entries=int(d.get("entries") or 0),
                   skipped=list(d.get("skipped") or []), skipped_count=int(d.get("skipped_count") or 0), raw=d)


@dataclass
class PreviewLink:
    """``link`` opens the preview as it is (curl, ``urllib``, a browser): hand it on as it is.
    ``token`` is None for a ``public_preview`` sandbox; a client may send it as the header
    ``X-Sandfort-Preview-Token`` to ``url`` instead."""
    url: str
    token: Optional[str]
    port: int
    link: Optional[str] = None

    @property
    def headers(self) -> Dict[str, str]:
        return {"X-Sandfort-Preview-Token": self.token} if self.token else {}

    @property
    def url_with_token(self) -> str:
        """The same as ``link``: the URL with ``/?sandfort_token=``."""
        if self.link:
            return self.link
        return f"{self.url.rstrip('/')}/?sandfort_token={self.token}" if self.token else self.url


@dataclass
class PortInfo:
    port: int
    address: Optional[str] = None
    protocol: str = "tcp"
    family: Optional[str] = None
    pid: Optional[int] = None
    process: Optional[str] = None
    url: Optional[str] = None
    previewable: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "PortInfo":
        return cls(port=int(d["port"]), address=d.get("address"), protocol=d.get("protocol", "tcp"),
                   family=d.get("family"), pid=d.get("pid"), process=d.get("process"), url=d.get("url"),
                   previewable=bool(d.get("previewable", False)), raw=d)


@dataclass
class Metrics:
    cpu_percent: float = 0.0
    memory_bytes: int = 0
    memory_limit_bytes: int = 0
    pids: int = 0
    egress_bytes_in: int = 0
    egress_bytes_out: int = 0
    egress_allowed: Optional[int] = None
    egress_denied: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Metrics":
        return cls(cpu_percent=float(d.get("cpu_percent") or 0), memory_bytes=int(d.get("memory_bytes") or 0),
                   memory_limit_bytes=int(d.get("memory_limit_bytes") or 0), pids=int(d.get("pids") or 0),
                   egress_bytes_in=int(d.get("egress_bytes_in") or 0),
                   egress_bytes_out=int(d.get("egress_bytes_out") or 0),
                   egress_allowed=d.get("egress_allowed"), egress_denied=d.get("egress_denied"), raw=d)


@dataclass
class WhoAmI:
    org: str
    principal: str
    role: str
    auth: str
    org_id: Optional[str] = None
    principal_name: Optional[str] = None
    superadmin: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "WhoAmI":
        return cls(org=d.get("org", ""), principal=d.get("principal", ""), role=d.get("role", ""),
                   auth=d.get("auth", ""), org_id=d.get("org_id"), principal_name=d.get("principal_name"),
                   superadmin=bool(d.get("superadmin", False)), raw=d)


@dataclass
class ApiKey:
    """An API key; ``key`` (the secret) is only set in the answer that created it."""
    id: str
    name: str
    role: str
    org_id: Optional[str] = None
    created_at: Optional[str] = None
    expires_at: Optional[str] = None
    revoked_at: Optional[str] = None
    key: Optional[str] = field(default=None, repr=False)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ApiKey":
        return cls(id=d["id"], name=d.get("name", ""), role=d.get("role", ""), org_id=d.get("org_id"),
                   created_at=d.get("created_at"), expires_at=d.get("expires_at"),
                   revoked_at=d.get("revoked_at"), key=d.get("key"), raw=d)


@dataclass
class Organization:
    id: str
    name: str
    superadmin: bool = False
    created_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Organization":
        return cls(id=d["id"], name=d.get("name", ""), superadmin=bool(d.get("superadmin", False)),
                   created_at=d.get("created_at"), raw=d)


@dataclass
class GitResult(ExecResult):
    """The result of a ``sandbox.git`` call: git's own exit code and output (a failed clone,
    rejected push or nothing to commit is a non-zero ``exit_code``, never an exception) and
    ``op``, the operation that ran."""
    op: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "GitResult":
        base = ExecResult.from_json(d)
        return cls(**{**base.__dict__, "op": d.get("op", "")})


@dataclass
class GitFileStatus:
    """One entry of ``git status``: ``index``/``worktree`` are git's letters (``.`` unchanged,
    ``M``, ``T``, ``A``, ``D``, ``R``, ``C``, ``U``; ``?`` untracked); ``kind`` is ``changed``,
    ``renamed`` (with ``orig_path``), ``unmerged``, ``untracked`` or ``ignored``."""
    path: str
    index: str = "."
    worktree: str = "."
    kind: str = ""
    staged: bool = False
    orig_path: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "GitFileStatus":
        return cls(path=d.get("path", ""), index=d.get("index", "."), worktree=d.get("worktree", "."),
                   kind=d.get("kind", ""), staged=bool(d.get("staged", False)), orig_path=d.get("orig_path"),
                   raw=d)


@dataclass
class GitStatus(GitResult):
    """``sandbox.git.status``: when git succeeded, ``branch`` (None when detached), ``commit``
    (None before the first commit), ``upstream`` (None without one), ``ahead``/``behind`` and
    ``files``. When git failed these stay None / empty."""
    branch: Optional[str] = None
    commit: Optional[str] = None
    upstream: Optional[str] = None
    ahead: int = 0
    behind: int = 0
    files: List[GitFileStatus] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "GitStatus":
        base = GitResult.from_json(d)
        return cls(**{**base.__dict__, "branch": d.get("branch"), "commit": d.get("commit"),
                      "upstream": d.get("upstream"), "ahead": int(d.get("ahead") or 0),
                      "behind": int(d.get("behind") or 0),
                      "files": [GitFileStatus.from_json(f) for f in d.get("files") or []]})


@dataclass
class GitBranch:
    """A local branch: its tip ``commit``, its ``upstream`` (None when none), whether it is checked out."""
    name: str
    commit: Optional[str] = None
    upstream: Optional[str] = None
    current: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "GitBranch":
        return cls(name=d.get("name", ""), commit=d.get("commit"), upstream=d.get("upstream"),
                   current=bool(d.get("current", False)), raw=d)


@dataclass
class GitBranches(GitResult):
    """``sandbox.git.branches``: when git succeeded, ``current`` (None on a detached HEAD or before
    the first commit), the local ``branches`` and ``remote_branches`` (``["origin/main", …]``)."""
    current: Optional[str] = None
    branches: List[GitBranch] = field(default_factory=list)
    remote_branches: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "GitBranches":
        base = GitResult.from_json(d)
        return cls(**{**base.__dict__, "current": d.get("current"),
                      "branches": [GitBranch.from_json(b) for b in d.get("branches") or []],
                      "remote_branches": list(d.get("remote_branches") or [])})


@dataclass
class CodeContext:
    """A stateful code context: one long-lived interpreter (``python``, ``js`` or ``bash``)."""
    id: str
    language: str
    cwd: Optional[str] = None
    default: bool = False
    created_at: Optional[str] = None
    pid: Optional[int] = None
    busy: Optional[bool] = None
    execution_count: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CodeContext":
        return cls(id=d["id"], language=d["language"], cwd=d.get("cwd"), default=bool(d.get("default")),
                   created_at=d.get("created_at"), pid=d.get("pid"), busy=d.get("busy"),
                   execution_count=int(d.get("execution_count") or 0), raw=d)


_RESULT_FORMATS = ("html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json", "javascript")


@dataclass
class CodeResult:
    """A value a run showed: ``text`` always, the other representations when the object has them
    (``png``/``jpeg``/``pdf`` are base64 text; :attr:`png_bytes` decodes)."""
    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None
    jpeg: Optional[str] = None
    pdf: Optional[str] = None
    latex: Optional[str] = None
    json: Any = None
    javascript: Optional[str] = None
    #: A matplotlib figure's data in E2B's chart schema (``type``, ``title``, ``elements``…; docs/api.md).
    chart: Optional[Dict[str, Any]] = None
    is_main_result: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CodeResult":
        chart = d.get("chart")
        return cls(text=d.get("text"), is_main_result=bool(d.get("is_main_result")), raw=d,
                   chart=chart if isinstance(chart, dict) else None,
                   **{k: d.get(k) for k in _RESULT_FORMATS})

    def formats(self) -> List[str]:
        """The representations present besides ``text``."""
        return [k for k in _RESULT_FORMATS if getattr(self, k) is not None]

    @property
    def png_bytes(self) -> Optional[bytes]:
        return _b64(self.png)


@dataclass
class CodeError:
    """What a run raised: the exception's ``name`` and ``value`` and its ``traceback`` as text."""
    name: str
    value: str
    traceback: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CodeError":
        return cls(name=str(d.get("name", "")), value=str(d.get("value", "")), traceback=str(d.get("traceback", "")))


@dataclass
class Execution:
    """A finished run: its results, its output, the error it raised (a value, never an exception)."""
    results: List[CodeResult] = field(default_factory=list)
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)
    error: Optional[CodeError] = None
    context_id: Optional[str] = None
    execution_count: Optional[int] = None
    timed_out: bool = False
    truncated: bool = False
    restarted: bool = False
    duration_ms: Optional[int] = None

    @property
    def text(self) -> Optional[str]:
        """The text of the main result (the value of the last expression), if any."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None
