"""An organization's guardrails: its limits and their use (``client.org_limits``), the operator
setting them (``client.set_org_limits``), and its kill switch (``client.stop_all`` /
``client.lift_stop_all``). docs/api.md, "Identity", has the routes.

``org`` is an organization id or name; None means the caller's own organization (found with
``whoami``). Reading needs the admin role; setting limits is the superadmin's; the kill switch is
thrown by an organization admin or the superadmin, and one the superadmin threw only the
superadmin lifts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ._resource import seg
from ._transport import Transport
from .models import WhoAmI

__all__ = ["Limits", "LimitsUsage", "OrgStop", "OrgLimits", "StopAllReport", "LIMIT_FIELDS", "GuardrailsMixin"]

# The fields PUT /v1/orgs/{org}/limits takes.
LIMIT_FIELDS = ("max_sandboxes", "max_cpus", "max_memory_mb", "allowed_images", "max_volumes", "max_snapshots",
                "max_disk_mb", "allowed_runtimes")


class _Unset:
    """Marks a keyword argument that was not given (None is a value here: it resets a field)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass
class Limits:
    """What an organization may take: sandboxes not deleted, CPUs and memory of its running
    sandboxes together, the image patterns it may start (``*`` any run of characters), volumes
    and snapshots not deleted, the ``disk_mb`` of its sandboxes not deleted together, and the
    runtimes its sandboxes may be created or started on (``"runc"``, ``"gvisor"``; ``["gvisor"]``
    requires gVisor)."""
    max_sandboxes: int
    max_cpus: float
    max_memory_mb: int
    allowed_images: List[str] = field(default_factory=list)
    max_volumes: int = 0
    max_snapshots: int = 0
    max_disk_mb: int = 0
    allowed_runtimes: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Limits":
        return cls(max_sandboxes=int(d.get("max_sandboxes", 0)), max_cpus=float(d.get("max_cpus", 0)),
                   max_memory_mb=int(d.get("max_memory_mb", 0)),
                   allowed_images=list(d.get("allowed_images") or []),
                   max_volumes=int(d.get("max_volumes", 0)), max_snapshots=int(d.get("max_snapshots", 0)),
                   max_disk_mb=int(d.get("max_disk_mb", 0)),
                   allowed_runtimes=list(d.get("allowed_runtimes") or []))


@dataclass
class LimitsUsage:
    """What it uses now: ``sandboxes`` not deleted (stopped ones count), ``running`` among them,
    the CPUs and memory of the running ones, ``volumes`` and ``snapshots`` not deleted, and the
    ``disk_mb`` of the sandboxes not deleted."""
    sandboxes: int = 0
    running: int = 0
    cpus: float = 0.0
    memory_mb: int = 0
    volumes: int = 0
    snapshots: int = 0
    disk_mb: int = 0

    @classmethod
    def from_json(cls, d: Optional[Dict[str, Any]]) -> "LimitsUsage":
        d = d or {}
        return cls(sandboxes=int(d.get("sandboxes", 0)), running=int(d.get("running", 0)),
                   cpus=float(d.get("cpus", 0)), memory_mb=int(d.get("memory_mb", 0)),
                   volumes=int(d.get("volumes", 0)), snapshots=int(d.get("snapshots", 0)),
                   disk_mb=int(d.get("disk_mb", 0)))


@dataclass
class OrgStop:
    """The kill switch is on: since when, and whether the superadmin threw it (then only the
    superadmin lifts it)."""
    since: str
    by_superadmin: bool = False


@dataclass
class OrgLimits:
    """``GET /v1/orgs/{org}/limits``. ``own`` names the fields set for this organization (the
    others are the daemon's configured defaults); ``stopped`` is None unless the kill switch is on."""
    org_id: str
    limits: Limits
    own: List[str] = field(default_factory=list)
    usage: LimitsUsage = field(default_factory=LimitsUsage)
    stopped: Optional[OrgStop] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_stopped(self) -> bool:
        return self.stopped is not None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "OrgLimits":
        s = d.get("stopped")
        stopped = OrgStop(since=str(s.get("since", "")), by_superadmin=bool(s.get("by_superadmin", False))) \
            if isinstance(s, dict) else None
        return cls(org_id=d.get("org_id", ""), limits=Limits.from_json(d.get("limits") or {}),
                   own=list(d.get("own") or []), usage=LimitsUsage.from_json(d.get("usage")), stopped=stopped,
                   raw=d)


