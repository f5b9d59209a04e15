"""gVisor sandboxes (`"runtime": "gvisor"`, docs/gvisor.md) against a real daemon, real Docker and
Debian's runsc: no network interface but lo, the agent dialing home over its door, egress through
tunnels over the same door, and the isolation transcript staged from inside. What both runtimes
must do alike (every API feature, the guardrails with a fork bomb and a memory hog, the egress
attacks: another host, another sandbox's credential, a flood of tunnels, endless data) is asserted
on both by test_gvisor_parity.py."""

import base64
import os
import socket
import subprocess

import pytest

from sandfort_harness import Daemon, new_org_member, require_runsc
from test_preview import (WS_ECHO, host_for, open_websocket, preview_get, start_command, wait_listening,
                          websocket_echo)


@pytest.fixture(scope="module")
def gvisor(member):
    require_runsc()
    sbx = member.create_sandbox(runtime="gvisor", egress_allowlist=["allowed.example"])
    assert sbx["state"] == "started", sbx
    yield sbx
    member.delete(f"/v1/sandboxes/{sbx['id']}")


def sh(member, sbx, command, timeout_s=30):
    return member.exec(sbx["id"], command=command, timeout_s=timeout_s)


def test_a_gvisor_sandbox_says_so_and_runs_on_gvisors_kernel(member, gvisor):
    assert gvisor["runtime"] == "gvisor"
    assert member.get(f"/v1/sandboxes/{gvisor['id']}").json()["runtime"] == "gvisor"
    r = sh(member, gvisor, "uname -r; exit 3")
    assert r["exit_code"] == 3
    assert r["stdout"].strip() != os.uname().release  # not the host's kernel
    # A session keeps its state over the links home as over the runc socket.
    assert member.post(f"/v1/sandboxes/{gvisor['id']}/exec", {"command": "cd /tmp && export G=7"}).status == 200
    r = member.post(f"/v1/sandboxes/{gvisor['id']}/exec", {"command": "echo $G; pwd"}).json()
    assert r["stdout"] == "7\n/tmp\n"


