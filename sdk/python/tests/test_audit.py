"""client.audit against a live daemon: events, export, checkpoints, the daemon's and the
client-side verification, and tampering with the downloaded chain; plus the pure-Python Ed25519
(RFC 8032 vectors, an openssl signature) and the canonical JSON."""

import base64
import copy
import dataclasses
import hashlib
import json
import os
import subprocess
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from sandfort_sdk import AuditEvent, Client, PermissionDeniedError, verify_chain
from sandfort_sdk import _ed25519
from sandfort_sdk.audit import canonical_json, checkpoint_message, event_canonical_json, event_hash

# Key names that exercise every escaping rule of the canonical form.
NAMES = [
    "clé-ü✓😀",
    'quote " backslash \\ slash / end',
    "ctrl \u0001\u001f\t\n\r\b\f del \u007f seps \u2028\u2029",
    "astral 𝄞 private \ue000",
]


def _wait_quiet(client, seconds=1.5, limit=30.0):
    """Waits until the chain stops growing (the daemon's own sandbox.state events come late)."""
    deadline = time.monotonic() + limit
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        head = list(client.audit.iter_events())[-1].seq
        if head != last:
            last, since = head, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return head
        time.sleep(0.3)
    raise AssertionError("the audit chain kept growing")


@pytest.fixture(scope="module")
def chain(client, env):
    """A fresh organization with a chain of its own: keys with awkward names, a revoked key, a
    sandbox with a command, and checkpoints at an early and at the final head."""
    org = client.create_org(f"audit-py-{uuid.uuid4().hex[:8]}")
    admin_key = client.create_api_key("audit-admin", role="admin", org=org.id)
    admin = Client(base_url=env["url"], api_key=admin_key.key)
    early = admin.audit.create_checkpoint()
    keys = [admin.create_api_key(name, role="viewer") for name in NAMES]
    admin.revoke_api_key(keys[-1].id)
    member = admin.create_api_key("member ✓", role="member")
    with admin.create_sandbox(labels={"team": "clé-ü✓😀"}) as sbx:
        # The daemon records a command cut at 1 KiB, with "…" appended.
        assert sbx.process_exec("true é " + "x" * 1100).exit_code == 0
        assert sbx.process_exec("printf '%s' 'é😀 \"q\" \\\\'").stdout == 'é😀 "q" \\\\'
    _wait_quiet(admin)
    final = admin.audit.create_checkpoint()
    return {"org": org, "admin": admin, "keys": keys, "member": member, "early": early, "final": final,
            "pem": admin.audit.public_key().public_key_pem}


@pytest.fixture
def downloaded(chain):
    a = chain["admin"]
    checkpoints = a.audit.checkpoints()
    events = list(a.audit.iter_events())
    return events, checkpoints


