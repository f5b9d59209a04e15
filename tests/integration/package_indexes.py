"""Real package indexes on this machine, for the package-manager tests (test_package_managers.py):
- a PEP 503 simple index serving a pure-Python wheel built here (`SimpleIndex`), over plain http or
  over https with a certificate from a test CA (`MirrorCA`), and the same for npm
  (`StaticNpmRegistry`: a package document and its tarball);
- a real npm registry: verdaccio from tests/verdaccio (`npm ci` there; scripts/setup does it), run
  offline (no uplinks), with a package published to it by `npm publish` as a throwaway user
  (`NpmRegistry`);
- a Debian repository made with `dpkg-deb --build` and `dpkg-scanpackages` (`DebRepository`).

Sandboxes reach them the way they reach pypi.org: by a host name, through their egress proxy.
The name is this machine's own host name, which resolves to one of its addresses (Debian's
/etc/hosts maps it to 127.0.1.1): `index_host()`. `localhost` would not do: it is in every
sandbox's NO_PROXY, so tools rightly go straight to the sandbox's own loopback with it.
Standard library only."""

import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERDACCIO_DIR = os.path.join(REPO, "tests", "verdaccio")


class SetupError(Exception):
    """A prerequisite of the package indexes is missing on this machine."""


def index_host():
    """(name, address): this machine's host name and the IPv4 address the proxy will dial for it."""
    name = socket.gethostname()
    try:
        found = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise SetupError(f"this machine's host name {name!r} does not resolve ({e}); the package-manager "
                         "tests reach their servers by it (add it to /etc/hosts, as Debian does)") from e
    if name == "localhost" or not found:
        raise SetupError(f"this machine's host name {name!r} cannot name the test servers")
    return name, found[0][4][0]


