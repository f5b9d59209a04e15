"""Attack: root inside a sandbox makes a set-uid root binary and hopes a host user runs it
(`cp /bin/dash /run/sandfort/rootsh; chmod 4755 …`), or uploads one in a tar.

Staged for real against a daemon whose state directory an operator created with a loose umask:
the daemon must tighten it (0700, database 0600), nothing the sandbox wrote may be a set-uid file
under it, an unprivileged host user (uid 65534) can neither list it, read the database, nor run
what the sandbox made; /run/sandfort inside is nosuid,nodev,noexec; tar uploads drop set-uid bits
unless keep_setid=true is asked for."""

import io
import json
import os
import stat
import subprocess
import sys
import tarfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandfort_harness import Daemon, docker  # noqa: E402

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def as_nobody(*argv):
    return subprocess.run(NOBODY + list(argv), capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def loose_daemon():
    """A daemon whose state directory and database were left world-readable (umask 022, an old
    release), as on a host where var/ was made by hand."""
    d = Daemon()
    os.chmod(d.state_dir, 0o755)
    os.chmod(d.config["state_dir"] + "/sandfort.db", 0o644)
    d.start()
    try:
        admin = d.admin()
        r = admin.post("/v1/orgs", {"name": "setuid-attackers"})
        assert r.status == 201, r
        r = admin.post(f"/v1/orgs/{r.json()['id']}/api-keys", {"name": "m", "role": "member"})
        assert r.status == 201, r
        member = d.client(r.json()["key"])
        sbx = member.create_sandbox(name="suid")
        yield d, member, sbx
        member.delete(f"/v1/sandboxes/{sbx['id']}")
    finally:
        d.stop_and_cleanup()


def sh(member, sandbox_id, script):
    """Runs script as the sandbox's user: root in the default image."""
    return member.exec(sandbox_id, command=script)


def container_of(sandbox_id):
    status, body = docker("GET", "/containers/json?filters=" +
                          json.dumps({"label": [f"io.sandfort.sandbox={sandbox_id}"]}).replace(" ", ""))
    assert status == 200 and len(body) == 1, body
    status, info = docker("GET", f"/containers/{body[0]['Id']}/json")
    assert status == 200, info
    return info


def setid_files_under(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID) and not stat.S_ISDIR(st.st_mode):
                found.append((path, oct(st.st_mode)))
    return found


def test_a_set_uid_shell_made_in_the_sandbox_is_no_use_to_a_host_user(loose_daemon):
    d, member, sbx = loose_daemon
    assert sh(member, sbx["id"], "id -u")["stdout"].strip() == "0"
    r = sh(member, sbx["id"], "cp /bin/dash /run/sandfort/rootsh && chmod 4755 /run/sandfort/rootsh && "
                              "stat -c %a /run/sandfort/rootsh")
    assert r["exit_code"] == 0, r
    # Root inside may set the bit; what matters is where the file lives and who can reach it.
    assert setid_files_under(d.state_dir) == [], "a set-uid file made inside the sandbox is on the host's disk"

    # The daemon tightened what an operator had left open, and said so.
    assert stat.S_IMODE(os.stat(d.state_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(d.state_dir + "/sandfort.db").st_mode) == 0o600
    assert "now 0700" in d.log()

    # An unprivileged host user can neither list the state directory nor read what is in it.
    assert as_nobody("id", "-u").stdout.strip() == "65534"
    assert as_nobody("ls", d.state_dir).returncode != 0
    for name in ("sandfort.db", "sandfort.json", "sandfortd.log"):
        r = as_nobody("cat", os.path.join(d.state_dir, name))
        assert r.returncode != 0 and r.stdout == "", name
    # Nor run the shell through any path the host has to it: the old host directory, or the
    # container's root through /proc.
    pid = container_of(sbx["id"])["State"]["Pid"]
    for path in (f"{d.state_dir}/sandboxes/{sbx['id']}/run/rootsh", f"/proc/{pid}/root/run/sandfort/rootsh"):
        r = as_nobody(path, "-p", "-c", "id -u")
        assert r.returncode != 0 and r.stdout.strip() != "0", (path, r)


def test_run_sandfort_is_nosuid_nodev_noexec_inside(loose_daemon):
    d, member, sbx = loose_daemon
    r = sh(member, sbx["id"], "cat /proc/mounts")
    assert r["exit_code"] == 0, r
    mounts = [line.split() for line in r["stdout"].splitlines()]
    at = [m for m in mounts if len(m) > 3 and m[1] == "/run/sandfort"]
    assert at, r["stdout"]
    options = set(at[-1][3].split(","))
    assert {"nosuid", "nodev", "noexec"} <= options, at[-1]


def tar_with(name, mode, data=b"#!/bin/sh\necho hi\n"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo(name)
        info.mode = mode
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_tar_upload_drops_set_uid_bits_unless_asked(loose_daemon):
    d, member, sbx = loose_daemon
    base = f"/v1/sandboxes/{sbx['id']}/files"
    r = member.request("PUT", f"{base}/archive?path=/tmp/plain", raw=tar_with("rootsh", 0o4755))
    assert r.status == 200, r
    r = member.request("PUT", f"{base}/archive?path=/tmp/kept&keep_setid=true", raw=tar_with("rootsh", 0o6755))
    assert r.status == 200, r
    r = sh(member, sbx["id"], "stat -c %a /tmp/plain/rootsh /tmp/kept/rootsh")
    assert r["exit_code"] == 0, r
    assert r["stdout"].split() == ["755", "6755"], r

    # PUT /files: a set-uid, set-gid or sticky mode is 400 unless keep_setid=true.
    for mode in ("4755", "2755", "1777"):
        r = member.request("PUT", f"{base}?path=/tmp/m{mode}&mode={mode}", raw=b"x")
        assert r.status == 400 and "keep_setid" in r.json()["error"]["message"], r
    r = member.request("PUT", f"{base}?path=/tmp/m4755&mode=4755&keep_setid=true", raw=b"x")
    assert r.status == 201 and r.json()["mode"] == "4755", r
