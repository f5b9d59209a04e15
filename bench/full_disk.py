#!/usr/bin/python3
"""How many deletes commit on a full disk, per size of the store's WAL reserve (store.reserve_mb).

  /usr/bin/python3 bench/full_disk.py [--fs-mb 64] [--reserves 0,1,4,8]

Needs root (a loop-mounted ext4). For each reserve size, on a fresh filesystem: a WAL-mode SQLite
file with the store's settings and a delete's shape (a row update, plus an audit event into a
table with the audit log's four secondary indexes), 2,000 rows and events; the WAL checkpointed
(RESTART; TRUNCATE for the `before` row, as sandfortd did before the reserve), then written out with zeros to the reserve as sandfortd does (store/database.cpp,
keep_reserve); the disk filled with zeros until ENOSPC; then "deletes" one transaction each until
SQLite answers SQLITE_FULL. Prints the commits per reserve, the WAL frames each cost, whether the
WAL file grew, integrity_check, and whether writes resume once the filler is removed. The figure
sandfortd's docs quote (about 100 deletes for 8 MiB) is this run's, divided by the extra pages the
real schema's other indexes cost.
"""

import argparse
import os
import sqlite3
import subprocess
import tempfile


def run(fs_mb, reserve, truncate=False):
    work = tempfile.mkdtemp(prefix="sf-bench-disk-")
    image, mnt = os.path.join(work, "img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    subprocess.run(["truncate", "-s", f"{fs_mb}M", image], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", image, mnt], check=True)
    try:
        path = os.path.join(mnt, "s.db")
        c = sqlite3.connect(path, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "temp_store=MEMORY", "journal_size_limit=33554432"):
            c.execute("PRAGMA " + pragma)
        c.execute("CREATE TABLE sandboxes (id TEXT PRIMARY KEY, state TEXT, updated_at TEXT)")
        c.execute("CREATE TABLE audit_events (org TEXT, seq INTEGER, ts TEXT, actor TEXT, action TEXT, "
                  "target TEXT, details TEXT, hash TEXT, PRIMARY KEY (org, seq))")
        for col in ("ts", "actor", "action", "target"):
            c.execute(f"CREATE INDEX audit_by_{col} ON audit_events (org, {col}, seq)")
        c.execute("BEGIN")
        for i in range(2000):
            c.execute("INSERT INTO sandboxes VALUES (?, 'started', '2026-01-01T00:00:00.000Z')", (f"sbx-{i:016x}",))
            c.execute("INSERT INTO audit_events VALUES ('org-1', ?, '2026-01-01T00:00:00.000Z', 'key:k', "
                      "'sandbox.create', ?, '{}', ?)", (i + 1, f"sbx-{i:016x}", "h" * 64))
        c.execute("COMMIT")
        c.execute("PRAGMA wal_checkpoint(%s)" % ("TRUNCATE" if truncate else "RESTART"))
        wal = path + "-wal"
        if reserve:
            c.execute("BEGIN IMMEDIATE")
            with open(wal, "r+b") as f:
                f.seek(0, 2)
                if f.tell() < reserve:
                    f.write(b"\0" * (reserve - f.tell()))
                f.flush()
                os.fdatasync(f.fileno())
            c.execute("ROLLBACK")
        wal_before = os.path.getsize(wal)
        filler = os.path.join(mnt, "fill")
        with open(filler, "wb", buffering=0) as f:
            for size in (1 << 20, 4096):
                try:
                    while True:
                        f.write(b"\0" * size)
                except OSError:
                    pass
        commits, seq = 0, 2000
        while commits < 100000:
            try:
                c.execute("BEGIN IMMEDIATE")
                c.execute("UPDATE sandboxes SET state = 'deleted', updated_at = '2026-01-02T00:00:00.000Z' "
                          "WHERE id = ?", (f"sbx-{commits % 2000:016x}",))
                seq += 1
                c.execute("INSERT INTO audit_events VALUES ('org-1', ?, '2026-01-02T00:00:00.000Z', 'key:k', "
                          "'sandbox.delete', ?, '{}', ?)", (seq, f"sbx-{commits % 2000:016x}", "h" * 64))
                c.execute("COMMIT")
                commits += 1
            except sqlite3.OperationalError as e:
                failure = str(e)
                if c.in_transaction:
                    c.execute("ROLLBACK")
                break
        wal_after = os.path.getsize(wal)
        integrity = c.execute("PRAGMA integrity_check").fetchone()[0]
        os.remove(filler)
        resumed = True
        try:
            c.execute("INSERT INTO sandboxes VALUES ('sbx-after', 'started', '')")
        except sqlite3.Error:
            resumed = False
        c.close()
        return commits, failure, wal_before, wal_after, integrity, resumed
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)
        subprocess.run(["rm", "-rf", work])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fs-mb", type=int, default=64)
    ap.add_argument("--reserves", default="before,0,1,4,8",
                    help="reserve sizes in MiB; `before`: the WAL truncated as sandfortd did before (TRUNCATE)")
    a = ap.parse_args()
    print(f"{'reserve':>8} {'deletes':>8} {'frames/delete':>14} {'WAL before':>11} {'WAL after':>10} "
          f"{'integrity':>9} {'resumed':>7}  ended by")
    for x in a.reserves.split(","):
        mb = 0 if x == "before" else int(x)
        commits, failure, before, after, integrity, resumed = run(a.fs_mb, mb << 20, truncate=x == "before")
        per = (before - 32) / 4120 / commits if commits else float("nan")
        label = "before" if x == "before" else f"{mb}Mi"
        print(f"{label:>8} {commits:>8} {per:>14.1f} {before:>11} {after:>10} {integrity:>9} {str(resumed):>7}  {failure}")


if __name__ == "__main__":
    main()
