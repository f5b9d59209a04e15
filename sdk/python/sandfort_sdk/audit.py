"""``client.audit``: an organization's audit chain, its signed checkpoints, and their verification.

Reading (admin role): :meth:`Audit.list_events` (one page), :meth:`Audit.iter_events` (every
page), :meth:`Audit.export` (JSON Lines), :meth:`Audit.checkpoints`; :meth:`Audit.verify` asks the
daemon to check its own chain.

An auditor who does not trust the host checks the downloaded chain against a public key pinned
earlier: :func:`verify_chain` (or :meth:`Audit.verify_remote`, which downloads and checks). It
recomputes ``hash = SHA-256(prev_hash || canonical JSON)`` of every event and checks each
checkpoint's Ed25519 signature (pure Python, :mod:`sandfort_sdk._ed25519`) and that the chain had
exactly its ``head_hash`` at its ``seq``: the same checks, and the same reasons, as
``sandfortd audit-verify`` (docs/audit.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import (TYPE_CHECKING, Any, BinaryIO, Dict, Iterable, Iterator, List, Mapping, Optional, Set,
                    Union)

from . import _ed25519
from ._resource import clean

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["Audit", "AuditEvent", "AuditEventPage", "AuditCheckpoint", "AuditPublicKey", "AuditVerifyReport",
           "verify_chain", "event_hash", "event_canonical_json", "canonical_json", "checkpoint_message",
           "GENESIS_HASH"]

GENESIS_HASH = "0" * 64
# The canonical form of an event holds exactly these fields (include/sandfort/audit/chain.hpp).
EVENT_FIELDS = ("action", "actor", "details", "org_id", "outcome", "prev_hash", "request_id", "seq", "source",
                "target", "ts")
CHECKPOINT_FIELDS = ("head_hash", "key_id", "org_id", "seq", "ts")
MAX_SAFE_INTEGER = 2 ** 53 - 1
_MAX_DEPTH = 32
_ORG_ID = re.compile(r"^org-[0-9a-f]{16}$")

TimeArg = Union[str, datetime, None]


# --- models ------------------------------------------------------------------------------------

@dataclass
class AuditEvent:
    """One event of the chain, as ``GET /v1/audit`` sends it. Verification hashes the attributes
    (:meth:`to_dict`), so an attribute changed in memory is seen as an edit."""
    org_id: str
    seq: int
    ts: str
    actor: str
    action: str
    target: str
    outcome: str
    request_id: str
    source: str
    details: Any
    prev_hash: str
    hash: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "AuditEvent":
        return cls(org_id=d.get("org_id"), seq=d.get("seq"), ts=d.get("ts"), actor=d.get("actor"),  # type: ignore[arg-type]
                   action=d.get("action"), target=d.get("target"), outcome=d.get("outcome"),  # type: ignore[arg-type]
                   request_id=d.get("request_id"), source=d.get("source"), details=d.get("details"),  # type: ignore[arg-type]
                   prev_hash=d.get("prev_hash"), hash=d.get("hash"), raw=d)  # type: ignore[arg-type]

    def to_dict(self) -> Dict[str, Any]:
        """The wire form: the canonical fields and ``hash``."""
        d = {k: getattr(self, k) for k in EVENT_FIELDS}
        d["hash"] = self.hash
        return d


@dataclass
class AuditEventPage:
    items: List[AuditEvent]
    next_cursor: Optional[str] = None


@dataclass
class AuditCheckpoint:
    """A signed statement "the chain of ``org_id`` had ``head_hash`` at ``seq`` at ``ts``".
    ``created`` (from :meth:`Audit.create_checkpoint` only): True for a new one (201), False when
    the head had not moved and the latest was returned (200)."""
    org_id: str
    seq: int
    head_hash: str
    ts: str
    key_id: str
    signature: str
    created: Optional[bool] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any], created: Optional[bool] = None) -> "AuditCheckpoint":
        return cls(org_id=d.get("org_id"), seq=d.get("seq"), head_hash=d.get("head_hash"),  # type: ignore[arg-type]
                   ts=d.get("ts"), key_id=d.get("key_id"), signature=d.get("signature"),  # type: ignore[arg-type]
                   created=created, raw=d)

    def to_dict(self) -> Dict[str, Any]:
        return {"org_id": self.org_id, "seq": self.seq, "head_hash": self.head_hash, "ts": self.ts,
                "key_id": self.key_id, "signature": self.signature}


@dataclass
class AuditPublicKey:
    key_id: str
    algorithm: str
    public_key_pem: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "AuditPublicKey":
        return cls(key_id=d.get("key_id", ""), algorithm=d.get("algorithm", ""),
                   public_key_pem=d.get("public_key_pem", ""), raw=d)


@dataclass
class AuditVerifyReport:
    """The outcome of a verification. ``events``: how many verified before the first break (all of
    them when ``ok``); ``head_hash``: the recomputed hash of the last event verified (genesis
    when none); ``first_bad_seq`` and ``reason`` only when not ``ok``. ``latest_checkpoint_seq``
    only from the daemon's :meth:`Audit.verify`."""
    ok: bool
    org_id: str
    events: int
    checkpoints: int
    head_hash: str
    first_bad_seq: Optional[int] = None
    reason: Optional[str] = None
    latest_checkpoint_seq: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "AuditVerifyReport":
        return cls(ok=bool(d.get("ok")), org_id=d.get("org_id", ""), events=int(d.get("events", 0)),
                   checkpoints=int(d.get("checkpoints", 0)), head_hash=d.get("head_hash", ""),
                   first_bad_seq=d.get("first_bad_seq"), reason=d.get("reason"),
                   latest_checkpoint_seq=d.get("latest_checkpoint_seq"), raw=d)

    def __bool__(self) -> bool:
        return self.ok


