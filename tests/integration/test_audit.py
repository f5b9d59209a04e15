"""The audit log against a real daemon and a real SQLite file.

Reading: GET /v1/audit (filters, cursor pages, JSON Lines), /v1/audit/verify, signed checkpoints
(on demand, exported, checked with the openssl CLI against GET /v1/audit/public-key). Every hash
is recomputed here in Python from the canonical rules of include/sandfort/audit/chain.hpp.

Tampering: the daemon is stopped, its SQLite file copied, and each copy edited directly with
sqlite3 the way an attacker with the database (but not the signing key) would: a field edited,
an event deleted, inserted, reordered or moved to another organization, the tail cut, a suffix
rewritten and re-hashed, a checkpoint forged. `sandfortd audit-verify` must exit 1 naming the
organization and the first bad seq; on the untouched copy it exits 0. What the chain does not
catch (docs/audit.md) is checked too, so that the documented limits are the real ones."""

import base64
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile

import pytest

from sandfort_harness import SANDFORTD, Daemon

GENESIS = "0" * 64
COLUMNS = ("org_id", "seq", "ts", "actor", "action", "target", "outcome", "request_id", "source", "details",
           "prev_hash", "hash")


def canonical(event):
    """The canonical JSON of an event (chain.hpp): every field but hash, details as an object."""
    obj = {k: event[k] for k in COLUMNS if k not in ("hash", "details")}
    details = event["details"]
    obj["details"] = json.loads(details) if isinstance(details, str) else details
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def chain_hash(prev_hash, event):
    return hashlib.sha256(prev_hash.encode() + canonical(event)).hexdigest()


def checkpoint_message(c):
    obj = {k: c[k] for k in ("org_id", "seq", "head_hash", "ts", "key_id")}
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def raw_public_key(pem):
    der = base64.b64decode("".join(line for line in pem.splitlines() if "-----" not in line))
    assert len(der) == 44, "an Ed25519 SubjectPublicKeyInfo is 44 bytes"
    return der[-32:]


def openssl(*args, **kw):
    return subprocess.run(["openssl", *args], capture_output=True, **kw)


def new_org(daemon, name, extra_keys=2):
    """An organization with an admin key (made by the superadmin) and extra keys its admin made."""
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": name})
    assert r.status == 201, r
    org = r.json()
    r = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "admin", "role": "admin"})
    assert r.status == 201, r
    org_admin = daemon.client(r.json()["key"])
    org["admin_key_id"] = r.json()["id"]
    org["admin"] = org_admin
    org["keys"] = {}
    for i in range(extra_keys):
        role = ("member", "viewer")[i % 2]
        r = org_admin.post("/v1/api-keys", {"name": f"{role}-{i}", "role": role})
        assert r.status == 201, r
        org["keys"][role] = r.json()
    return org


def all_events(client, query=""):
    r = client.get("/v1/audit?limit=1000" + query)
    assert r.status == 200, r
    assert r.json()["next_cursor"] is None
    return r.json()["items"]


def require_write_side(events):
    assert any(e["action"].startswith("api_key.") for e in events), "the daemon appended no api_key.* event"


@pytest.fixture(scope="module")
def audited():
    """A daemon that exports its checkpoints, with two organizations that have a history."""
    export_dir = tempfile.mkdtemp(prefix="sf-audit-")
    export = os.path.join(export_dir, "checkpoints.jsonl")
    d = Daemon({"audit": {"export_path": export, "checkpoint_interval_s": 3600}}).start()
    try:
        acme = new_org(d, "audit-acme")
        temp = acme["admin"].post("/v1/api-keys", {"name": "temporary", "role": "viewer"})
        assert temp.status == 201, temp
        acme["temp_key"] = temp.json()
        assert acme["admin"].delete(f"/v1/api-keys/{acme['temp_key']['id']}").status == 204
        other = new_org(d, "audit-other")
        yield {"daemon": d, "export": export, "acme": acme, "other": other}
    finally:
        d.stop()
        d.cleanup()
        shutil.rmtree(export_dir, ignore_errors=True)


