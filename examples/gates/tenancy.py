#!/usr/bin/env python3
"""Gate: tenancy. Another organization's key gets 404 — never 403, never the resource — on every
route family that names a resource: sandboxes (by id and by name), processes, sessions, code
contexts, background commands, files (and their watch), git, ports, previews, metrics, the PTY,
snapshots, volumes, API keys, audit, organization limits and the kill switch; and another organization's snapshot or volume cannot be
used to create a sandbox.

    SANDFORT_BASE_URL=... SANDFORT_API_KEY=sfk_... python3 examples/gates/tenancy.py

Two organizations are needed:
- with a superadmin key (`sandfortd admin bootstrap`), the gate makes two fresh organizations
  with an admin key each, and deletes them at the end;
- otherwise SANDFORT_API_KEY (organization A: owns the resources, member or admin) and
  SANDFORT_GATE_OTHER_API_KEY (organization B: probes them; admin, or member for the
  non-admin routes).
At the end A's resources must be untouched (nothing B did reached them).
`python3 tenancy.py --list-routes` prints the routes probed.
"""

import http.client
import json
import sys
import time
import uuid
from urllib.parse import quote, urlsplit

import _gate
from _gate import env, retry, sh

# (method, path, body or None, least role of the prober) — {sbx}, {name}, {cmd}, {session}, {ctx},
# {snap}, {vol}, {key}, {org} are organization A's. The sandbox routes are probed by id and by name.
SANDBOX_ROUTES = [
    ("GET", "/v1/sandboxes/{sbx}", None),
    ("GET", "/v1/sandboxes/{sbx}?wait_for=started&timeout_s=1", None),
    ("PATCH", "/v1/sandboxes/{sbx}", {"labels": {"owned": "by-b"}}),
    ("POST", "/v1/sandboxes/{sbx}/stop", {}),
    ("POST", "/v1/sandboxes/{sbx}/start", {}),
    ("POST", "/v1/sandboxes/{sbx}/pause", {}),
    ("POST", "/v1/sandboxes/{sbx}/resume", {}),
    ("GET", "/v1/sandboxes/{sbx}/metrics", None),
    ("GET", "/v1/sandboxes/{sbx}/ports", None),
    ("GET", "/v1/sandboxes/{sbx}/preview/8080", None),
    ("POST", "/v1/sandboxes/{sbx}/process/exec", {"command": "touch /tmp/pwned"}),
    ("POST", "/v1/sandboxes/{sbx}/process/exec#sse", {"command": "touch /tmp/pwned"}),
    ("POST", "/v1/sandboxes/{sbx}/process/code-run", {"language": "sh", "code": "touch /tmp/pwned"}),
    ("POST", "/v1/sandboxes/{sbx}/exec", {"command": "touch /tmp/pwned"}),
    ("POST", "/v1/sandboxes/{sbx}/code/run", {"language": "bash", "code": "touch /tmp/pwned"}),
    ("POST", "/v1/sandboxes/{sbx}/code/run", {"context_id": "{ctx}", "code": "touch /tmp/pwned"}),
    ("POST", "/v1/sandboxes/{sbx}/code/contexts", {"language": "bash"}),
    ("GET", "/v1/sandboxes/{sbx}/code/contexts", None),
    ("GET", "/v1/sandboxes/{sbx}/code/contexts/{ctx}", None),
    ("POST", "/v1/sandboxes/{sbx}/code/contexts/{ctx}/restart", {}),
    ("DELETE", "/v1/sandboxes/{sbx}/code/contexts/{ctx}", None),
    ("POST", "/v1/sandboxes/{sbx}/sessions", {"name": "b-session"}),
    ("GET", "/v1/sandboxes/{sbx}/sessions", None),
    ("POST", "/v1/sandboxes/{sbx}/sessions/{session}/exec", {"command": "touch /tmp/pwned"}),
    ("DELETE", "/v1/sandboxes/{sbx}/sessions/{session}", None),
    ("POST", "/v1/sandboxes/{sbx}/commands", {"command": "touch /tmp/pwned"}),
    ("GET", "/v1/sandboxes/{sbx}/commands", None),
    ("GET", "/v1/sandboxes/{sbx}/commands/{cmd}", None),
    ("GET", "/v1/sandboxes/{sbx}/commands/{cmd}/logs", None),
    ("POST", "/v1/sandboxes/{sbx}/commands/{cmd}/stdin", b"input\n"),
    ("POST", "/v1/sandboxes/{sbx}/commands/{cmd}/kill", {"signal": "KILL"}),
    ("PUT", "/v1/sandboxes/{sbx}/files?path=/work/secret.txt", b"overwritten by B\n"),
    ("GET", "/v1/sandboxes/{sbx}/files?path=/work/secret.txt", None),
    ("DELETE", "/v1/sandboxes/{sbx}/files?path=/work/secret.txt", None),
    ("GET", "/v1/sandboxes/{sbx}/files/list?path=/work", None),
    ("GET", "/v1/sandboxes/{sbx}/files/stat?path=/work/secret.txt", None),
    ("POST", "/v1/sandboxes/{sbx}/files/mkdir", {"path": "/work/b", "parents": True}),
    ("POST", "/v1/sandboxes/{sbx}/files/move", {"from": "/work/secret.txt", "to": "/work/moved.txt"}),
    ("GET", "/v1/sandboxes/{sbx}/files/archive?path=/work", None),
    ("GET", "/v1/sandboxes/{sbx}/files/watch?path=/work#sse", None),
    ("PUT", "/v1/sandboxes/{sbx}/files/archive?path=/work", b"\0" * 1024),
    ("GET", "/v1/sandboxes/{sbx}/pty#ws", None),
    ("POST", "/v1/sandboxes/{sbx}/git/status", {"path": "/work"}),
    ("POST", "/v1/sandboxes/{sbx}/git/clone", {"path": "/work/repo", "url": "https://example.com/r.git"}),
    ("POST", "/v1/sandboxes/{sbx}/git/add", {"path": "/work"}),
    ("POST", "/v1/sandboxes/{sbx}/git/commit", {"path": "/work", "message": "b"}),
    ("POST", "/v1/sandboxes/{sbx}/git/checkout", {"path": "/work", "branch": "b"}),
    ("POST", "/v1/sandboxes/{sbx}/git/branches", {"path": "/work"}),
    ("POST", "/v1/sandboxes/{sbx}/git/pull", {"path": "/work"}),
    ("POST", "/v1/sandboxes/{sbx}/git/push", {"path": "/work"}),
    ("DELETE", "/v1/sandboxes/{sbx}", None),
]
OTHER_ROUTES = [
    ("GET", "/v1/snapshots/{snap}", None, "member"),
    ("GET", "/v1/snapshots/{snap_id}", None, "member"),
    ("DELETE", "/v1/snapshots/{snap}", None, "member"),
    ("DELETE", "/v1/snapshots/{snap_id}", None, "member"),
    ("POST", "/v1/snapshots", {"sandbox_id": "{sbx}", "name": "b-steals"}, "member"),
    # A name or id that is not one of the caller's snapshots is read as an image reference
    # (docs/api.md, "Snapshots"): the answer is then a failed pull or an image refusal, which is
    # fine, as long as no sandbox is made from A's snapshot (any 2xx fails the check).
    ("POST", "/v1/sandboxes", {"snapshot": "{snap}", "wait": True}, "member"),
    ("POST", "/v1/sandboxes", {"snapshot": "{snap_id}", "wait": True}, "member"),
    ("GET", "/v1/volumes/{vol}", None, "member"),
    ("GET", "/v1/volumes/{vol_id}", None, "member"),
    ("DELETE", "/v1/volumes/{vol}", None, "member"),
    ("DELETE", "/v1/volumes/{vol_id}", None, "member"),
    ("POST", "/v1/sandboxes", {"wait": True, "volumes": [{"name": "{vol}", "mount_path": "/stolen"}]}, "member"),
    ("DELETE", "/v1/api-keys/{key}", None, "admin"),
    ("GET", "/v1/audit?org={org}", None, "admin"),
    ("GET", "/v1/audit/verify?org={org}", None, "admin"),
    ("GET", "/v1/audit/checkpoints?org={org}", None, "admin"),
    ("POST", "/v1/audit/checkpoints?org={org}", {}, "admin"),
    ("GET", "/v1/orgs/{org}/limits", None, "admin"),
    ("POST", "/v1/orgs/{org}/stop-all", {}, "admin"),
    ("DELETE", "/v1/orgs/{org}/stop-all", None, "admin"),
    ("GET", "/v1/orgs/{org}/egress-defaults", None, "admin"),
    ("PUT", "/v1/orgs/{org}/egress-defaults", {"egress_allowlist": ["*"]}, "admin"),
    ("GET", "/v1/secrets/{secret}", None, "admin"),
    ("PUT", "/v1/secrets/{secret}", {"value": "b-rotated"}, "admin"),
    ("DELETE", "/v1/secrets/{secret}", None, "admin"),
    ("GET", "/v1/webhooks/{webhook}", None, "admin"),
    ("PATCH", "/v1/webhooks/{webhook}", {"url": "https://b.example/stolen", "enabled": True}, "admin"),
    ("POST", "/v1/webhooks/{webhook}/rotate-secret", {}, "admin"),
    ("GET", "/v1/webhooks/{webhook}/deliveries", None, "admin"),
    ("DELETE", "/v1/webhooks/{webhook}", None, "admin"),
]
RANK = {"viewer": 1, "member": 2, "admin": 3}