# --- canonical form ----------------------------------------------------------------------------

def _check_value(v: Any, depth: int) -> None:
    """Raises ValueError for what has no canonical form (chain.hpp): floats, integers beyond
    ±(2^53 - 1), non-string keys, nesting deeper than 32 levels."""
    if depth > _MAX_DEPTH:
        raise ValueError("nested deeper than 32 levels")
    if v is None or isinstance(v, (bool, str)):
        return
    if isinstance(v, int):
        if not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
            raise ValueError("integer beyond ±(2^53 - 1)")
        return
    if isinstance(v, float):
        raise ValueError("floats have no canonical form")
    if isinstance(v, (list, tuple)):
        for item in v:
            _check_value(item, depth + 1)
        return
    if isinstance(v, dict):
        for k, item in v.items():
            if not isinstance(k, str):
                raise ValueError("object keys must be strings")
            _check_value(item, depth + 1)
        return
    raise ValueError(f"{type(v).__name__} has no JSON form")


def _dump(obj: Any) -> bytes:
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string is not valid Unicode (a lone surrogate)") from None


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of ``value`` (the rules of include/sandfort/audit/chain.hpp);
    ValueError when it has none."""
    _check_value(value, 0)
    return _dump(value)


def _as_dict(x: Any) -> Dict[str, Any]:
    if isinstance(x, Mapping):
        return dict(x)
    if hasattr(x, "to_dict"):
        return x.to_dict()
    raise TypeError(f"expected a mapping or an audit model, got {type(x).__name__}")


def event_canonical_json(event: Union[AuditEvent, Mapping[str, Any]]) -> bytes:
    """The canonical JSON of an event: every field but ``hash``; ValueError when it has none."""
    e = _as_dict(event)
    missing = [k for k in EVENT_FIELDS if k not in e]
    if missing:
        raise ValueError("missing " + ", ".join(missing))
    seq = e["seq"]
    if type(seq) is not int or not -MAX_SAFE_INTEGER <= seq <= MAX_SAFE_INTEGER:
        raise ValueError("seq is not an integer")
    for k in EVENT_FIELDS:
        if k not in ("seq", "details") and not isinstance(e[k], str):
            raise ValueError(f"{k} is not a string")
    if not isinstance(e["details"], dict):
        raise ValueError("details is not a JSON object")
    _check_value(e["details"], 0)
    return _dump({k: e[k] for k in EVENT_FIELDS})


def event_hash(event: Union[AuditEvent, Mapping[str, Any]]) -> str:
    """Lowercase hex SHA-256 of the event's ``prev_hash`` followed by its canonical JSON."""
    e = _as_dict(event)
    body = event_canonical_json(e)
    return hashlib.sha256(e["prev_hash"].encode("utf-8") + body).hexdigest()