def test_events_form_a_hash_chain_that_python_recomputes(audited):
    acme = audited["acme"]
    events = all_events(acme["admin"])
    require_write_side(events)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    prev = GENESIS
    for e in events:
        assert set(e) == set(COLUMNS)
        assert e["org_id"] == acme["id"]
        assert isinstance(e["details"], dict)
        assert e["prev_hash"] == prev
        assert chain_hash(prev, e) == e["hash"], e
        prev = e["hash"]
    assert events[0]["action"] == "org.create" and events[0]["target"] == acme["id"]
    created = [e for e in events if e["action"] == "api_key.create"]
    assert {e["target"] for e in created} >= {acme["admin_key_id"], acme["temp_key"]["id"]}
    revoked = [e for e in events if e["action"] == "api_key.revoke"]
    assert [e["target"] for e in revoked] == [acme["temp_key"]["id"]]
    assert revoked[0]["actor"] == "key:" + acme["admin_key_id"]
    assert revoked[0]["request_id"].startswith("req-") and revoked[0]["source"] == "127.0.0.1"
    # A key's secret never reaches the chain.
    body = acme["admin"].get("/v1/audit?limit=1000").body.decode()
    for k in list(acme["keys"].values()) + [acme["temp_key"]]:
        assert k["key"] not in body


def test_only_admins_read_the_log_and_only_their_own_organization(audited):
    d, acme, other = audited["daemon"], audited["acme"], audited["other"]
    member = d.client(acme["keys"]["member"]["key"])
    viewer = d.client(acme["keys"]["viewer"]["key"])
    for client in (member, viewer):
        for path in ("/v1/audit", "/v1/audit/verify", "/v1/audit/checkpoints"):
            assert client.get(path).status == 403, path
        assert client.post("/v1/audit/checkpoints").status == 403
    assert d.client().get("/v1/audit").status == 401
    # The public key is public: any role may fetch it to pin it.
    assert viewer.get("/v1/audit/public-key").status == 200

    theirs = all_events(other["admin"])
    require_write_side(theirs)
    assert {e["org_id"] for e in theirs} == {other["id"]}
    # Another organization's chain is a missing resource, whichever way it is named.
    for name in (acme["id"], acme["name"]):
        r = other["admin"].get(f"/v1/audit?org={name}")
        assert r.status == 404, r
        assert other["admin"].get(f"/v1/audit/verify?org={name}").status == 404
    # The superadmin reads its own chain, and any other by id or name.
    own = all_events(d.admin())
    assert {e["org_id"] for e in own} == {d.admin().get("/v1/whoami").json()["org_id"]}
    assert any(e["action"] == "org.create" and e["target"] == acme["id"] for e in own)
    assert all_events(d.admin(), f"&org={acme['name']}") == all_events(acme["admin"])
    assert d.admin().get("/v1/audit?org=no-such-org").status == 404


