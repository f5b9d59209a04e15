"""The preview link is what an agent hands back, so it works as printed: the link that `sandfort
run` prints (the API's `link`, the SDKs' too) opens with curl (no -L), Python's urllib and Node's
fetch and http on this machine, with no DNS set-up (`*.localhost` is loopback: browsers and curl
know it, glibc clients through nss-myhostname, which scripts/setup installs), and a browser's
top-level navigation trades the token for a cookie and a URL without it. The token never reaches
the app or the daemon's log, and the answer to a URL carrying it keeps it out of Referer headers
and caches. The ports list leaves out Docker's resolver (127.0.0.11) and marks what the preview
cannot reach.

No browser runs here (no browser automation is a dependency of the repository): a browser's
navigation is the request it sends (Sec-Fetch-Mode: navigate, Sec-Fetch-Dest: document)."""

import json
import os
import shutil
import subprocess
import tempfile
import sys
import time
import urllib.error
import urllib.request

import pytest

from sandfort_harness import BUILD, Daemon, new_org_member

CLI = os.path.join(BUILD, "cli", "sandfort")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python"))
from sandfort_sdk import Client as SdkClient  # noqa: E402

PORT = 8080

# The app in the sandbox records every request it gets (request line and headers), and sets a
# cookie of its own.
APP = r"""
import http.server, json, sys

class Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open("/tmp/seen.jsonl", "a") as f:
            f.write(json.dumps({"line": self.requestline, "headers": list(self.headers.items())}) + "\n")
        body = b"served by the app\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "app_session=1; Path=/")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Recorder).serve_forever()
"""

NAVIGATION = {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "none"}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def urlopen(url, headers=None, follow=True):
    """(status, headers as a list of (lowercase name, value), body) of a GET with urllib."""
    opener = urllib.request.build_opener() if follow else urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, [(k.lower(), v) for k, v in r.getheaders()], r.read()
    except urllib.error.HTTPError as e:
        return e.code, [(k.lower(), v) for k, v in e.headers.items()], e.read()


def header(headers, name):
    values = [v for k, v in headers if k == name]
    assert len(values) <= 1, (name, headers)
    return values[0] if values else None


@pytest.fixture(scope="module")
def daemon():
    """A daemon of its own, logging at debug level: its whole log is searched for the token."""
    d = Daemon({"log_level": "debug", "host": {"memory_overcommit": 8}}).start()
    yield d
    d.stop_and_cleanup()


@pytest.fixture(scope="module")
def member(daemon):
    return new_org_member(daemon, "links")[1]


