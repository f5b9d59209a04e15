"""GET /v1/events against a real daemon and real sandboxes: an organization's life-cycle events as
server-sent events, in the audit chain's order with its seq as the id, stops with their reason
(a request, the idle timeout, the kill switch, out of memory), resumed exactly after
Last-Event-ID, filtered by type, readable by a viewer and by nobody of another organization
(docs/events.md)."""

import http.client
import json
import time

import pytest

from sandfort_harness import Daemon, new_org_with_keys


@pytest.fixture(scope="module")
def daemon():
    # The reaper's round is 5 s; a short grace keeps the idle-stopped sandbox from lingering.
    # Egress decisions are written to the chain every summary interval: 1 s here.
    d = Daemon({"guardrails": {"delete_grace_s": 3}, "audit": {"summary_interval_s": 1}}).start()
    yield d
    d.stop_and_cleanup()


class Stream:
    """One GET /v1/events, read event by event (comment lines and `retry:` skipped)."""

    def __init__(self, client, query="", headers=None, timeout=60):
        self.conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=timeout)
        h = {"Accept": "text/event-stream", "Authorization": "Bearer " + client.key}
        h.update(headers or {})
        self.conn.request("GET", "/v1/events" + query, headers=h)
        self.resp = self.conn.getresponse()
        self.heartbeats = 0

    def next(self):
        fields = {}
        while True:
            line = self.resp.readline()
            assert line, "the stream ended"
            line = line.decode().rstrip("\n")
            if line == "":
                if "data" in fields:
                    return {"id": fields.get("id"), "event": fields.get("event"), "data": json.loads(fields["data"])}
                continue
            if line.startswith(":"):
                self.heartbeats += 1
                continue
            name, _, value = line.partition(": ")
            fields[name] = value

    def until(self, predicate, deadline_s=90):
        """Events up to and including the first that satisfies predicate."""
        got = []
        deadline = time.time() + deadline_s
        while time.time() < deadline:
            e = self.next()
            got.append(e)
            if predicate(e):
                return got
        raise AssertionError(f"no such event within {deadline_s} s; got {[(e['event'], e['id']) for e in got]}")

    def close(self):
        self.conn.close()


def of(events, sandbox_id):
    return [e for e in events if e["data"]["target"] == sandbox_id]


def is_event(type_, target):
    return lambda e: e["event"] == type_ and e["data"]["target"] == target


def test_a_sandboxs_life_in_order_resumed_filtered_and_seen_by_its_organization_only(daemon):
    org, c = new_org_with_keys(daemon, "events-life")
    other_org, other = new_org_with_keys(daemon, "events-other")
    stream = Stream(c["viewer"])  # any role reads
    assert stream.resp.status == 200 and stream.resp.getheader("Content-Type") == "text/event-stream"
    sbx = c["member"].create_sandbox()
    assert c["member"].post(f"/v1/sandboxes/{sbx['id']}/stop").status == 200
    assert c["member"].delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    events = stream.until(is_event("sandbox.deleted", sbx["id"]))
    stream.close()
    mine = of(events, sbx["id"])
    assert [e["event"] for e in mine] == ["sandbox.created", "sandbox.started", "sandbox.stopped",
                                          "sandbox.deleted"], mine
    # The id is the audit chain's seq, rising; the data says the same.
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
    assert all(int(e["id"]) == e["data"]["seq"] and e["data"]["org_id"] == org["id"] for e in events), events
    assert mine[2]["data"]["reason"] == "request", mine[2]
    assert mine[0]["data"]["actor"].startswith("key:"), mine[0]

    # Resumed after the `started` event: exactly the later ones (header, ?after=, and ?after= with
    # an empty header, which is no cursor).
    started_id = mine[1]["id"]
    for query, headers in (("", {"Last-Event-ID": started_id}), (f"?after={started_id}", {}),
                           (f"?after={started_id}", {"Last-Event-ID": ""})):
        again = Stream(c["admin"], query, headers)
        later = again.until(is_event("sandbox.deleted", sbx["id"]))
        again.close()
        assert [e["id"] for e in later] == [e["id"] for e in events if int(e["id"]) > int(started_id)], later

    # ?types= filters.
    only = Stream(c["member"], "?types=sandbox.stopped,sandbox.deleted")
    filtered = only.until(is_event("sandbox.deleted", sbx["id"]))
    only.close()
    assert [e["event"] for e in of(filtered, sbx["id"])] == ["sandbox.stopped", "sandbox.deleted"], filtered
    assert {e["event"] for e in filtered} <= {"sandbox.stopped", "sandbox.deleted"}, filtered

    # Another organization's key, from the start of its chain: its own events, none of ours.
    theirs = Stream(other["viewer"])
    r = other["member"].post("/v1/volumes", {"name": "events-mark"})
    assert r.status == 201, r
    seen = theirs.until(lambda e: e["event"] == "volume.created")
    theirs.close()
    assert all(e["data"]["org_id"] == other_org["id"] for e in seen), seen
    assert not of(seen, sbx["id"]), seen
    # The operator reads another organization's stream with ?org=.
    operator = Stream(daemon.admin(), f"?org={org['id']}&types=sandbox.deleted")
    assert operator.until(is_event("sandbox.deleted", sbx["id"]))[-1]["data"]["org_id"] == org["id"]
    operator.close()


