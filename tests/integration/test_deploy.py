"""sandfortd behind a TLS-terminating reverse proxy: the configurations of examples/deploy/
(nginx, Caddy), run for real, and every client through them over https; and sandfortd
terminating TLS itself ("direct"), with the same clients and tests.

Each set-up is one value of the `deployment` fixture: for nginx and Caddy, a daemon configured
from examples/deploy/sandfort.json and the proxy started from its example file with the test's
values put in place of the placeholders (the example files are the only copy of the
configuration); for direct, a daemon with `tls.cert_file`/`tls.key_file` and no proxy (its API
and preview listeners speak https, on two ports). The certificate comes from a CA this module
makes with `openssl`, for api.sandfort.localhost and *.preview.sandfort.localhost. Clients verify
the chain against that CA and check the host name; nothing is ever run with verification off.

The host names resolve to 127.0.0.1 without touching the machine: inside this process through a
wrapper of socket.getaddrinfo (the TLS host name is still the real one), and for the CLI and
Node in a private mount namespace whose /etc/hosts is the test's (`unshare --mount`).

Run: SANDFORT_BUILD_DIR=$PWD/build /usr/bin/python3 -m pytest tests/integration/test_deploy.py -v
(root, Docker, nginx-light and caddy from Debian, node for the TypeScript SDK's dist/).
"""

import base64
import contextlib
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import NamedTuple

import pytest

from sandfort_harness import BUILD, REPO, Client, Daemon, free_port

sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
import sandfort_sdk  # noqa: E402

DEPLOY = os.path.join(REPO, "examples", "deploy")
CLI = os.path.join(BUILD, "cli", "sandfort")
TS_SDK = os.path.join(REPO, "sdk", "typescript", "dist", "esm", "index.js")
NGINX = "/usr/sbin/nginx"
CADDY = "/usr/bin/caddy"

API_HOST = "api.sandfort.localhost"
PREVIEW_DOMAIN = "preview.sandfort.localhost"
# Loopback addresses the test speaks from when the client's address matters: 127.0.0.1 is the
# proxies' own address, trusted by sandfortd (`trusted_proxies` of examples/deploy/sandfort.json).
PROXY_CLIENT = "127.0.0.5"   # the test, calling through the front (the proxy, or sandfortd's TLS)
DIRECT_CLIENT = "127.0.0.6"  # the test, calling sandfortd's own plain listener behind a proxy
FORGED = "203.0.113.9"       # what a client claims in X-Forwarded-For
BIG = 20 * 1024 * 1024       # an upload over max_body_bytes: file uploads are not capped by it


class Deployment(NamedTuple):
    """One set-up: what a client is given, and (after the first four) what the tests need."""
    base_url: str        # https://api.sandfort.localhost:PORT
    ca_file: str         # the CA that signed the front's certificate
    preview_suffix: str  # preview hosts are <port>-<sandbox id>.<preview_suffix>:<preview_port>
    port: int            # the front's HTTPS port of the API
    preview_port: int    # the front's HTTPS port of previews: `port` for a proxy; for direct,
                         # sandfortd's preview.listen
    admin_key: str       # the daemon's superadmin key
    daemon_url: str | None  # sandfortd's own plain listener, for requests that bypass the front;
                            # None for direct (there is no plain listener)
    name: str


