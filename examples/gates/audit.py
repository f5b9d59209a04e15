#!/usr/bin/env python3
"""Gate: the audit chain verifies, and verification fails on a tampered copy.

    SANDFORT_BASE_URL=... SANDFORT_API_KEY=sfk_... python3 examples/gates/audit.py

The key needs the admin role of its organization (the superadmin's works: its own organization's
chain). Checks (docs/audit.md):
- `GET /v1/audit/verify`: the daemon's own check says ok;
- remote verification: every event and checkpoint downloaded and checked here against the public
  key (pinned in SANDFORT_GATE_AUDIT_PUBLIC_KEY, a PEM file, when given; else fetched now) with
  the SDK's verifier (standard library Ed25519);
- tampered copies of that download fail: an edited field, a deleted event, a cut tail, a forged
  checkpoint — each at the right seq;
- the CLI (`sandfort audit verify --public-key`, when a `sandfort` binary is found: SANDFORT_CLI,
  PATH, or build/cli/sandfort) passes, and fails with a forged checkpoint file;
- on the daemon's host (SANDFORT_GATE_SANDFORTD_CONFIG = the daemon's config file, and the
  `sandfortd` binary: SANDFORT_GATE_SANDFORTD, PATH, or build/src/sandfortd/sandfortd):
  `sandfortd audit-verify` on an online copy of the database (SQLite backup API) passes, and
  exits 1 naming the seq on a copy with one event edited.
The last two print SKIP when their tools are absent (with SANDFORT_GATE_STRICT=1, a failure).
"""

import copy
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile

import _gate
from _gate import REPO, env, retry
from sandfort_sdk import verify_chain


def find_binary(env_name, name, build_path):
    if env(env_name):
        return env(env_name)
    found = shutil.which(name)
    if found:
        return found
    candidate = os.path.join(REPO, "build", *build_path)
    return candidate if os.access(candidate, os.X_OK) else None