def test_bad_cursors_and_types_are_refused_with_the_error_shape(daemon):
    org, c = new_org_with_keys(daemon, "events-bad")
    for query, headers, word in (("", {"Last-Event-ID": "abc"}, "Last-Event-ID"),
                                 ("?after=-1", {}, "after"),
                                 ("?types=sandbox.exploded", {}, "sandbox.exploded"),
                                 ("?types=", {}, "types")):
        r = c["viewer"].get("/v1/events" + query, headers=dict(headers, Accept="text/event-stream"))
        assert r.status == 400, (query, headers, r)
        err = r.json()["error"]
        assert err["code"] == "invalid_argument" and word in err["message"] and err["request_id"], err
    assert daemon.client().get("/v1/events").status == 401
    assert daemon.client("sfk_not_a_key").get("/v1/events").status == 401
    # Another organization named by a key that is not the operator's: not found, like any resource.
    other_org, _ = new_org_with_keys(daemon, "events-bad-other")
    assert c["admin"].get(f"/v1/events?org={other_org['id']}").status == 404


def test_an_idle_timeout_stop_says_idle_timeout(daemon):
    org, c = new_org_with_keys(daemon, "events-idle")
    stream = Stream(c["viewer"], "?types=sandbox.stopped")
    sbx = c["member"].create_sandbox(idle_timeout_s=2)
    stopped = stream.until(is_event("sandbox.stopped", sbx["id"]))[-1]
    stream.close()
    assert stopped["data"]["reason"] == "idle_timeout", stopped
    assert stopped["data"]["actor"] == "system" and "idle for" in stopped["data"]["details"]["message"], stopped
    # The audit event that the stream shows carries the reason too.
    r = c["admin"].get(f"/v1/audit?action=sandbox.stop&target={sbx['id']}")
    assert [e["details"]["reason"] for e in r.json()["items"]] == ["idle_timeout"], r


def test_the_kill_switch_says_kill_switch(daemon):
    org, c = new_org_with_keys(daemon, "events-kill")
    sbx = c["member"].create_sandbox(idle_timeout_s=0)
    stream = Stream(c["member"], "?types=sandbox.stopped")
    r = c["admin"].post(f"/v1/orgs/{org['id']}/stop-all")
    assert r.status == 200 and r.json()["stopped"] == [sbx["id"]], r
    stopped = stream.until(is_event("sandbox.stopped", sbx["id"]))[-1]
    stream.close()
    assert stopped["data"]["reason"] == "kill_switch", stopped
    assert c["admin"].delete(f"/v1/orgs/{org['id']}/stop-all").status == 204


def test_a_sandbox_that_runs_out_of_memory_says_oom(daemon):
    org, c = new_org_with_keys(daemon, "events-oom")
    sbx = c["member"].create_sandbox(idle_timeout_s=0, resources={"memory_mb": 64})
    stream = Stream(c["viewer"], "?types=sandbox.stopped")
    # The kernel's OOM killer picks the container's init and agent first (their oom_score_adj
    # raised, which needs no privilege), so the whole sandbox ends out of memory, as it does when
    # its main process grows past the limit.
    hog = ("echo 1000 > /proc/1/oom_score_adj; for p in $(cat /proc/1/task/*/children); do "
           "echo 1000 > /proc/$p/oom_score_adj; done; "
           "python3 -c 'b = bytearray(512 * 1024 * 1024); print(len(b))' || "
           "head -c 512m /dev/zero | tail > /dev/null")
    c["member"].post(f"/v1/sandboxes/{sbx['id']}/process/exec", {"command": hog, "timeout_s": 60})
    stopped = stream.until(is_event("sandbox.stopped", sbx["id"]))[-1]
    stream.close()
    assert stopped["data"]["reason"] == "oom", stopped
    assert "out of memory" in stopped["data"]["details"]["message"], stopped
    assert c["member"].get(f"/v1/sandboxes/{sbx['id']}").json()["state"] == "stopped"


