"""A real sandfortd for integration tests: its own state directory, SQLite file and port,
against the machine's real Docker engine. Standard library only."""

import glob
import http.client
import http.server
import ipaddress
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SANDFORT_BUILD_DIR", os.path.join(REPO, "build"))
SANDFORTD = os.path.join(BUILD, "src", "sandfortd", "sandfortd")
# The agent bind-mounted into sandboxes. A sanitizer build's agent cannot be static (the images have
# no sanitizer runtime): its integration run names the shipped build's agent here.
AGENT = os.environ.get("SANDFORT_AGENT", os.path.join(BUILD, "src", "agent", "sandfort-agent"))
IMAGE = "sandfort/base:bookworm"
DOCKER_SOCK = "/var/run/docker.sock"


# Below the kernel's ephemeral range (32768-60999 by default): a port the kernel hands out for
# bind(0) is also what it hands out to outgoing connections and to the next suite's bind(0), so
# a daemon started a moment later could find it taken. Drawn at random, checked free.
LISTEN_PORTS = range(20000, 32768)


def free_port():
    while True:
        port = random.choice(LISTEN_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


class PortTaken(RuntimeError):
    """The daemon could not listen: a port free_port() chose was taken before it bound it."""


class SubnetTaken(RuntimeError):
    """The daemon could not create its sandbox network: another test daemon created one on the
    /24 free_subnet() chose between its look and this daemon's start."""


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body) if self.body else None

    def __repr__(self):
        return f"<{self.status} {self.body[:300]!r}>"


class Client:
    """One request per connection. With ssl_context: https (sandfortd terminating TLS itself),
    to `host` (the name its certificate must carry)."""

    def __init__(self, port, key=None, timeout=120, ssl_context=None, host="127.0.0.1", source_address=None):
        self.port = port
        self.key = key
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.host = host
        self.source_address = source_address

    def with_key(self, key):
        return Client(self.port, key, self.timeout, self.ssl_context, self.host, self.source_address)

    def connection(self):
        if self.ssl_context is None:
            return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout,
                                              source_address=self.source_address)
        return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.ssl_context,
                                           source_address=self.source_address)

    def request(self, method, path, body=None, raw=None, headers=None):
        conn = self.connection()
        h = dict(headers or {})
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        out = Response(r.status, dict(r.getheaders()), r.read())
        conn.close()
        return out

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def create_sandbox(self, **spec):
        spec.setdefault("wait", True)
        r = self.post("/v1/sandboxes", spec)
        assert r.status == 201, r
        return r.json()

    def exec(self, sandbox_id, **body):
        r = self.post(f"/v1/sandboxes/{sandbox_id}/process/exec", body)
        assert r.status == 200, r
        return r.json()


class HostUpstream:
    """An HTTP server on the host's 127.0.0.1, the target of egress tests: it answers every GET with
    `body` and keeps count of the connections and the (path, headers) of the requests reaching it."""

    def __init__(self, body=b"upstream says hi\n"):
        outer = self
        self.connections = 0
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append((self.path, dict(self.headers)))
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            def get_request(self):
                conn = super().get_request()
                outer.connections += 1
                return conn

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def paths(self):
        return [path for path, _ in self.requests]

    def close(self):
        self.server.shutdown()


# Test daemons' sandbox networks: /24s under a /16 of their own, outside sandfortd's default
# 10.213.0.0/16 (docs/configuration.md), so that a daemon started by ./scripts/run on this machine
# (its network stays after it stops) and the test suites never take each other's addresses.
TEST_SUBNETS = ipaddress.ip_network("10.215.0.0/16")


def free_subnet():
    """A /24 under TEST_SUBNETS that no Docker network uses yet: every test daemon gets its own
    sandbox network (and bridge, and firewall chains), so daemons never share one."""
    status, networks = docker("GET", "/networks")
    assert status == 200, networks
    used = set()
    for n in networks:
        for cfg in (n.get("IPAM") or {}).get("Config") or []:
            if cfg.get("Subnet"):
                used.add(ipaddress.ip_network(cfg["Subnet"], strict=False))
    # In a random order: two test processes choosing at once rarely pick the same one.
    candidates = list(TEST_SUBNETS.subnets(new_prefix=24))
    random.shuffle(candidates)
    for candidate in candidates:
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    raise RuntimeError(f"no free /24 left under {TEST_SUBNETS}")


def merge(base, extra):
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


OWNER_FILE = "owner"  # in a test daemon's state directory: process_identity() of the test process
NETWORK_PREFIX = "sandfort-test-"


