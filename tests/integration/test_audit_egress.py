"""Egress decisions reach the audit chain as counted records: per sandbox, host, port and decision,
one `egress` event per interval in the sandbox's organization's chain, made by real connections
from inside a real sandbox through the proxy. A credential that names no existing sandbox is
recorded in the operator's chain (docs/audit.md, "Egress decisions")."""

import time

import pytest

from sandfort_harness import Daemon, HostUpstream
from test_egress import THROUGH_PROXY


@pytest.fixture(scope="module")
def upstream():
    u = HostUpstream()
    yield u
    u.close()


@pytest.fixture(scope="module")
def daemon():
    d = Daemon({"audit": {"summary_interval_s": 1}, "egress": {"allowed_ranges": "127.0.0.0/8"}}).start()
    yield d
    d.stop()
    d.cleanup()


def code_of(member, sbx, args):
    r = member.exec(sbx["id"], command="curl -sS -m 10 -o /dev/null -w '%{http_code}' " + args,
                    env=THROUGH_PROXY, timeout_s=30)
    return r["stdout"]


def egress_events(client, **filters):
    query = "&".join(f"{k}={v}" for k, v in {"action": "egress", "limit": 1000, **filters}.items())
    return client.get("/v1/audit?" + query).json()["items"]


def test_allowed_and_denied_connections_become_counted_events_of_their_organization(daemon, upstream):
    admin = daemon.admin()
    org = admin.post("/v1/orgs", {"name": "egress-audit"}).json()
    org_admin = daemon.client(admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "a", "role": "admin"}).json()["key"])
    sbx = org_admin.create_sandbox(egress_allowlist=["localhost"])
    try:
        gw = f"{daemon.gateway}:3128"
        for _ in range(5):
            assert code_of(org_admin, sbx, f"-p http://localhost:{upstream.port}/") == "200"
        for _ in range(3):
            assert code_of(org_admin, sbx, f"-p http://127.0.0.1:{upstream.port}/") == "000"  # 403 to CONNECT
        assert code_of(org_admin, sbx, f"--proxy http://{sbx['id']}:wrong@{gw} http://localhost:{upstream.port}/") == "407"
        forged = "sbx-" + "f" * 16
        assert code_of(org_admin, sbx, f"--proxy http://{forged}:x@{gw} http://localhost:{upstream.port}/") == "407"

        # One event per (decision, host, port) and interval: on a busy machine the connections
        # above can span intervals, so the counts are summed over the events of each key.
        def totals(events):
            sums = {}
            for e in events:
                key = (e["outcome"], e["details"]["host"], e["details"]["port"])
                t = sums.setdefault(key, {"count": 0, "bytes_in": 0, "bytes_out": 0, "reasons": {}})
                t["count"] += e["details"]["count"]
                t["bytes_in"] += e["details"].get("bytes_in", 0)
                t["bytes_out"] += e["details"].get("bytes_out", 0)
                for why, n in e["details"].get("reasons", {}).items():
                    t["reasons"][why] = t["reasons"].get(why, 0) + n
            return sums

        # The forged credential came last: a flush between it and the others writes it an
        # interval later, so it is waited for too.
        deadline = time.time() + 15
        while time.time() < deadline and (sum(t["count"] for t in totals(egress_events(org_admin)).values()) < 9
                                          or not egress_events(admin, target=forged)):
            time.sleep(0.5)
        events = egress_events(org_admin)
        by = totals(events)
        for e in events:
            assert e["target"] == sbx["id"] and e["actor"] == "sandbox:" + sbx["id"], e
        allowed = by[("allowed", "localhost", upstream.port)]
        assert allowed["count"] == 5, events
        assert allowed["bytes_in"] >= 5 * len("upstream says hi\n")
        assert allowed["bytes_out"] > 0
        denied = by[("denied", "127.0.0.1", upstream.port)]
        assert denied["count"] == 3
        assert denied["reasons"] == {"host not in the allowlist": 3}
        # The wrong secret for a real sandbox: that sandbox's organization sees the attempt.
        wrong = next(t for (outcome, host, _), t in by.items() if outcome == "denied" and host == "")
        assert wrong["count"] == 1 and sum(wrong["reasons"].values()) == 1, events
        assert len(by) == 3, events  # 5 + 3 + 1 decisions, three keys

        # A credential naming no sandbox is the operator's business, not any organization's.
        ops = egress_events(admin, target=forged)
        assert [e["details"]["count"] for e in ops] == [1], ops
        assert ops[0]["details"]["org_id"] == "" and ops[0]["outcome"] == "denied"
        assert org_admin.get("/v1/audit/verify").json()["ok"] is True
        assert admin.get("/v1/audit/verify").json()["ok"] is True
    finally:
        org_admin.delete(f"/v1/sandboxes/{sbx['id']}")