class StaticServer:
    """An HTTP(S) server on `address` answering GET and HEAD from a dict of path → bytes (404
    otherwise), recording the (method, path without its query, headers) of every request."""

    def __init__(self, address, files, ssl_context=None, json_paths=()):
        outer = self
        self.files = files
        self.json_paths = set(json_paths)
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self, with_body):
                # apt asks for "/./Packages.gz" in a flat repository.
                path = self.path.split("?", 1)[0].replace("/./", "/")
                outer.requests.append((self.command, path, dict(self.headers)))
                body = outer.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                kind = "application/json" if path in outer.json_paths else \
                    "text/html" if path.endswith("/") else "application/octet-stream"
                self.send_header("Content-Type", kind)
                self.end_headers()
                if with_body:
                    self.wfile.write(body)

            def do_GET(self):
                self.answer(True)

            def do_HEAD(self):
                self.answer(False)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((address, 0), Handler)
        if ssl_context is not None:
            self.server.socket = ssl_context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def paths(self):
        return [path for _, path, _ in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# --- PyPI: a PEP 503 simple index -------------------------------------------------------------


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(project, version, module, source):
    """A pure-Python wheel written as a zip by hand (PEP 427: the module, METADATA, WHEEL and
    RECORD): (file name, bytes)."""
    dist = project.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    entries = {
        f"{module}/__init__.py": source.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: sandfort-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in entries.items())
    entries[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in entries.items():
            z.writestr(path, data)
    return f"{dist}-{version}-py3-none-any.whl", out.getvalue()


class SimpleIndex(StaticServer):
    """/simple/ and /simple/<project>/ (PEP 503) linking to /files/<wheel>#sha256=…"""

    def __init__(self, address, project, version, module, source, ssl_context=None):
        wheel, data = build_wheel(project, version, module, source)
        digest = hashlib.sha256(data).hexdigest()
        page = "<!DOCTYPE html><html><body>{}</body></html>\n"
        files = {
            "/simple/": page.format(f'<a href="{project}/">{project}</a>').encode(),
            f"/simple/{project}/": page.format(f'<a href="../../files/{wheel}#sha256={digest}">{wheel}</a>').encode(),
            f"/files/{wheel}": data,
        }
        self.wheel = wheel
        super().__init__(address, files, ssl_context)


# --- TLS: a test CA and a server certificate ---------------------------------------------------


class MirrorCA:
    """A throwaway CA (in a temporary directory) and a server certificate it signs for `name`."""

    def __init__(self, name):
        self.dir = tempfile.mkdtemp(prefix="sf-ca-")

        def openssl(*args):
            r = subprocess.run(["openssl", *args], cwd=self.dir, capture_output=True, text=True)
            assert r.returncode == 0, r.stderr

        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=Sandfort test mirror CA", "-keyout", "ca.key", "-out", "ca.pem")
        with open(os.path.join(self.dir, "server.ext"), "w") as f:
            f.write(f"subjectAltName=DNS:{name}\nextendedKeyUsage=serverAuth\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                "-keyout", "server.key", "-out", "server.csr")
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "server.ext", "-out", "server.pem")
        with open(os.path.join(self.dir, "ca.pem")) as f:
            self.pem = f.read()

    def server_context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(self.dir, "server.pem"), os.path.join(self.dir, "server.key"))
        return ctx

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


# --- Debian: a flat repository ------------------------------------------------------------------


class DebRepository(StaticServer):
    """A flat repository (`deb [trusted=yes] http://HOST:PORT/ ./`) holding one package built
    with `dpkg-deb --build`, indexed by `dpkg-scanpackages`, with a Release file naming the index
    (so apt asks for Packages.gz and nothing else)."""

    def __init__(self, address, package, version, command, output):
        for tool in ("dpkg-deb", "dpkg-scanpackages"):
            if shutil.which(tool) is None:
                raise SetupError(f"{tool} is not installed (Debian's dpkg-dev; scripts/setup installs it)")
        work = tempfile.mkdtemp(prefix="sf-deb-")
        try:
            root = os.path.join(work, "root")
            os.makedirs(os.path.join(root, "DEBIAN"))
            os.makedirs(os.path.join(root, "usr", "bin"))
            with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
                f.write(f"Package: {package}\nVersion: {version}\nArchitecture: all\n"
                        "Maintainer: Sandfort tests <tests@sandfort.invalid>\n"
                        "Description: a package of the package-manager tests\n")
            script = os.path.join(root, "usr", "bin", command)
            with open(script, "w") as f:
                f.write(f"#!/bin/sh\necho '{output}'\n")
            os.chmod(script, 0o755)
            repo = os.path.join(work, "repo")
            os.makedirs(repo)
            deb = f"{package}_{version}_all.deb"
            subprocess.run(["dpkg-deb", "--root-owner-group", "--build", root, os.path.join(repo, deb)],
                           check=True, capture_output=True)
            scanned = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=repo,
                                     check=True, capture_output=True)
            with open(os.path.join(repo, deb), "rb") as f:
                deb_bytes = f.read()
        finally:
            shutil.rmtree(work, ignore_errors=True)
        packages = scanned.stdout
        packages_gz = gzip.compress(packages, mtime=0)
        date = time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime())
        release = f"Origin: sandfort-tests\nLabel: sandfort-tests\nDate: {date}\nSHA256:\n" + "".join(
            f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}\n"
            for name, data in (("Packages", packages), ("Packages.gz", packages_gz)))
        self.deb = deb
        super().__init__(address, {"/Release": release.encode(), "/Packages": packages,
                                   "/Packages.gz": packages_gz, "/" + deb: deb_bytes})


# --- npm: verdaccio, and a registry as files ----------------------------------------------------


