"""Preview URLs from outside: a server started inside a sandbox is reachable through the preview
listener by host name alone, HTTP and WebSocket, with the token rules of the API."""

import base64
import http.client
import os
import socket
import time

import pytest

# A WebSocket echo server in the standard library only: enough of RFC 6455 for one text frame.
WS_ECHO = r"""
import base64, hashlib, socket
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 8765))
srv.listen(8)
while True:
    c, _ = srv.accept()
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(4096)
    key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key")][0]
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    while True:
        hdr = c.recv(2)
        if len(hdr) < 2:
            break
        n = hdr[1] & 0x7F
        mask = c.recv(4)
        data = bytearray(c.recv(n))
        for i in range(n):
            data[i] ^= mask[i % 4]
        c.sendall(bytes([0x81, n]) + bytes(data))
    c.close()
"""


def start_command(member, sbx, command):
    r = member.post(f"/v1/sandboxes/{sbx['id']}/commands", {"command": command})
    assert r.status == 201, r
    return r.json()["id"]


def wait_listening(member, sbx, port):
    deadline = time.time() + 20
    while time.time() < deadline:
        items = member.get(f"/v1/sandboxes/{sbx['id']}/ports").json()["items"]
        if any(p.get("port") == port for p in items):
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def served(member):
    sbx = member.create_sandbox()
    member.exec(sbx["id"], command="mkdir -p /srv && echo 'hello from the sandbox' > /srv/index.html")
    start_command(member, sbx, "cd /srv && python3 -m http.server 8080")
    wait_listening(member, sbx, 8080)
    yield sbx
    member.delete(f"/v1/sandboxes/{sbx['id']}")


def host_for(daemon, sbx, port):
    return f"{port}-{sbx['id']}.preview.localhost:{daemon.preview_port}"


def preview_get(daemon, host, path="/", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.preview_port, timeout=30)
    conn.request("GET", path, headers={"Host": host, **(headers or {})})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), body


def test_preview_link_and_template(daemon, member, served):
    got = member.get(f"/v1/sandboxes/{served['id']}").json()
    assert got["preview_url_template"] == f"http://{{port}}-{served['id']}.preview.localhost:{daemon.preview_port}"
    link = member.get(f"/v1/sandboxes/{served['id']}/preview/8080").json()
    assert link["url"] == f"http://8080-{served['id']}.preview.localhost:{daemon.preview_port}"
    assert len(link["token"]) == 64
    assert member.get(f"/v1/sandboxes/{served['id']}/preview/0").status == 400
    assert member.get(f"/v1/sandboxes/{served['id']}/preview/70000").status == 400


def test_a_server_in_the_sandbox_is_reachable_with_its_token(daemon, member, served):
    token = member.get(f"/v1/sandboxes/{served['id']}/preview/8080").json()["token"]
    host = host_for(daemon, served, 8080)
    status, _, body = preview_get(daemon, host, "/index.html", {"X-Sandfort-Preview-Token": token})
    assert status == 200 and body == b"hello from the sandbox\n"
    status, _, body = preview_get(daemon, host)
    assert status == 401, body
    status, _, _ = preview_get(daemon, host, headers={"X-Sandfort-Preview-Token": "0" * 64})
    assert status == 401
    # A token opens one port only.
    other = member.get(f"/v1/sandboxes/{served['id']}/preview/8081").json()["token"]
    status, _, _ = preview_get(daemon, host, headers={"X-Sandfort-Preview-Token": other})
    assert status == 401