@dataclass
class StopAllReport:
    """What the kill switch did: the sandboxes it stopped, and those it could not stop (id → why)."""
    org_id: str
    stopped: List[str] = field(default_factory=list)
    failed: Dict[str, str] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return not self.failed

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "StopAllReport":
        return cls(org_id=d.get("org_id", ""), stopped=list(d.get("stopped") or []),
                   failed={str(k): str(v) for k, v in (d.get("failed") or {}).items()}, raw=d)


class GuardrailsMixin:
    """The guardrail calls of :class:`~sandfort_sdk.Client`."""

    _t: Transport
    timeout: Optional[float]
    whoami: Callable[[], WhoAmI]  # the Client's, to find the caller's own organization

    def _org_path(self, org: Optional[str], leaf: str) -> str:
        # The route takes an id or a name; None is the caller's own organization.
        if org is None:
            who = self.whoami()
            org = who.org_id or who.org
        return f"/v1/orgs/{seg(org)}/{leaf}"

    def org_limits(self, org: Optional[str] = None) -> OrgLimits:
        """The organization's limits, their use and its kill switch (admin; ``org``: an id or a
        name, None for your own; another organization: superadmin only)."""
        return OrgLimits.from_json(self._t.call("GET", self._org_path(org, "limits")))

    def set_org_limits(self, org: str, *, max_sandboxes: Any = UNSET, max_cpus: Any = UNSET,
                       max_memory_mb: Any = UNSET, allowed_images: Any = UNSET, max_volumes: Any = UNSET,
                       max_snapshots: Any = UNSET, max_disk_mb: Any = UNSET, allowed_runtimes: Any = UNSET,
                       **extra: Any) -> OrgLimits:
        """Superadmin: sets an organization's limits. Only the fields given change; ``None`` resets
        a field to the daemon's configured default. Returns the limits as ``org_limits`` does."""
        if not org:
            raise ValueError("set_org_limits needs the organization (an id or a name)")
        given = {"max_sandboxes": max_sandboxes, "max_cpus": max_cpus, "max_memory_mb": max_memory_mb,
                 "allowed_images": allowed_images, "max_volumes": max_volumes, "max_snapshots": max_snapshots,
                 "max_disk_mb": max_disk_mb, "allowed_runtimes": allowed_runtimes}
        body: Dict[str, Any] = {k: v for k, v in given.items() if v is not UNSET}
        # A string would be sent as one, and read by nobody as meant: "gvisor" is not ["gvisor"].
        for name, what in (("allowed_images", "patterns"), ("allowed_runtimes", "runtimes")):
            if isinstance(body.get(name), (list, tuple)):
                body[name] = list(body[name])
            elif isinstance(body.get(name), str):
                raise TypeError(f"{name} is a list of {what}, not one string")
        body.update(extra)
        return OrgLimits.from_json(self._t.call("PUT", self._org_path(org, "limits"), json_body=body))

    def stop_all(self, org: Optional[str] = None) -> StopAllReport:
        """The kill switch: stops every started sandbox of the organization at once and refuses
        new and restarted ones (``ConflictError``) until :meth:`lift_stop_all`."""
        # Stopping every started sandbox can take a while (each gets its stop grace).
        timeout = max(self.timeout or 60, 300)
        return StopAllReport.from_json(self._t.call("POST", self._org_path(org, "stop-all"), timeout=timeout))

    def lift_stop_all(self, org: Optional[str] = None) -> None:
        """Lifts the kill switch (one the superadmin threw: superadmin only, else
        ``PermissionDeniedError``). Stopped sandboxes stay stopped until started."""
        self._t.call("DELETE", self._org_path(org, "stop-all"))
