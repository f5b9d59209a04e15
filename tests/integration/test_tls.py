"""sandfortd terminating TLS itself (`tls.cert_file` / `tls.key_file`): a certificate from a CA the
test makes, verified by the client for real; TLS 1.2 and 1.3 only; plain HTTP on the TLS port gets
nothing; streamed exec and a sandbox's whole life over TLS; the client address behind the TLS front
is the client's; SIGHUP reloads the certificate without dropping connections, and a bad file keeps
the old one."""

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import pytest

from sandfort_harness import Daemon, read_sse


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=Sandfort test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=directory)
    return os.path.join(directory, "ca.pem")


def issue(directory, name, common_name):
    """A server certificate for localhost and 127.0.0.1, signed by the test CA."""
    with open(os.path.join(directory, f"{name}.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={common_name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=directory)
    return os.path.join(directory, f"{name}.pem"), os.path.join(directory, f"{name}.key")


def peer_common_name(port, ca):
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            subject = dict(x[0] for x in tls.getpeercert()["subject"])
            return subject["commonName"]


@pytest.fixture(scope="module")
def pki():
    directory = tempfile.mkdtemp(prefix="sf-tls-")
    ca = make_ca(directory)
    cert, key = issue(directory, "server", "sandfort-one")
    # The daemon reads these paths; the reload test writes new contents into them.
    live_cert, live_key = os.path.join(directory, "live.pem"), os.path.join(directory, "live.key")
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    yield {"dir": directory, "ca": ca, "cert": live_cert, "key": live_key}
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_daemon(pki):
    ctx = ssl.create_default_context(cafile=pki["ca"])
    d = Daemon({"tls": {"cert_file": pki["cert"], "key_file": pki["key"]}}, ssl_context=ctx).start()
    yield d
    assert d.stop() == 0, d.log()
    d.cleanup()


def test_https_with_a_verified_certificate(tls_daemon, pki):
    health = tls_daemon.client().get("/healthz")
    assert health.status == 200 and health.json()["status"] == "ok"
    # The certificate is really checked: without the test CA the client refuses it.
    conn = http.client.HTTPSConnection("localhost", tls_daemon.port, timeout=10, context=ssl.create_default_context())
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/healthz")
    # And it names the host it is for.
    strict = ssl.create_default_context(cafile=pki["ca"])
    with socket.create_connection(("127.0.0.1", tls_daemon.port), timeout=10) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            strict.wrap_socket(raw, server_hostname="sandfort.example.com")
    assert "TLS" in tls_daemon.log() and "sandfort-one" in tls_daemon.log()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_tls_1_2_and_1_3_are_served(tls_daemon, pki, version):
    ctx = ssl.create_default_context(cafile=pki["ca"])
    ctx.minimum_version = ctx.maximum_version = version
    with socket.create_connection(("127.0.0.1", tls_daemon.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_older_tls_is_refused_by_the_server(tls_daemon, pki, version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki["ca"])
    # Let this client offer the old version at all (OpenSSL 3's own floor), so the refusal seen
    # is the server's: a protocol_version alert.
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version = ctx.maximum_version = version
    with socket.create_connection(("127.0.0.1", tls_daemon.port), timeout=10) as raw:
        with pytest.raises(ssl.SSLError) as refused:
            ctx.wrap_socket(raw, server_hostname="localhost")
    assert "PROTOCOL_VERSION" in str(refused.value).upper() or "UNSUPPORTED_PROTOCOL" in str(refused.value).upper(), \
        refused.value
    assert tls_daemon.client().get("/healthz").status == 200


def test_plain_http_on_the_tls_port_gets_no_answer(tls_daemon):
    with socket.create_connection(("127.0.0.1", tls_daemon.port), timeout=15) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        try:
            answer = s.recv(4096)
        except ConnectionResetError:
            answer = b""
    assert b"HTTP/1.1" not in answer and b"ok" not in answer


def test_a_sandbox_and_a_streamed_exec_over_tls(tls_daemon):
    admin = tls_daemon.admin()
    sbx = admin.create_sandbox(name="over-tls")
    try:
        assert admin.exec(sbx["id"], argv=["echo", "secure"])["stdout"] == "secure\n"
        conn = admin.connection()
        conn.request("POST", f"/v1/sandboxes/{sbx['id']}/process/exec",
                     body=json.dumps({"command": "for i in 1 2 3; do echo line$i; sleep 0.2; done"}),
                     headers={"Authorization": "Bearer " + admin.key, "Accept": "text/event-stream",
                              "Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream")
        events = read_sse(r.read())
        conn.close()
        out = "".join(data["data"] for event, data in events if event == "stdout")
        assert out == "line1\nline2\nline3\n"
        assert [data["exit_code"] for event, data in events if event == "exit"] == [0]
        # A body larger than one relay buffer, both ways.
        blob = os.urandom(3 * 1024 * 1024)
        up = admin.request("PUT", f"/v1/sandboxes/{sbx['id']}/files?path=/tmp/blob", raw=blob,
                           headers={"Content-Type": "application/octet-stream"})
        assert up.status in (200, 201, 204), up
        down = admin.get(f"/v1/sandboxes/{sbx['id']}/files?path=/tmp/blob")
        assert down.status == 200 and down.body == blob
    finally:
        admin.delete(f"/v1/sandboxes/{sbx['id']}")


def test_the_client_address_is_the_clients_not_the_fronts(tls_daemon):
    # The TLS front reaches the API listener from 127.0.0.1; this client comes from 127.0.0.2.
    admin = tls_daemon.admin()
    admin.source_address = ("127.0.0.2", 0)
    created = admin.post("/v1/orgs", {"name": "from-127-0-0-2"})
    assert created.status == 201, created
    # A forged X-Forwarded-For is not believed (no trusted proxies are configured).
    forged = admin.post("/v1/orgs", {"name": "forged-xff"}, headers={"X-Forwarded-For": "203.0.113.9"})
    assert forged.status == 201, forged
    events = tls_daemon.admin().get("/v1/audit?limit=500").json()["items"]
    sources = {e["details"].get("name", e["target"]): e["source"] for e in events if e["action"] == "org.create"}
    assert sources.get("from-127-0-0-2") == "127.0.0.2", events[-3:]
    assert sources.get("forged-xff") == "127.0.0.2"


def test_sighup_reloads_the_certificate_and_keeps_connections(tls_daemon, pki):
    assert peer_common_name(tls_daemon.port, pki["ca"]) == "sandfort-one"
    # A kept-alive connection opened before the reload.
    kept = tls_daemon.client().connection()
    kept.request("GET", "/healthz")
    assert kept.getresponse().read()

    cert, key = issue(pki["dir"], "renewed", "sandfort-two")
    shutil.copy(key, pki["key"])
    shutil.copy(cert, pki["cert"])
    tls_daemon.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while peer_common_name(tls_daemon.port, pki["ca"]) != "sandfort-two":
        assert time.time() < deadline, tls_daemon.log()
        time.sleep(0.1)
    kept.request("GET", "/healthz")
    assert kept.getresponse().status == 200
    kept.close()

    # A broken file: the daemon says so and keeps serving the certificate it has.
    with open(pki["key"], "w") as f:
        f.write("not a key\n")
    tls_daemon.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "still serving the previous certificate" not in tls_daemon.log():
        assert time.time() < deadline, tls_daemon.log()
        time.sleep(0.1)
    assert peer_common_name(tls_daemon.port, pki["ca"]) == "sandfort-two"
    assert tls_daemon.client().get("/healthz").status == 200
    shutil.copy(key, pki["key"])


def test_tls_needs_both_files():
    d = Daemon()
    try:
        d.config["tls"] = {"cert_file": "/nonexistent.pem"}
        with open(d.config_path, "w") as f:
            json.dump(d.config, f)
        with pytest.raises(RuntimeError) as failed:
            d.start()
        assert "tls.cert_file and tls.key_file go together" in str(failed.value)
    finally:
        d.cleanup()