def all_routes():
    return [(m, p, b, "member") for m, p, b in SANDBOX_ROUTES] + OTHER_ROUTES


def fill(value, ids):
    if isinstance(value, str):
        for k, v in ids.items():
            value = value.replace("{" + k + "}", quote(v, safe=""))
        return value
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    return value


def call(base_url, key, method, path, body):
    """One raw request (the SDK would turn the answer into an exception; here the status is the point)."""
    parts = urlsplit(base_url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=60)
    headers = {"Authorization": "Bearer " + key}
    data = None
    path, _, variant = path.partition("#")
    if variant == "sse":
        headers["Accept"] = "text/event-stream"
    if variant == "ws":
        headers.update({"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    if isinstance(body, bytes):
        data = body
        headers["Content-Type"] = "application/octet-stream"
    elif body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    for _ in range(30):
        conn.request(method, parts.path.rstrip("/") + path, body=data, headers=headers)
        r = conn.getresponse()
        text = r.read(2000)
        if r.status != 429:
            break
        time.sleep(int(r.getheader("Retry-After") or 1))
    conn.close()
    return r.status, text


def main(gate):
    base = env("SANDFORT_BASE_URL")
    first = _gate.client()
    me = retry(first.whoami)
    made_orgs = []
    if env("SANDFORT_GATE_OTHER_API_KEY"):
        key_a, key_b = env("SANDFORT_API_KEY"), env("SANDFORT_GATE_OTHER_API_KEY")
    elif me.superadmin:
        suffix = uuid.uuid4().hex[:8]
        keys = []
        for side in ("a", "b"):
            org = retry(first.create_org, f"gate-tenancy-{side}-{suffix}")
            made_orgs.append(org.id)
            keys.append(retry(first.create_api_key, "gate", role="admin", org=org.id).key)
        key_a, key_b = keys
    else:
        raise RuntimeError("set SANDFORT_GATE_OTHER_API_KEY (a key of another organization), "
                           "or run with a superadmin key")
    a, b = _gate.client(key_a), _gate.client(key_b)
    who_a, who_b = retry(a.whoami), retry(b.whoami)
    if who_a.org_id == who_b.org_id:
        raise RuntimeError("SANDFORT_API_KEY and SANDFORT_GATE_OTHER_API_KEY belong to the same organization")
    b_rank = RANK.get(who_b.role, 0)
    suffix = uuid.uuid4().hex[:8]
    sbx = snap_name = vol_name = secret_name = webhook_id = None
    try:
        # Organization A's resources: a sandbox with a file, a session, a command and a code context, a snapshot,
        # a volume, an API key (when A is admin).
        vol_name = f"gate-vol-{suffix}"
        vol_id = retry(a.create_volume, vol_name).id
        sbx = retry(a.create_sandbox, env("SANDFORT_GATE_IMAGE"), name=f"gate-tenancy-{suffix}",
                    labels={"gate": "tenancy"}, volumes=[{"name": vol_name, "mount_path": "/data"}])
        retry(sbx.fs.upload_file, "/work/secret.txt", "A's secret\n")
        session = retry(sbx.process.create_session, "a-session").name
        cmd = retry(sbx.process.start, "sleep 600").id
        ctx = retry(sbx.code.create_context, "bash").id
        snap_name = f"gate-snap-{suffix}"
        snap_id = retry(a.create_snapshot, sbx, snap_name).id
        key_id = retry(a.create_api_key, f"gate-{suffix}", role="viewer").id if who_a.role == "admin" else "key-0000000000000000"
        secret_name = f"gate-secret-{suffix}"  # A's only when A is admin (B's probes need a name either way)
        if who_a.role == "admin":
            status, text = call(base, key_a, "POST", "/v1/secrets",
                                {"name": secret_name, "value": "A's value", "hosts": ["api.example.com"],
                                 "header": "Authorization", "format": "Bearer {value}"})
            assert status == 201, f"A's secret: {status} {text[:200]!r}"
            # A's webhook, disabled at once: it only has to exist (nothing is ever sent to it).
            status, text = call(base, key_a, "POST", "/v1/webhooks",
                                {"url": "https://1.1.1.1/gate", "types": ["quota.refused"], "description": "gate"})
            assert status == 201, f"A's webhook: {status} {text[:200]!r}"
            webhook_id = json.loads(text)["id"]
            status, text = call(base, key_a, "PATCH", f"/v1/webhooks/{webhook_id}", {"enabled": False})
            assert status == 200, f"A's webhook: {status} {text[:200]!r}"
        ids = {"session": session, "cmd": cmd, "ctx": ctx, "snap": snap_name, "snap_id": snap_id, "vol": vol_name,
               "vol_id": vol_id, "key": key_id, "secret": secret_name,
               "webhook": webhook_id or "whk-0000000000000000", "org": who_a.org_id}

        def probe_family(routes, extra_ids, label):
            statuses = {}
            for method, path, body, role in routes:
                if RANK[role] > b_rank:
                    gate.skip(f"{method} {path}", f"the other organization's key is {who_b.role}, this route needs {role}")
                    continue
                filled = fill(path, {**ids, **extra_ids})
                status, text = call(base, key_b, method, filled, fill(body, {**ids, **extra_ids}))
                label_body = f" {json.dumps(fill(body, {**ids, **extra_ids}))}" if method == "POST" and path == "/v1/sandboxes" else ""
                from_snapshot = path == "/v1/sandboxes" and "snapshot" in (body or {})
                statuses[f"{method} {filled.split('#')[0]}{label_body}"] = (status, text[:120], from_snapshot)

            def refused(status, from_snapshot):
                # an image reference nobody has (not A's snapshot): any refusal will do
                return status >= 400 if from_snapshot else status == 404
            bad = {k: v[:2] for k, v in statuses.items() if not refused(v[0], v[2])}
            assert not bad, f"{len(bad)} of {len(statuses)} not 404: " + "; ".join(
                f"{k} -> {s} {t!r}" for k, (s, t) in list(bad.items())[:6])
            others = sorted({str(v[0]) for v in statuses.values() if v[0] != 404})
            return f"{len(statuses)} routes, all 404 ({label})" if not others else \
                f"{len(statuses)} routes refused: 404, and {'/'.join(others)} for a create naming A's snapshot as an image ({label})"

        sandbox_routes = [(m, p, body, "member") for m, p, body in SANDBOX_ROUTES]
        gate.check("sandbox routes by id (process, sessions, code, commands, files, watch, git, ports, preview, metrics, pty)",
                   lambda: probe_family(sandbox_routes, {"sbx": sbx.id}, sbx.id))
        gate.check("sandbox routes by name",
                   lambda: probe_family(sandbox_routes, {"sbx": sbx.name}, sbx.name))
        snapshot_routes = [r for r in OTHER_ROUTES if "{snap" in json.dumps(r[1:3]) or r[1] == "/v1/snapshots"]
        gate.check("snapshots by name and id (get, delete, snapshot A's sandbox, create from A's snapshot)",
                   lambda: probe_family(snapshot_routes, {"sbx": sbx.id}, snap_name))
        volume_routes = [r for r in OTHER_ROUTES if "{vol" in json.dumps(r[1:3])]
        gate.check("volumes by name and id (get, delete, mount A's volume)",
                   lambda: probe_family(volume_routes, {}, vol_name))
        admin_routes = [r for r in OTHER_ROUTES if r[3] == "admin"]
        if b_rank >= RANK["admin"]:
            gate.check("API keys, secrets, webhooks, audit, limits, egress defaults, kill switch of A's organization",
                       lambda: probe_family(admin_routes, {}, who_a.org_id))
        else:
            gate.skip("API keys, secrets, webhooks, audit, limits, egress defaults, kill switch of A's organization",
                      f"the other organization's key is {who_b.role}, not admin")

        def lists():
            for label, items in (("sandboxes", [s.id for s in retry(b.list_sandboxes)]),
                                 ("snapshots", [s.name for s in retry(b.list_snapshots)]),
                                 ("volumes", [v.name for v in retry(b.list_volumes)])):
                leaked = {sbx.id, snap_name, vol_name} & set(items)
                assert not leaked, f"B's list of {label} shows {leaked}"
            return "B's sandbox, snapshot and volume lists show none of A's"
        gate.check("lists", lists)

        def untouched():
            s = retry(a.get_sandbox, sbx.id)
            assert s.state == "started", f"A's sandbox is {s.state}"
            assert s.info.labels.get("owned") is None, "B's PATCH reached A's sandbox"
            assert retry(sbx.fs.read_text, "/work/secret.txt") == "A's secret\n", "A's file changed"
            r = sh(sbx, "ls /tmp/pwned /work/b /work/moved.txt 2>&1; true")
            assert r.stdout.count("No such file") == 3, f"B's calls left traces: {r.stdout!r}"
            info = retry(sbx.process.get_command, cmd).info
            assert info.state == "running", f"A's command is {info.state}"
            assert retry(a.get_snapshot, snap_name).name == snap_name
            assert retry(a.get_volume, vol_name).name == vol_name
            if who_a.role == "admin":
                assert key_id in [k.id for k in retry(a.list_api_keys)], "A's key was revoked"
                status, text = call(base, key_a, "GET", f"/v1/secrets/{secret_name}", None)
                assert status == 200 and json.loads(text)["version"] == 1, f"A's secret: {status} {text[:200]!r}"
                status, text = call(base, key_a, "GET", f"/v1/webhooks/{webhook_id}", None)
                hook = json.loads(text) if status == 200 else {}
                assert hook.get("url") == "https://1.1.1.1/gate" and hook.get("enabled") is False, \
                    f"A's webhook: {status} {text[:200]!r}"
                status, text = call(base, key_a, "GET", f"/v1/orgs/{who_a.org_id}/egress-defaults", None)
                assert status == 200 and b"*" not in text, f"A's egress defaults: {status} {text[:200]!r}"
            return "A's sandbox started, file, command, snapshot, volume, key, secret, webhook and egress defaults intact; no trace of B"
        gate.check("organization A untouched", untouched)
    finally:
        for what, fn in (("sandbox", lambda: sbx and retry(a.delete, sbx.id)),
                         ("snapshot", lambda: snap_name and retry(a.delete_snapshot, snap_name)),
                         ("volume", lambda: vol_name and retry(a.delete_volume, vol_name)),
                         ("secret", lambda: secret_name and call(base, key_a, "DELETE", f"/v1/secrets/{secret_name}", None)),
                         ("webhook", lambda: webhook_id and call(base, key_a, "DELETE", f"/v1/webhooks/{webhook_id}", None))):
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                if "not found" not in str(e):
                    print(f"cleanup: {what}: {e}")
        for org in made_orgs:
            try:
                status, text = call(base, env("SANDFORT_API_KEY"), "DELETE", f"/v1/orgs/{org}", None)
                if status != 204:
                    print(f"cleanup: DELETE /v1/orgs/{org} -> {status} {text[:200]!r}")
            except Exception as e:  # noqa: BLE001
                print(f"cleanup: org {org}: {e}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--list-routes"]:
        for m, p, _, role in all_routes():
            print(f"{m} {p} {role}")
        sys.exit(0)
    _gate.run("tenancy", main)