def test_filters_by_action_actor_target_and_time(audited):
    admin, acme = audited["acme"]["admin"], audited["acme"]
    events = all_events(admin)
    require_write_side(events)

    def seqs(query):
        return [e["seq"] for e in all_events(admin, query)]

    def expected(pred):
        return [e["seq"] for e in events if pred(e)]

    assert seqs("&action=api_key.create") == expected(lambda e: e["action"] == "api_key.create")
    assert len(seqs("&action=api_key.create")) >= 4
    actor = "key:" + acme["admin_key_id"]
    assert seqs("&actor=" + actor) == expected(lambda e: e["actor"] == actor)
    assert len(seqs("&actor=" + actor)) >= 4
    target = acme["temp_key"]["id"]
    assert [e["action"] for e in all_events(admin, "&target=" + target)] == ["api_key.create", "api_key.revoke"]
    assert seqs(f"&action=api_key.revoke&actor={actor}&target={target}") == expected(
        lambda e: e["target"] == target and e["action"] == "api_key.revoke")
    assert seqs("&action=no.such.action") == []

    middle = events[len(events) // 2]
    assert seqs("&since=" + middle["ts"]) == expected(lambda e: e["ts"] >= middle["ts"])
    assert seqs("&until=" + middle["ts"]) == expected(lambda e: e["ts"] <= middle["ts"])
    assert middle["seq"] in seqs("&since=" + middle["ts"]) and middle["seq"] in seqs("&until=" + middle["ts"])
    # Whole seconds mean .000: an event at .123 of that second is after `since` and after `until`.
    second = middle["ts"][:19] + "Z"
    assert seqs("&since=" + second) == expected(lambda e: e["ts"] >= middle["ts"][:19] + ".000Z")
    assert seqs("&until=" + second) == expected(lambda e: e["ts"] <= middle["ts"][:19] + ".000Z")
    assert seqs("&since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z") == []

    for bad in ("since=yesterday", "until=2025-01-02T03:04:05", "since=2025-01-02%2003:04:05Z", "limit=0",
                "limit=1001", "since_seq=-1", "format=xml", "limit=100001&format=jsonl"):
        r = admin.get("/v1/audit?" + bad)
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", (bad, r)


def test_cursor_pages_cover_the_chain_once(audited):
    admin = audited["acme"]["admin"]
    events = all_events(admin)
    require_write_side(events)
    seen, cursor, pages = [], None, 0
    while True:
        r = admin.get("/v1/audit?limit=2" + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200, r
        page = r.json()
        seen += page["items"]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert cursor == str(page["items"][-1]["seq"])
    assert seen == events
    assert pages == (len(events) + 1) // 2
    # since_seq is the contract's name for the same cursor.
    assert all_events(admin, "&since_seq=3") == events[3:]


def test_json_lines_export(audited):
    admin = audited["acme"]["admin"]
    events = all_events(admin)
    require_write_side(events)
    for r in (admin.get("/v1/audit?format=jsonl"), admin.get("/v1/audit", headers={"Accept": "application/x-ndjson"})):
        assert r.status == 200, r
        assert r.headers["Content-Type"] == "application/x-ndjson"
        assert "X-Next-Cursor" not in r.headers
        lines = r.body.decode().splitlines()
        assert [json.loads(line) for line in lines] == events
    # Pieces: the cursor of the next piece comes in a header.
    got, cursor = [], "0"
    while cursor is not None:
        r = admin.get(f"/v1/audit?format=jsonl&limit=3&cursor={cursor}")
        assert r.status == 200, r
        piece = [json.loads(line) for line in r.body.decode().splitlines()]
        assert len(piece) <= 3
        got += piece
        cursor = r.headers.get("X-Next-Cursor")
        if cursor is not None:
            assert cursor == str(piece[-1]["seq"]) and len(piece) == 3
    assert got == events
    # Filters apply to the export too.
    r = admin.get("/v1/audit?format=jsonl&action=api_key.revoke")
    assert [json.loads(line)["action"] for line in r.body.decode().splitlines()] == ["api_key.revoke"]


def test_verify_reports_an_intact_chain(audited):
    admin = audited["acme"]["admin"]
    events = all_events(admin)
    require_write_side(events)
    r = admin.get("/v1/audit/verify")
    assert r.status == 200, r
    report = r.json()
    assert report["ok"] is True, report
    assert report["org_id"] == audited["acme"]["id"]
    assert report["events"] == len(events)
    assert report["head_hash"] == events[-1]["hash"]
    assert "first_bad_seq" not in report and "reason" not in report


def test_checkpoint_on_demand_is_signed_exported_and_checks_with_openssl(audited, tmp_path):
    acme = audited["acme"]
    admin = acme["admin"]
    events = all_events(admin)
    require_write_side(events)

    r = admin.post("/v1/audit/checkpoints")
    assert r.status == 201, r
    c = r.json()
    assert c["org_id"] == acme["id"] and c["seq"] == len(events) and c["head_hash"] == events[-1]["hash"]
    # The head did not move: the same checkpoint, not a new one.
    r = admin.post("/v1/audit/checkpoints")
    assert r.status == 200 and r.json() == c, r
    listed = admin.get("/v1/audit/checkpoints").json()
    assert listed["items"][-1] == c and listed["next_cursor"] is None
    assert admin.get(f"/v1/audit/checkpoints?after_seq={c['seq']}").json()["items"] == []

    key = admin.get("/v1/audit/public-key").json()
    assert key["algorithm"] == "Ed25519" and key["key_id"] == c["key_id"]
    assert hashlib.sha256(raw_public_key(key["public_key_pem"])).hexdigest()[:16] == key["key_id"]
    (tmp_path / "pub.pem").write_text(key["public_key_pem"])
    (tmp_path / "msg").write_bytes(checkpoint_message(c))
    (tmp_path / "sig").write_bytes(base64.b64decode(c["signature"]))
    ok = openssl("pkeyutl", "-verify", "-pubin", "-inkey", "pub.pem", "-rawin", "-in", "msg", "-sigfile", "sig",
                 cwd=tmp_path)
    assert ok.returncode == 0 and b"Signature Verified Successfully" in ok.stdout, ok
    (tmp_path / "msg").write_bytes(checkpoint_message(dict(c, seq=c["seq"] - 1)))
    forged = openssl("pkeyutl", "-verify", "-pubin", "-inkey", "pub.pem", "-rawin", "-in", "msg", "-sigfile", "sig",
                     cwd=tmp_path)
    assert forged.returncode != 0, forged

    with open(audited["export"]) as f:
        exported = [json.loads(line) for line in f]
    assert exported.count(c) == 1
    assert oct(os.stat(audited["export"]).st_mode & 0o777) == "0o600"

    # A new event moves the head: the next checkpoint covers it.
    assert admin.post("/v1/api-keys", {"name": "after-checkpoint", "role": "viewer"}).status == 201
    r = admin.post("/v1/audit/checkpoints")
    assert r.status == 201 and r.json()["seq"] > c["seq"], r
    verified = admin.get("/v1/audit/verify").json()
    assert verified["ok"] and verified["checkpoints"] >= 2 and verified["latest_checkpoint_seq"] == r.json()["seq"]


def test_audit_verify_on_the_live_database(audited):
    d, acme, other = audited["daemon"], audited["acme"], audited["other"]
    require_write_side(all_events(acme["admin"]))
    out = subprocess.run([SANDFORTD, "audit-verify", "--config", d.config_path, "--checkpoints", audited["export"]],
                         capture_output=True, text=True)
    assert out.returncode == 0, out
    for org in (acme, other):
        assert re.search(rf"^{org['id']} \({org['name']}\) ok: \d+ events, \d+ checkpoints", out.stdout, re.M), out
    one = subprocess.run([SANDFORTD, "audit-verify", "--config", d.config_path, "--org", "audit-acme"],
                         capture_output=True, text=True)
    assert one.returncode == 0 and one.stdout.count("\n") == 1 and acme["id"] in one.stdout, one
    unknown = subprocess.run([SANDFORTD, "audit-verify", "--config", d.config_path, "--org", "no-such-org"],
                             capture_output=True, text=True)
    assert unknown.returncode == 2 and "no-such-org" in unknown.stderr, unknown


# --- tampering with a copy of the database -------------------------------------------------------


@pytest.fixture(scope="module")
def stopped():
    """A stopped daemon whose two organizations have a history, with a checkpoint in the middle of
    acme's chain (made on demand) and one at its end (made by the shutdown), both exported."""
    export_dir = tempfile.mkdtemp(prefix="sf-audit-")
    export = os.path.join(export_dir, "checkpoints.jsonl")
    d = Daemon({"audit": {"export_path": export, "checkpoint_interval_s": 3600}}).start()
    try:
        acme = new_org(d, "tamper-acme", extra_keys=4)
        other = new_org(d, "tamper-other")
        events = all_events(acme["admin"])
        require_write_side(events)
        r = acme["admin"].post("/v1/audit/checkpoints")
        assert r.status == 201, r
        middle = r.json()["seq"]
        for i in range(4):
            assert acme["admin"].post("/v1/api-keys", {"name": f"late-{i}", "role": "viewer"}).status == 201
        head = all_events(acme["admin"])[-1]["seq"]
        public_key = acme["admin"].get("/v1/audit/public-key").json()["public_key_pem"]
        assert d.stop() == 0, d.log()
        db = sqlite3.connect(os.path.join(d.state_dir, "sandfort.db"))
        signed = [s for (s,) in db.execute("SELECT seq FROM audit_checkpoints WHERE org_id = ? ORDER BY seq",
                                           (acme["id"],))]
        db.close()
        # The shutdown signed the last events.
        assert signed == [middle, head], (signed, middle, head)
        with open(export) as f:
            assert [c["seq"] for c in map(json.loads, f) if c["org_id"] == acme["id"]] == [middle, head]
        yield {"daemon": d, "export": export, "acme": acme["id"], "other": other["id"], "middle": middle,
               "head": head, "public_key": public_key}
    finally:
        d.stop()
        d.cleanup()
        shutil.rmtree(export_dir, ignore_errors=True)


class Copy:
    """A copy of the stopped daemon's database with a configuration that points at it."""

    def __init__(self, stopped, directory, key_path=None):
        self.s = stopped
        self.dir = str(directory)
        source = os.path.join(stopped["daemon"].state_dir, "sandfort.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(source + suffix):
                shutil.copy2(source + suffix, os.path.join(self.dir, "sandfort.db" + suffix))
        self.config = os.path.join(self.dir, "verify.json")
        key = key_path or os.path.join(stopped["daemon"].state_dir, "audit-signing.key")
        with open(self.config, "w") as f:
            json.dump({"state_dir": self.dir, "audit": {"key_path": key}}, f)
        self.db = sqlite3.connect(os.path.join(self.dir, "sandfort.db"))

    def sql(self, statement, *args):
        self.db.execute(statement, args)
        self.db.commit()

    def events(self, org):
        rows = self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM audit_events WHERE org_id = ? ORDER BY seq", (org,))
        return [dict(zip(COLUMNS, row)) for row in rows]

    def rehash(self, org, from_seq):
        """Rewrites the hashes from from_seq on so that the chain is consistent again."""
        prev = GENESIS
        for e in self.events(org):
            if e["seq"] >= from_seq:
                e["prev_hash"] = prev
                e["hash"] = chain_hash(prev, e)
                self.sql("UPDATE audit_events SET prev_hash = ?, hash = ? WHERE org_id = ? AND seq = ?",
                         e["prev_hash"], e["hash"], org, e["seq"])
            prev = e["hash"]

    def insert(self, e):
        self.sql(f"INSERT INTO audit_events ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                 *[e[k] for k in COLUMNS])

    def verify(self, *args):
        return subprocess.run([SANDFORTD, "audit-verify", "--config", self.config, *args], capture_output=True,
                              text=True)


def assert_broken(out, org, seq, reason=""):
    assert out.returncode == 1, out
    m = re.search(rf"^{org} \([^)]*\) BROKEN at seq (\d+): (.*)$", out.stdout, re.M)
    assert m, out
    assert int(m.group(1)) == seq, out.stdout
    assert reason in m.group(2), out.stdout


def assert_intact(out, org, events):
    assert out.returncode == 0, out
    assert re.search(rf"^{org} \([^)]*\) ok: {events} events, ", out.stdout, re.M), out


def test_the_untouched_copy_verifies(stopped, tmp_path):
    copy = Copy(stopped, tmp_path)
    out = copy.verify("--checkpoints", stopped["export"])
    assert_intact(out, stopped["acme"], stopped["head"])
    assert re.search(rf"^{stopped['acme']} \(tamper-acme\) ok: {stopped['head']} events, 2 checkpoints$", out.stdout,
                     re.M), out
    assert "BROKEN" not in out.stdout


@pytest.mark.parametrize("column,value", [("actor", "key:key-0000000000000000"), ("action", "api_key.revoke"),
                                          ("ts", "2020-01-01T00:00:00.000Z"), ("outcome", "denied"),
                                          ("details", '{"name":"harmless","role":"viewer"}'),
                                          ("source", "10.0.0.1"), ("hash", "0" * 64)])
def test_an_edited_field_is_found(stopped, tmp_path, column, value):
    copy = Copy(stopped, tmp_path)
    copy.sql(f"UPDATE audit_events SET {column} = ? WHERE org_id = ? AND seq = 3", value, stopped["acme"])
    assert_broken(copy.verify(), stopped["acme"], 3)


def test_a_deleted_event_is_found(stopped, tmp_path):
    copy = Copy(stopped, tmp_path)
    copy.sql("DELETE FROM audit_events WHERE org_id = ? AND seq = 4", stopped["acme"])
    assert_broken(copy.verify(), stopped["acme"], 4, "missing")


def test_an_inserted_event_is_found_even_with_a_correct_hash(stopped, tmp_path):
    copy = Copy(stopped, tmp_path)
    acme = stopped["acme"]
    events = copy.events(acme)
    # Make room at seq 3 (in two steps: the primary key is checked row by row).
    copy.sql("UPDATE audit_events SET seq = seq + 1000000 WHERE org_id = ? AND seq >= 3", acme)
    copy.sql("UPDATE audit_events SET seq = seq - 999999 WHERE org_id = ? AND seq > 1000000", acme)
    forged = dict(events[2], seq=3, actor="key:key-0000000000000000", prev_hash=events[1]["hash"])
    forged["hash"] = chain_hash(forged["prev_hash"], forged)
    copy.insert(forged)
    # The forged event itself chains; the one after it no longer does.
    assert_broken(copy.verify(), acme, 4)


def test_reordered_events_are_found(stopped, tmp_path):
    copy = Copy(stopped, tmp_path)
    acme = stopped["acme"]
    copy.sql("UPDATE audit_events SET seq = 1000000 WHERE org_id = ? AND seq = 3", acme)
    copy.sql("UPDATE audit_events SET seq = 3 WHERE org_id = ? AND seq = 4", acme)
    copy.sql("UPDATE audit_events SET seq = 4 WHERE org_id = ? AND seq = 1000000", acme)
    assert_broken(copy.verify(), acme, 3)


def test_an_event_moved_to_another_organization_is_found_in_both(stopped, tmp_path):
    copy = Copy(stopped, tmp_path)
    acme, other = stopped["acme"], stopped["other"]
    other_head = copy.events(other)[-1]["seq"]
    copy.sql("UPDATE audit_events SET org_id = ?, seq = ? WHERE org_id = ? AND seq = 5", other, other_head + 1, acme)
    out = copy.verify()
    assert_broken(out, acme, 5, "missing")
    assert_broken(out, other, other_head + 1)


def test_a_cut_tail_is_found_by_the_database_checkpoint_or_the_exported_one(stopped, tmp_path):
    acme, middle = stopped["acme"], stopped["middle"]
    copy = Copy(stopped, tmp_path)
    copy.sql("DELETE FROM audit_events WHERE org_id = ? AND seq > ?", acme, middle)
    assert_broken(copy.verify(), acme, middle + 1, "tail was cut off")
    # The attacker deletes the checkpoints that cover the cut events too: only the export catches it.
    copy.sql("DELETE FROM audit_checkpoints WHERE org_id = ? AND seq > ?", acme, middle)
    assert_intact(copy.verify(), acme, middle)  # the documented limit of a database alone
    assert_broken(copy.verify("--checkpoints", stopped["export"]), acme, middle + 1, "tail was cut off")


def test_a_rewritten_and_rehashed_suffix_is_found(stopped, tmp_path):
    acme, middle, head = stopped["acme"], stopped["middle"], stopped["head"]
    copy = Copy(stopped, tmp_path)
    copy.sql("UPDATE audit_events SET actor = 'key:key-0000000000000000' WHERE org_id = ? AND seq = ?", acme,
             middle + 2)
    copy.rehash(acme, middle + 2)
    assert_broken(copy.verify(), acme, head, "rewritten")
    copy.sql("DELETE FROM audit_checkpoints WHERE org_id = ? AND seq > ?", acme, middle)
    assert_intact(copy.verify(), acme, head)  # the documented limit of a database alone
    assert_broken(copy.verify("--checkpoints", stopped["export"]), acme, head, "rewritten")
    # A rewrite that reaches behind a checkpoint the database still has is found without the export.
    copy.sql("UPDATE audit_events SET target = 'key-0000000000000000' WHERE org_id = ? AND seq = 2", acme)
    copy.rehash(acme, 2)
    assert_broken(copy.verify(), acme, middle, "rewritten")


def test_a_checkpoint_forged_without_the_key_is_found(stopped, tmp_path):
    acme, middle, head = stopped["acme"], stopped["middle"], stopped["head"]
    copy = Copy(stopped, tmp_path)
    copy.sql("UPDATE audit_events SET actor = 'key:key-0000000000000000' WHERE org_id = ? AND seq = ?", acme,
             middle + 1)
    copy.rehash(acme, middle + 1)
    new_head = copy.events(acme)[-1]["hash"]
    real = dict(zip(("org_id", "seq", "head_hash", "ts", "key_id", "signature"), copy.db.execute(
        "SELECT org_id, seq, head_hash, ts, key_id, signature FROM audit_checkpoints WHERE org_id = ? AND seq = ?",
        (acme, head)).fetchone()))
    assert openssl("genpkey", "-algorithm", "ed25519", "-out", "attacker.pem", cwd=tmp_path).returncode == 0

    def forge(key_id):
        c = dict(real, head_hash=new_head, key_id=key_id)
        (tmp_path / "msg").write_bytes(checkpoint_message(c))
        signed = openssl("pkeyutl", "-sign", "-inkey", "attacker.pem", "-rawin", "-in", "msg", cwd=tmp_path)
        assert signed.returncode == 0, signed
        c["signature"] = base64.b64encode(signed.stdout).decode()
        copy.sql("UPDATE audit_checkpoints SET head_hash = ?, key_id = ?, signature = ? WHERE org_id = ? AND seq = ?",
                 c["head_hash"], c["key_id"], c["signature"], acme, head)

    forge(real["key_id"])  # claims to be the daemon's key
    assert_broken(copy.verify(), acme, head, "invalid signature")
    forge("0123456789abcdef")  # the attacker's own key
    assert_broken(copy.verify(), acme, head, "not the trusted key")


def test_events_appended_after_the_latest_checkpoint_are_not_caught(stopped, tmp_path):
    """The documented limit: a consistent event after the last checkpoint is indistinguishable."""
    copy = Copy(stopped, tmp_path)
    acme = stopped["acme"]
    last = copy.events(acme)[-1]
    forged = dict(last, seq=last["seq"] + 1, action="api_key.revoke", prev_hash=last["hash"])
    forged["hash"] = chain_hash(forged["prev_hash"], forged)
    copy.insert(forged)
    out = copy.verify("--checkpoints", stopped["export"])
    assert_intact(out, acme, stopped["head"] + 1)
    assert "(1 after the latest checkpoint)" in out.stdout


def test_the_public_key_comes_from_the_key_file_or_the_command_line(stopped, tmp_path):
    copy = Copy(stopped, tmp_path, key_path=str(tmp_path / "no-such.key"))
    out = copy.verify()
    assert out.returncode == 2 and "--public-key" in out.stderr, out
    assert not (tmp_path / "no-such.key").exists()  # audit-verify never creates a key
    (tmp_path / "pub.pem").write_text(stopped["public_key"])
    assert_intact(copy.verify("--public-key", str(tmp_path / "pub.pem")), stopped["acme"], stopped["head"])
    # Another key: every checkpoint looks forged.
    assert openssl("genpkey", "-algorithm", "ed25519", "-out", "other.pem", cwd=tmp_path).returncode == 0
    assert openssl("pkey", "-in", "other.pem", "-pubout", "-out", "other.pub", cwd=tmp_path).returncode == 0
    assert_broken(copy.verify("--public-key", str(tmp_path / "other.pub")), stopped["acme"], stopped["middle"],
                  "not the trusted key")


def test_usage_and_io_errors_exit_2(stopped, tmp_path):
    copy = Copy(stopped, tmp_path)
    (tmp_path / "garbage.jsonl").write_text("{not json\n")
    out = copy.verify("--checkpoints", str(tmp_path / "garbage.jsonl"))
    assert out.returncode == 2 and "garbage.jsonl:1" in out.stderr, out
    assert copy.verify("--checkpoints", str(tmp_path / "missing.jsonl")).returncode == 2
    out = subprocess.run([SANDFORTD, "audit-verify", "--set", f"state_dir={tmp_path}/nothing-here"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "no database" in out.stderr, out
    assert not (tmp_path / "nothing-here").exists()
