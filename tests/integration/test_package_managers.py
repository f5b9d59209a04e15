"""pip, npm and apt in a sandbox of the default image, through the sandbox's real egress proxy, as
they go through a company's: against real local indexes (package_indexes.py: a PEP 503 simple index
over http and over https with a private CA, verdaccio, an npm package served over https with that
CA, a Debian repository made with dpkg-deb and dpkg-scanpackages), reached by a host name on the
sandbox's allowlist. The tools are configured only the way their own documentation says (pip.conf
or --index-url, `npm config set registry` or --registry, a sources entry);
nothing tells them about the proxy but the environment every sandbox gets. A host not on the
allowlist fails with the proxy's 403 in the tool's own error.

The module's daemon may dial the test servers' address (egress.allowed_ranges, the way an
operator allows a private mirror); the servers listen on this machine's own host name."""

import re

import pytest

from package_indexes import DebRepository, MirrorCA, NpmRegistry, SimpleIndex, StaticNpmRegistry, index_host
from sandfort_harness import Daemon, new_org_member

WHEEL_SOURCE = "def greet():\n    return 'hello from a wheel'\n"
NPM_SOURCE = "module.exports = () => 'hello from npm';\n"
# The proxy's refusal as its status line gives it, which each tool prints in its own error (apt
# with two spaces after the status).
REFUSED = re.compile(r"403 +Forbidden \(host not on the sandbox's egress allowlist\)")


@pytest.fixture(scope="module")
def host():
    return index_host()


@pytest.fixture(scope="module")
def daemon(host):
    d = Daemon({"egress": {"allowed_ranges": host[1] + "/32"}}).start()
    yield d
    d.stop()
    d.cleanup()


@pytest.fixture(scope="module")
def member(daemon):
    return new_org_member(daemon, "packages")[1]


@pytest.fixture(scope="module")
def sandbox(member, host):
    sbx = member.create_sandbox(egress_allowlist=[host[0]])
    yield sbx
    member.delete(f"/v1/sandboxes/{sbx['id']}")


@pytest.fixture(scope="module")
def simple_index(host):
    index = SimpleIndex(host[1], "sandfort-hello", "1.0", "sandfort_hello", WHEEL_SOURCE)
    yield index
    index.close()


@pytest.fixture(scope="module")
def mirror_ca(host):
    ca = MirrorCA(host[0])
    yield ca
    ca.cleanup()


@pytest.fixture(scope="module")
def https_index(host, mirror_ca):
    index = SimpleIndex(host[1], "sandfort-secure", "2.0", "sandfort_secure", "VALUE = 'over https'\n",
                        ssl_context=mirror_ca.server_context())
    yield index
    index.close()


@pytest.fixture(scope="module")
def https_npm_registry(host, mirror_ca):
    registry = StaticNpmRegistry(host[1], host[0], "sandfort-secure", "2.0.0", "module.exports = 'over https';\n",
                                 ssl_context=mirror_ca.server_context())
    yield registry
    registry.close()


def trust(member, sbx, ca):
    """The CA in the sandbox's trust store, the Debian way (once: update-ca-certificates takes seconds)."""
    r = sh(member, sbx, "f=/usr/local/share/ca-certificates/mirror-ca.crt; "
                        "test -f $f || { cat > $f && update-ca-certificates; }", stdin=ca.pem)
    assert r["exit_code"] == 0, r


@pytest.fixture(scope="module")
def npm_registry(host):
    registry = NpmRegistry(host[1]).start()
    registry.publish("sandfort-hello", "1.0.0", NPM_SOURCE)
    yield registry
    registry.stop()


@pytest.fixture(scope="module")
def deb_repository(host):
    repo = DebRepository(host[1], "sandfort-hello", "1.0", "sandfort-hello", "hello from a deb")
    yield repo
    repo.close()


def sh(member, sbx, command, **kw):
    """One shell command in the sandbox, as a user's agent runs it: the sandbox's own environment."""
    return member.exec(sbx["id"], command=command, timeout_s=kw.pop("timeout_s", 120), **kw)


def egress_lines(daemon, sbx, host_name):
    with open(daemon.log_path) as f:
        return [line for line in f if "egress" in line and sbx["id"] in line and f"host={host_name} " in line]


# --- pip ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def venv(member, sandbox):
    # Debian's Python is externally managed (PEP 668): pip installs into a virtual environment.
    r = sh(member, sandbox, "python3 -m venv /work/.venv")
    assert r["exit_code"] == 0, r
    return "/work/.venv"


def test_pip_installs_a_wheel_from_a_simple_index_over_http(daemon, member, sandbox, host, simple_index, venv):
    name, port = host[0], simple_index.port
    # A plain-http index is "not a trusted or secure host" to pip unless named so (as for any such mirror).
    r = sh(member, sandbox, f"{venv}/bin/pip config --site set global.index-url http://{name}:{port}/simple/ && "
                            f"{venv}/bin/pip config --site set global.trusted-host {name}")
    assert r["exit_code"] == 0, r
    r = sh(member, sandbox, f"{venv}/bin/pip install --no-cache-dir sandfort-hello")
    assert r["exit_code"] == 0, r
    assert "Successfully installed sandfort-hello-1.0" in r["stdout"], r
    r = sh(member, sandbox, f"{venv}/bin/python -c 'import sandfort_hello; print(sandfort_hello.greet())'")
    assert r["stdout"] == "hello from a wheel\n", r
    assert "/simple/sandfort-hello/" in simple_index.paths and f"/files/{simple_index.wheel}" in simple_index.paths
    # Through the proxy: absolute-form requests it forwarded and logged as allowed.
    assert any("decision=allow" in line for line in egress_lines(daemon, sandbox, name))


