"""Attack: a member names an image on a registry inside the host ("127.0.0.1:8080/v1/whoami"),
so the host's dockerd fetches a loopback URL and the error echoes what it answered.

Staged for real: a recorder listens on loopback and counts every connection, the API port itself
is named as a registry, and a hostile registry that an operator did allow answers with a secret
in its body. Refusals must come before Docker is asked anything; errors never carry the
registry's words (they go to the daemon's log)."""

import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandfort_harness import Daemon, docker  # noqa: E402

SECRET = "SECRET-BODY-7f3a9c"


class ConnectionRecorder:
    """A TCP listener on a loopback address that counts every connection made to it."""

    def __init__(self, host="127.0.0.1"):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.peers = []
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while self.running:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                continue
            self.peers.append(peer)
            conn.close()

    def close(self):
        self.running = False
        self.thread.join(2)
        self.sock.close()


@pytest.fixture
def recorder():
    r = ConnectionRecorder()
    yield r
    r.close()


def local_image_names():
    status, images = docker("GET", "/images/json?all=true")
    assert status == 200, images
    return {tag for i in images for tag in (i.get("RepoTags") or [])}


def assert_refused_before_docker(member, snapshot, wait):
    r = member.post("/v1/sandboxes", {"snapshot": snapshot, "wait": wait})
    assert r.status == 400, (snapshot, r)
    err = r.json()["error"]
    assert err["code"] == "invalid_argument", err
    return err["message"]


def test_the_api_itself_as_a_registry_is_400_before_docker(daemon, member):
    before = len(member.get("/v1/sandboxes?limit=1000").json()["items"])
    snapshot = f"127.0.0.1:{daemon.port}/v1/whoami:latest"
    for wait in (True, False):
        message = assert_refused_before_docker(member, snapshot, wait)
        assert f'"127.0.0.1:{daemon.port}"' in message and "images.allowed_registries" in message, message
        assert "loopback" in message, message
    assert len(member.get("/v1/sandboxes?limit=1000").json()["items"]) == before
    assert not any(t.startswith(f"127.0.0.1:{daemon.port}/") for t in local_image_names())


def test_loopback_registries_in_any_spelling_are_never_dialled(daemon, member, recorder):
    port = recorder.port
    spellings = [f"127.0.0.1:{port}/x:1", f"localhost:{port}/x:1", f"LOCALHOST:{port}/x", f"127.1:{port}/x",
                 f"0x7f.1:{port}/x", f"0x7f000001:{port}/x", f"2130706433:{port}/x", f"0177.0.0.1:{port}/x",
                 f"registry.localhost:{port}/x", f"[::1]:{port}/x", f"[::ffff:7f00:1]:{port}/x"]
    for snapshot in spellings:
        for wait in (True, False):
            assert_refused_before_docker(member, snapshot, wait)
    # A refused create must not have started a pull in the background either.
    time.sleep(2)
    assert recorder.peers == [], f"dockerd dialled the recorder: {recorder.peers}"


def test_private_link_local_and_metadata_registries_are_400(member):
    for snapshot in ("169.254.169.254/latest", "169.254.169.254:80/computemetadata/v1:x", "10.0.0.1/x",
                     "192.168.1.1:5000/x", "172.17.0.1:5000/x", "100.64.0.1/x", "0.0.0.0:5000/x",
                     "metadata.google.internal/x", "ghcr.io/someone/image:1"):
        message = assert_refused_before_docker(member, snapshot, True)
        assert "images.allowed_registries" in message, message


# ---- a registry the operator allowed, answering with a body of its choice ------------------

class HostileRegistry(BaseHTTPRequestHandler):
    """Speaks just enough of the registry API for dockerd to fetch a manifest, then answers
    every manifest request with an error whose body holds a secret."""
    answers = {"five": (500, "json"), "fiveplain": (500, "plain"), "four": (404, "plain"), "auth": (401, "json")}

    def _answer(self):
        if self.path == "/v2/":
            body, status, ctype = b"{}", 200, "application/json"
        else:
            name = self.path.split("/")[2] if self.path.count("/") > 2 else ""
            status, kind = self.answers.get(name, (500, "plain"))
            if kind == "json":
                body = ('{"errors":[{"code":"UNKNOWN","message":"%s token=abc"}]}' % SECRET).encode()
            else:
                body = f"{SECRET} plain text token=abc".encode()
            ctype = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = _answer
    do_HEAD = _answer

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def hostile_registry():
    server = ThreadingHTTPServer(("127.0.0.1", 0), HostileRegistry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def mirror_member(hostile_registry):
    """A daemon whose operator allowed the (hostile) loopback registry, and a member key there."""
    d = Daemon({"images": {"allowed_registries": [f"127.0.0.1:{hostile_registry}", "docker.io"]}}).start()
    try:
        admin = d.admin()
        r = admin.post("/v1/orgs", {"name": "mirror-users"})
        assert r.status == 201, r
        r = admin.post(f"/v1/orgs/{r.json()['id']}/api-keys", {"name": "m", "role": "member"})
        assert r.status == 201, r
        yield d, d.client(r.json()["key"])
    finally:
        d.stop_and_cleanup()


@pytest.mark.parametrize("name", ["five", "fiveplain", "four", "auth"])
def test_a_registry_answer_is_never_echoed(mirror_member, hostile_registry, name):
    d, member = mirror_member
    snapshot = f"127.0.0.1:{hostile_registry}/{name}/img:1"
    r = member.post("/v1/sandboxes", {"snapshot": snapshot, "wait": True})
    assert r.status in (403, 404, 503), r
    assert SECRET.encode() not in r.body and b"token=abc" not in r.body, r
    err = r.json()["error"]
    assert snapshot in err["message"], err
    # The same create without waiting ends in `error`, with the same short message.
    r = member.post("/v1/sandboxes", {"snapshot": snapshot, "wait": False})
    assert r.status == 201, r
    sid = r.json()["id"]
    r = member.get(f"/v1/sandboxes/{sid}?wait_for=started&timeout_s=60")
    assert r.json()["state"] == "error", r
    assert SECRET not in r.json()["error_message"] and snapshot in r.json()["error_message"], r.json()
    member.delete(f"/v1/sandboxes/{sid}")
    # The operator still has the details (Docker itself drops the body of a 500).
    if name in ("four", "auth"):
        with open(d.log_path) as f:
            assert SECRET in f.read()
