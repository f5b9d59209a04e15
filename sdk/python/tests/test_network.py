"""Preview links, egress updates, ports, metrics, whoami."""

import http.client
import time
import urllib.request
from urllib.parse import urlsplit

import pytest

from sandfort_sdk import InvalidArgumentError, PortInfo, PreviewLink


def wait_port(sbx, port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for p in sbx.ports():
            if p.port == port:
                return p
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


def fetch(link, path="/", headers=None):
    """GET through the preview listener: connect to 127.0.0.1, name the preview host in Host."""
    u = urlsplit(link.url)
    conn = http.client.HTTPConnection("127.0.0.1", u.port, timeout=30)
    conn.request("GET", path, headers={"Host": u.netloc, **(headers or {})})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def test_preview_link_and_ports(client):
    with client.create_sandbox() as sbx:
        sbx.fs.upload_file("/srv/index.html", "hello preview\n")
        server = sbx.process.start("cd /srv && exec python3 -m http.server 8080")
        p = wait_port(sbx, 8080)
        assert isinstance(p, PortInfo) and p.previewable and p.protocol == "tcp"
        link = sbx.preview_link(8080)
        assert isinstance(link, PreviewLink)
        assert link.url.startswith(f"http://8080-{sbx.id}.") and len(link.token) == 64
        assert sbx.info.preview_url_template.replace("{port}", "8080") == link.url
        assert fetch(link, "/index.html", link.headers) == (200, b"hello preview\n")
        assert fetch(link, "/index.html")[0] == 401
        # The link to hand on opens as printed (*.localhost resolved by the system).
        assert link.link == link.url_with_token == f"{link.url}/?sandfort_token={link.token}"
        with urllib.request.urlopen(link.link, timeout=30) as r:
            assert r.status == 200 and r.read() == b"hello preview\n"
        with pytest.raises(InvalidArgumentError):
            sbx.preview_link(70000)
        server.kill()
        server.wait(timeout=20)


def test_public_preview_has_no_token(client):
    with client.create_sandbox(public_preview=True) as sbx:
        assert sbx.info.public_preview is True
        link = sbx.preview_link(3000)
        assert link.token is None and link.headers == {} and link.url_with_token == link.link == link.url


def test_egress_patch(client):
    with client.create_sandbox(egress_allowlist=["example.com"]) as sbx:
        assert sbx.info.egress_allowlist == ["example.com"]
        sbx.set_egress_allowlist(["*.pypi.org", "pypi.org"])
        assert sbx.info.egress_allowlist == ["*.pypi.org", "pypi.org"]
        assert client.get_sandbox(sbx.id).info.egress_allowlist == ["*.pypi.org", "pypi.org"]
        sbx.update(egress_allowlist=[])
        assert sbx.info.egress_allowlist == []
        # Nothing is allowed now: the proxy refuses without dialling.
        r = sbx.process_exec(command="curl -s -o /dev/null -w '%{http_code}' http://example.com/")
        assert r.stdout == "403", r
        with pytest.raises(InvalidArgumentError):
            sbx.set_egress_allowlist(["bad host"])
        sbx.update(labels={"team": "sdk"}, ttl_s=3600)
        assert sbx.info.labels == {"team": "sdk"} and sbx.info.expires_at


def test_egress_deny_and_rules(client):
    rule = {"host": "example.com", "methods": ["GET"], "paths": ["/repos/acme/*"]}
    with client.create_sandbox(egress_allowlist=["*"], egress_deny=["example.org"], egress_rules=[rule]) as sbx:
        assert sbx.info.egress_deny == ["example.org"] and sbx.info.egress_rules == [rule]
        # The deny entry wins over "*": refused at the proxy, never dialled.
        r = sbx.process_exec(command="curl -s -o /dev/null -w '%{http_code}' http://example.org/")
        assert r.stdout == "403", r
        sbx.update(egress_deny=[], egress_rules=[])
        assert sbx.info.egress_deny == [] and sbx.info.egress_rules == []
        assert client.get_sandbox(sbx.id).info.egress_rules == []
        with pytest.raises(InvalidArgumentError):
            sbx.update(egress_rules=[{"host": "example.com", "methods": ["get"]}])


def test_metrics_and_whoami(client):
    me = client.whoami()
    assert me.role == "admin" and me.superadmin and me.org and me.principal.startswith("key-")
    with client.create_sandbox() as sbx:
        m = sbx.metrics()
        assert m.memory_limit_bytes > 0 and m.pids >= 1
