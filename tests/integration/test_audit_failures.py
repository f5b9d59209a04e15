"""Authentication failures reach the audit chain as counted records, not one event each: a flood
of bad credentials becomes one `auth.failures` event per source and reason per interval, in the
operator's (superadmin organization's) chain."""

import math
import time

from sandfort_harness import Daemon


def test_a_flood_of_bad_keys_becomes_a_few_counted_events():
    interval = 1
    d = Daemon({"audit": {"summary_interval_s": interval}}).start()
    try:
        bad = d.client("sfk_" + "0" * 32)
        begun = time.monotonic()
        for _ in range(200):
            assert bad.get("/v1/sandboxes").status == 401
        for _ in range(30):
            assert d.client().get("/v1/whoami").status == 401  # no credential at all
        took = time.monotonic() - begun
        admin = d.admin()
        # Every failure is counted once the intervals that saw them have been summarized; on a
        # loaded machine that may take more than one interval.
        deadline = time.monotonic() + 30
        while True:
            items = admin.get("/v1/audit?action=auth.failures&limit=1000").json()["items"]
            by_reason = {}
            for e in items:
                assert e["actor"] == "anonymous" and e["source"] == "127.0.0.1" and e["outcome"] == "denied", e
                by_reason[e["details"]["reason"]] = by_reason.get(e["details"]["reason"], 0) + e["details"]["count"]
            if by_reason == {"invalid API key": 200, "missing API key": 30} or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert by_reason == {"invalid API key": 200, "missing API key": 30}, by_reason
        # Per interval, not per request: at most one event per reason for each interval the flood
        # spanned (and the one it ended in), however slowly the machine sent it.
        intervals = math.ceil(took / interval) + 1
        assert len(items) <= 2 * intervals, (len(items), took)
        assert admin.get("/v1/audit/verify").json()["ok"] is True
    finally:
        d.stop()
        d.cleanup()