def checkpoint_message(checkpoint: Union[AuditCheckpoint, Mapping[str, Any]]) -> bytes:
    """What a checkpoint's signature signs: the canonical JSON of
    ``{head_hash, key_id, org_id, seq, ts}``; ValueError when it has none."""
    c = _as_dict(checkpoint)
    if any(k not in c for k in CHECKPOINT_FIELDS) or type(c["seq"]) is not int:
        raise ValueError("not a checkpoint")
    if not all(isinstance(c[k], str) for k in CHECKPOINT_FIELDS if k != "seq"):
        raise ValueError("not a checkpoint")
    return canonical_json({k: c[k] for k in CHECKPOINT_FIELDS})


# --- client-side verification ------------------------------------------------------------------

class _ChainVerifier:
    """Mirrors sandfortd's chain_verifier (src/audit/verifier.cpp): events are fed in order and
    only the hashes at the checkpoints' seqs are kept, so memory does not grow with the chain."""

    def __init__(self, org_id: str, watched: Set[int]) -> None:
        self.org_id = org_id
        self.watched = watched
        self.kept: Dict[int, str] = {}
        self.last_seq = 0
        self.last_hash = GENESIS_HASH
        self.bad_seq: Optional[int] = None
        self.reason = ""

    def _fail(self, seq: int, reason: str) -> bool:
        self.bad_seq, self.reason = seq, reason
        return False

    def feed(self, e: Dict[str, Any]) -> bool:
        expected = self.last_seq + 1
        seq = e.get("seq")
        if type(seq) is not int:
            return self._fail(expected, f"the event where seq {expected} belongs has no integer seq: edited")
        at = f"seq {seq}"
        if seq > expected:
            return self._fail(expected, f"seq {expected} is missing (the next event has {at}): events were deleted")
        if seq < 1:
            return self._fail(expected, f"an event with invalid {at} stands where seq {expected} belongs")
        if seq < expected:
            return self._fail(seq, f"{at} appears again after seq {self.last_seq}: "
                                   "events were reordered, duplicated or inserted")
        if e.get("org_id") != self.org_id:
            return self._fail(seq, f"the event at {at} belongs to organization {e.get('org_id')}: "
                                   "moved from another organization")
        if e.get("prev_hash") != self.last_hash:
            return self._fail(seq, f"the event at {at} does not chain to its predecessor (prev_hash differs): "
                                   "an event before it was deleted, inserted or reordered, or it was moved from "
                                   "another organization")
        try:
            body = event_canonical_json(e)
        except ValueError as err:
            return self._fail(seq, f"the event at {at} has no canonical form ({err}): edited")
        h = hashlib.sha256(self.last_hash.encode("utf-8") + body).hexdigest()
        if h != e.get("hash"):
            return self._fail(seq, f"the hash of the event at {at} does not match its content: a field was edited")
        if seq in self.watched:
            self.kept[seq] = h
        self.last_seq, self.last_hash = seq, h
        return True

    def hash_at(self, seq: int) -> Optional[str]:
        return GENESIS_HASH if seq == 0 else self.kept.get(seq)

    def finish(self, checkpoints: List[Dict[str, Any]], public_key: bytes) -> AuditVerifyReport:
        problems: List[Any] = []  # (seq, order found, reason): the lowest seq wins, then the first found

        def note(seq: int, reason: str) -> None:
            problems.append((seq, len(problems), reason))

        if self.bad_seq is not None:
            note(self.bad_seq, self.reason)
        trusted = _ed25519.key_id(public_key)
        last_matching = 0
        ordered = sorted(checkpoints, key=lambda c: c.get("seq") if type(c.get("seq")) is int else -1)
        for c in ordered:
            seq = c.get("seq") if type(c.get("seq")) is int else 0
            at = f"the checkpoint at seq {seq}"
            if c.get("org_id") != self.org_id:
                note(seq, f"{at} is for organization {c.get('org_id')}, not {self.org_id}")
            elif c.get("key_id") != trusted:
                note(seq, f"{at} names key {c.get('key_id')}, not the trusted key {trusted}: "
                          "forged or signed by another key")
            elif not _signature_ok(c, public_key):
                note(seq, f"{at} has an invalid signature: forged or altered")
            elif self.bad_seq is not None and seq >= self.bad_seq:
                continue  # the chain is already broken before it: nothing to compare with
            elif seq > self.last_seq:
                note(self.last_seq + 1, f"the chain ends at seq {self.last_seq} but a signed checkpoint covers "
                                        f"seq {seq}: the tail was cut off")
            elif self.hash_at(seq) is None:
                note(seq, f"{at} was not announced to the verifier before the events were fed")
            elif self.hash_at(seq) != c.get("head_hash"):
                note(seq, f"the chain's hash at seq {seq} differs from the signed checkpoint: events after "
                          f"seq {last_matching} were rewritten")
            else:
                last_matching = seq
        report = AuditVerifyReport(ok=True, org_id=self.org_id, events=self.last_seq,
                                   checkpoints=len(checkpoints), head_hash=self.last_hash)
        if problems:
            seq, _, reason = min(problems)
            report.ok, report.first_bad_seq, report.reason = False, seq, reason
        return report