def test_events_pages_and_filters(chain, client):
    a = chain["admin"]
    events = list(a.audit.iter_events(limit=2))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.org_id for e in events} == {chain["org"].id}
    assert [e.to_dict() for e in events] == [e.raw for e in a.audit.list_events(limit=1000).items]
    first = a.audit.list_events(limit=3)
    assert [e.seq for e in first.items] == [1, 2, 3] and first.next_cursor == "3"
    rest = a.audit.list_events(cursor=first.next_cursor, limit=1000)
    assert rest.items[0].seq == 4 and rest.next_cursor is None
    assert [e.seq for e in a.audit.list_events(since_seq=len(events) - 2).items] == [len(events) - 1, len(events)]

    created = [e for e in events if e.action == "api_key.create"]
    assert [e.details["name"] for e in created[1:1 + len(NAMES)]] == NAMES
    assert [e.seq for e in a.audit.iter_events(action="api_key.create")] == [e.seq for e in created]
    revoked = chain["keys"][-1].id
    assert [e.action for e in a.audit.iter_events(target=revoked)] == ["api_key.create", "api_key.revoke"]
    actor = created[1].actor
    assert all(e.actor == actor for e in a.audit.iter_events(actor=actor))
    actions = {e.action for e in events}
    assert {"org.create", "api_key.revoke", "sandbox.create", "sandbox.exec", "sandbox.delete"} <= actions

    # since/until are inclusive; a datetime is sent in UTC.
    ev = events[3]
    assert ev.seq in [e.seq for e in a.audit.iter_events(since=ev.ts, until=ev.ts)]
    t = datetime.strptime(ev.ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert [e.seq for e in a.audit.iter_events(since=t.astimezone(timezone(timedelta(hours=5))), until=t)] == \
        [e.seq for e in events if e.ts == ev.ts]
    assert list(a.audit.iter_events(until=datetime(2000, 1, 1, tzinfo=timezone.utc))) == []

    # The superadmin reads the organization's chain with org=; the organization cannot be read
    # by a member at all.
    assert [e.hash for e in client.audit.iter_events(org=chain["org"].id)] == [e.hash for e in events]
    assert [e.hash for e in client.audit.iter_events(org=chain["org"].name)] == [e.hash for e in events]
    member = Client(base_url=a.base_url, api_key=chain["member"].key)
    with pytest.raises(PermissionDeniedError):
        member.audit.list_events()
    assert member.audit.public_key().public_key_pem == chain["pem"]


def test_export_follows_the_cursor(chain, tmp_path):
    a = chain["admin"]
    events = list(a.audit.iter_events())
    data = a.audit.export(limit=2)  # several requests, each cut by X-Next-Cursor
    # Lines end at "\n" only (a raw U+2028 is inside a string, which str.splitlines would split).
    lines = data.split(b"\n")
    assert lines.pop() == b"" and [json.loads(line) for line in lines] == [e.raw for e in events]
    path = tmp_path / "audit.jsonl"
    assert a.audit.export_to(path, limit=3, since_seq=2) == len(events) - 2
    assert path.read_bytes() == b"".join(line + b"\n" for line in lines[2:])
    only = a.audit.export(action="api_key.revoke", limit=1)
    assert [json.loads(line)["action"] for line in only.split(b"\n")[:-1]] == ["api_key.revoke"]


def test_checkpoints_and_both_verifications_agree(chain, client, downloaded):
    a = chain["admin"]
    events, checkpoints = downloaded
    early, final = chain["early"], chain["final"]
    assert early.created and final.created and final.seq == len(events)
    assert early.seq == 2  # org.create and the admin key's creation
    again = a.audit.create_checkpoint()
    assert again.created is False and again.to_dict() == final.to_dict()
    assert [c.to_dict() for c in checkpoints] == [early.to_dict(), final.to_dict()]
    assert [c.seq for c in a.audit.checkpoints(after_seq=early.seq)] == [final.seq]
    assert [c.seq for c in a.audit.checkpoints(limit=1)] == [early.seq, final.seq]

    server = a.audit.verify()
    assert server.ok and server.org_id == chain["org"].id and server.latest_checkpoint_seq == final.seq
    mine = verify_chain(events, checkpoints, chain["pem"])
    assert mine.ok, mine.reason
    assert (mine.events, mine.checkpoints, mine.head_hash, mine.org_id) == \
        (server.events, server.checkpoints, server.head_hash, server.org_id)
    assert mine.head_hash == final.head_hash == events[-1].hash
    assert mine.first_bad_seq is None and mine.reason is None

    # Every hash recomputes, the awkward strings written as UTF-8 with only controls escaped.
    for e in events:
        assert event_hash(e) == e.hash
    body = b"".join(event_canonical_json(e) for e in events)
    assert "clé-ü✓😀".encode() in body and b"\\u0001\\u001f\\t\\n\\r\\b\\f del \x7f" in body
    assert "\u2028\u2029".encode() in body and b'\\" backslash \\\\ slash / end' in body
    assert ("true é " + "x" * (1024 - 8) + "…").encode() in body  # the recorded command, cut

    remote = a.audit.verify_remote(chain["pem"])
    assert remote.ok and remote.head_hash == server.head_hash and remote.events == len(events)
    by_super = client.audit.verify_remote(chain["pem"], org=chain["org"].id)
    assert by_super.ok and by_super.org_id == chain["org"].id and by_super.head_hash == server.head_hash
    assert client.audit.verify(org=chain["org"].id).head_hash == server.head_hash


# A command cut at 1 KiB for the chain inside a multi-byte character once made the record throw (500).
def test_long_command_cut_inside_a_character(client, env):
    with client.create_sandbox() as sbx:
        # 5 + 600 × 2 bytes: the 1 KiB cut falls inside an "é".
        assert sbx.process_exec("true " + "é" * 600).exit_code == 0
    events = list(client.audit.iter_events(action="sandbox.exec", target=sbx.id))
    assert events and events[-1].details["command"].startswith("true " + "é" * 509)
    assert client.audit.verify_remote(client.audit.public_key().public_key_pem).ok


def test_superadmin_checkpoints_another_org(client):
    org = client.create_org(f"audit-other-{uuid.uuid4().hex[:8]}")
    cp = client.audit.create_checkpoint(org=org.id)  # its chain holds its org.create
    assert cp.created and cp.seq == 1 and cp.org_id == org.id
    again = client.audit.create_checkpoint(org=org.name)
    assert again.created is False and again.signature == cp.signature
    assert [c.to_dict() for c in client.audit.checkpoints(org=org.id)] == [cp.to_dict()]


def _rehash_from(events, seq):
    """What an attacker with the database does: edits seq and recomputes every hash after it."""
    out = [e.to_dict() for e in events]
    out[seq - 1]["actor"] = "key:someone-else"
    for i in range(seq - 1, len(out)):
        if i > 0:
            out[i]["prev_hash"] = out[i - 1]["hash"]
        out[i]["hash"] = event_hash(out[i])
    return out


def _flip_signature(c):
    sig = bytearray(base64.b64decode(c["signature"]))
    sig[5] ^= 1
    return dict(c, signature=base64.b64encode(bytes(sig)).decode())


def test_tampering_is_found_at_the_right_seq(chain, downloaded):
    events, checkpoints = downloaded
    n = len(events)
    early, final = chain["early"].seq, chain["final"].seq
    assert n >= 10 and final == n
    cps = [c.to_dict() for c in checkpoints]

    def edit(seq, **fields):
        out = copy.deepcopy(events)
        for k, v in fields.items():
            setattr(out[seq - 1], k, v)
        return out

    details = copy.deepcopy(events[3].details)
    details["name"] = details["name"] + "!"
    swapped = list(events)
    swapped[2], swapped[3] = swapped[3], swapped[2]
    cases = [
        ("edited actor", edit(3, actor="key:evil"), cps, 3, "does not match its content"),
        ("edited details", edit(4, details=details), cps, 4, "does not match its content"),
        ("edited last ts", edit(n, ts="2000-01-01T00:00:00.000Z"), cps, n, "does not match its content"),
        ("float in details", edit(5, details={"x": 1.5}), cps, 5, "no canonical form"),
        ("dropped event", events[:4] + events[5:], cps, 5, "seq 5 is missing"),
        ("swapped events", swapped, cps, 3, "seq 3 is missing"),
        ("duplicated event", events[:2] + [events[1]] + events[2:], cps, 2, "appears again"),
        ("moved from another org", edit(6, org_id="org-0000000000000000"), cps, 6, "belongs to organization"),
        ("tail cut", events[:-2], cps, n - 1, "the tail was cut off"),
        ("everything deleted", [], cps, 1, "the tail was cut off"),
        ("rewritten after the early checkpoint", _rehash_from(events, early + 2), cps, final,
         f"events after seq {early} were rewritten"),
        ("rewritten from the start", _rehash_from(events, 1), cps, early, "differs from the signed checkpoint"),
        ("forged signature", events, [cps[0], _flip_signature(cps[1])], final, "invalid signature"),
        ("altered head_hash", events, [cps[0], dict(cps[1], head_hash=events[-2].hash)], final,
         "invalid signature"),
        ("altered checkpoint seq", events, [cps[0], dict(cps[1], seq=n - 1)], n - 1, "invalid signature"),
        ("another org's checkpoint", events, [cps[0], dict(cps[1], org_id="org-0000000000000000")], final,
         "is for organization org-0000000000000000"),
    ]
    for name, evs, cs, bad, reason in cases:
        r = verify_chain(evs, cs, chain["pem"], org_id=chain["org"].id)
        assert not r.ok and not r, name
        assert r.first_bad_seq == bad, (name, r)
        assert reason in r.reason, (name, r.reason)
    # The report counts what verified before the break.
    assert verify_chain(events[:4] + events[5:], cps, chain["pem"]).events == 4
    # Without checkpoints a cut tail or a re-hashed chain cannot be seen: what they are for.
    assert verify_chain(events[:-2], [], chain["pem"]).ok
    assert verify_chain(_rehash_from(events, 1), [], chain["pem"]).ok


def test_wrong_pinned_key_and_bad_pem(chain, downloaded, tmp_path):
    events, checkpoints = downloaded
    key = tmp_path / "other.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    other = subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout"], check=True, capture_output=True,
                           text=True).stdout
    r = verify_chain(events, checkpoints, other)
    assert not r.ok and r.first_bad_seq == chain["early"].seq and "not the trusted key" in r.reason
    assert _ed25519.key_id(_ed25519.public_key_from_pem(other)) in r.reason
    assert not chain["admin"].audit.verify_remote(other).ok
    for bad in ["", "not a key", key.read_text(), other.replace("MCowBQYDK2Vw", "MCowBQYDK2Vx")]:
        with pytest.raises(ValueError):
            verify_chain(events, checkpoints, bad)