def test_query_token_is_answered_at_once_with_a_host_only_cookie(daemon, member, served):
    token = member.get(f"/v1/sandboxes/{served['id']}/preview/8080").json()["token"]
    host = host_for(daemon, served, 8080)
    status, headers, body = preview_get(daemon, host, f"/index.html?a=1&sandfort_token={token}&b=2")
    assert status == 200 and body == b"hello from the sandbox\n"
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"sandfort_preview_token={token}")
    assert "HttpOnly" in cookie and "Domain" not in cookie
    assert headers["Referrer-Policy"] == "no-referrer"
    status, _, body = preview_get(daemon, host, "/index.html", {"Cookie": f"sandfort_preview_token={token}"})
    assert status == 200 and body == b"hello from the sandbox\n"
    # A browser's top-level navigation is sent to the same URL without the token.
    status, headers, _ = preview_get(daemon, host, f"/index.html?a=1&sandfort_token={token}&b=2",
                                     {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"})
    assert status == 302 and headers["Location"].endswith("/index.html?a=1&b=2")
    assert headers["Set-Cookie"] == cookie


def test_bad_hosts_unknown_sandboxes_and_closed_ports(daemon, member, served):
    token = member.get(f"/v1/sandboxes/{served['id']}/preview/9").json()["token"]
    assert preview_get(daemon, f"localhost:{daemon.preview_port}")[0] == 400
    assert preview_get(daemon, f"99999-{served['id']}.preview.localhost")[0] == 400
    assert preview_get(daemon, f"8080-{served['id']}.elsewhere.example")[0] == 400
    assert preview_get(daemon, "8080-sbx-0000000000000000.preview.localhost")[0] == 404
    status, _, body = preview_get(daemon, host_for(daemon, served, 9), headers={"X-Sandfort-Preview-Token": token})
    assert status == 502, body
    assert len(body) < 200


def test_public_preview_needs_no_token(daemon, member):
    sbx = member.create_sandbox(public_preview=True)
    try:
        assert member.get(f"/v1/sandboxes/{sbx['id']}/preview/8080").json()["token"] is None
        start_command(member, sbx, f"mkdir -p /srv/p && echo {sbx['id']} > /srv/p/whoami && "
                                   "python3 -m http.server 8080 --directory /srv/p")
        wait_listening(member, sbx, 8080)
        status, _, body = preview_get(daemon, host_for(daemon, sbx, 8080), "/whoami")
        assert status == 200 and body.strip() == sbx["id"].encode()
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def open_websocket(daemon, sbx, port, token):
    """A WebSocket to that port of the sandbox through the preview listener: the socket, its 101 read."""
    s = socket.create_connection(("127.0.0.1", daemon.preview_port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws HTTP/1.1\r\nHost: {host_for(daemon, sbx, port)}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
               f"X-Sandfort-Preview-Token: {token}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def websocket_echo(s, payload):
    """Sends one short masked text frame to WS_ECHO and returns the payload of its answer."""
    mask = os.urandom(4)
    s.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
    frame = b""
    while len(frame) < 2 + len(payload):
        frame += s.recv(4096)
    return frame[2:]


def test_websocket_through_the_preview_and_deletion_kills_it(daemon, member):
    sbx = member.create_sandbox()
    deleted = False
    try:
        member.exec(sbx["id"], argv=["sh", "-c", "cat > /tmp/ws.py"], stdin=WS_ECHO)
        start_command(member, sbx, "python3 /tmp/ws.py")
        wait_listening(member, sbx, 8765)
        token = member.get(f"/v1/sandboxes/{sbx['id']}/preview/8765").json()["token"]
        s = open_websocket(daemon, sbx, 8765, token)
        assert websocket_echo(s, b"ping through the preview") == b"ping through the preview"
        # Deleting the sandbox closes the open relay at once and kills its URLs.
        assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
        deleted = True
        s.settimeout(5)
        assert s.recv(4096) == b""
        s.close()
        assert preview_get(daemon, host_for(daemon, sbx, 8765), headers={"X-Sandfort-Preview-Token": token})[0] == 404
    finally:
        if not deleted:
            member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_ports_list_their_preview_urls(daemon, member, served):
    items = member.get(f"/v1/sandboxes/{served['id']}/ports").json()["items"]
    http_server = [p for p in items if p["port"] == 8080]
    assert http_server, items
    assert http_server[0]["url"] == f"http://8080-{served['id']}.preview.localhost:{daemon.preview_port}"
    assert http_server[0]["previewable"] is True


def preview_request(daemon, method, host, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.preview_port, timeout=30)
    conn.request(method, "/", body=body, headers={"Host": host, **(headers or {})})
    r = conn.getresponse()
    out = (r.status, r.read())
    conn.close()
    return out


def test_a_viewer_gets_no_preview_token_so_cannot_post_or_upgrade_to_the_app(daemon, org, member, served):
    """A preview token reaches the app with every method and WebSockets (a notebook there runs
    code): it is a member's. A viewer reads the sandbox and its ports, never a token."""
    viewer = org["viewer"]
    r = viewer.get(f"/v1/sandboxes/{served['id']}/preview/8080")
    assert r.status == 403, r
    assert r.json()["error"]["code"] == "permission_denied" and r.json()["error"]["request_id"], r
    # Nothing a viewer may read carries one (the sandbox, its ports with their URLs).
    for path in (f"/v1/sandboxes/{served['id']}", f"/v1/sandboxes/{served['id']}/ports"):
        r = viewer.get(path)
        assert r.status == 200 and "token" not in r.body.decode(), r
    host = host_for(daemon, served, 8080)
    # Without a token the preview listener answers itself: the app sees neither request.
    status, body = preview_request(daemon, "POST", host, b"{}", {"Content-Type": "application/json"})
    assert status == 401, body
    status, body = preview_request(daemon, "GET", host, headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert status == 401, body
    # A member's token is unchanged and does reach the app: the POST is the server's own answer.
    token = member.get(f"/v1/sandboxes/{served['id']}/preview/8080").json()["token"]
    status, body = preview_request(daemon, "POST", host, b"{}", {"X-Sandfort-Preview-Token": token})
    assert status == 501 and b"Unsupported method" in body, (status, body)
