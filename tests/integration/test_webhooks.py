"""Webhooks against a real daemon, real sandboxes and a real receiver on the host
(docs/events.md, "Webhooks"): every life-cycle event arrives signed with its reason (a request, the
idle timeout, the kill switch, out of memory), verified by both SDK helpers; a receiver that fails
five times gets the event once more with the same Sandfort-Event-Id; events not delivered before a
restart are delivered after it; loopback and metadata URLs are refused at registration, and an
address the policy no longer allows at delivery; another organization sees nothing; the delivery
log shows the attempts.

The receiver listens on the Docker bridge's gateway address (a private address of this host, not
loopback), and only that /32 is in the test daemon's webhooks.allowed_ranges."""

import base64
import http.server
import json
import os
import shutil
import subprocess
import threading
import time

import pytest

from sandfort_harness import REPO, Daemon, docker, new_org_with_keys

import sys

sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
from sandfort_sdk.webhooks import WebhookSignatureError, verify  # noqa: E402

TS_SDK = os.path.join(REPO, "sdk", "typescript", "dist", "esm", "index.js")


def host_address():
    """A non-loopback address of this host that a daemon on it can dial: the Docker bridge's gateway."""
    status, net = docker("GET", "/networks/bridge")
    assert status == 200, (status, net)
    gateways = [c.get("Gateway") for c in (net.get("IPAM") or {}).get("Config") or [] if c.get("Gateway")]
    if not gateways:
        # Docker 20.10 leaves the gateway out of IPAM when it found its bridge already made (a
        # restarted dockerd): the bridge interface itself carries the address.
        bridge = (net.get("Options") or {}).get("com.docker.network.bridge.name", "docker0")
        out = subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", bridge], capture_output=True, text=True)
        gateways = [a["local"] for i in (json.loads(out.stdout or "[]")) for a in i.get("addr_info", [])]
    assert gateways, f"the Docker bridge network has no gateway address: {net}"
    return gateways[0]