def build_npm_tarball(name, version, source):
    """An npm package tarball (package/package.json, package/index.js): bytes."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, data in (("package/package.json", json.dumps({"name": name, "version": version,
                                                                "main": "index.js", "license": "MIT"}).encode()),
                           ("package/index.js", source.encode())):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


class StaticNpmRegistry(StaticServer):
    """What `npm install NAME` reads from a registry, as files: the package document at /NAME and
    the tarball it links to, by `host_name` (for a mirror over https, where verdaccio would need a
    TLS set-up of its own)."""

    def __init__(self, address, host_name, name, version, source, ssl_context=None):
        tarball = build_npm_tarball(name, version, source)
        tarball_path = f"/{name}/-/{name}-{version}.tgz"
        super().__init__(address, {tarball_path: tarball}, ssl_context, json_paths=[f"/{name}"])
        scheme = "http" if ssl_context is None else "https"
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
        document = {"name": name, "dist-tags": {"latest": version},
                    "versions": {version: {"name": name, "version": version, "main": "index.js",
                                           "dist": {"tarball": f"{scheme}://{host_name}:{self.port}{tarball_path}",
                                                    "shasum": hashlib.sha1(tarball).hexdigest(),
                                                    "integrity": integrity}}}}
        self.files[f"/{name}"] = json.dumps(document).encode()
        self.tarball_path = tarball_path


VERDACCIO_CONFIG = """\
storage: {storage}
auth:
  htpasswd:
    file: {htpasswd}
    max_users: 1
uplinks: {{}}
packages:
  '**':
    access: $all
    publish: $authenticated
    unpublish: $authenticated
log: {{ type: stdout, format: pretty, level: warn }}
"""


def _free_port(address):
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


class NpmRegistry:
    """verdaccio on address:port, offline (no uplinks: a package it does not hold is a 404), in a
    temporary directory. `publish(name, version, source)` publishes a package with the host's npm
    as a throwaway user."""

    def __init__(self, address):
        self.address = address
        self.node = shutil.which("node")
        self.npm = shutil.which("npm")
        main = os.path.join(VERDACCIO_DIR, "node_modules", "verdaccio", "bin", "verdaccio")
        if not self.node or not self.npm:
            raise SetupError("node and npm are not installed; the npm registry test needs them")
        if not os.path.isfile(main):
            raise SetupError(f"{VERDACCIO_DIR}/node_modules has no verdaccio: run `npm ci` there "
                             "(scripts/setup does it)")
        self.dir = tempfile.mkdtemp(prefix="sf-npm-")
        config = os.path.join(self.dir, "config.yaml")
        with open(config, "w") as f:
            f.write(VERDACCIO_CONFIG.format(storage=os.path.join(self.dir, "storage"),
                                            htpasswd=os.path.join(self.dir, "htpasswd")))
        self.port = _free_port(address)
        self.url = f"http://{address}:{self.port}/"
        self.log_path = os.path.join(self.dir, "verdaccio.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([self.node, main, "--config", config, "--listen", f"{address}:{self.port}"],
                                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=self.dir)
        self.token = None

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-4000:]

    def _call(self, method, path, body=None):
        req = urllib.request.Request(self.url + path.lstrip("/"), method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        # Straight to it, whatever proxy this machine's environment names.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def start(self, timeout_s=60):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SetupError("verdaccio exited at start:\n" + self.log())
            try:
                if self._call("GET", "/-/ping")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise SetupError("verdaccio did not answer /-/ping:\n" + self.log())
        # A throwaway user, as `npm adduser` makes one (the CouchDB user document).
        status, body = self._call("PUT", "/-/user/org.couchdb.user:sandfort-tests",
                                  {"name": "sandfort-tests", "password": "throwaway-" + os.urandom(8).hex()})
        assert status == 201 and body.get("token"), (status, body)
        self.token = body["token"]
        return self

    def publish(self, name, version, source):
        package = os.path.join(self.dir, "publish-" + name)
        os.makedirs(package)
        with open(os.path.join(package, "package.json"), "w") as f:
            json.dump({"name": name, "version": version, "main": "index.js", "license": "MIT"}, f)
        with open(os.path.join(package, "index.js"), "w") as f:
            f.write(source)
        npmrc = os.path.join(self.dir, "npmrc")
        with open(npmrc, "w") as f:
            f.write(f"//{self.address}:{self.port}/:_authToken={self.token}\n")
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.lower().startswith("npm_")}
        r = subprocess.run([self.npm, "publish", "--registry", self.url, "--userconfig", npmrc,
                            "--cache", os.path.join(self.dir, "cache"), "--no-audit", "--no-fund"],
                           cwd=package, capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        status, body = self._call("GET", "/" + name)
        assert status == 200 and version in body["versions"], (status, body)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
