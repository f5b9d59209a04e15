"""A change and its audit event are one: kill sandfortd with SIGKILL in the middle of a burst of
mutating requests, many times, then check the real SQLite file — every key, revocation and
sandbox has its event, every event its change — and that `sandfortd audit-verify` finds every
chain intact."""

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