def test_a_restart_ends_the_stream_and_a_resumed_one_says_daemon_restart():
    """A graceful stop ends every stream; a container found stopped at the next start is
    `daemon_restart`, and the stream resumed with Last-Event-ID gets it and nothing before."""
    from sandfort_harness import docker, docker_container

    d = Daemon()
    try:
        d.start()
        admin = d.admin()
        sbx = admin.create_sandbox(idle_timeout_s=0)
        stream = Stream(admin)
        seen = stream.until(is_event("sandbox.started", sbx["id"]))
        d.stop()
        with pytest.raises(AssertionError, match="the stream ended"):
            stream.next()
        stream.close()
        status, _ = docker("POST", f"/containers/{docker_container(sbx['id'])['Id']}/stop?t=1")
        assert status in (204, 304), status
        d.start()
        resumed = Stream(admin, headers={"Last-Event-ID": seen[-1]["id"]})
        after = resumed.until(is_event("sandbox.stopped", sbx["id"]))
        resumed.close()
        assert [int(e["id"]) for e in after] == sorted(int(e["id"]) for e in after)
        assert int(after[0]["id"]) > int(seen[-1]["id"]), after
        assert after[-1]["data"]["reason"] == "daemon_restart", after[-1]
        assert admin.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    finally:
        d.stop_and_cleanup()


def test_streams_are_bounded_per_client_address_and_a_closed_one_makes_room(daemon):
    org, c = new_org_with_keys(daemon, "events-bounds")
    streams = [Stream(c["viewer"]) for _ in range(8)]
    try:
        assert all(s.resp.status == 200 for s in streams)
        r = c["viewer"].get("/v1/events", headers={"Accept": "text/event-stream"})
        assert r.status == 429 and r.json()["error"]["code"] == "quota_exceeded", r
        assert "event streams" in r.json()["error"]["message"], r
        streams.pop().close()
        # The daemon sees the client leave while its stream waits: the place is free again.
        deadline = time.time() + 30
        while True:
            again = Stream(c["viewer"], "?types=sandbox.deleted")
            if again.resp.status == 200:
                streams.append(again)
                break
            assert again.resp.status == 429, again.resp.status
            again.close()
            assert time.time() < deadline, "the closed stream's place never came back"
            time.sleep(0.1)
    finally:
        for s in streams:
            s.close()


def test_a_quota_refusal_is_an_event(daemon):
    org, c = new_org_with_keys(daemon, "events-quota")
    r = daemon.admin().request("PUT", f"/v1/orgs/{org['id']}/limits", body={"max_sandboxes": 1})
    assert r.status == 200, r
    sbx = c["member"].create_sandbox(idle_timeout_s=0)
    r = c["member"].post("/v1/sandboxes", {"wait": False})
    assert r.status == 429 and r.json()["error"]["code"] == "quota_exceeded", r
    stream = Stream(c["viewer"], "?types=quota.refused")
    refused = stream.next()
    stream.close()
    assert refused["event"] == "quota.refused", refused
    assert refused["data"]["action"] == "guardrail.quota_exceeded" and refused["data"]["outcome"] == "denied", refused
    assert refused["data"]["details"]["in_use"] == 1, refused
    assert c["member"].delete(f"/v1/sandboxes/{sbx['id']}").status == 204


def test_egress_denials_are_counted_events(daemon):
    org, c = new_org_with_keys(daemon, "events-egress")
    sbx = c["member"].create_sandbox(idle_timeout_s=0)  # an empty allowlist: no egress at all
    stream = Stream(c["viewer"], "?types=egress.denied")
    for _ in range(3):
        out = c["member"].exec(sbx["id"], command="curl -sS -m 10 -o /dev/null -w '%{http_code}' http://example.com/",
                               env={"NO_PROXY": "", "no_proxy": ""}, timeout_s=30)
        assert out["stdout"] == "403", out
    # One event per interval and key: the three may span intervals, so they are summed.
    count = 0
    while count < 3:
        e = stream.next()
        assert e["event"] == "egress.denied" and e["data"]["target"] == sbx["id"], e
        assert e["data"]["details"]["host"] == "example.com" and e["data"]["actor"] == f"sandbox:{sbx['id']}", e
        count += e["data"]["details"]["count"]
    stream.close()
    assert count == 3
    assert c["member"].delete(f"/v1/sandboxes/{sbx['id']}").status == 204