def test_pip_installs_over_https_from_a_mirror_with_a_private_ca(member, sandbox, host, https_index, mirror_ca, venv):
    name, port = host[0], https_index.port
    url = f"https://{name}:{port}/simple/"
    # Not the http test's pip.conf: its trusted-host would also turn certificate checks off.
    no_config = {"PIP_CONFIG_FILE": "/dev/null"}
    # Untrusted first: pip refuses the certificate (the tunnel itself was allowed).
    r = sh(member, sandbox, f"{venv}/bin/pip install --no-cache-dir --retries 0 --index-url {url} sandfort-secure",
           env=no_config)
    assert r["exit_code"] != 0 and "CERTIFICATE_VERIFY_FAILED" in r["stdout"] + r["stderr"], r
    trust(member, sandbox, mirror_ca)
    r = sh(member, sandbox, f"{venv}/bin/pip install --no-cache-dir --index-url {url} sandfort-secure && "
                            f"{venv}/bin/python -c 'import sandfort_secure; print(sandfort_secure.VALUE)'", env=no_config)
    assert r["exit_code"] == 0 and r["stdout"].endswith("over https\n"), r
    assert f"/files/{https_index.wheel}" in https_index.paths


# --- npm ---------------------------------------------------------------------------------------


def test_npm_installs_a_package_from_a_registry(daemon, member, sandbox, host, npm_registry):
    name = host[0]
    r = sh(member, sandbox, f"npm config set registry http://{name}:{npm_registry.port}/")
    assert r["exit_code"] == 0, r
    r = sh(member, sandbox, "mkdir -p /work/app && cd /work/app && npm init -y >/dev/null && "
                            "npm install --no-audit --no-fund sandfort-hello && "
                            "node -e 'console.log(require(\"sandfort-hello\")())'")
    assert r["exit_code"] == 0, r
    assert r["stdout"].endswith("hello from npm\n"), r
    r = sh(member, sandbox, "cat /work/app/package.json")
    assert '"sandfort-hello": "^1.0.0"' in r["stdout"], r
    assert any("decision=allow" in line for line in egress_lines(daemon, sandbox, name))


def test_npm_installs_over_https_from_a_mirror_with_a_private_ca(member, sandbox, host, https_npm_registry, mirror_ca):
    # Debian's Node.js reads the system's trust store: no `npm config set cafile` needed.
    trust(member, sandbox, mirror_ca)
    url = f"https://{host[0]}:{https_npm_registry.port}/"
    r = sh(member, sandbox, "mkdir -p /work/secure && cd /work/secure && npm init -y >/dev/null && "
                            f"npm install --no-audit --no-fund --registry {url} sandfort-secure && "
                            "node -e 'console.log(require(\"sandfort-secure\"))'")
    assert r["exit_code"] == 0, r
    assert r["stdout"].endswith("over https\n"), r
    assert https_npm_registry.tarball_path in https_npm_registry.paths


# --- apt ---------------------------------------------------------------------------------------


def test_apt_installs_a_package_from_a_repository(member, sandbox, host, deb_repository):
    name = host[0]
    r = sh(member, sandbox, f"echo 'deb [trusted=yes] http://{name}:{deb_repository.port}/ ./' "
                            "> /etc/apt/sources.list.d/mirror.list && "
                            "apt-get update -o Dir::Etc::SourceList=/dev/null && "
                            "DEBIAN_FRONTEND=noninteractive apt-get install -y sandfort-hello && sandfort-hello")
    assert r["exit_code"] == 0, r
    assert r["stdout"].endswith("hello from a deb\n"), r
    assert "Err:" not in r["stdout"] and "W:" not in r["stderr"], r
    assert f"/{deb_repository.deb}" in deb_repository.paths


# --- a host not on the allowlist -----------------------------------------------------------------


def test_pip_names_the_proxys_403_for_a_host_off_the_allowlist(daemon, member, sandbox, venv):
    # pip reports a failed connection only when it retries it (its default is 5 retries).
    r = sh(member, sandbox, f"{venv}/bin/pip install --no-cache-dir --retries 1 "
                            "--index-url https://pypi.org/simple/ requests", env={"PIP_CONFIG_FILE": "/dev/null"})
    assert r["exit_code"] != 0, r
    assert REFUSED.search(r["stdout"] + r["stderr"]), r
    assert any("decision=deny" in line for line in egress_lines(daemon, sandbox, "pypi.org"))


def test_npm_names_the_proxys_403_for_a_host_off_the_allowlist(daemon, member, sandbox):
    r = sh(member, sandbox, "mkdir -p /work/other && cd /work/other && "
                            "npm install --no-audit --no-fund --fetch-retries=0 "
                            "--registry https://registry.npmjs.org/ left-pad")
    assert r["exit_code"] != 0, r
    assert REFUSED.search(r["stdout"] + r["stderr"]), r
    assert any("decision=deny" in line for line in egress_lines(daemon, sandbox, "registry.npmjs.org"))


def test_apt_names_the_proxys_403_for_a_host_off_the_allowlist(daemon, member, sandbox):
    # The image's own sources: deb.debian.org, not on this sandbox's allowlist.
    r = sh(member, sandbox, "apt-get update -o Dir::Etc::SourceParts=/dev/null")
    assert REFUSED.search(r["stdout"] + r["stderr"]), r
    assert any("decision=deny" in line for line in egress_lines(daemon, sandbox, "deb.debian.org"))