# --- name resolution -------------------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def sandfort_localhost_names():
    """*.sandfort.localhost → 127.0.0.1 for this process (http.client, the Python SDK)."""
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if isinstance(host, str) and host.lower().endswith(".sandfort.localhost"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    socket.getaddrinfo = resolve
    yield
    socket.getaddrinfo = real


def run_with_hosts(args, names, workdir, **kwargs):
    """Runs args with `names` resolving to 127.0.0.1 through /etc/hosts, in a mount namespace of
    its own (the machine's /etc/hosts is not touched)."""
    hosts = os.path.join(workdir, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n::1 localhost ip6-localhost\n")
        f.write("".join(f"127.0.0.1 {n}\n" for n in names))
    wrapper = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /etc/hosts && exec "$@"', hosts]
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 300)
    return subprocess.run(wrapper + list(args), **kwargs)


# --- certificates ----------------------------------------------------------------------------

class Pki(NamedTuple):
    ca: str
    cert: str
    key: str


@pytest.fixture(scope="module")
def pki():
    d = tempfile.mkdtemp(prefix="sf-pki-")
    os.chmod(d, 0o755)  # nginx's workers (nobody) need not read it, but may traverse

    def openssl(*args):
        r = subprocess.run(["openssl", *args], cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=Sandfort deploy test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", f"/CN={API_HOST}")
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write(f"subjectAltName=DNS:{API_HOST},DNS:*.{PREVIEW_DOMAIN}\n"
                "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-out", "server.pem", "-extfile", "server.ext")
    os.chmod(os.path.join(d, "server.key"), 0o600)
    yield Pki(os.path.join(d, "ca.pem"), os.path.join(d, "server.pem"), os.path.join(d, "server.key"))
    shutil.rmtree(d, ignore_errors=True)


# --- the daemon ------------------------------------------------------------------------------

def example_daemon_config():
    with open(os.path.join(DEPLOY, "sandfort.json")) as f:
        return json.load(f)


def daemon_config(front_port):
    """examples/deploy/sandfort.json with the test's names and ports (listen, state_dir and
    preview.listen are the harness's own)."""
    example = example_daemon_config()
    preview = example["preview"]
    assert preview["domain"] == "preview.example.com"
    assert preview["url_template"] == "https://{port}-{id}.preview.example.com"
    cfg = {"max_body_bytes": example["max_body_bytes"],
           "audit": {"summary_interval_s": 1},  # auth failures are written within a second
           "preview": {"domain": PREVIEW_DOMAIN,
                       "url_template": preview["url_template"].replace(
                           "preview.example.com", f"{PREVIEW_DOMAIN}:{front_port}")}}
    cfg["trusted_proxies"] = example["trusted_proxies"]
    return cfg


def direct_daemon_config(pki):
    """sandfortd terminating TLS itself: the example's body cap, the test's preview domain, the
    test's certificate; no trusted_proxies (no proxy in front) and no preview.url_template (the
    preview URLs the API hands out are its default: https, the preview listener's port)."""
    return {"max_body_bytes": example_daemon_config()["max_body_bytes"],
            "audit": {"summary_interval_s": 1},
            "preview": {"domain": PREVIEW_DOMAIN},
            "tls": {"cert_file": pki.cert, "key_file": pki.key}}


class DirectDaemon(Daemon):
    """The harness's daemon, spoken to over https as API_HOST (the name the test's certificate
    carries; the harness's own TLS client names "localhost", which it does not)."""

    def client(self, key=None):
        return Client(self.port, key, ssl_context=self.ssl_context, host=API_HOST)


# --- the fronts ------------------------------------------------------------------------------

def wait_for_front(port, ca_file, proc, log_path, deadline_s=30):
    """Until https://API_HOST:port/healthz answers 200 through the front (TLS verified)."""
    deadline = time.time() + deadline_s
    last = None
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the front exited ({proc.returncode}):\n" + tail(log_path))
        try:
            r = request_https(f"https://{API_HOST}:{port}", None, "GET", "/healthz", ca_file=ca_file, timeout=5)
            if r.status == 200:
                return
            last = r
        except (OSError, http.client.HTTPException) as e:
            last = e
        time.sleep(0.1)
    raise RuntimeError(f"the front did not answer in time ({last!r}):\n" + tail(log_path))


def tail(path, n=4000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def render(text, substitutions):
    """Puts each value in place of its placeholder; every placeholder must be there."""
    for old, new in substitutions:
        assert old in text, f"placeholder {old!r} is not in the example any more"
        text = text.replace(old, new)
    return text


def config_lines(text):
    return [line.split("#", 1)[0] for line in text.splitlines() if line.split("#", 1)[0].strip()]


@contextlib.contextmanager
def nginx_front(pki, daemon, port):
    """examples/deploy/nginx/sandfort.conf, included from a minimal nginx.conf of the test's (its
    pid, logs and temp paths in a temp prefix; /etc/nginx is not read)."""
    d = tempfile.mkdtemp(prefix="sf-nginx-")
    os.chmod(d, 0o755)
    with open(os.path.join(DEPLOY, "nginx", "sandfort.conf")) as f:
        example = f.read()
    # The JSON body cap matches sandfortd's max_body_bytes (one source: examples/deploy/sandfort.json).
    caps = re.findall(r"^\s*client_max_body_size\s+(\d+)m;", example, re.M)
    assert caps and int(caps[0]) * 1024 * 1024 == example_daemon_config()["max_body_bytes"], caps
    conf = render(example, [
        ("sandfort.example.com", API_HOST),
        ("preview.example.com", PREVIEW_DOMAIN),
        ("/etc/ssl/sandfort/fullchain.pem", pki.cert),
        ("/etc/ssl/sandfort/privkey.pem", pki.key),
        ("127.0.0.1:8080", f"127.0.0.1:{daemon.port}"),
        ("127.0.0.1:8081", f"127.0.0.1:{daemon.preview_port}"),
        ("/var/log/nginx/sandfort-access.log", os.path.join(d, "sandfort-access.log")),
        ("listen [::]:443 ", f"listen [::1]:{port} "),
        ("listen 443 ", f"listen 127.0.0.1:{port} "),
    ])
    for line in config_lines(conf):
        assert not re.search(r"example\.com|\b443\b|:808[01]\b|/etc/|/var/", line), line
    with open(os.path.join(d, "sandfort.conf"), "w") as f:
        f.write(conf)
    temp = "\n".join(f"    {k}_temp_path {d}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(f"worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n"
                f"events {{ worker_connections 256; }}\n"
                f"http {{\n{temp}\n    access_log {d}/access.log;\n    include {d}/sandfort.conf;\n}}\n")
    args = [NGINX, "-p", d + "/", "-c", os.path.join(d, "nginx.conf"), "-e", os.path.join(d, "error.log")]
    check = subprocess.run(args + ["-t"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    log_path = os.path.join(d, "error.log")
    proc = subprocess.Popen(args + ["-g", "daemon off;"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_front(port, pki.ca, proc, log_path)
        yield log_path
    finally:
        proc.send_signal(signal.SIGQUIT)  # graceful
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def caddy_front(pki, daemon, port):
    """examples/deploy/caddy/Caddyfile as it is, its placeholders set in the environment; admin
    endpoint off, HOME and XDG directories in a temp directory, no certificate fetched."""
    d = tempfile.mkdtemp(prefix="sf-caddy-")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": d,
           "XDG_DATA_HOME": os.path.join(d, "data"), "XDG_CONFIG_HOME": os.path.join(d, "config"),
           "SANDFORT_API_HOST": API_HOST, "SANDFORT_PREVIEW_DOMAIN": PREVIEW_DOMAIN,
           "SANDFORT_TLS_CERT": pki.cert, "SANDFORT_TLS_KEY": pki.key,
           "SANDFORT_API_UPSTREAM": f"127.0.0.1:{daemon.port}",
           "SANDFORT_PREVIEW_UPSTREAM": f"127.0.0.1:{daemon.preview_port}",
           "SANDFORT_HTTPS_PORT": str(port), "SANDFORT_HTTP_PORT": str(free_port()),
           "SANDFORT_CADDY_ADMIN": "off"}
    caddyfile = os.path.join(DEPLOY, "caddy", "Caddyfile")
    with open(caddyfile) as f:
        text = f.read()
    for name in ("SANDFORT_API_HOST", "SANDFORT_PREVIEW_DOMAIN", "SANDFORT_TLS_CERT", "SANDFORT_TLS_KEY",
                 "SANDFORT_API_UPSTREAM", "SANDFORT_PREVIEW_UPSTREAM", "SANDFORT_HTTPS_PORT",
                 "SANDFORT_HTTP_PORT", "SANDFORT_CADDY_ADMIN"):
        assert "{$" + name + ":" in text, f"placeholder {name} is not in the Caddyfile any more"
    adapted = subprocess.run([CADDY, "adapt", "--config", caddyfile, "--adapter", "caddyfile"],
                             env=env, capture_output=True, text=True)
    assert adapted.returncode == 0, adapted.stderr
    for leftover in ("example.com", "/etc/caddy", "127.0.0.1:8080", "127.0.0.1:8081"):
        assert leftover not in adapted.stdout, leftover
    log_path = os.path.join(d, "caddy.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([CADDY, "run", "--config", caddyfile, "--adapter", "caddyfile"], env=env, cwd=d,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        wait_for_front(port, pki.ca, proc, log_path)
        yield log_path
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
        shutil.rmtree(d, ignore_errors=True)


# A set-up: a context manager (pki, daemon, front port) that serves https://API_HOST:port and the
# preview wildcard on that port until it exits. "direct" (sandfortd terminating TLS itself) has
# another daemon configuration and no front: `deployment` below makes it. The tests only use the
# Deployment it yields.
FRONTS = {"nginx": nginx_front, "caddy": caddy_front}
DIRECT = "direct"
SETUPS = sorted(FRONTS) + [DIRECT]


@pytest.fixture(scope="module", params=SETUPS)
def deployment(request, pki):
    """(https_base_url, ca_file, preview_host_suffix, port, …) of one set-up, up and answering."""
    if request.param == DIRECT:
        ctx = ssl.create_default_context(cafile=pki.ca)
        daemon = DirectDaemon(direct_daemon_config(pki), ssl_context=ctx)
    else:
        port = free_port()
        daemon = Daemon(daemon_config(port))
    try:
        daemon.start()  # with TLS: /healthz and /readyz answered over https, the certificate verified
    except BaseException:
        daemon.cleanup()
        raise
    try:
        if request.param == DIRECT:
            yield Deployment(f"https://{API_HOST}:{daemon.port}", pki.ca, PREVIEW_DOMAIN, daemon.port,
                             daemon.preview_port, daemon.admin_key, None, request.param)
        else:
            with FRONTS[request.param](pki, daemon, port):
                yield Deployment(f"https://{API_HOST}:{port}", pki.ca, PREVIEW_DOMAIN, port, port,
                                 daemon.admin_key, f"http://127.0.0.1:{daemon.port}", request.param)
    finally:
        daemon.stop_and_cleanup()


# --- https helpers ---------------------------------------------------------------------------

class Answer(NamedTuple):
    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


def request_https(base_url, key, method, path, *, body=None, raw=None, headers=None, source=None,
                  ca_file=None, timeout=120):
    """One request to base_url (http or https; https verified against ca_file, host name checked),
    from the local address `source` when given."""
    u = urllib.parse.urlsplit(base_url)
    h = dict(headers or {})
    if key:
        h["Authorization"] = "Bearer " + key
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    src = (source, 0) if source else None
    if u.scheme == "https":
        ctx = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
        conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=ctx, source_address=src)
    else:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout, source_address=src)
    try:
        conn.request(method, u.path.rstrip("/") + path, body=data, headers=h)
        r = conn.getresponse()
        return Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def api(dep, key, method, path, **kw):
    return request_https(dep.base_url, key, method, path, ca_file=dep.ca_file, **kw)


class Keys(NamedTuple):
    admin: str
    member: str


@pytest.fixture(scope="module")
def keys(deployment):
    """An organization of the set-up's daemon with an admin and a member key, made through the front."""
    r = api(deployment, deployment.admin_key, "POST", "/v1/orgs", body={"name": "deploy"})
    assert r.status == 201, r
    org = r.json()["id"]
    made = {}
    for role in ("admin", "member"):
        r = api(deployment, deployment.admin_key, "POST", f"/v1/orgs/{org}/api-keys",
                body={"name": f"deploy-{role}", "role": role})
        assert r.status == 201, r
        made[role] = r.json()["key"]
    return Keys(**made)


@pytest.fixture
def sdk_client(deployment, keys, monkeypatch):
    """The Python SDK as a user has it: the CA through SSL_CERT_FILE (its ssl default context)."""
    monkeypatch.setenv("SSL_CERT_FILE", deployment.ca_file)
    return sandfort_sdk.Client(deployment.base_url, keys.member, timeout=120)


# --- 1. the CLI ------------------------------------------------------------------------------

def cli_env(home, ca_file):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
           "XDG_CONFIG_HOME": os.path.join(home, "config")}
    if ca_file:
        env["SSL_CERT_FILE"] = ca_file
    return env


def test_cli_login_create_exec_cp_rm(deployment, keys, tmp_path):
    home = str(tmp_path)
    env = cli_env(home, deployment.ca_file)

    def cli(*args, **kw):
        return run_with_hosts([CLI, *args], [API_HOST], home, env=env, **kw)

    r = cli("login", "--url", deployment.base_url, "--api-key-stdin", input=keys.member + "\n")
    assert r.returncode == 0, r
    with open(os.path.join(home, "config", "sandfort", "config.json")) as f:
        assert json.load(f)["base_url"] == deployment.base_url

    r = cli("sandbox", "create", "--wait")
    assert r.returncode == 0, r
    sbx = r.stdout.strip()
    assert re.fullmatch(r"sbx-[0-9a-f]{16}", sbx), r
    try:
        # exec streams its output (SSE through the front) and passes the exit status on.
        r = cli("exec", sbx, "--", "sh", "-c", "echo out-$((6*7)); echo err >&2; exit 3")
        assert (r.returncode, r.stdout, r.stderr.strip()) == (3, "out-42\n", "err"), r

        # A file over max_body_bytes: uploads stream and are not capped by it, at the front either.
        big = os.path.join(home, "big.bin")
        with open(big, "wb") as f:
            f.write(os.urandom(BIG))
        r = cli("cp", big, f"{sbx}:/tmp/big.bin")
        assert r.returncode == 0, r
        back = os.path.join(home, "back.bin")
        r = cli("cp", f"{sbx}:/tmp/big.bin", back)
        assert r.returncode == 0, r
        assert sha256_file(back) == sha256_file(big)
    finally:
        r = cli("sandbox", "rm", sbx)
    assert r.returncode == 0, r
    assert api(deployment, keys.member, "GET", f"/v1/sandboxes/{sbx}").status == 404


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def test_clients_verify_the_front(deployment, keys, tmp_path):
    """Without the test's CA the front is refused: the chain is checked, nothing is trusted blindly."""
    home = str(tmp_path)
    r = run_with_hosts([CLI, "login", "--url", deployment.base_url, "--api-key-stdin"], [API_HOST], home,
                       env=cli_env(home, None), input=keys.member)
    assert r.returncode != 0 and "certificate" in (r.stderr + r.stdout).lower(), r
    with pytest.raises(ssl.SSLCertVerificationError):
        request_https(deployment.base_url, keys.member, "GET", "/v1/whoami")
    # The right CA, a name the certificate does not carry (the address itself): refused, by the
    # front's handshake or by the client's name check.
    with pytest.raises(ssl.SSLError):
        ctx = ssl.create_default_context(cafile=deployment.ca_file)
        with socket.create_connection(("127.0.0.1", deployment.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass
    assert api(deployment, keys.member, "GET", "/v1/whoami").status == 200


# --- 2. the Python SDK -----------------------------------------------------------------------

def test_python_sdk(deployment, sdk_client):
    sbx = sdk_client.create_sandbox()
    try:
        assert sbx.state == "started"
        r = sbx.process.exec("echo py-$((6*7)); echo oops >&2; exit 3")
        assert (r.exit_code, r.stdout, r.stderr) == (3, "py-42\n", "oops\n")

        data = os.urandom(BIG)
        up = sbx.fs.upload_file("/tmp/big.bin", data)
        assert up.size == BIG
        assert sbx.fs.download_file("/tmp/big.bin") == data

        # Streamed exec: each event arrives when it happens, not when the command ends.
        started = time.monotonic()
        seen = []
        for ev in sbx.process.exec_stream("echo first; sleep 3; echo second"):
            seen.append((ev.type, ev.data, time.monotonic() - started))
        kinds = [t for t, _, _ in seen]
        assert kinds[-1] == "exit" and "".join(d for t, d, _ in seen if t == "stdout") == "first\nsecond\n", seen
        first = next(at for t, d, at in seen if t == "stdout" and "first" in d)
        assert seen[-1][2] - first >= 2.0, f"events were held back by the front: {seen}"
    finally:
        sbx.delete()


def test_json_body_over_max_body_bytes_is_413(deployment, keys):
    """A JSON body over sandfortd's max_body_bytes is refused with 413 (by the front or by
    sandfortd, from the Content-Length, maybe before the body is sent: the answer is read even
    when sending the rest fails)."""
    limit = example_daemon_config()["max_body_bytes"]
    body = b'{"name": "' + b"x" * limit + b'"}'
    u = urllib.parse.urlsplit(deployment.base_url)
    ctx = ssl.create_default_context(cafile=deployment.ca_file)
    with ctx.wrap_socket(socket.create_connection((u.hostname, u.port), timeout=60),
                         server_hostname=u.hostname) as sock:
        sock.sendall(f"POST /v1/sandboxes HTTP/1.1\r\nHost: {u.netloc}\r\nAuthorization: Bearer {keys.member}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        try:
            sock.sendall(body)
        except OSError:
            pass
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        assert answer.status == 413, (answer.status, answer.read(300))


# --- 3. the TypeScript SDK -------------------------------------------------------------------

NODE_SCRIPT = r"""
const { Sandbox } = await import(process.env.SANDFORT_TS_SDK_URL);
const out = {};
const sbx = await Sandbox.create({ baseUrl: process.env.SANDFORT_BASE_URL, apiKey: process.env.SANDFORT_API_KEY });
try {
  out.state = sbx.state;
  const r = await sbx.commands.run("echo node-$((6*7)); echo warn >&2; exit 4");
  out.exec = { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr };
  await sbx.files.write("/tmp/ts.txt", "written by node");
  out.read = await sbx.files.read("/tmp/ts.txt");
  out.events = [];
  for await (const ev of sbx.commands.stream("echo one; sleep 1; echo two")) out.events.push(ev.type);
  const chunks = [];
  const term = await sbx.pty.connect({ onData: (d) => chunks.push(Buffer.from(d)) });
  term.write("echo pty-$((6*7)); exit 5\n");
  out.ptyExit = await term.exited;
  out.pty = Buffer.concat(chunks).toString();
} finally {
  out.killed = await sbx.kill();
}
console.log(JSON.stringify(out));
"""


def test_typescript_sdk(deployment, keys, tmp_path):
    if not os.path.exists(TS_SDK):
        pytest.fail(f"{TS_SDK} is missing: cd sdk/typescript && npm ci")
    script = tmp_path / "deploy_check.mjs"
    script.write_text(NODE_SCRIPT)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "NODE_EXTRA_CA_CERTS": deployment.ca_file, "SANDFORT_BASE_URL": deployment.base_url,
           "SANDFORT_API_KEY": keys.member, "SANDFORT_TS_SDK_URL": "file://" + TS_SDK}
    r = run_with_hosts([shutil.which("node") or "node", str(script)], [API_HOST], str(tmp_path), env=env)
    assert r.returncode == 0, r
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["state"] == "started"
    assert out["exec"] == {"exitCode": 4, "stdout": "node-42\n", "stderr": "warn\n"}
    assert out["read"] == "written by node"
    assert out["events"][-1] == "exit" and out["events"].count("stdout") >= 1, out
    assert out["ptyExit"] == 5 and "pty-42" in out["pty"], out
    assert out["killed"] is True


# --- 4. a WebSocket: the terminal ------------------------------------------------------------

def test_pty_websocket(deployment, sdk_client):
    sbx = sdk_client.create_sandbox()
    try:
        with sbx.pty(cols=100, rows=30) as term:
            term.send("echo pty-$((6*7))\n")
            assert b"pty-42" in term.read_until(b"pty-42", timeout=30)
            term.send("exit 3\n")
            assert term.wait(timeout=30) == 3
    finally:
        sbx.delete()


# --- 5. previews through the wildcard host ---------------------------------------------------

# A web app for the sandbox (standard library): GET answers with the headers it was given; a
# WebSocket upgrade is answered and every text frame echoed back.
PREVIEW_APP = r'''
import base64, hashlib, http.server, json, struct

class App(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket()
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            op, n = head[0] & 15, head[1] & 127
            if n == 126:
                n = struct.unpack("!H", self.rfile.read(2))[0]
            mask = self.rfile.read(4) if head[1] & 128 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                self.wfile.write(b"\x88\x00")
                self.wfile.flush()
                return
            reply = b"echo:" + data
            self.wfile.write(bytes([0x81, len(reply)]) + reply)
            self.wfile.flush()

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("0.0.0.0", 8000), App).serve_forever()
'''


def preview_get(deployment, host, target, headers=None):
    ctx = ssl.create_default_context(cafile=deployment.ca_file)
    conn = http.client.HTTPSConnection(host, deployment.preview_port, timeout=30, context=ctx)
    try:
        conn.request("GET", target, headers=headers or {})
        r = conn.getresponse()
        return Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def websocket_echo(deployment, host, target, headers, message):
    """Opens a WebSocket through the front (TLS verified), sends one text frame, returns the reply."""
    ctx = ssl.create_default_context(cafile=deployment.ca_file)
    raw = socket.create_connection((host, deployment.preview_port), timeout=30)
    with ctx.wrap_socket(raw, server_hostname=host) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        head = (f"GET {target} HTTP/1.1\r\nHost: {host}:{deployment.preview_port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n")
        sock.sendall(head.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            assert chunk, f"closed during the handshake: {data!r}"
            data += chunk
        answer, rest = data.split(b"\r\n\r\n", 1)
        lines = answer.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1.1 101"), answer
        fields = {name.strip().lower(): value.strip() for name, _, value in (ln.partition(":") for ln in lines[1:])}
        expect = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        assert fields.get("sec-websocket-accept") == expect.decode(), answer
        payload = message.encode()
        mask = os.urandom(4)
        sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        while len(rest) < 2 or len(rest) < 2 + (rest[1] & 127):
            chunk = sock.recv(4096)
            assert chunk, f"closed before the echo: {rest!r}"
            rest += chunk
        assert rest[0] == 0x81, rest
        reply = rest[2:2 + (rest[1] & 127)].decode()
        sock.sendall(bytes([0x88, 0x80]) + mask)
        return reply


def test_preview_through_the_wildcard_host(deployment, sdk_client):
    sbx = sdk_client.create_sandbox()
    try:
        sbx.fs.upload_file("/tmp/app.py", PREVIEW_APP)
        sbx.process.start("python3 /tmp/app.py")
        link = sbx.preview_link(8000)
        host = f"8000-{sbx.id}.{deployment.preview_suffix}"
        # Behind a proxy, preview.url_template (examples/deploy/sandfort.json) names the front,
        # not the listener; direct, sandfortd's default names its own TLS preview listener.
        assert link.url.rstrip("/") == f"https://{host}:{deployment.preview_port}", link
        assert link.token

        deadline = time.time() + 30
        while True:
            r = preview_get(deployment, host, "/hello", link.headers)
            if r.status == 200 or time.time() > deadline:
                break
            time.sleep(0.3)  # 502 until the app listens
        assert r.status == 200, r
        seen = r.json()
        assert seen["host"].split(":")[0] == host, seen
        assert seen["x-forwarded-host"].split(":")[0] == host, seen
        assert "x-sandfort-preview-token" not in seen, seen

        # No token: sandfortd's preview router refuses (the front, if any, passed the request to it).
        r = preview_get(deployment, host, "/hello")
        assert r.status == 401, r
        # The link form, as printed: the app answers at once and the token becomes a host-only cookie.
        assert link.link == f"{link.url.rstrip('/')}/?sandfort_token={link.token}", link
        r = preview_get(deployment, host, f"/hello?sandfort_token={link.token}")
        assert r.status == 200 and r.headers["referrer-policy"] == "no-referrer", r
        cookie = r.headers["set-cookie"]
        assert cookie.startswith("sandfort_preview_token="), r
        # Secure when sandfortd serves previews over TLS itself; behind a front it cannot tell.
        assert ("; Secure" in cookie) == (deployment.name == DIRECT), cookie
        # A browser opening it in a tab: redirected to the same host, without the token.
        r = preview_get(deployment, host, f"/hello?sandfort_token={link.token}",
                        {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"})
        assert r.status == 302 and r.headers["location"] == "/hello", r
        # A WebSocket to the app, through the front and the preview router.
        assert websocket_echo(deployment, host, "/ws", link.headers, "ping") == "echo:ping"
    finally:
        sbx.delete()
    r = preview_get(deployment, host, "/hello", link.headers)
    assert r.status == 404, r


# --- 6. X-Forwarded-For ----------------------------------------------------------------------

def audit_event(deployment, key, request_id, action):
    """The audit event of one request (by its X-Request-Id), read through the front."""
    deadline = time.time() + 15
    while True:
        r = api(deployment, key, "GET", f"/v1/audit?action={action}&limit=1000")
        assert r.status == 200, r
        found = [e for e in r.json()["items"] if e.get("request_id") == request_id]
        if found or time.time() > deadline:
            break
        time.sleep(0.2)
    assert found, f"no {action} event for {request_id}"
    return found[0]


def test_forwarded_for_is_the_client_the_front_saw(deployment, keys):
    """Through the front, sandfortd records the address the front saw, never the client's claim.
    The test calls from 127.0.0.5 and claims 203.0.113.9: nginx passes `203.0.113.9, 127.0.0.5`
    (it appends the peer), Caddy `127.0.0.5` (it drops an untrusted client's header); sandfortd,
    trusting only 127.0.0.1 (the front), takes the right-most address that is not a trusted proxy:
    127.0.0.5 both times. Without trusted_proxies it would record the front, 127.0.0.1.
    Direct, sandfortd's own TLS front hands on the TCP peer, 127.0.0.5 (not the loopback address
    its relay comes from), and with no trusted_proxies the claim is not believed."""
    r = api(deployment, keys.admin, "POST", "/v1/api-keys", body={"name": "via-front", "role": "viewer"},
            headers={"X-Forwarded-For": FORGED}, source=PROXY_CLIENT)
    assert r.status == 201, r
    event = audit_event(deployment, keys.admin, r.headers["x-request-id"], "api_key.create")
    assert event["source"] == PROXY_CLIENT, event


def test_auth_failures_are_counted_for_the_client_behind_the_front(deployment):
    """A refused key through the front is counted for the client's address (the superadmin
    organization's `auth.failures` events, written every audit.summary_interval_s = 1 s here),
    not for the address it claims."""
    r = api(deployment, "sfk_not_a_real_key", "GET", "/v1/whoami",
            headers={"X-Forwarded-For": FORGED}, source=PROXY_CLIENT)
    assert r.status == 401, r
    deadline = time.time() + 15
    sources = []
    while time.time() < deadline:
        a = api(deployment, deployment.admin_key, "GET", "/v1/audit?action=auth.failures&limit=1000")
        assert a.status == 200, a
        sources = [e["source"] for e in a.json()["items"]]
        if PROXY_CLIENT in sources or "127.0.0.1" in sources:
            break
        time.sleep(0.3)
    assert PROXY_CLIENT in sources and FORGED not in sources, sources


def test_forged_forwarded_for_from_an_untrusted_peer_is_ignored(deployment, keys):
    """Straight to sandfortd's own listener from an address that is no trusted proxy: the claim
    in X-Forwarded-For is not believed; the TCP peer is recorded."""
    if deployment.daemon_url is None:
        pytest.skip(f"{deployment.name}: sandfortd has no plain listener to bypass its TLS front with; "
                    "the forged claim from an untrusted peer is checked through the front "
                    "(test_forwarded_for_is_the_client_the_front_saw)")
    r = request_https(deployment.daemon_url, keys.admin, "POST", "/v1/api-keys",
                      body={"name": "direct", "role": "viewer"}, headers={"X-Forwarded-For": FORGED},
                      source=DIRECT_CLIENT, ca_file=deployment.ca_file)
    assert r.status == 201, r
    event = audit_event(deployment, keys.admin, r.headers["x-request-id"], "api_key.create")
    assert event["source"] == DIRECT_CLIENT, event