def _signature_ok(c: Dict[str, Any], public_key: bytes) -> bool:
    try:
        message = checkpoint_message(c)
        signature = base64.b64decode(c["signature"], validate=True)
    except (ValueError, TypeError, binascii.Error):
        return False
    return _ed25519.verify(public_key, message, signature)


def verify_chain(events: Iterable[Union[AuditEvent, Mapping[str, Any]]],
                 checkpoints: Iterable[Union[AuditCheckpoint, Mapping[str, Any]]],
                 public_key_pem: Union[str, bytes], *, org_id: Optional[str] = None) -> AuditVerifyReport:
    """Checks one organization's whole chain, from seq 1, against checkpoints signed by the key of
    ``public_key_pem`` (pinned earlier: never the one the same host serves now, if the host is
    what is doubted).

    Every event in order: seq 1, 2, 3, … without gaps, ``org_id`` the same throughout (``org_id``,
    or else the first event's or checkpoint's), ``prev_hash`` the previous ``hash``, and ``hash``
    = SHA-256(prev_hash || canonical JSON). Every checkpoint: of that organization, the pinned
    key's id, a valid Ed25519 signature, and the chain had exactly its ``head_hash`` at its
    ``seq`` (a checkpoint beyond the last event means the tail was cut off). ``events`` may be a
    generator (e.g. :meth:`Audit.iter_events`): only the hashes at checkpoints are kept.

    Returns an :class:`AuditVerifyReport` naming the lowest bad seq; ValueError for a PEM that
    is not an Ed25519 public key."""
    public_key = _ed25519.public_key_from_pem(public_key_pem)
    cps = [_as_dict(c) for c in checkpoints]
    it = iter(events)
    first = next(it, None)
    first_d = _as_dict(first) if first is not None else None
    org = org_id or (first_d or {}).get("org_id") or (cps[0].get("org_id") if cps else "") or ""
    verifier = _ChainVerifier(str(org), {c["seq"] for c in cps if type(c.get("seq")) is int})
    if first_d is not None and verifier.feed(first_d):
        for e in it:
            if not verifier.feed(_as_dict(e)):
                break
    return verifier.finish(cps, public_key)