def process_identity(pid):
    """"PID STARTTIME" (clock ticks after boot, /proc/PID/stat), so a reused pid is not taken for
    the process that had it; "" when there is no such process or it has exited (a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return ""
    return "" if fields[0] in ("Z", "X") else f"{pid} {fields[19]}"


def sandfortd_pids_of(config_path):
    """The running sandfortd processes started with --config config_path."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"sandfortd") and config_path.encode() in argv:
            found.append(int(entry))
    return found


def _abandoned(state_dir):
    """True when the test process that made this state directory is gone (owner file), or, for a
    directory without one, when no sandfortd runs on it."""
    try:
        with open(os.path.join(state_dir, OWNER_FILE)) as f:
            owner = f.read().strip()
    except OSError:
        owner = ""
    if owner:
        return process_identity(owner.split()[0]) != owner
    return not sandfortd_pids_of(os.path.join(state_dir, "sandfort.json"))


_swept = False


def sweep_leftovers():
    """Removes what the test daemons of test processes that are gone left behind (a suite killed
    before its clean-up ran): their sandfortd if it still runs, their containers, volumes, snapshot
    images, network, firewall rules and state directory. A test daemon's network is sandfort-test-TOKEN and its state
    /tmp/sf-TOKEN, whose owner file names the test process: a parallel run's daemons are left
    alone. Once per process: leftovers only ever come from processes that ended before it."""
    global _swept
    if _swept:
        return
    _swept = True
    status, networks = docker("GET", "/networks")
    assert status == 200, networks
    for net in networks:
        name = net.get("Name", "")
        state_dir = "/tmp/sf-" + name[len(NETWORK_PREFIX):]
        # A network without its state directory is not a harness daemon's (the unit tests' own).
        if not name.startswith(NETWORK_PREFIX) or not os.path.isdir(state_dir) or not _abandoned(state_dir):
            continue
        _kill_sandfortd(state_dir)
        for c in _containers_labelled("io.sandfort.sandbox"):
            if name in (c.get("NetworkSettings", {}).get("Networks") or {}):
                docker("DELETE", f"/containers/{c['Id']}?force=true")
        # Its containers elsewhere, volumes and snapshot images: labelled with its instance id,
        # as is its network.
        instance = (net.get("Labels") or {}).get("io.sandfort.instance")
        if instance:
            mine = urllib.parse.quote(json.dumps({"label": [f"io.sandfort.instance={instance}"]}))
            for c in _containers_labelled(f"io.sandfort.instance={instance}"):
                docker("DELETE", f"/containers/{c['Id']}?force=true")
            for v in (docker("GET", "/volumes?filters=" + mine)[1] or {}).get("Volumes") or []:
                docker("DELETE", f"/volumes/{v['Name']}?force=true")
            for image in docker("GET", "/images/json?filters=" + mine)[1] or []:
                docker("DELETE", f"/images/{image['Id']}?force=true")
        docker("DELETE", f"/networks/{net['Id']}")
        bridge = (net.get("Options") or {}).get("com.docker.network.bridge.name")
        if bridge:
            remove_firewall_rules(bridge)
        shutil.rmtree(state_dir, ignore_errors=True)
    # State directories of daemons that never made their network (a start that failed).
    for state_dir in glob.glob("/tmp/sf-*"):
        if os.path.exists(os.path.join(state_dir, OWNER_FILE)) and _abandoned(state_dir):
            _kill_sandfortd(state_dir)
            shutil.rmtree(state_dir, ignore_errors=True)