class Receiver:
    """An HTTP server on `host`: records every POST (headers, raw body) and answers 500 to the next
    `fail_next` of them, 200 otherwise."""

    def __init__(self, host, port=0):
        self.host = host
        self.deliveries = []
        self.fail_next = 0
        self.answers = {}  # path → (status, headers, body) instead of 200 "ok"
        self.cond = threading.Condition()
        self._start(port)

    def _start(self, port):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.cond:
                    failing = outer.fail_next > 0
                    if failing:
                        outer.fail_next -= 1
                    status, headers, answer = outer.answers.get(
                        self.path, (500 if failing else 200, {}, b"no" if failing else b"ok"))
                    outer.deliveries.append({"headers": {k.lower(): v for k, v in self.headers.items()},
                                             "body": body, "answered": status, "path": self.path})
                    outer.cond.notify_all()
                self.send_response(status)
                for k, v in dict(headers, **{"Content-Length": str(len(answer))}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(answer)
                except OSError:
                    pass  # the daemon stops reading past its bound

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((self.host, port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path="/hook"):
        return f"http://{self.host}:{self.port}{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def restart(self):
        self._start(self.port)

    def events(self):
        with self.cond:
            return [dict(d, event=json.loads(d["body"])) for d in self.deliveries]

    def wait_for(self, predicate, timeout=120):
        """Deliveries so far, once one satisfies predicate."""
        deadline = time.time() + timeout
        with self.cond:
            while True:
                got = [dict(d, event=json.loads(d["body"])) for d in self.deliveries]
                if any(predicate(d) for d in got):
                    return got
                left = deadline - time.time()
                assert left > 0, f"no such delivery within {timeout} s; got {[d['event'] for d in got]}"
                self.cond.wait(min(left, 1))


def config_for(address):
    return {"webhooks": {"allowed_ranges": f"{address}/32", "retry_base_ms": 200, "retry_max_ms": 1000,
                         "poll_interval_ms": 200},
            "guardrails": {"delete_grace_s": 3}}


@pytest.fixture(scope="module")
def address():
    return host_address()


@pytest.fixture(scope="module")
def daemon(address):
    d = Daemon(config_for(address)).start()
    yield d
    d.stop_and_cleanup()


def register(client, url, **body):
    r = client.post("/v1/webhooks", dict(body, url=url))
    assert r.status == 201, r
    hook = r.json()
    assert hook["secret"].startswith("whsec_") and len(hook["secret"]) == 70, hook
    return hook


def about(type_, target, reason=None):
    def match(d):
        e = d["event"]
        return e["type"] == type_ and e["target"] == target and (reason is None or e.get("reason") == reason)
    return match


def verify_with_typescript(deliveries, secret):
    """The TypeScript SDK's verifyWebhook over each delivery (a node process); the types it returns."""
    assert os.path.exists(TS_SDK), f"{TS_SDK} is missing: build the TypeScript SDK (cd sdk/typescript && npm ci)"
    assert shutil.which("node"), "node is needed to check the TypeScript SDK's verifyWebhook"
    script = ("import { verifyWebhook } from %s;\n"
              "let input = ''; for await (const c of process.stdin) input += c;\n"
              "const { secret, items } = JSON.parse(input);\n"
              "const out = items.map(({ body, header }) => {\n"
              "  const raw = Buffer.from(body, 'base64');\n"
              "  const e = verifyWebhook(raw, header, secret);\n"
              "  let tampered = false;\n"
              "  try { verifyWebhook(Buffer.concat([raw, Buffer.from(' ')]), header, secret); } catch { tampered = true; }\n"
              "  return { type: e.type, tampered };\n"
              "});\n"
              "console.log(JSON.stringify(out));\n") % json.dumps("file://" + TS_SDK)
    items = [{"body": base64.b64encode(d["body"]).decode(), "header": d["headers"]["sandfort-signature"]}
             for d in deliveries]
    out = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps({"secret": secret, "items": items}),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_every_life_cycle_event_arrives_signed_with_its_reason(daemon, address):
    org, c = new_org_with_keys(daemon, "webhooks-life")
    receiver = Receiver(address)
    try:
        hook = register(c["admin"], receiver.url(), description="every event")
        assert hook["types"] == [] and hook["enabled"] is True
        # Request: created, started, stopped (request), started, deleted.
        sbx = c["member"].create_sandbox(idle_timeout_s=0)
        assert c["member"].post(f"/v1/sandboxes/{sbx['id']}/stop").status == 200
        assert c["member"].post(f"/v1/sandboxes/{sbx['id']}/start").status == 200
        assert c["member"].delete(f"/v1/sandboxes/{sbx['id']}").status == 204
        receiver.wait_for(about("sandbox.deleted", sbx["id"]))
        # The idle timeout.
        idle = c["member"].create_sandbox(idle_timeout_s=2)
        # The kill switch.
        killed = c["member"].create_sandbox(idle_timeout_s=0)
        receiver.wait_for(about("sandbox.stopped", idle["id"], "idle_timeout"))
        r = c["admin"].post(f"/v1/orgs/{org['id']}/stop-all")
        assert r.status == 200 and killed["id"] in r.json()["stopped"], r
        receiver.wait_for(about("sandbox.stopped", killed["id"], "kill_switch"))
        assert c["admin"].delete(f"/v1/orgs/{org['id']}/stop-all").status == 204
        # Out of memory (as tests/integration/test_events.py makes it).
        oom = c["member"].create_sandbox(idle_timeout_s=0, resources={"memory_mb": 64})
        hog = ("echo 1000 > /proc/1/oom_score_adj; for p in $(cat /proc/1/task/*/children); do "
               "echo 1000 > /proc/$p/oom_score_adj; done; "
               "python3 -c 'b = bytearray(512 * 1024 * 1024); print(len(b))' || "
               "head -c 512m /dev/zero | tail > /dev/null")
        c["member"].post(f"/v1/sandboxes/{oom['id']}/process/exec", {"command": hog, "timeout_s": 60})
        got = receiver.wait_for(about("sandbox.stopped", oom["id"], "oom"))

        mine = [d for d in got if d["event"]["target"] == sbx["id"]]
        assert [d["event"]["type"] for d in mine] == ["sandbox.created", "sandbox.started", "sandbox.stopped",
                                                      "sandbox.started", "sandbox.deleted"], [d["event"] for d in mine]
        assert mine[2]["event"]["reason"] == "request"
        # In the chain's order, each once (every attempt here succeeded first time), each its own key.
        seqs = [d["event"]["seq"] for d in got]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
        for d in got:
            h = d["headers"]
            assert h["content-type"] == "application/json", h
            assert h["sandfort-webhook-id"] == hook["id"], h
            assert h["sandfort-event-id"] == f"{org['id']}:{d['event']['seq']}", h
            assert h["sandfort-event-type"] == d["event"]["type"], h
            assert d["event"]["org_id"] == org["id"], d
            # The Python SDK's helper accepts it, and refuses it with another secret or body.
            assert verify(d["body"], h["sandfort-signature"], hook["secret"]) == d["event"]
            with pytest.raises(WebhookSignatureError):
                verify(d["body"], h["sandfort-signature"], "whsec_" + "0" * 64)
            with pytest.raises(WebhookSignatureError):
                verify(d["body"] + b" ", h["sandfort-signature"], hook["secret"])
        # The TypeScript SDK's helper agrees.
        checked = verify_with_typescript(got, hook["secret"])
        assert [x["type"] for x in checked] == [d["event"]["type"] for d in got]
        assert all(x["tampered"] for x in checked), checked
        # The delivery log: newest first, each delivered at the first attempt, paged by cursor.
        r = c["admin"].get(f"/v1/webhooks/{hook['id']}/deliveries?limit=2")
        assert r.status == 200, r
        page = r.json()
        assert len(page["items"]) == 2 and page["next_cursor"], page
        assert page["items"][0]["seq"] > page["items"][1]["seq"]
        rest = c["admin"].get(f"/v1/webhooks/{hook['id']}/deliveries?limit=200&cursor={page['next_cursor']}").json()
        log = page["items"] + rest["items"]
        assert [x["seq"] for x in log] == sorted(seqs, reverse=True)[:len(log)], log
        assert all(x["state"] == "delivered" and x["attempts"] == 1 and x["last_status"] == 200 and x["delivered_at"]
                   for x in log), log
        for s in (idle, killed, oom):
            assert c["member"].delete(f"/v1/sandboxes/{s['id']}").status == 204
    finally:
        receiver.close()


def test_a_failing_receiver_gets_the_event_again_with_the_same_id_and_the_log_counts_attempts(daemon, address):
    org, c = new_org_with_keys(daemon, "webhooks-retry")
    receiver = Receiver(address)
    try:
        receiver.fail_next = 5
        hook = register(c["admin"], receiver.url("/retry"), types=["volume.created"])
        assert c["member"].post("/v1/volumes", {"name": "retried"}).status == 201
        got = receiver.wait_for(lambda d: d["answered"] == 200)
        assert [d["answered"] for d in got] == [500] * 5 + [200], got
        ids = {d["headers"]["sandfort-event-id"] for d in got}
        assert len(ids) == 1, ids
        assert all(d["event"]["type"] == "volume.created" for d in got)
        # Each attempt is signed afresh; every signature verifies.
        assert all(verify(d["body"], d["headers"]["sandfort-signature"], hook["secret"]) for d in got)
        deadline = time.time() + 30
        while True:
            log = c["admin"].get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
            if log and log[0]["state"] == "delivered":
                break
            assert time.time() < deadline, log
            time.sleep(0.2)
        assert len(log) == 1 and log[0]["attempts"] == 6 and log[0]["last_status"] == 200, log
        assert log[0]["event_id"] == ids.pop() and log[0]["last_error"] == "", log
        time.sleep(1)  # nothing more comes
        assert len(receiver.events()) == 6
    finally:
        receiver.close()


def test_redirects_are_not_followed_and_a_large_answer_is_cut(daemon, address):
    org, c = new_org_with_keys(daemon, "webhooks-answers")
    receiver = Receiver(address)
    try:
        receiver.answers["/moved"] = (302, {"Location": receiver.url("/elsewhere")}, b"")
        receiver.answers["/large"] = (200, {}, b"x" * (4 << 20))
        moved = register(c["admin"], receiver.url("/moved"), types=["volume.created"])
        large = register(c["admin"], receiver.url("/large"), types=["volume.created"])
        assert c["member"].post("/v1/volumes", {"name": "answers"}).status == 201
        receiver.wait_for(lambda d: d["answered"] == 302 and d["headers"]["sandfort-webhook-id"] == moved["id"])
        receiver.wait_for(lambda d: d["headers"]["sandfort-webhook-id"] == large["id"])
        deadline = time.time() + 30
        while True:
            redirected = c["admin"].get(f"/v1/webhooks/{moved['id']}/deliveries").json()["items"]
            big = c["admin"].get(f"/v1/webhooks/{large['id']}/deliveries").json()["items"]
            if redirected and redirected[0]["attempts"] >= 2 and big and big[0]["state"] == "delivered":
                break
            assert time.time() < deadline, (redirected, big)
            time.sleep(0.2)
        # A 3xx is a failed attempt, retried at the same URL; the Location is never visited.
        assert redirected[0]["state"] == "pending" and redirected[0]["last_status"] == 302, redirected
        assert "302" in redirected[0]["last_error"], redirected
        assert all(d["answered"] == 302 for d in receiver.events()
                   if d["headers"]["sandfort-webhook-id"] == moved["id"])
        assert "/elsewhere" not in [d.get("path") for d in receiver.events()]
        # 4 MiB of answer: read to its bound and dropped; the status is what counts.
        assert big[0]["last_status"] == 200 and big[0]["attempts"] == 1, big
        assert c["admin"].delete(f"/v1/webhooks/{moved['id']}").status == 204
    finally:
        receiver.close()


def test_a_rotation_can_keep_the_previous_secret_signing_for_a_while(daemon, address):
    org, c = new_org_with_keys(daemon, "webhooks-rotation")
    receiver = Receiver(address)
    try:
        hook = register(c["admin"], receiver.url("/rotated"), types=["volume.created"])
        old = hook["secret"]
        r = c["admin"].post(f"/v1/webhooks/{hook['id']}/rotate-secret", {"keep_previous_s": 600})
        assert r.status == 200, r
        new = r.json()["secret"]
        assert new != old and new.startswith("whsec_")
        assert c["member"].post("/v1/volumes", {"name": "rotation-1"}).status == 201
        first = receiver.wait_for(lambda d: d["event"]["target"] and d["event"]["details"].get("name") == "rotation-1")[-1]
        header = first["headers"]["sandfort-signature"]
        assert header.count("v1=") == 2, header
        # Either secret verifies: receivers are updated at leisure within the overlap.
        assert verify(first["body"], header, old)["type"] == "volume.created"
        assert verify(first["body"], header, new)["type"] == "volume.created"
        # Rotated again without keeping: only the newest signs.
        newest = c["admin"].post(f"/v1/webhooks/{hook['id']}/rotate-secret").json()["secret"]
        assert c["member"].post("/v1/volumes", {"name": "rotation-2"}).status == 201
        second = receiver.wait_for(lambda d: d["event"]["details"].get("name") == "rotation-2")[-1]
        header = second["headers"]["sandfort-signature"]
        assert header.count("v1=") == 1, header
        assert verify(second["body"], header, newest)
        for stale in (old, new):
            with pytest.raises(WebhookSignatureError):
                verify(second["body"], header, stale)
        for bad in ({"keep_previous_s": -1}, {"keep_previous_s": 86401}, {"keep": 1}):
            r = c["admin"].post(f"/v1/webhooks/{hook['id']}/rotate-secret", bad)
            assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", (bad, r)
        # The chain says a rotation happened, never what the secrets are.
        events = c["admin"].get(f"/v1/audit?target={hook['id']}").json()["items"]
        rotations = [e for e in events if e["action"] == "webhook.update"]
        assert [e["details"]["keep_previous_s"] for e in rotations] == [600, 0], rotations
        assert not any(s in json.dumps(events) for s in (old, new, newest))
    finally:
        receiver.close()


def test_addresses_the_policy_refuses_are_refused_at_registration(daemon, address):
    org, c = new_org_with_keys(daemon, "webhooks-policy")
    for url, word in (("http://127.0.0.1:9/x", "loopback"), ("http://169.254.169.254/latest/meta-data/", "link-local"),
                      ("http://localhost:9/x", "loopback"), ("http://[::1]/", "loopback"),
                      ("http://10.0.0.1/", "private"), ("http://2130706433/", "loopback")):
        r = c["admin"].post("/v1/webhooks", {"url": url})
        assert r.status == 400, (url, r)
        err = r.json()["error"]
        assert err["code"] == "invalid_argument" and word in err["message"] and err["request_id"], (url, err)
    for body in ({"url": "ftp://example.com/"}, {"url": "https://user:pw@example.com/"}, {"url": "x" * 3000},
                 {"url": f"http://{address}:1/", "types": ["sandbox.exploded"]}, {"url": f"http://{address}:1/",
                                                                                    "secret": "mine"}):
        r = c["admin"].post("/v1/webhooks", body)
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", (body, r)
    assert c["admin"].get("/v1/webhooks").json()["items"] == []
    # A change of URL is checked the same way.
    hook = register(c["admin"], f"http://{address}:1/ok")
    r = c["admin"].request("PATCH", f"/v1/webhooks/{hook['id']}", body={"url": "http://169.254.169.254/"})
    assert r.status == 400 and "link-local" in r.json()["error"]["message"], r
    assert c["admin"].get(f"/v1/webhooks/{hook['id']}").json()["url"] == f"http://{address}:1/ok"
    # The audit chain records the change, never the secret.
    events = c["admin"].get(f"/v1/audit?target={hook['id']}").json()["items"]
    assert [e["action"] for e in events] == ["webhook.create"], events
    assert hook["secret"] not in json.dumps(events)


def test_roles_and_another_organization(daemon, address):
    org, c = new_org_with_keys(daemon, "webhooks-owner")
    other_org, other = new_org_with_keys(daemon, "webhooks-stranger")
    hook = register(c["admin"], f"http://{address}:1/owned")
    base = f"/v1/webhooks/{hook['id']}"
    for who in ("member", "viewer"):
        assert c[who].get("/v1/webhooks").status == 403
        assert c[who].get(base).status == 403
        assert c[who].post("/v1/webhooks", {"url": f"http://{address}:1/x"}).status == 403
    for method, path, body in (("GET", base, None), ("PATCH", base, {"enabled": False}), ("DELETE", base, None),
                               ("GET", base + "/deliveries", None), ("POST", base + "/rotate-secret", None)):
        r = other["admin"].request(method, path, body=body)
        assert r.status == 404 and r.json()["error"]["code"] == "not_found", (method, path, r)
    assert other["admin"].get("/v1/webhooks").json()["items"] == []
    assert c["admin"].get(base).json()["enabled"] is True
    # A quota: webhooks.max_per_org (10 by default).
    for i in range(9):
        register(c["admin"], f"http://{address}:1/n{i}")
    r = c["admin"].post("/v1/webhooks", {"url": f"http://{address}:1/eleventh"})
    assert r.status == 429 and r.json()["error"]["code"] == "quota_exceeded", r
    rotated = c["admin"].post(base + "/rotate-secret").json()
    assert rotated["secret"] != hook["secret"] and rotated["id"] == hook["id"]
    assert c["admin"].delete(base).status == 204
    assert c["admin"].get(base).status == 404


def test_undelivered_events_are_delivered_after_a_restart_and_the_policy_holds_at_delivery(address):
    d = Daemon(config_for(address))
    receiver = Receiver(address)
    try:
        d.start()
        admin = d.admin()
        hook = register(admin, receiver.url("/restart"), types=["volume.created"])
        receiver.close()  # nothing listens: each attempt is refused
        assert admin.post("/v1/volumes", {"name": "while-down"}).status == 201
        deadline = time.time() + 30
        while True:
            log = admin.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
            if log and log[0]["attempts"] >= 2:
                break
            assert time.time() < deadline, log
            time.sleep(0.2)
        assert log[0]["state"] == "pending" and log[0]["last_status"] is None and log[0]["next_attempt_at"], log
        assert "connect" in log[0]["last_error"], log
        pending_id = log[0]["event_id"]
        d.stop()
        d.start()
        receiver.restart()
        got = receiver.wait_for(lambda x: x["answered"] == 200)
        assert [x["headers"]["sandfort-event-id"] for x in got] == [pending_id], got
        assert verify(got[0]["body"], got[0]["headers"]["sandfort-signature"], hook["secret"])["type"] == "volume.created"

        # The operator takes the range back: the registered URL now resolves to an address the
        # policy refuses, and each attempt fails saying so; the receiver hears nothing.
        d.stop()
        d.config["webhooks"]["allowed_ranges"] = ""
        with open(d.config_path, "w") as f:
            json.dump(d.config, f)
        d.start()
        before = len(receiver.events())
        assert admin.post("/v1/volumes", {"name": "refused-now"}).status == 201
        deadline = time.time() + 30
        while True:
            log = admin.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"]
            if log and log[0]["attempts"] >= 1 and log[0]["seq"] != int(pending_id.split(":")[1]):
                break
            assert time.time() < deadline, log
            time.sleep(0.2)
        assert f"resolves to {address}" in log[0]["last_error"] and "private" in log[0]["last_error"], log
        assert len(receiver.events()) == before
    finally:
        receiver.close()
        d.stop_and_cleanup()