# --- the resource ------------------------------------------------------------------------------

def _time(value: TimeArg) -> Optional[str]:
    """A query time: strings as given; datetimes in UTC (naive ones are taken as UTC)."""
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Audit:
    """``client.audit``. Every call reads the caller's organization; the superadmin reads another
    with ``org=`` (its id or name). All but :meth:`public_key` need the admin role."""

    def __init__(self, client: "Client") -> None:
        self._client = client
        self._t = client._t

    def _filters(self, since_seq: Optional[int], since: TimeArg, until: TimeArg, actor: Optional[str],
                 action: Optional[str], target: Optional[str], org: Optional[str]) -> Dict[str, Any]:
        return clean({"since_seq": since_seq, "since": _time(since), "until": _time(until), "actor": actor,
                      "action": action, "target": target, "org": org})

    def list_events(self, *, since_seq: Optional[int] = None, cursor: Optional[str] = None,
                    since: TimeArg = None, until: TimeArg = None, actor: Optional[str] = None,
                    action: Optional[str] = None, target: Optional[str] = None, limit: Optional[int] = None,
                    org: Optional[str] = None) -> AuditEventPage:
        """One page of events, ascending seq: those after ``since_seq`` (or ``cursor``, a page's
        ``next_cursor``), with ``ts`` within [``since``, ``until``] and the exact ``actor``,
        ``action``, ``target`` given. ``limit`` 1-1000 (default 100)."""
        q = self._filters(since_seq, since, until, actor, action, target, org)
        q.update(clean({"cursor": cursor, "limit": limit}))
        page = self._t.call("GET", "/v1/audit", query=q)
        return AuditEventPage(items=[AuditEvent.from_json(e) for e in page.get("items", [])],
                              next_cursor=page.get("next_cursor"))

    def iter_events(self, *, since_seq: Optional[int] = None, since: TimeArg = None, until: TimeArg = None,
                    actor: Optional[str] = None, action: Optional[str] = None, target: Optional[str] = None,
                    limit: Optional[int] = 1000, org: Optional[str] = None) -> Iterator[AuditEvent]:
        """Every matching event, page after page (``limit`` per page), as they are read."""
        cursor: Optional[str] = None
        while True:
            page = self.list_events(since_seq=since_seq, cursor=cursor, since=since, until=until, actor=actor,
                                    action=action, target=target, limit=limit, org=org)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def export_to(self, dest: Union[BinaryIO, "os.PathLike[str]", str], *, since_seq: Optional[int] = None,
                  since: TimeArg = None, until: TimeArg = None, actor: Optional[str] = None,
                  action: Optional[str] = None, target: Optional[str] = None, limit: Optional[int] = None,
                  org: Optional[str] = None) -> int:
        """Writes every matching event as JSON Lines into ``dest`` (a binary file object or a
        path), asking again with ``X-Next-Cursor`` until the daemon sends no more; ``limit`` is
        per request (1-100,000, default 1,000). Returns the number of events written."""
        if isinstance(dest, (str, os.PathLike)):
            with open(os.fspath(dest), "wb") as f:
                return self.export_to(f, since_seq=since_seq, since=since, until=until, actor=actor,
                                      action=action, target=target, limit=limit, org=org)
        q = self._filters(since_seq, since, until, actor, action, target, org)
        q.update(clean({"format": "jsonl", "limit": limit}))
        timeout = None if self._client.timeout is None else max(self._client.timeout, 600)
        count = 0
        while True:
            resp = self._t.open("GET", "/v1/audit", query=q, timeout=timeout)
            cursor = resp.raw.getheader("X-Next-Cursor")
            for chunk in resp.iter_bytes():
                dest.write(chunk)
                count += chunk.count(b"\n")
            if not cursor:
                return count
            q.pop("since_seq", None)
            q["cursor"] = cursor

    def export(self, *, since_seq: Optional[int] = None, since: TimeArg = None, until: TimeArg = None,
               actor: Optional[str] = None, action: Optional[str] = None, target: Optional[str] = None,
               limit: Optional[int] = None, org: Optional[str] = None) -> bytes:
        """Like :meth:`export_to`, into memory: the JSON Lines bytes of every matching event."""
        buf = io.BytesIO()
        self.export_to(buf, since_seq=since_seq, since=since, until=until, actor=actor, action=action,
                       target=target, limit=limit, org=org)
        return buf.getvalue()

    def iter_checkpoints(self, *, after_seq: Optional[int] = None, limit: Optional[int] = 1000,
                         org: Optional[str] = None) -> Iterator[AuditCheckpoint]:
        cursor: Optional[str] = None
        while True:
            q = clean({"after_seq": after_seq if cursor is None else None, "cursor": cursor, "limit": limit,
                       "org": org})
            page = self._t.call("GET", "/v1/audit/checkpoints", query=q)
            yield from (AuditCheckpoint.from_json(c) for c in page.get("items", []))
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def checkpoints(self, *, after_seq: Optional[int] = None, limit: Optional[int] = 1000,
                    org: Optional[str] = None) -> List[AuditCheckpoint]:
        """Every signed checkpoint (all pages, ``limit`` per page), ascending seq; those after
        ``after_seq`` only when given."""
        return list(self.iter_checkpoints(after_seq=after_seq, limit=limit, org=org))

    def create_checkpoint(self, *, org: Optional[str] = None) -> AuditCheckpoint:
        """Signs the chain's head now. ``created`` is False when the head had not moved since the
        latest checkpoint (that one is returned). ConflictError: no events yet, or the chain no
        longer extends the latest checkpoint (edited)."""
        resp = self._t.open("POST", "/v1/audit/checkpoints", query=clean({"org": org}))
        return AuditCheckpoint.from_json(resp.json(), created=resp.status == 201)

    def public_key(self) -> AuditPublicKey:
        """The daemon's checkpoint key (any role). Pin ``public_key_pem`` where the auditor keeps
        things, and verify later downloads against that copy."""
        return AuditPublicKey.from_json(self._t.call("GET", "/v1/audit/public-key"))

    def verify(self, *, org: Optional[str] = None) -> AuditVerifyReport:
        """The daemon's own check of its chain, with its own key: a convenience for admins, not
        evidence for an auditor who doubts the host (use :meth:`verify_remote` for that)."""
        return AuditVerifyReport.from_json(self._t.call("GET", "/v1/audit/verify", query=clean({"org": org}),
                                                        timeout=None))

    def verify_remote(self, public_key_pem: Union[str, bytes], *, org: Optional[str] = None,
                      org_id: Optional[str] = None) -> AuditVerifyReport:
        """Downloads the whole chain and every checkpoint and checks them here with
        :func:`verify_chain` against ``public_key_pem``. The organization the chain must belong
        to is ``org_id``, else ``org`` when it is an id, else the caller's own (``whoami``); for
        ``org`` given by name, the one the data names."""
        if org_id is None:
            if org is None:
                org_id = self._client.whoami().org_id
            elif _ORG_ID.match(org):
                org_id = org
        # Checkpoints first: every one of them then covers events that the later download holds,
        # even when the chain grows (or the daemon signs a new checkpoint) in between.
        checkpoints = self.checkpoints(org=org)
        return verify_chain(self.iter_events(org=org), checkpoints, public_key_pem, org_id=org_id)