def test_no_interface_but_lo_no_route_no_raw_socket(member, gvisor):
    r = sh(member, gvisor, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert r["stdout"].split() == ["lo"]
    r = sh(member, gvisor, "curl -sS --noproxy '*' -m 5 http://169.254.169.254/ 2>&1; echo rc=$?")
    assert "rc=0" not in r["stdout"], r
    r = sh(member, gvisor, "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)' 2>&1")
    assert "PermissionError" in r["stdout"], r


# Every netlink family a container could use against the kernel, and two changes to the route family
# that only CAP_NET_ADMIN may make (an address on lo, lo down), as raw netlink messages.
NETLINK = r"""
import errno, socket, struct
families = {0: "route", 4: "sock_diag", 6: "xfrm", 9: "audit", 12: "netfilter", 15: "uevent", 16: "generic"}
for number, name in families.items():
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, number).close()
        print(name, "opened")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
s.bind((0, 0))
def ask(kind, flags, payload):
    s.send(struct.pack("=LHHLL", 16 + len(payload), kind, flags, 1, 0) + payload)
    answer = s.recv(65536)
    if struct.unpack("=H", answer[4:6])[0] != 2:  # NLMSG_ERROR
        return "done"
    code = struct.unpack("=i", answer[16:20])[0]
    return errno.errorcode[-code] if code else "done"
lo = socket.if_nametoindex("lo")
print("new address", ask(20, 0x1 | 0x4 | 0x400 | 0x200,
                          struct.pack("=BBBBL", 2, 8, 0, 0, lo) + struct.pack("=HH", 8, 2) + bytes([127, 0, 0, 2])))
print("lo down", ask(16, 0x1 | 0x4, struct.pack("=BxHiII", 0, 0, lo, 0, 1)))
"""


def test_netlink_is_refused_but_gvisors_own_read_only_route_table(member, gvisor):
    r = member.exec(gvisor["id"], argv=["python3", "-c", NETLINK], timeout_s=30)
    assert r["exit_code"] == 0, r
    said = dict(line.rsplit(" ", 1) for line in r["stdout"].splitlines())
    # gVisor implements the route family itself (its own netstack: the listing of lo) and a stub
    # of uevent; every other family does not exist there. On runc all of them open against the
    # host's kernel (and changes are refused by the missing capability only).
    assert {k: v for k, v in said.items() if v == "opened"} == {"route": "opened", "uevent": "opened"}, said
    assert all(said[f] == "EPROTONOSUPPORT" for f in ("sock_diag", "xfrm", "audit", "netfilter", "generic")), said
    # And what the route family would change is refused.
    assert said["new address"] in ("EACCES", "EPERM") and said["lo down"] in ("EACCES", "EPERM"), said
    r = member.exec(gvisor["id"], command="tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert r["stdout"].split() == ["lo"]


def test_nothing_of_the_daemons_inside_and_the_door_is_read_only(member, gvisor):
    r = sh(member, gvisor, "env | grep -c '^SANDFORT_'; test -e /var/run/docker.sock; echo sock=$?")
    assert r["stdout"] == "0\nsock=1\n", r
    r = sh(member, gvisor, "touch /run/sandfort/home/planted 2>&1; echo rc=$?; rm -f /run/sandfort/home/home.sock 2>&1")
    assert "Read-only file system" in r["stdout"] and "rc=1" in r["stdout"], r


def test_ls_and_stat_work_through_the_preloaded_shim_which_root_inside_cannot_touch(daemon, member):
    """Debian's runsc answers EINVAL to statx with AT_NO_AUTOMOUNT, which every `ls` and `stat` of
    coreutils 9.1 passes: the shim sandfortd preloads drops the flag (docs/gvisor.md)."""
    require_runsc()
    sbx = member.create_sandbox(runtime="gvisor", env={"LD_PRELOAD": "/lib/x86_64-linux-gnu/libm.so.6"})
    try:
        r = sh(member, sbx, "ls -la /etc | grep -c ' hostname$'; stat -c '%n %a' /etc/hostname; "
                            "ls /nothing-here 2>&1; echo rc=$?")
        assert r["stdout"] == ("1\n/etc/hostname 644\n"
                               "ls: cannot access '/nothing-here': No such file or directory\nrc=2\n"), r
        # Without the shim the quirk is there: what the shim fixes is real.
        r = sh(member, sbx, "LD_PRELOAD= ls / 2>&1; echo rc=$?")
        assert "Invalid argument" in r["stdout"] and "rc=2" in r["stdout"], r
        # The caller's own preload comes after it; the file is read-only to root inside.
        assert sh(member, sbx, 'printf %s "$LD_PRELOAD"')["stdout"] == "/.sandfort/statx.so:/lib/x86_64-linux-gnu/libm.so.6"
        r = sh(member, sbx, "(echo planted > /.sandfort/statx.so) 2>&1; chmod 777 /.sandfort/statx.so 2>&1; "
                            "rm -f /.sandfort/statx.so 2>&1; echo rm=$?; ls -la /etc > /dev/null && echo still-works")
        assert r["stdout"].count("Read-only file system") == 2 and "rm=1" in r["stdout"], r
        assert r["stdout"].endswith("still-works\n"), r
        host_copy = os.path.join(daemon.state_dir, "gvisor", "statx-shim.so")
        assert os.stat(host_copy).st_mode & 0o7777 == 0o444
        with open(host_copy, "rb") as f:
            host_bytes = f.read()
        assert host_bytes[:4] == b"\x7fELF"
        inside = sh(member, sbx, "base64 -w0 /.sandfort/statx.so")["stdout"]
        assert base64.b64decode(inside) == host_bytes  # unchanged by the attempts above
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_egress_goes_through_the_proxy_with_the_sandboxs_own_allowlist(member, gvisor):
    assert sh(member, gvisor, "echo $HTTPS_PROXY")["stdout"] == "http://127.0.0.1:3128\n"
    r = sh(member, gvisor, "curl -sS -o /dev/null https://blocked.example/ 2>&1; true")
    assert "response 403" in r["stdout"], r
    # Allowed, so the proxy goes on to resolve it (there is no such host): a 502, not a 403.
    r = sh(member, gvisor, "curl -sS -o /dev/null https://allowed.example/ 2>&1; true")
    assert "response 502" in r["stdout"], r


def test_a_link_that_claims_another_sandbox_is_still_its_own(member, gvisor):
    other = member.create_sandbox(runtime="gvisor", egress_allowlist=["claimed.example"])
    try:
        # Straight to the door, with another sandbox's id as a credential: the door decides.
        code = (
            "import socket, base64\n"
            "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect('/run/sandfort/home/home.sock')\n"
            f"cred = base64.b64encode(b'{other['id']}:guess').decode()\n"
            "s.sendall(b'SANDFORT-HOME/1 tunnel\\nCONNECT claimed.example:443 HTTP/1.1\\r\\nHost: claimed.example:443\\r\\n'"
            " + b'Proxy-Authorization: Basic ' + cred.encode() + b'\\r\\n\\r\\n')\n"
            "print(s.recv(200).split(b'\\r\\n')[0].decode())\n")
        r = member.exec(gvisor["id"], argv=["python3", "-c", code], timeout_s=30)
        assert r["stdout"].startswith("HTTP/1.1 403"), r
        # And a line that is not a hello opens nothing.
        code = ("import socket\n"
                "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect('/run/sandfort/home/home.sock')\n"
                "s.sendall(b'GET /process/exec HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
                "try:\n    print('closed' if s.recv(200) == b'' else 'answered')\n"
                "except ConnectionResetError:\n    print('closed')\n")
        r = member.exec(gvisor["id"], argv=["python3", "-c", code], timeout_s=30)
        assert r["stdout"] == "closed\n", r
    finally:
        member.delete(f"/v1/sandboxes/{other['id']}")


def test_files_and_the_ports_list_over_the_links(member, gvisor):
    r = member.request("PUT", f"/v1/sandboxes/{gvisor['id']}/files?path=/work/g.txt", raw=b"over the door\n")
    assert r.status == 201, r
    r = member.get(f"/v1/sandboxes/{gvisor['id']}/files?path=/work/g.txt")
    assert r.status == 200 and r.body == b"over the door\n"
    r = member.get(f"/v1/sandboxes/{gvisor['id']}/ports")
    assert r.status == 200
    assert all(p["port"] != 3128 for p in r.json()["items"]), r.json()  # the agent's own listener is not listed


# Streams its body in three pieces, a second apart, chunked: the preview must pass each on as it
# comes (through the agent and the link), not when the answer ends.
SLOW_SERVER = r"""
import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path == "/slow":
            self.send_response(200); self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
            for i in range(3):
                piece = f"piece {i}\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece)); self.wfile.flush(); time.sleep(1)
            self.wfile.write(b"0\r\n\r\n")
        else:
            body = b"hello from gvisor\n"
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8080), H).serve_forever()
"""


def test_previews_reach_the_sandboxs_loopback_through_its_agent(daemon, member, gvisor):
    # Listening on 127.0.0.1 only: on runc the preview could not reach it; here the agent dials it.
    member.exec(gvisor["id"], argv=["sh", "-c", "cat > /tmp/slow.py"], stdin=SLOW_SERVER)
    start_command(member, gvisor, "python3 /tmp/slow.py")
    wait_listening(member, gvisor, 8080)
    listed = [p for p in member.get(f"/v1/sandboxes/{gvisor['id']}/ports").json()["items"] if p["port"] == 8080]
    assert listed and listed[0]["previewable"] is True, listed
    token = member.get(f"/v1/sandboxes/{gvisor['id']}/preview/8080").json()["token"]
    auth = {"X-Sandfort-Preview-Token": token}
    assert preview_get(daemon, host_for(daemon, gvisor, 8080))[0] == 401
    status, headers, body = preview_get(daemon, host_for(daemon, gvisor, 8080), headers=auth)
    assert (status, body) == (200, b"hello from gvisor\n"), (status, headers, body)
    # Streamed: the first piece arrives while the app still sleeps before the last.
    s = socket.create_connection(("127.0.0.1", daemon.preview_port), timeout=10)
    s.sendall(f"GET /slow HTTP/1.1\r\nHost: {host_for(daemon, gvisor, 8080)}\r\nX-Sandfort-Preview-Token: {token}"
              "\r\n\r\n".encode())
    first = b""
    while b"piece 0" not in first:
        chunk = s.recv(4096)
        assert chunk, first
        first += chunk
    assert b"piece 2" not in first
    rest = b""
    while b"0\r\n\r\n" not in rest:
        chunk = s.recv(4096)
        assert chunk, rest
        rest += chunk
    assert b"piece 2" in rest
    s.close()
    # Nothing on a port: 502; the agent's own egress listener is not an application's: 403.
    for port, status in ((8099, 502), (3128, 403)):
        t = member.get(f"/v1/sandboxes/{gvisor['id']}/preview/{port}").json()["token"]
        assert preview_get(daemon, host_for(daemon, gvisor, port), headers={"X-Sandfort-Preview-Token": t})[0] == status


def test_a_websocket_through_the_preview_of_a_gvisor_sandbox(daemon, member, gvisor):
    member.exec(gvisor["id"], argv=["sh", "-c", "cat > /tmp/ws.py"], stdin=WS_ECHO)
    start_command(member, gvisor, "python3 /tmp/ws.py")
    wait_listening(member, gvisor, 8765)
    token = member.get(f"/v1/sandboxes/{gvisor['id']}/preview/8765").json()["token"]
    s = open_websocket(daemon, gvisor, 8765, token)
    for payload in (b"ping over the door", b"and again"):
        assert websocket_echo(s, payload) == payload
    s.close()


def test_stop_and_start_keep_files_and_dial_home_again(member):
    require_runsc()
    sbx = member.create_sandbox(runtime="gvisor")
    try:
        assert member.exec(sbx["id"], command="echo kept > /work/k")["exit_code"] == 0
        assert member.post(f"/v1/sandboxes/{sbx['id']}/stop").status == 200
        assert member.post(f"/v1/sandboxes/{sbx['id']}/start").status == 200
        assert member.exec(sbx["id"], command="cat /work/k")["stdout"] == "kept\n"
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")


def test_runc_with_no_interface_dials_home_on_the_hosts_kernel():
    """runc_dials_home: the same transport on runc (no bridge, no address, no credential)."""
    d = Daemon({"runc_dials_home": True}).start()
    try:
        _, admin = new_org_member(d, "at-home")
        sbx = admin.create_sandbox(egress_allowlist=["allowed.example"])
        try:
            assert sbx["runtime"] == "runc"
            r = admin.exec(sbx["id"], command="uname -r; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
                                              "echo $HTTPS_PROXY; ls /run/sandfort/home")
            assert r["stdout"].split() == [os.uname().release, "lo", "http://127.0.0.1:3128", "home.sock"], r
            r = admin.exec(sbx["id"], command="curl -sS -o /dev/null https://blocked.example/ 2>&1; true")
            assert "response 403" in r["stdout"], r
            r = admin.exec(sbx["id"], command="curl -sS -o /dev/null https://allowed.example/ 2>&1; true")
            assert "response 502" in r["stdout"], r
            start_command(admin, sbx, "mkdir -p /srv && echo runc at home > /srv/i && cd /srv && "
                                      "exec python3 -m http.server --bind 127.0.0.1 8080")
            wait_listening(admin, sbx, 8080)
            token = admin.get(f"/v1/sandboxes/{sbx['id']}/preview/8080").json()["token"]
            status, _, body = preview_get(d, host_for(d, sbx, 8080), "/i", headers={"X-Sandfort-Preview-Token": token})
            assert (status, body) == (200, b"runc at home\n")
            inspect = subprocess.run(["docker", "ps", "--filter", f"label=io.sandfort.sandbox={sbx['id']}",
                                      "--format", "{{.Networks}}"], capture_output=True, text=True).stdout.strip()
            assert inspect == "none", inspect
        finally:
            admin.delete(f"/v1/sandboxes/{sbx['id']}")
    finally:
        d.stop()
        d.cleanup()
