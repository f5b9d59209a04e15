"""The Debian package as an operator uses it: scripts/package builds it, `apt-get install` installs
it on this machine, the systemd unit passes `systemd-analyze verify`, and the unit's ExecStart
(run directly: systemd is not PID 1 here) serves sandboxes from the installed paths. The package
is purged afterwards."""

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time

import pytest

from sandfort_harness import (REPO, Client, docker, docker_containers_of, free_port, free_subnet,
                              remove_firewall_rules)

UNIT = "/usr/lib/systemd/system/sandfortd.service"


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def installed():
    if os.geteuid() != 0:
        pytest.fail("the package test installs a .deb: run as root (CI does)")
    if run("dpkg-query", "-W", "sandfort").returncode == 0:
        pytest.fail("a sandfort package is already installed on this machine; the test would replace it")
    env = dict(os.environ)
    env["SANDFORT_BUILD_DIR"] = os.environ.get("SANDFORT_BUILD_DIR", os.path.join(REPO, "build"))
    built = run(os.path.join(REPO, "scripts", "package"), env=env, timeout=1800)
    assert built.returncode == 0, built.stderr[-3000:]
    deb = built.stdout.strip().splitlines()[-1]
    assert os.path.basename(deb).startswith("sandfort_") and deb.endswith("_amd64.deb"), deb
    info = run("dpkg-deb", "--info", deb).stdout
    assert "Depends:" in info and "docker.io" in info and "iptables" in info, info
    listing = run("dpkg-deb", "--contents", deb).stdout
    for path in ["./usr/bin/sandfortd", "./usr/bin/sandfort", "./usr/lib/sandfort/sandfort-agent",
                 "./usr/lib/systemd/system/sandfortd.service", "./etc/sandfort/sandfort.json"]:
        assert path in listing, listing
    r = run("apt-get", "install", "-y", "--no-install-recommends", deb, timeout=600,
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    try:
        yield deb
    finally:
        r = run("apt-get", "purge", "-y", "sandfort", timeout=600, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        assert r.returncode == 0, r.stderr
        assert not os.path.exists("/usr/bin/sandfortd") and not os.path.exists("/etc/sandfort/sandfort.json")


def test_the_package_installs_where_the_docs_say(installed):
    assert run("dpkg-query", "-W", "-f=${Version}", "sandfort").stdout == \
        run("/usr/bin/sandfortd", "version").stdout.split()[1]
    assert run("/usr/bin/sandfort", "--version").stdout.startswith("sandfort ")
    conffiles = run("dpkg-query", "--control-show", "sandfort", "conffiles").stdout
    assert "/etc/sandfort/sandfort.json" in conffiles
    config = json.load(open("/etc/sandfort/sandfort.json"))
    assert config["state_dir"] == "/var/lib/sandfort"
    assert config["agent_path"] == "/usr/lib/sandfort/sandfort-agent"
    # Static binaries: nothing but the kernel needed inside a sandbox.
    assert "statically linked" in run("file", "-L", "/usr/lib/sandfort/sandfort-agent").stdout


def test_the_unit_verifies(installed):
    r = run("systemd-analyze", "verify", UNIT)
    # systemd-analyze warns about the machine (no systemd as PID 1) on stderr; only the unit's
    # own problems name it.
    problems = [line for line in (r.stdout + r.stderr).splitlines() if "sandfortd.service" in line]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr
    unit = open(UNIT).read()
    for hardening in ["NoNewPrivileges=yes", "ProtectSystem=strict", "StateDirectory=sandfort",
                      "ConfigurationDirectory=sandfort", "CapabilityBoundingSet=CAP_NET_ADMIN"]:
        assert hardening in unit


def test_execstart_serves_a_sandbox_from_the_installed_paths(installed):
    unit = open(UNIT).read()
    exec_start = next(l.split("=", 1)[1] for l in unit.splitlines() if l.startswith("ExecStart="))
    argv = shlex.split(exec_start)
    assert argv[0] == "/usr/bin/sandfortd"
    # The installed configuration as it is; only what would collide with other daemons on this
    # machine moves (environment variables are a layer over the file: docs/configuration.md).
    state = tempfile.mkdtemp(prefix="sf-pkg-", dir="/tmp")
    port, preview_port = free_port(), free_port()
    token = os.path.basename(state)[7:].lower()
    network = {"name": "sandfort-pkg-" + token, "subnet": free_subnet(),
               "bridge": ("sfp" + "".join(c for c in token if c.isalnum()))[:15]}
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDFORT_")}
    env.update(SANDFORT_STATE_DIR=state, SANDFORT_LISTEN=f"127.0.0.1:{port}",
               SANDFORT_PREVIEW_LISTEN=f"127.0.0.1:{preview_port}", SANDFORT_NETWORK_NAME=network["name"],
               SANDFORT_NETWORK_SUBNET=network["subnet"], SANDFORT_NETWORK_BRIDGE=network["bridge"])
    boot = run("/usr/bin/sandfortd", "admin", "bootstrap", "--config", "/etc/sandfort/sandfort.json", env=env)
    assert boot.returncode == 0, boot.stderr
    key = boot.stdout.strip()
    log = open(os.path.join(state, "sandfortd.log"), "w")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)

    class daemon:  # what docker_containers_of needs
        pass
    daemon.network = network
    daemon.state_dir = state
    try:
        client = Client(port, key)
        deadline = time.time() + 60
        while True:
            assert proc.poll() is None, open(log.name).read()[-3000:]
            try:
                if client.get("/readyz").status == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline, open(log.name).read()[-3000:]
            time.sleep(0.1)
        assert client.get("/healthz").json()["version"] == run("/usr/bin/sandfortd", "version").stdout.split()[1]
        sbx = client.create_sandbox(name="from-the-package")
        assert client.exec(sbx["id"], argv=["echo", "packaged"])["stdout"] == "packaged\n"
        # The agent inside is the installed one.
        mounts = docker_containers_of(daemon)[0]["Mounts"]
        assert any(m.get("Source") == "/usr/lib/sandfort/sandfort-agent" for m in mounts), mounts
        assert client.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
        proc.terminate()
        assert proc.wait(60) == 0, open(log.name).read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for c in docker_containers_of(daemon):
            docker("DELETE", f"/containers/{c['Id']}?force=true")
        docker("DELETE", f"/networks/{network['name']}")
        remove_firewall_rules(network["bridge"])
        shutil.rmtree(state, ignore_errors=True)