def _kill_sandfortd(state_dir):
    for pid in sandfortd_pids_of(os.path.join(state_dir, "sandfort.json")):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Daemon:
    """One sandfortd process. Start, stop (SIGTERM), kill (SIGKILL) and restart on the same state."""

    def __init__(self, extra_config=None, ssl_context=None, prepare_state_dir=None):
        # ssl_context: the daemon terminates TLS (extra_config has "tls"); clients trust it with this.
        # prepare_state_dir(path): called with the new, empty state directory before anything is
        # written there (e.g. to mount a small filesystem on it); the caller undoes it after cleanup().
        self.ssl_context = ssl_context
        # Short path: agent sockets live under it and unix socket paths are limited to 108 bytes.
        sweep_leftovers()
        self.state_dir = tempfile.mkdtemp(prefix="sf-", dir="/tmp")
        if prepare_state_dir is not None:
            prepare_state_dir(self.state_dir)
        # Written whole, then renamed: another test process's sweep_leftovers() that saw an empty
        # owner file would take this directory for abandoned and kill the daemon starting on it.
        owner = os.path.join(self.state_dir, OWNER_FILE)
        with open(owner + ".new", "w") as f:
            f.write(process_identity(os.getpid()))
        os.rename(owner + ".new", owner)
        self.port = free_port()
        self.preview_port = free_port()
        self.config_path = os.path.join(self.state_dir, "sandfort.json")
        token = os.path.basename(self.state_dir)[3:].lower()
        self.network = {"name": "sandfort-test-" + token, "subnet": free_subnet(),
                        "bridge": ("sft" + "".join(c for c in token if c.isalnum()))[:15]}
        self.gateway = str(next(ipaddress.ip_network(self.network["subnet"]).hosts()))
        config = {"listen": f"127.0.0.1:{self.port}", "state_dir": self.state_dir, "agent_path": AGENT,
                  "log_format": "json", "network": dict(self.network),
                  "preview": {"listen": f"127.0.0.1:{self.preview_port}"}}
        merge(config, extra_config or {})
        self.config = config
        with open(self.config_path, "w") as f:
            json.dump(config, f)
        self.log_path = os.path.join(self.state_dir, "sandfortd.log")
        self.proc = None
        out = subprocess.run([SANDFORTD, "admin", "bootstrap", "--config", self.config_path],
                             capture_output=True, text=True, check=True)
        self.admin_key = out.stdout.strip()
        assert self.admin_key.startswith("sfk_"), out

    def start(self, wait_ready=True):
        # Suites run in parallel: between free_port() and the daemon's bind another process may
        # take a port, and between free_subnet() and the network's creation another daemon may
        # take the /24. Then the daemon exits at once naming it, and starts again on fresh ones.
        for _ in range(4):
            try:
                return self._start(wait_ready)
            except PortTaken:
                self.port, self.preview_port = free_port(), free_port()
                self.config["listen"] = f"127.0.0.1:{self.port}"
                self.config.setdefault("preview", {})["listen"] = f"127.0.0.1:{self.preview_port}"
            except SubnetTaken:
                self.network["subnet"] = free_subnet()
                self.gateway = str(next(ipaddress.ip_network(self.network["subnet"]).hosts()))
                self.config["network"]["subnet"] = self.network["subnet"]
            with open(self.config_path, "w") as f:
                json.dump(self.config, f)
        return self._start(wait_ready)

    def _start(self, wait_ready):
        log = open(self.log_path, "a")
        begun = log.tell()  # where this start's lines begin
        self.proc = subprocess.Popen([SANDFORTD, "serve", "--config", self.config_path],
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                with open(self.log_path) as f:
                    f.seek(begun)
                    said = f.read()
                    if "Address already in use" in said:
                        raise PortTaken(self.log())
                    if "another Docker network holds these addresses" in said:
                        raise SubnetTaken(self.log())
                raise RuntimeError("sandfortd exited at start:\n" + self.log())
            try:
                # A short timeout: what holds the port may be another process that never answers
                # (the daemon then exits, above).
                probe = self.client()
                probe.timeout = 5
                if probe.get("/healthz").status == 200:
                    if not wait_ready or probe.get("/readyz").status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("sandfortd did not become healthy:\n" + self.log())

    def client(self, key=None):
        if self.ssl_context is not None:
            return Client(self.port, key, ssl_context=self.ssl_context, host="localhost")
        return Client(self.port, key)

    def admin(self):
        return self.client(self.admin_key)

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-6000:]
        except OSError:
            return ""

    def stop(self, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout)
        return self.proc.returncode if self.proc else None

    def stop_and_cleanup(self):
        """stop(), then cleanup(); fails unless sandfortd exited cleanly (status 0 on SIGTERM)."""
        rc = self.stop()
        log = self.log()  # before cleanup removes it
        self.cleanup()
        assert rc == 0, f"sandfortd did not exit cleanly on SIGTERM (exit {rc}):\n" + log

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def cleanup(self):
        """Stops the daemon and removes every container it made, its network, the firewall
        rules a killed daemon could not remove, then its state."""
        self.kill()
        for c in docker_containers_of(self):
            docker("DELETE", f"/containers/{c['Id']}?force=true")
        docker("DELETE", f"/networks/{self.network['name']}")
        remove_firewall_rules(self.network["bridge"])
        report = sanitizer_report(self.log_path)
        shutil.rmtree(self.state_dir, ignore_errors=True)
        # A daemon built with ASan+UBSan (scripts/test's sanitized run) stops at its first finding;
        # the finding, not just the failures it causes, fails the test.
        assert report is None, "sandfortd's sanitizer report:\n" + report


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error: ")


def new_org_with_keys(daemon, name, roles=("admin", "member", "viewer")):
    """An organization made by the operator and a client per role: (org, {role: client})."""
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": name})
    assert r.status == 201, r
    org = r.json()
    clients = {}
    for role in roles:
        r = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": role, "role": role})
        assert r.status == 201, r
        clients[role] = daemon.client(r.json()["key"])
    return org, clients


def new_org_member(daemon, name):
    """A second organization made by the operator, and a member's client of it: (org, client)."""
    org, clients = new_org_with_keys(daemon, name, ("member",))
    return org, clients["member"]


