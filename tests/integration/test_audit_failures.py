"""Authentication failures reach the audit chain as counted records, not one event each: a flood
of bad credentials becomes one `auth.failures` event per source and reason per interval, in the
operator's (superadmin organization's) chain."""

import time

from sandfort_harness import Daemon


def test_a_flood_of_bad_keys_becomes_a_few_counted_events():
    d = Daemon({"audit": {"summary_interval_s": 1}}).start()
    try:
        bad = d.client("sfk_" + "0" * 32)
        for _ in range(200):
            assert bad.get("/v1/sandboxes").status == 401
        for _ in range(30):
            assert d.client().get("/v1/whoami").status == 401  # no credential at all
        time.sleep(2.5)
        admin = d.admin()
        items = admin.get("/v1/audit?action=auth.failures&limit=1000").json()["items"]
        by_reason = {}
        for e in items:
            assert e["actor"] == "anonymous" and e["source"] == "127.0.0.1" and e["outcome"] == "denied", e
            by_reason[e["details"]["reason"]] = by_reason.get(e["details"]["reason"], 0) + e["details"]["count"]
        assert by_reason == {"invalid API key": 200, "missing API key": 30}, by_reason
        assert len(items) <= 6, len(items)  # per interval, not per request
        assert admin.get("/v1/audit/verify").json()["ok"] is True
    finally:
        d.stop()
        d.cleanup()
