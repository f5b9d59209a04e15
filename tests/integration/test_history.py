"""A store with a long history answers like one without: the small version of bench/history.py.

Two daemons, each with one real sandbox (made through the API) and the same 40 live rows written
into its SQLite file; one of them also holds 20,000 deleted sandboxes that look like the live ones
(same names, same labels) and 1,200 deleted a month ago. Compared are query plans, the work
(SQLite VM steps) of each lookup as the store itself runs it (tests/unit/store/store_plans), and
the answers of the API — never times. Then the old deleted rows must be pruned and the rest kept.
"""

import hashlib
import json
import os
import sqlite3
import subprocess
import time

import pytest

from sandfort_harness import BUILD, Daemon

STORE_PLANS = os.path.join(BUILD, "tests", "unit", "store", "store_plans")
LIVE = 40
DELETED = 20000
DELETED_LONG_AGO = 1200
RETENTION_S = 86400


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".000Z"


def live_id(n):
    """Ids spread over the whole id space, so that random deleted ids fall between them."""
    return "sbx-%016x" % ((n + 1) * (2 ** 64 // (LIVE + 1)))


def labels_of(n):
    labels = {"team": "a" if n % 2 == 0 else "b"}
    if n % 4 == 0:
        labels["tier"] = "gold"
    return labels


def spec(labels):
    return json.dumps({"env": {}, "labels": labels, "resources": {"cpus": 1.0, "memory_mb": 1024, "pids": 512},
                       "egress_allowlist": [], "user": "", "workdir": "", "public_preview": False})


COLUMNS = "id, org_id, name, state, snapshot, spec_json, error_message, created_at, updated_at"


def fill(db_path, org_id, with_history):
    """Rows straight into the file (the daemon is stopped): live rows in state error (they have
    no container, and reconciliation leaves such rows alone) and, with history, deleted ones."""
    now = time.time()
    rows = [(live_id(n), org_id, f"row-{n}", "error", "sandfort/base:bookworm", spec(labels_of(n)), "filler",
             rfc3339(now), rfc3339(now)) for n in range(LIVE)]
    if with_history:
        for i in range(DELETED + DELETED_LONG_AGO):
            deleted_at = now - 3600 if i < DELETED else now - 30 * 86400
            rows.append(("sbx-" + os.urandom(8).hex(), org_id, f"row-{i % LIVE}", "deleted",
                         "sandfort/base:bookworm", spec(labels_of(i % LIVE)), "", rfc3339(deleted_at - 60),
                         rfc3339(deleted_at)))
    db = sqlite3.connect(db_path)
    db.executemany(f"INSERT INTO sandboxes ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()


def count(db_path, sql):
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchone()[0]
    finally:
        db.close()


class Store:
    def __init__(self, with_history):
        self.daemon = Daemon(extra_config={"store": {"deleted_retention_s": RETENTION_S, "maintenance_interval_s": 1}})
        self.db_path = os.path.join(self.daemon.state_dir, "sandfort.db")
        self.with_history = with_history

    def setup(self):
        d = self.daemon
        d.start()
        admin = d.admin()
        r = admin.post("/v1/orgs", {"name": "history"})
        assert r.status == 201, r
        self.org_id = r.json()["id"]
        r = admin.post(f"/v1/orgs/{self.org_id}/api-keys", {"name": "m", "role": "member"})
        assert r.status == 201, r
        self.key = r.json()["key"]
        self.api = d.client(self.key)
        self.real = self.api.create_sandbox(name="real", labels={"team": "real"})
        assert d.stop() == 0
        fill(self.db_path, self.org_id, self.with_history)
        d.start()
        return self

    def plans(self):
        out = subprocess.run([STORE_PLANS, self.db_path, self.org_id, live_id(7), "row-7", "team:a", live_id(10),
                              hashlib.sha256(self.key.encode()).hexdigest()],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)


@pytest.fixture(scope="module")
def stores():
    made = []
    try:
        for with_history in (False, True):
            s = Store(with_history)
            made.append(s)
            s.setup()
        yield made
    finally:
        for s in made:
            s.daemon.stop()
            s.daemon.cleanup()  # removes the real sandbox's container too


def test_plans_and_work_do_not_depend_on_history(stores):
    fresh, old = stores
    assert count(old.db_path, "SELECT count(*) FROM sandboxes WHERE state = 'deleted'") >= DELETED
    p_fresh, p_old = fresh.plans(), old.plans()
    for plan in p_old["plans"]:
        assert not plan["reads_history"], plan
    assert [(p["name"], p["steps"]) for p in p_old["plans"]] == [(p["name"], p["steps"]) for p in p_fresh["plans"]]
    by_name = {c["name"]: c for c in p_fresh["calls"]}
    for call in p_old["calls"]:
        other = by_name[call["name"]]
        assert call["vm_steps"] == other["vm_steps"], (call, other)
        assert call["vm_steps"] > 0, call
        if call["name"] == "api key by hash":
            assert call["result"].startswith("key-"), call
            continue
        if call["name"] in ("list", "list from a cursor"):
            # The real sandbox (its id differs between the stores) may fall into these pages.
            assert len(call["result"].split()) == len(other["result"].split()) == 10, (call, other)
            continue
        real_of = {old.real["id"]: "real", fresh.real["id"]: "real"}
        same = lambda text: [real_of.get(i, i) for i in text.split()]  # noqa: E731
        assert same(call["result"]) == same(other["result"]), (call, other)
    found = {c["name"]: c["result"] for c in p_old["calls"]}
    assert found["sandbox by id"] == found["sandbox by name"] == live_id(7)
    assert found["sandbox by a name nobody has"] == "not_found"
    assert found["list by label"].split() == [live_id(n) for n in range(0, 20, 2)]


def pages(api, query, limit):
    seen, cursor = [], None
    for _ in range(100):
        r = api.get(f"/v1/sandboxes?{query}&limit={limit}" + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200, r
        page = r.json()
        seen.append([s["id"] for s in page["items"]])
        cursor = page["next_cursor"]
        if not cursor:
            return seen
    raise AssertionError("too many pages")


def test_answers_are_the_same_and_label_pages_are_full(stores):
    for s in stores:
        api = s.api
        for ref in (live_id(7), "row-7"):
            r = api.get(f"/v1/sandboxes/{ref}")
            assert r.status == 200 and r.json()["id"] == live_id(7), r
        assert api.get("/v1/sandboxes/real").json()["id"] == s.real["id"]
        assert api.exec(s.real["id"], argv=["true"])["exit_code"] == 0
        assert api.get("/v1/sandboxes/row-99").status == 404
        team_a = pages(api, "label=team:a", 7)
        assert [len(p) for p in team_a] == [7, 7, 6]
        assert sum(team_a, []) == [live_id(n) for n in range(0, LIVE, 2)]
        gold = pages(api, "label=team:a,tier:gold&state=error", 3)
        assert sum(gold, []) == [live_id(n) for n in range(0, LIVE, 4)]
        assert all(len(p) == 3 for p in gold[:-1])
        assert [i["id"] for i in api.get("/v1/sandboxes?label=team:real").json()["items"]] == [s.real["id"]]
    fresh, old = stores
    deleted_id = sqlite3.connect(old.db_path).execute(
        "SELECT id FROM sandboxes WHERE state = 'deleted' LIMIT 1").fetchone()[0]
    assert old.api.get(f"/v1/sandboxes/{deleted_id}").status == 404


def test_old_deleted_rows_are_pruned_and_the_rest_kept(stores):
    _, old = stores
    cutoff = rfc3339(time.time() - RETENTION_S)
    deadline = time.time() + 30
    while time.time() < deadline:
        left = count(old.db_path, f"SELECT count(*) FROM sandboxes WHERE state = 'deleted' AND updated_at < '{cutoff}'")
        if left == 0:
            break
        time.sleep(0.2)
    assert left == 0, "deleted rows past retention are still there"
    assert count(old.db_path, "SELECT count(*) FROM sandboxes WHERE state = 'deleted'") == DELETED
    assert count(old.db_path, "SELECT count(*) FROM sandboxes WHERE state <> 'deleted'") == LIVE + 1
    # Labels are kept for live sandboxes only: team for each, tier for every fourth, and the real one's.
    assert count(old.db_path, "SELECT count(*) FROM sandbox_labels") == LIVE + LIVE // 4 + 1
    with open(old.daemon.log_path) as f:
        assert f"pruned {DELETED_LONG_AGO} sandboxes deleted before" in f.read()


def test_the_wal_stays_between_the_reserve_and_its_limit(stores):
    """Checkpointed with RESTART, never truncated: the file keeps store.reserve_mb (8 MiB) written
    for deletes on a full disk (docs/limits.md) and never passes journal_size_limit (32 MiB)."""
    _, old = stores
    wal = old.db_path + "-wal"
    deadline = time.time() + 15
    while time.time() < deadline and not 8 << 20 <= os.path.getsize(wal) <= 32 << 20:
        time.sleep(0.2)
    assert 8 << 20 <= os.path.getsize(wal) <= 32 << 20