def test_checkpoint_signature_checks_with_openssl(chain, tmp_path):
    """The message this SDK rebuilds is the one the daemon signed: openssl agrees."""
    c = chain["final"]
    (tmp_path / "pub.pem").write_text(chain["pem"])
    (tmp_path / "message").write_bytes(checkpoint_message(c))
    (tmp_path / "sig").write_bytes(base64.b64decode(c.signature))
    out = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "pub.pem", "-rawin", "-in",
                          "message", "-sigfile", "sig"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and "Signature Verified Successfully" in out.stdout, out


def test_audit_event_model_keeps_the_wire_form(chain):
    e = chain["admin"].audit.list_events(limit=1).items[0]
    assert isinstance(e, AuditEvent) and e.to_dict() == e.raw
    assert dataclasses.replace(e, actor="x").to_dict()["actor"] == "x"


# --- Ed25519 -----------------------------------------------------------------------------------

# RFC 8032, section 7.1, TEST 1-3: (public key, message, signature).
RFC8032_VECTORS = [
    ("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),  # noqa: E501
    ("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),  # noqa: E501
    ("fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),  # noqa: E501
]
L = 2 ** 252 + 27742317777372353535851937790883648493
P = 2 ** 255 - 19


@pytest.mark.parametrize("pk,msg,sig", RFC8032_VECTORS)
def test_ed25519_rfc8032_vectors(pk, msg, sig):
    pk, msg, sig = bytes.fromhex(pk), bytes.fromhex(msg), bytes.fromhex(sig)
    assert _ed25519.verify(pk, msg, sig)
    assert not _ed25519.verify(pk, msg + b"\x00", sig)
    for i in (0, 31, 32, 63):  # a bit of R, of S
        bad = bytearray(sig)
        bad[i] ^= 0x01
        assert not _ed25519.verify(pk, msg, bytes(bad))
    assert not _ed25519.verify(pk, msg, sig[:63])
    # S + L satisfies the same equation ([S+L]B = [S]B) but is not canonical: rejected.
    s = int.from_bytes(sig[32:], "little")
    assert not _ed25519.verify(pk, msg, sig[:32] + (s + L).to_bytes(32, "little"))


def test_ed25519_rejects_bad_point_encodings():
    pk, msg, sig = (bytes.fromhex(x) for x in RFC8032_VECTORS[1])
    # With the identity (x = 0, y = 1) as the key, R = identity and S = 0 satisfy the equation
    # for any message: the control below verifies, so each encoding refused after it is refused
    # for its encoding alone.
    identity, zero = (1).to_bytes(32, "little"), bytes(32)
    assert _ed25519.verify(identity, msg, identity + zero)
    non_canonical = (P + 1).to_bytes(32, "little")  # y >= p: the same y as 1, encoded otherwise
    assert not _ed25519.verify(identity, msg, non_canonical + zero)
    assert not _ed25519.verify(non_canonical, msg, identity + zero)
    negative_zero = (1 | 1 << 255).to_bytes(32, "little")  # x = 0 with the sign bit set
    assert not _ed25519.verify(identity, msg, negative_zero + zero)
    assert not _ed25519.verify(negative_zero, msg, identity + zero)
    # A y with no x on the curve: (y² - 1) / (d y² + 1) is not a square mod p.
    d = -121665 * pow(121666, P - 2, P) % P
    y = next(y for y in range(2, 100)
             if pow((y * y - 1) * pow(d * y * y + 1, P - 2, P) % P, (P - 1) // 2, P) == P - 1)
    off_curve = y.to_bytes(32, "little")
    assert _ed25519._decode_point(off_curve) is None and _ed25519._decode_point(pk) is not None
    assert not _ed25519.verify(off_curve, msg, sig)
    assert not _ed25519.verify(pk, msg, off_curve + sig[32:])
    assert not _ed25519.verify(pk[:31], msg, sig)


def test_ed25519_against_an_openssl_signature(tmp_path):
    key, msg = tmp_path / "k.pem", tmp_path / "msg"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    pem = subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout"], check=True, capture_output=True,
                         text=True).stdout
    message = os.urandom(200) + "clé ✓".encode()
    msg.write_bytes(message)
    sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", str(key), "-rawin", "-in", str(msg)],
                         check=True, capture_output=True).stdout
    raw = _ed25519.public_key_from_pem(pem)
    der = subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-outform", "DER"], check=True,
                         capture_output=True).stdout
    assert raw == der[-32:] and _ed25519.key_id(raw) == hashlib.sha256(raw).hexdigest()[:16]
    assert len(sig) == 64 and _ed25519.verify(raw, message, sig)
    mutated = bytearray(message)
    mutated[17] ^= 0x40
    assert not _ed25519.verify(raw, bytes(mutated), sig)
    assert not _ed25519.verify(raw, message, sig[:40] + bytes([sig[40] ^ 1]) + sig[41:])


# --- canonical JSON ----------------------------------------------------------------------------

def test_canonical_json_rules():
    # Keys by code point: "\ue000" (U+E000) before the astral "😀" (U+1F600), though UTF-16 would
    # put the astral one's surrogates (0xD83D) first; integer-like keys are plain strings.
    obj = {"😀": 1, "\ue000": 2, "b": [True, None, -0, "\u0001\"\\/\u2028"], "10": {}, "2": 3, "a": "é"}
    assert canonical_json(obj) == \
        '{"10":{},"2":3,"a":"é","b":[true,null,0,"\\u0001\\"\\\\/\u2028"],"\ue000":2,"😀":1}'.encode()
    for bad in [{"f": 1.0}, {"big": 2 ** 53}, {"neg": -(2 ** 53)}, {"s": "\ud800"}, {1: "x"}]:
        with pytest.raises(ValueError):
            canonical_json(bad)
    canonical_json({"ok": 2 ** 53 - 1})
    deep = {}
    for _ in range(32):
        deep = {"x": deep}
    canonical_json(deep)
    with pytest.raises(ValueError):
        canonical_json({"x": deep})