def sanitized_daemon():
    """Whether the sandfortd under test is built with AddressSanitizer (scripts/test runs the
    integration suite so): its memory figures then include ASan's quarantine of freed blocks."""
    with open(SANDFORTD, "rb") as f:
        return b"__asan_init" in f.read()


def sanitizer_report(log_path):
    """The sanitizer report in a daemon's log, from its first line, or None."""
    try:
        with open(log_path, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    at = min((i for i in (text.find(m) for m in SANITIZER_MARKS) if i >= 0), default=-1)
    return None if at < 0 else text[max(0, text.rfind("\n", 0, at) + 1):][:6000]


def firewall_rules(bridge, tool="iptables"):
    """sandfortd's host firewall lines for bridge: its jumps, chains and their rules (not Docker's)."""
    out = subprocess.run([tool, "-w", "-S"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "SANDFORT" in line and bridge in line]


def remove_firewall_rules(bridge):
    for tool in ("iptables", "ip6tables"):
        for parent, chain in (("INPUT", "SANDFORT-IN-" + bridge), ("FORWARD", "SANDFORT-FW-" + bridge)):
            while subprocess.run([tool, "-w", "-D", parent, "-i", bridge, "-j", chain],
                                 capture_output=True).returncode == 0:
                pass
            subprocess.run([tool, "-w", "-F", chain], capture_output=True)
            subprocess.run([tool, "-w", "-X", chain], capture_output=True)


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def docker(method, path, body=None):
    """One call to the real Docker engine; returns (status, parsed JSON or None)."""
    conn = _UnixHTTPConnection(DOCKER_SOCK)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    try:
        return r.status, json.loads(raw) if raw else None
    except ValueError:
        return r.status, raw


def _containers_labelled(label):
    status, body = docker("GET", "/containers/json?all=true&filters=" +
                          urllib.parse.quote(json.dumps({"label": [label]})))
    assert status == 200, body
    return body


def container_id_of(sandbox_id):
    """The Docker id of a sandbox's container (found by its label: names are opaque), or None."""
    found = _containers_labelled(f"io.sandfort.sandbox={sandbox_id}")
    return found[0]["Id"] if found else None


def docker_container(sandbox_id):
    """Docker's inspect of a sandbox's container (found by its label: names are opaque), or None."""
    cid = container_id_of(sandbox_id)
    if cid is None:
        return None
    status, body = docker("GET", f"/containers/{cid}/json")
    return body if status == 200 else None


def runsc_registered():
    """Whether gVisor's runsc is registered with the Docker Engine (scripts/setup registers it)."""
    r = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True,
                       timeout=60)
    return r.returncode == 0 and "runsc" in json.loads(r.stdout or "{}")


def require_runsc():
    """Fails a gVisor test where runsc is missing under CI=true (never skipped there), skips it
    elsewhere."""
    if runsc_registered():
        return
    import pytest  # only the tests import this module with pytest at hand
    why = "runsc is not registered with the Docker Engine (scripts/setup registers it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def rss_kib(pid):
    """Resident memory of a process (the daemon's, for bounds and benchmarks)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def docker_containers_of(daemon):
    """The sandbox containers a daemon made: those on its own sandbox network, and gVisor ones
    (Docker's `none` network) by their door, a directory of the daemon's state mounted in them."""
    home = os.path.join(daemon.state_dir, "home") + "/"
    return [c for c in _containers_labelled("io.sandfort.sandbox")
            if daemon.network["name"] in (c.get("NetworkSettings", {}).get("Networks") or {})
            or any((m.get("Source") or "").startswith(home) for m in c.get("Mounts") or [])]


def read_sse(response_body):
    """Parses a complete text/event-stream body into [(event, data-as-parsed-JSON)]."""
    events = []
    for block in response_body.decode().split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if name:
            events.append((name, json.loads("\n".join(data))))
    return events


class EventStream:
    """Reads server-sent events as they arrive over a raw HTTP/1.1 connection."""

    def __init__(self, port, key, path, body):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.request("POST" if body is not None else "GET", path,
                          body=json.dumps(body) if body is not None else None,
                          headers={"Authorization": "Bearer " + key, "Accept": "text/event-stream",
                                   "Content-Type": "application/json"})
        self.response = self.conn.getresponse()
        self.pending = b""

    def next_event(self):
        while b"\n\n" not in self.pending:
            chunk = self.response.read1(65536)
            if not chunk:
                return None
            self.pending += chunk
        block, self.pending = self.pending.split(b"\n\n", 1)
        parsed = read_sse(block + b"\n\n")
        return parsed[0] if parsed else self.next_event()

    def close(self):
        self.conn.close()