def main(gate):
    c = _gate.client()
    me = retry(c.whoami)
    org_id = me.org_id
    tmp = tempfile.mkdtemp(prefix="sandfort-audit-gate-")
    try:
        # Something to record, then a checkpoint over it.
        retry(c.list_sandboxes)
        for i in range(3):
            key = retry(c.create_api_key, f"audit-gate-{i}", role="viewer")
            retry(c.revoke_api_key, key.id)
        cp = retry(c.audit.create_checkpoint)
        if env("SANDFORT_GATE_AUDIT_PUBLIC_KEY"):
            pem = open(env("SANDFORT_GATE_AUDIT_PUBLIC_KEY")).read()
            pinned = "pinned " + env("SANDFORT_GATE_AUDIT_PUBLIC_KEY")
        else:
            pem = retry(c.audit.public_key).public_key_pem
            pinned = "fetched now (pin it: SANDFORT_GATE_AUDIT_PUBLIC_KEY)"
        pem_path = os.path.join(tmp, "audit.pem")
        open(pem_path, "w").write(pem)

        def daemon_verify():
            r = retry(c.audit.verify)
            assert r.ok, f"the daemon reports the chain broken: {r.raw}"
            return f"org {org_id}: {r.events} events, {r.raw.get('checkpoints')} checkpoints"
        gate.check("GET /v1/audit/verify ok", daemon_verify)

        checkpoints = [x.to_dict() for x in retry(c.audit.checkpoints)]
        events = [e.to_dict() for e in retry(lambda: list(c.audit.iter_events()))]
        events = [e for e in events if e["seq"] <= cp.seq]  # the chain up to the checkpoint signed above
        checkpoints = [x for x in checkpoints if x["seq"] <= cp.seq]

        def remote():
            r = verify_chain(events, checkpoints, pem, org_id=org_id)
            assert r.ok, f"the downloaded chain does not verify: seq {r.first_bad_seq}: {r.reason}"
            return f"{len(events)} events, {len(checkpoints)} checkpoints, key {pinned}"
        gate.check("downloaded chain verifies offline against the public key", remote)

        def tampered():
            middle = events[len(events) // 2]["seq"]
            results = {}
            edited = copy.deepcopy(events)
            next(e for e in edited if e["seq"] == middle)["action"] = "nothing.happened"
            results["edited field"] = (verify_chain(edited, checkpoints, pem, org_id=org_id), middle)
            deleted = [e for e in events if e["seq"] != middle]
            results["deleted event"] = (verify_chain(deleted, checkpoints, pem, org_id=org_id), middle)
            cut = [e for e in events if e["seq"] < middle]
            results["cut tail"] = (verify_chain(cut, checkpoints, pem, org_id=org_id), middle)
            forged = copy.deepcopy(checkpoints)
            forged[-1]["head_hash"] = "0" * 64
            results["forged checkpoint"] = (verify_chain(events, forged, pem, org_id=org_id), forged[-1]["seq"])
            wrong = [f"{k}: {'passed' if r.ok else f'first bad seq {r.first_bad_seq}, expected {seq}'}"
                     for k, (r, seq) in results.items() if r.ok or (k != "forged checkpoint" and r.first_bad_seq != seq)]
            assert not wrong, "; ".join(wrong)
            return ", ".join(f"{k} -> broken at seq {r.first_bad_seq}" for k, (r, _) in results.items())
        gate.check("tampered copies fail verification", tampered)

        cli = find_binary("SANDFORT_CLI", "sandfort", ["cli", "sandfort"])
        if cli:
            def cli_verify():
                run_env = dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=tmp)
                ok = subprocess.run([cli, "audit", "verify", "--public-key", pem_path], env=run_env,
                                    capture_output=True, text=True, timeout=300)
                assert ok.returncode == 0, f"exit {ok.returncode}: {ok.stdout.strip()} {ok.stderr.strip()}"
                forged = dict(checkpoints[-1], head_hash="f" * 64)
                bad_file = os.path.join(tmp, "forged-checkpoints.jsonl")
                open(bad_file, "w").write(json.dumps(forged) + "\n")
                bad = subprocess.run([cli, "audit", "verify", "--public-key", pem_path, "--checkpoints", bad_file],
                                     env=run_env, capture_output=True, text=True, timeout=300)
                assert bad.returncode == 1, f"forged checkpoint file: exit {bad.returncode}: {bad.stdout.strip()}"
                return f"intact: exit 0 ({ok.stdout.strip().splitlines()[0]}); forged checkpoint file: exit 1"
            gate.check("sandfort audit verify (CLI) passes, fails on a forged checkpoint", cli_verify)
        else:
            gate.skip("sandfort audit verify (CLI)", "no sandfort binary (SANDFORT_CLI, PATH, build/cli/sandfort)")

        config = env("SANDFORT_GATE_SANDFORTD_CONFIG")
        sandfortd = find_binary("SANDFORT_GATE_SANDFORTD", "sandfortd", ["src", "sandfortd", "sandfortd"])
        if config and sandfortd:
            def host_verify():
                cfg = json.load(open(config))
                state_dir = cfg.get("state_dir", "/var/lib/sandfort")
                copy_dir = os.path.join(tmp, "copy")
                os.mkdir(copy_dir, 0o700)
                src = sqlite3.connect(f"file:{os.path.join(state_dir, 'sandfort.db')}?mode=ro", uri=True)
                dst = sqlite3.connect(os.path.join(copy_dir, "sandfort.db"))
                src.backup(dst)  # a consistent online copy while the daemon writes
                src.close()
                copy_cfg = os.path.join(copy_dir, "verify.json")
                json.dump({"state_dir": copy_dir}, open(copy_cfg, "w"))

                def verify():
                    return subprocess.run([sandfortd, "audit-verify", "--config", copy_cfg, "--public-key", pem_path,
                                           "--org", org_id], capture_output=True, text=True, timeout=300)
                ok = verify()
                assert ok.returncode == 0, f"the untouched copy: exit {ok.returncode}: {ok.stdout} {ok.stderr}"
                seq = dst.execute("SELECT MAX(seq) / 2 + 1 FROM audit_events WHERE org_id = ?", (org_id,)).fetchone()[0]
                dst.execute("UPDATE audit_events SET action = 'nothing.happened' WHERE org_id = ? AND seq = ?",
                            (org_id, seq))
                dst.commit()
                dst.close()
                bad = verify()
                assert bad.returncode == 1, f"the tampered copy: exit {bad.returncode}: {bad.stdout} {bad.stderr}"
                m = re.search(r"BROKEN at seq (\d+)", bad.stdout)
                assert m and int(m.group(1)) == seq, f"expected BROKEN at seq {seq}: {bad.stdout.strip()}"
                return f"copy: exit 0 ({ok.stdout.strip()}); seq {seq} edited: exit 1, BROKEN at seq {seq}"
            gate.check("sandfortd audit-verify passes on a copy of the database, fails on a tampered copy",
                       host_verify)
        else:
            gate.skip("sandfortd audit-verify on a database copy",
                      "needs SANDFORT_GATE_SANDFORTD_CONFIG (the daemon's config, on its host) and sandfortd")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    _gate.run("audit", main)
