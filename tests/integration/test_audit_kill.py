"""A change and its audit event are one: kill sandfortd with SIGKILL in the middle of a burst of
mutating requests, many times, then check the real SQLite file — every key, revocation and
sandbox has its event, every event its change — and that `sandfortd audit-verify` finds every
chain intact."""

import json
import random
import sqlite3
import subprocess
import threading
import time

from sandfort_harness import SANDFORTD, Daemon

ROUNDS = 12


class Progress:
    """What the bursts of one round have done: key changes made, sandbox creates answered."""

    def __init__(self):
        self.lock = threading.Lock()
        self.changes = 0
        self.sandboxes = 0

    def reached(self, changes, sandboxes):
        with self.lock:
            return self.changes >= changes and self.sandboxes >= sandboxes


def burst(daemon, org_admin_key, stop, progress):
    """Mutating calls as fast as one client goes, until stop is set or the daemon dies."""
    client = daemon.client(org_admin_key)
    while not stop.is_set():
        try:
            r = client.post("/v1/api-keys", {"name": "burst", "role": "viewer"})
            if r.status != 201:
                continue
            client.delete(f"/v1/api-keys/{r.json()['id']}")
            with progress.lock:
                progress.changes += 1
                sandbox_turn = progress.changes % 8 == 1  # fewer sandboxes: each is a container to make
            if sandbox_turn:
                client.post("/v1/sandboxes", {"wait": False})
                with progress.lock:
                    progress.sandboxes += 1
        except OSError:
            return


def wait_for(progress, changes, sandboxes, seconds=60):
    """Until the round has done that much (a loaded machine is slow to), or the time is up."""
    deadline = time.monotonic() + seconds
    while not progress.reached(changes, sandboxes) and time.monotonic() < deadline:
        time.sleep(0.02)


def test_sigkill_mid_request_never_splits_a_change_from_its_event():
    d = Daemon()
    try:
        d.start()
        admin = d.admin()
        org = admin.post("/v1/orgs", {"name": "killed"}).json()
        key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "a", "role": "admin"}).json()["key"]
        rng = random.Random(7)
        for round_ in range(ROUNDS):
            stop = threading.Event()
            progress = Progress()
            threads = [threading.Thread(target=burst, args=(d, key, stop, progress)) for _ in range(3)]
            for t in threads:
                t.start()
            # Each round makes keys before the kill, and the first a sandbox too, then the kill
            # lands at a random moment of what follows.
            wait_for(progress, 2, 1 if round_ == 0 else 0)
            time.sleep(rng.uniform(0.05, 0.4))
            d.kill()
            stop.set()
            for t in threads:
                t.join()
            d.start()
        d.stop()

        db = sqlite3.connect(d.config["state_dir"] + "/sandfort.db")
        events = db.execute("SELECT action, target FROM audit_events WHERE org_id = ?", (org["id"],)).fetchall()
        created_keys = {t for a, t in events if a == "api_key.create"}
        revoked_keys = {t for a, t in events if a == "api_key.revoke"}
        created_sandboxes = {t for a, t in events if a == "sandbox.create"}
        keys = dict(db.execute("SELECT id, revoked_at FROM api_keys WHERE org_id = ?", (org["id"],)).fetchall())
        sandboxes = {r[0] for r in db.execute("SELECT id FROM sandboxes WHERE org_id = ?", (org["id"],))}
        assert len(keys) > ROUNDS and sandboxes, (len(keys), len(sandboxes))
        assert created_keys == set(keys), "a key without its event, or an event without its key"
        assert revoked_keys == {k for k, at in keys.items() if at}, "a revocation without its event or the reverse"
        assert created_sandboxes == sandboxes, "a sandbox without its event, or an event without its sandbox"

        out = subprocess.run([SANDFORTD, "audit-verify", "--config", d.config_path], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        print(f"{ROUNDS} kills: {len(keys)} keys, {len(sandboxes)} sandboxes, {len(events)} events; " +
              out.stdout.strip().replace("\n", "; "))
    finally:
        d.cleanup()  # stops the daemon and removes every container it made


def exec_burst(daemon, key, sandbox_id, round_, client_no, stop, answered):
    """Sequential execs, each with its own marker, until stop is set or the daemon dies; the
    markers of the answered ones (200) in answered[client_no], in the order they were answered."""
    client = daemon.client(key)
    n = 0
    while not stop.is_set():
        marker = f"r{round_}-c{client_no}-{n}"
        try:
            r = client.post(f"/v1/sandboxes/{sandbox_id}/process/exec", {"argv": ["true", marker]})
        except OSError:
            return
        if r.status == 200:
            answered[client_no].append(marker)
        n += 1


def test_sigkill_under_exec_load_loses_no_answered_event_and_reorders_none():
    """The events of commands go through the group writer (a batch of events per transaction, on a
    thread of its own): a command whose answer came back has its event in the chain, whatever
    instant the daemon is killed at, and each client's commands are there in the order it ran
    them. Changes with their events (key create/revoke) commit on the other connection meanwhile."""
    d = Daemon()
    try:
        d.start()
        admin = d.admin()
        org = admin.post("/v1/orgs", {"name": "exec-killed"}).json()
        key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "a", "role": "admin"}).json()["key"]
        sandbox_id = d.client(key).create_sandbox()["id"]
        clients = 6
        answered = [[] for _ in range(clients)]
        rng = random.Random(11)
        for round_ in range(4):
            stop = threading.Event()
            progress = Progress()
            threads = [threading.Thread(target=exec_burst, args=(d, key, sandbox_id, round_, c, stop, answered))
                       for c in range(clients)]
            threads.append(threading.Thread(target=burst, args=(d, key, stop, progress)))
            before = sum(len(a) for a in answered)
            for t in threads:
                t.start()
            deadline = time.monotonic() + 60
            while sum(len(a) for a in answered) < before + 30 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(rng.uniform(0.05, 0.3))
            d.kill()
            stop.set()
            for t in threads:
                t.join()
            d.start()
            # A restart finds the container running and serves it again.
            deadline = time.monotonic() + 30
            while d.client(key).get(f"/v1/sandboxes/{sandbox_id}").json().get("state") != "started":
                assert time.monotonic() < deadline, "the sandbox did not come back after the restart"
                time.sleep(0.2)
        d.stop()

        db = sqlite3.connect(d.config["state_dir"] + "/sandfort.db")
        rows = db.execute("SELECT seq, details FROM audit_events WHERE org_id = ? AND action = 'sandbox.exec' "
                          "ORDER BY seq", (org["id"],)).fetchall()
        recorded = [json.loads(details)["argv"][1] for _, details in rows]
        assert len(recorded) == len(set(recorded)), "an exec recorded twice"
        position = {marker: i for i, marker in enumerate(recorded)}
        total = sum(len(a) for a in answered)
        assert total > 100, f"too few execs answered to prove anything: {total}"
        for c in range(clients):
            missing = [m for m in answered[c] if m not in position]
            assert not missing, f"answered but not in the chain: {missing[:5]}"
            places = [position[m] for m in answered[c]]
            assert places == sorted(places), f"client {c}'s commands are out of order in the chain"
        out = subprocess.run([SANDFORTD, "audit-verify", "--config", d.config_path], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        print(f"4 kills: {total} execs answered, {len(recorded)} recorded; " + out.stdout.strip().replace("\n", "; "))
    finally:
        d.cleanup()