@pytest.fixture(scope="module")
def served(daemon, member):
    """A sandbox whose app was started the way the issue tells it: `sandfort run "… &"`, which
    prints the link. → (sandbox, the printed link)"""
    sbx = member.create_sandbox()
    try:
        member.exec(sbx["id"], argv=["sh", "-c", "cat > /tmp/app.py"], stdin=APP)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SANDFORT_")}
        env.update(SANDFORT_BASE_URL=f"http://127.0.0.1:{daemon.port}", SANDFORT_API_KEY=member.key,
                   HOME=os.path.join(daemon.state_dir, "cli-home"))
        r = subprocess.run([CLI, "run", f"--id={sbx['id']}", f"(nohup python3 /tmp/app.py {PORT} >/dev/null 2>&1 &) && "
                            f"until (exec 3<>/dev/tcp/127.0.0.1/{PORT}) 2>/dev/null; do sleep 0.05; done"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        lines = [line for line in r.stderr.splitlines() if line.startswith(f"preview: port {PORT}: ")]
        assert len(lines) == 1, r.stderr
        yield sbx, lines[0].split(": ", 2)[2]
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def seen_by_app(member, sbx):
    out = member.exec(sbx["id"], command="cat /tmp/seen.jsonl")
    return [json.loads(line) for line in out["stdout"].splitlines()]


def test_every_tool_hands_on_the_same_link(daemon, member, served):
    sbx, printed = served
    api = member.get(f"/v1/sandboxes/{sbx['id']}/preview/{PORT}").json()
    assert printed == api["link"] == f"{api['url']}/?sandfort_token={api['token']}"
    assert printed.startswith(f"http://{PORT}-{sbx['id']}.preview.localhost:{daemon.preview_port}/?")
    sdk = SdkClient(f"http://127.0.0.1:{daemon.port}", member.key).get_sandbox(sbx["id"]).preview_link(PORT)
    assert sdk.link == sdk.url_with_token == printed


def test_the_printed_link_opens_with_curl_without_following_redirects(served):
    _, link = served
    assert shutil.which("curl"), "curl is installed by scripts/setup"
    r = subprocess.run(["curl", "-sS", "-i", "--max-time", "30", link], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"200", head
    assert body == b"served by the app\n"


def test_the_printed_link_opens_with_pythons_urllib(served):
    _, link = served
    status, headers, body = urlopen(link)
    assert (status, body) == (200, b"served by the app\n"), headers


def test_the_printed_link_opens_with_node_fetch_and_http(served):
    _, link = served
    assert shutil.which("node"), "node is installed by scripts/setup"
    script = r"""
const http = require("http");
const url = process.argv[1];
(async () => {
  const r = await fetch(url);
  const viaFetch = { status: r.status, body: await r.text() };
  const viaHttp = await new Promise((resolve, reject) => {
    http.get(url, (m) => {
      let body = "";
      m.on("data", (d) => (body += d));
      m.on("end", () => resolve({ status: m.statusCode, body }));
    }).on("error", reject);
  });
  console.log(JSON.stringify({ fetch: viaFetch, http: viaHttp }));
})().catch((e) => { console.error(String((e && e.cause) || e)); process.exit(1); });
"""
    r = subprocess.run(["node", "-e", script, link], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    want = {"status": 200, "body": "served by the app\n"}
    assert got == {"fetch": want, "http": want}


def test_the_answer_to_the_link_sets_the_cookie_and_keeps_the_url_out_of_referers_and_caches(served):
    _, link = served
    token = link.split("sandfort_token=")[1]
    status, headers, _ = urlopen(link)
    assert status == 200
    assert header(headers, "referrer-policy") == "no-referrer"
    assert header(headers, "cache-control") == "no-store"
    cookies = [v for k, v in headers if k == "set-cookie"]
    ours = [c for c in cookies if c.startswith("sandfort_preview_token=")]
    assert len(ours) == 1 and ours[0].startswith(f"sandfort_preview_token={token};"), cookies
    assert "HttpOnly" in ours[0] and "SameSite=Lax" in ours[0] and "Domain" not in ours[0]
    assert "app_session=1; Path=/" in cookies  # the app's own cookie passes
    # That cookie alone opens the preview afterwards (a browser's next requests).
    base = link.split("?")[0]
    status, _, body = urlopen(base + "page", {"Cookie": ours[0].split(";")[0]})
    assert (status, body) == (200, b"served by the app\n")


def test_a_browser_navigation_trades_the_token_for_the_cookie_and_a_clean_address(served):
    _, link = served
    token = link.split("sandfort_token=")[1]
    status, headers, _ = urlopen(link.replace("/?", "/docs/?a=1&") + "&b=2", NAVIGATION, follow=False)
    assert status == 302, headers
    assert header(headers, "location") == "/docs/?a=1&b=2"
    assert header(headers, "referrer-policy") == "no-referrer"
    assert header(headers, "set-cookie").startswith(f"sandfort_preview_token={token};")
    # An iframe's navigation (or a client that says nothing) is answered at once.
    status, _, _ = urlopen(link, {**NAVIGATION, "Sec-Fetch-Dest": "iframe"}, follow=False)
    assert status == 200


def test_the_printed_link_opens_in_a_real_browser(served):
    """Debian's chromium, headless: it resolves *.localhost itself, navigates (so it is redirected
    to the address without the token) and comes back with the cookie."""
    _, link = served
    browser = shutil.which("chromium")
    assert browser, "chromium is installed by scripts/setup"
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            f"--user-data-dir={profile}", "--dump-dom", link],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "served by the app" in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])


def test_a_wrong_or_another_ports_token_in_the_link_opens_nothing(member, served):
    sbx, link = served
    base = link.split("?")[0]
    other = member.get(f"/v1/sandboxes/{sbx['id']}/preview/{PORT + 1}").json()["token"]
    for token in ("0" * 64, other, ""):
        for headers in ({}, NAVIGATION):
            status, got, _ = urlopen(f"{base}?sandfort_token={token}", headers, follow=False)
            assert status == 401, (token, headers)
            assert header(got, "set-cookie") is None


def test_the_token_reaches_neither_the_app_nor_the_daemons_log(daemon, member, served):
    sbx, link = served
    token = link.split("sandfort_token=")[1]
    urlopen(link)
    urlopen(link, NAVIGATION)  # followed: the redirect, then the page with the cookie
    urlopen(link.split("?")[0] + "asset.js", {"Referer": link, "Cookie": f"sandfort_preview_token={token}"})
    # What the app received: request lines without the parameter, no cookie, header or Referer
    # carrying the token, and its own cookie untouched.
    seen = seen_by_app(member, sbx)
    assert len(seen) >= 3, seen
    assert token not in json.dumps(seen)
    assert any(h == ["Referer", link.split("?")[0]] for req in seen for h in req["headers"]), seen
    # sandfortd's log, every line of it (debug level).
    with open(daemon.log_path, errors="replace") as f:
        log = f.read()
    assert f"/preview/{PORT}" in log  # the API's access log saw the link being asked for
    assert token not in log


def test_ports_leave_out_dockers_resolver_and_mark_loopback_listeners(member, served):
    sbx, _ = served
    # Docker's embedded DNS server does listen in this sandbox (127.0.0.11 is 0B00007F).
    tcp = member.exec(sbx["id"], command="cat /proc/net/tcp")["stdout"]
    assert any(line.split()[1].startswith("0B00007F:") and line.split()[3] == "0A"
               for line in tcp.splitlines()[1:]), tcp
    member.post(f"/v1/sandboxes/{sbx['id']}/commands",
                {"command": "python3 -m http.server 8091 --bind 127.0.0.1"})
    deadline = time.time() + 20
    while True:
        items = member.get(f"/v1/sandboxes/{sbx['id']}/ports").json()["items"]
        if any(p["port"] == 8091 for p in items) or time.time() > deadline:
            break
        time.sleep(0.1)
    assert not [p for p in items if p["address"] in ("127.0.0.11", "::ffff:127.0.0.11")], items
    by_port = {p["port"]: p for p in items}
    assert by_port[PORT]["previewable"] is True and by_port[PORT]["address"] == "0.0.0.0"
    assert by_port[8091]["previewable"] is False and by_port[8091]["address"] == "127.0.0.1"
