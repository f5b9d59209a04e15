"""The `sandfort` CLI end to end: the real binary against a live sandfortd."""

import fcntl
import hashlib
import http.client
import json
import os
import pty
import select
import signal
import socket
import ssl
import stat
import struct
import subprocess
import threading
import termios
import time
import urllib.parse
import urllib.request

import pytest
from conftest import CLI


# --- configuration: login / whoami / logout ---------------------------------------------------

def test_login_whoami_logout_with_config_file(cli):
    r = cli.run("login", with_credentials=False, input=f"{cli.base_url}\n{cli.api_key}\n")
    assert r.returncode == 0, r.stderr
    config = os.path.join(cli.home, "xdg", "sandfort", "config.json")
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
    saved = json.load(open(config))
    assert saved == {"base_url": cli.base_url, "api_key": cli.api_key}

    who = cli.json("whoami", with_credentials=False)
    assert who["role"] == "admin" and who["auth"] == "api_key"
    assert "principal_name: bootstrap" in cli.ok("whoami", with_credentials=False).stdout

    cli.ok("logout", with_credentials=False)
    assert not os.path.exists(config)
    r = cli.run("whoami", with_credentials=False)
    assert r.returncode == 1
    assert "sandfort login" in r.stderr and "SANDFORT_BASE_URL" in r.stderr


def test_config_under_home_when_xdg_unset(cli):
    env_home = {"XDG_CONFIG_HOME": ""}
    r = cli.run("login", with_credentials=False, input=f"{cli.base_url}\n{cli.api_key}\n", **env_home)
    assert r.returncode == 0, r.stderr
    config = os.path.join(cli.home, ".config", "sandfort", "config.json")
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600


def test_environment_overrides_the_config_file(cli):
    cli.ok("login", with_credentials=False, input=f"{cli.base_url}\n{cli.api_key}\n")
    r = cli.run("whoami", with_credentials=False, SANDFORT_API_KEY="sfk_wrong")
    assert r.returncode == 1
    assert "request req-" in r.stderr


def test_login_for_scripts_reads_only_the_key_from_stdin(cli):
    config = os.path.join(cli.home, "xdg", "sandfort", "config.json")
    # As `docker login --password-stdin`: no prompt, the key alone on stdin (newline or not).
    r = cli.run("login", "--url", cli.base_url + "/", "--api-key-stdin", with_credentials=False, input=cli.api_key)
    assert r.returncode == 0, r.stderr
    assert "API key:" not in r.stderr and "Base URL" not in r.stderr
    assert json.load(open(config)) == {"base_url": cli.base_url, "api_key": cli.api_key}
    cli.ok("logout", with_credentials=False)
    # --url alone: the key is the one line read (the URL is not asked).
    r = cli.run("login", "--url", cli.base_url, with_credentials=False, input=cli.api_key + "\n")
    assert r.returncode == 0, r.stderr
    # A later login reuses the stored URL.
    r = cli.run("login", "--api-key-stdin", with_credentials=False, input=f"\n  {cli.api_key}  \n")
    assert r.returncode == 0, r.stderr
    cli.ok("logout", with_credentials=False)


def test_login_for_scripts_refuses_what_it_cannot_use(cli):
    config = os.path.join(cli.home, "xdg", "sandfort", "config.json")
    r = cli.run("login", "--api-key-stdin", with_credentials=False, input=cli.api_key)
    assert r.returncode == 2 and "--url" in r.stderr
    for bad in ["", "  \n", f"{cli.base_url}\n{cli.api_key}\n"]:
        r = cli.run("login", "--url", cli.base_url, "--api-key-stdin", with_credentials=False, input=bad)
        assert r.returncode == 1, (bad, r.stderr)
        assert "--api-key-stdin" in r.stderr
    r = cli.run("login", "--url", cli.base_url, "--api-key-stdin", with_credentials=False, input="sfk_not_a_key")
    assert r.returncode == 1 and "unauthenticated" in r.stderr
    r = cli.run("login", "--api-key-stdin", "--oidc", "http://127.0.0.1:1", with_credentials=False, input="x")
    assert r.returncode == 2
    assert not os.path.exists(config)


def test_one_version_everywhere(cli):
    cli_version = cli.ok("--version", with_credentials=False).stdout.strip()
    assert cli_version.startswith("sandfort "), cli_version
    daemon_bin = os.path.join(os.path.dirname(os.path.dirname(CLI)), "src", "sandfortd", "sandfortd")
    daemon_version = subprocess.run([daemon_bin, "version"], capture_output=True, text=True, check=True).stdout
    assert daemon_version.strip() == "sandfortd " + cli_version.split(" ", 1)[1]
    url = urllib.parse.urlparse(cli.base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.request("GET", "/healthz")
    health = json.loads(conn.getresponse().read())
    assert health == {"status": "ok", "version": cli_version.split(" ", 1)[1]}
    # The project's version, not a literal somewhere else.
    cmake = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "CMakeLists.txt")).read()
    assert f"VERSION {health['version']} " in cmake


def test_login_refuses_a_bad_key_and_stores_nothing(cli):
    r = cli.run("login", with_credentials=False, input=f"{cli.base_url}\nsfk_not_a_key\n")
    assert r.returncode == 1
    assert "error:" in r.stderr and "request req-" in r.stderr
    assert not os.path.exists(os.path.join(cli.home, "xdg", "sandfort", "config.json"))


def test_bad_key_prints_api_message(cli):
    r = cli.run("sandbox", "ls", SANDFORT_API_KEY="sfk_bogus")
    assert r.returncode == 1
    assert "unauthenticated" in r.stderr and "req-" in r.stderr and "sandfort login" in r.stderr


def test_unreachable_daemon_says_what_to_do(cli):
    r = cli.run("whoami", SANDFORT_BASE_URL="http://127.0.0.1:1")
    assert r.returncode == 1
    assert "SANDFORT_BASE_URL" in r.stderr


def test_usage_errors_exit_2(cli):
    assert cli.run().returncode == 2
    assert cli.run("sandbox", "get").returncode == 2
    assert cli.run("exec").returncode == 2
    assert cli.run("cp", "a", "b").returncode == 2


def test_help_everywhere(cli):
    for args in [(), ("sandbox",), ("sandbox", "create"), ("exec",), ("run",), ("cp",)]:
        r = cli.run(*args, "--help", with_credentials=False)
        assert r.returncode == 0, args
        assert "Usage" in r.stdout or "USAGE" in r.stdout.upper()


# --- exec ---------------------------------------------------------------------------------------

def test_exec_seed_line_prints_42(cli, sandbox):
    r = cli.run("exec", sandbox, "python3", "-c", "print(21 * 2)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "42\n"


def test_exec_propagates_exit_status_and_stderr(cli, sandbox):
    r = cli.run("exec", sandbox, "sh", "-c", "echo out; echo err >&2; exit 7")
    assert r.returncode == 7
    assert r.stdout == "out\n" and r.stderr == "err\n"


def test_exec_options_after_the_id_belong_to_the_command(cli, sandbox):
    r = cli.run("exec", sandbox, "ls", "-la", "/")
    assert r.returncode == 0, r.stderr
    assert "total" in r.stdout and " etc" in r.stdout
    r = cli.run("exec", sandbox, "--", "echo", "--help", "--json")
    assert r.stdout == "--help --json\n"
    r = cli.run("exec", "--cwd", "/tmp", sandbox, "pwd")
    assert r.stdout == "/tmp\n"
    r = cli.run("exec", sandbox, "echo", "--help", "-i", "--timeout", "1")
    assert r.stdout == "--help -i --timeout 1\n"
    r = cli.run("run", f"--id={sandbox}", "echo", "--help")
    assert r.stdout == "--help\n"


def test_exec_stdin_and_timeout(cli, sandbox):
    r = cli.run("exec", "-i", sandbox, "wc", "-c", input="hello\n")
    assert r.returncode == 0 and r.stdout.strip() == "6"
    r = cli.run("exec", "--timeout", "1", sandbox, "sleep", "5")
    assert r.returncode == 124 and "timed out" in r.stderr


def test_exec_unknown_sandbox_prints_api_message(cli):
    r = cli.run("exec", "sbx-0000000000000000", "true")
    assert r.returncode == 1
    assert "not found" in r.stderr and "req-" in r.stderr


# --- sandbox create / ls / get / stop / start / rm -----------------------------------------------

def test_sandbox_lifecycle_with_json(cli):
    sbx = cli.json("sandbox", "create", "--wait", "--env", "FOO=bar", "--egress", "example.com", "cli-life",
                   "--egress", "*.example.org", "--memory", "256")
    sid = sbx["id"]
    try:
        assert sbx["state"] == "started" and sbx["name"] == "cli-life"
        assert sbx["env_keys"] == ["FOO"] and sbx["egress_allowlist"] == ["example.com", "*.example.org"]
        assert sbx["resources"]["memory_mb"] == 256
        assert cli.run("exec", sid, "sh", "-c", "echo $FOO").stdout == "bar\n"

        assert sid in [s["id"] for s in cli.json("sandbox", "ls")["items"]]
        assert sid in cli.ok("sandbox", "ls").stdout
        assert cli.json("sandbox", "get", "cli-life")["id"] == sid
        assert "state: started" in cli.ok("sandbox", "get", sid).stdout

        assert cli.json("sandbox", "stop", sid)["state"] == "stopped"
        assert cli.ok("sandbox", "start", sid).stdout.strip() == f"{sid} started"
    finally:
        cli.ok("sandbox", "rm", sid)
    r = cli.run("sandbox", "get", sid)
    assert r.returncode == 1 and "not found" in r.stderr and "req-" in r.stderr


def test_sandbox_pause_resume(cli):
    sid = cli.ok("sandbox", "create", "--wait").stdout.strip()
    try:
        cli.ok("exec", sid, "sh", "-c", "echo kept > /tmp/state")
        assert cli.ok("sandbox", "pause", sid).stdout.strip() == f"{sid} paused"
        assert cli.json("sandbox", "pause", sid)["state"] == "paused"
        assert "state: paused" in cli.ok("sandbox", "get", sid).stdout
        r = cli.run("exec", sid, "true")
        assert r.returncode == 1 and "paused" in r.stderr and "resume it first" in r.stderr, r.stderr
        assert cli.json("sandbox", "resume", sid)["state"] == "started"
        assert cli.ok("sandbox", "resume", sid).stdout.strip() == f"{sid} started"
        assert cli.run("exec", sid, "cat", "/tmp/state").stdout == "kept\n"
        cli.ok("sandbox", "stop", sid)
        r = cli.run("sandbox", "pause", sid)
        assert r.returncode == 1 and "conflict" in r.stderr, r.stderr
    finally:
        cli.ok("sandbox", "rm", sid)


def test_sandbox_create_rejects_bad_env(cli):
    r = cli.run("sandbox", "create", "--env", "NOEQUALS")
    assert r.returncode == 2


# --- new / run / rm with the current sandbox -----------------------------------------------------

def test_new_run_rm(cli):
    sid = cli.ok("new").stdout.strip()
    assert sid.startswith("sbx-")
    assert open(os.path.join(cli.home, "xdg", "sandfort", "current")).read().strip() == sid
    try:
        assert cli.ok("run", "cd /tmp && export X=5").stdout == ""
        r = cli.run("run", "pwd; echo $X")
        assert r.returncode == 0 and r.stdout == "/tmp\n5\n"
        assert cli.run("run", "echo", "two", "words").stdout == "two words\n"
        assert cli.run("run", "exit 3").returncode == 3
        assert cli.run("run", f"--id={sid}", "echo hi").stdout == "hi\n"
    finally:
        r = cli.run("rm")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(os.path.join(cli.home, "xdg", "sandfort", "current"))
    r = cli.run("run", "true")
    assert r.returncode == 1 and "sandfort new" in r.stderr


def test_new_starts_in_work_and_a_failed_command_names_bash(cli):
    sid = cli.ok("new").stdout.strip()
    try:
        r = cli.run("run", "pwd; stat -c %U /work; touch made-here")
        assert r.returncode == 0 and r.stdout == "/work\nroot\n", (r.stdout, r.stderr)
        r = cli.run("run", "cd /nope")
        assert r.returncode == 1
        assert r.stderr == "bash: line 1: cd: /nope: No such file or directory\n", r.stderr
        assert cli.run("exec", sid, "ls", "made-here").stdout == "made-here\n"
    finally:
        cli.run("rm")


@pytest.mark.parametrize("create", [["new"], ["sandbox", "create", "--wait"]])
def test_workdir_flag(cli, create):
    sid = cli.ok(*create, "--workdir", "/srv/app").stdout.strip()
    try:
        assert cli.json("sandbox", "get", sid)["workdir"] == "/srv/app"
        assert cli.run("run", f"--id={sid}", "pwd").stdout == "/srv/app\n"
        assert cli.run("exec", sid, "pwd").stdout == "/srv/app\n"
    finally:
        cli.run("sandbox", "rm", sid)
    r = cli.run(*create, "--workdir", "relative/dir")
    assert r.returncode == 1 and "workdir must be an absolute path" in r.stderr, r.stderr


# --- cp -------------------------------------------------------------------------------------------

def test_cp_file_both_ways(cli, sandbox, tmp_path):
    src = tmp_path / "in.bin"
    data = bytes(range(256)) * 1000
    src.write_bytes(data)
    os.chmod(src, 0o750)
    cli.ok("cp", str(src), f"{sandbox}:/tmp/cp/in.bin")
    assert cli.run("exec", sandbox, "stat", "-c", "%s %a", "/tmp/cp/in.bin").stdout == f"{len(data)} 750\n"

    out = tmp_path / "out.bin"
    cli.ok("cp", f"{sandbox}:/tmp/cp/in.bin", str(out))
    assert out.read_bytes() == data

    into = tmp_path / "into"
    into.mkdir()
    cli.ok("cp", f"{sandbox}:/tmp/cp/in.bin", str(into))
    assert (into / "in.bin").read_bytes() == data
    assert stat.S_IMODE(os.stat(into / "in.bin").st_mode) == 0o750
    r = cli.run("cp", f"{sandbox}:/tmp/cp/missing", str(out))
    assert r.returncode == 1 and "req-" in r.stderr


def test_cp_streams_a_file_larger_than_the_body_limit(cli, sandbox, tmp_path):
    big = tmp_path / "big.bin"
    block = hashlib.sha256(b"sandfort").digest() * 4096  # 128 KiB, deterministic
    big.write_bytes(block * 192)  # 24 MiB, above the API's 16 MiB JSON body limit
    digest = hashlib.sha256(big.read_bytes()).hexdigest()
    cli.ok("cp", str(big), f"{sandbox}:/tmp/big/")
    assert cli.run("exec", sandbox, "sha256sum", "/tmp/big/big.bin").stdout.split()[0] == digest
    back = tmp_path / "back.bin"
    cli.ok("cp", f"{sandbox}:/tmp/big/big.bin", str(back))
    assert hashlib.sha256(back.read_bytes()).hexdigest() == digest


def test_cp_directory_both_ways(cli, sandbox, tmp_path):
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "sub" / "a.txt").write_text("alpha\n")
    cli.ok("cp", str(tmp_path / "tree"), f"{sandbox}:/tmp/tree")
    assert cli.run("exec", sandbox, "cat", "/tmp/tree/sub/a.txt").stdout == "alpha\n"
    cli.ok("cp", f"{sandbox}:/tmp/tree", str(tmp_path / "back"))
    assert (tmp_path / "back" / "sub" / "a.txt").read_text() == "alpha\n"
    assert cli.ok("cp", f"{sandbox}:/tmp/tree/sub/a.txt", "-").stdout == "alpha\n"


# --- preview / logs -------------------------------------------------------------------------------

def test_preview_prints_url_and_token(cli, sandbox):
    p = cli.json("preview", sandbox, "8000")
    assert sandbox in p["url"] and p["token"]
    assert p["link"] == f"{p['url']}/?sandfort_token={p['token']}"
    out = cli.ok("preview", sandbox, "8000").stdout
    assert f"link: {p['link']}\n" in out and p["url"] in out and p["token"] in out
    assert cli.run("preview", sandbox, "70000").returncode == 2


def test_run_prints_the_preview_url_of_a_port_it_opened(cli, sandbox):
    cli.ok("run", f"--id={sandbox}", "mkdir -p /tmp/site && echo served-by-run > /tmp/site/index.html")
    # The command waits for its server to listen (as a careful script does): the CLI looks for new
    # ports for only about a second after a command returns, and a loaded machine can take longer
    # than that to start Python.
    r = cli.run("run", f"--id={sandbox}",
                "cd /tmp/site && (nohup python3 -m http.server 8731 >/dev/null 2>&1 &) && "
                "until (exec 3<>/dev/tcp/127.0.0.1/8731) 2>/dev/null; do sleep 0.05; done")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # the URL goes to stderr: stdout stays the command's
    lines = [l for l in r.stderr.splitlines() if l.startswith("preview: port 8731: ")]
    assert len(lines) == 1, r.stderr
    printed = lines[0].split(": ", 2)[2]
    assert urllib.parse.urlparse(printed).hostname.startswith(f"8731-{sandbox}.")
    # The link works as printed (the token is in it), *.localhost resolved by the system.
    with urllib.request.urlopen(printed, timeout=30) as resp:
        assert resp.status == 200 and b"served-by-run" in resp.read()
    # A port that was already listening is not the next command's.
    r = cli.run("run", f"--id={sandbox}", "true")
    assert "preview:" not in r.stderr


def test_preview_wait_answers_once_the_port_listens_and_fails_when_it_never_does(cli, sandbox):
    # The server binds two seconds after `run` returns: without --wait its link would answer 502.
    cli.ok("run", f"--id={sandbox}",
           "mkdir -p /tmp/late && echo late-server > /tmp/late/index.html && "
           "(cd /tmp/late && nohup sh -c 'sleep 2; exec python3 -m http.server 8732' >/dev/null 2>&1 &)")
    r = cli.run("preview", "--wait", "60", sandbox, "8732")
    assert r.returncode == 0, r.stderr
    link = [l for l in r.stdout.splitlines() if l.startswith("link: ")][0][len("link: "):]
    with urllib.request.urlopen(link, timeout=30) as resp:
        assert resp.status == 200 and b"late-server" in resp.read()
    # Nothing ever listens on 8733: exit 1, naming the port, after the wait.
    r = cli.run("preview", "--wait", "1", sandbox, "8733")
    assert r.returncode == 1 and "port 8733" in r.stderr and "not listening" in r.stderr, r.stderr
    assert r.stdout == ""
    assert cli.run("preview", "--wait", "-1", sandbox, "8733").returncode == 2


def start_background(cli, sandbox, command):
    url = urllib.parse.urlparse(cli.base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.request("POST", f"/v1/sandboxes/{sandbox}/commands", body=json.dumps({"command": command}),
                 headers={"Authorization": "Bearer " + cli.api_key, "Content-Type": "application/json"})
    r = conn.getresponse()
    body = json.loads(r.read())
    assert r.status == 201, body
    return body["id"]


def test_logs_and_follow(cli, sandbox):
    cmd = start_background(cli, sandbox, "echo one; echo two >&2; sleep 1; echo three; exit 4")
    r = cli.run("logs", sandbox, cmd, "-f")
    assert r.returncode == 4, r.stderr
    assert r.stdout == "one\nthree\n" and r.stderr == "two\n"
    r = cli.ok("logs", sandbox, cmd)
    assert r.stdout == "one\nthree\n" and r.stderr == "two\n"
    r = cli.run("logs", sandbox, "cmd-unknown")
    assert r.returncode == 1 and "req-" in r.stderr


# --- shell (PTY over WebSocket) -------------------------------------------------------------------

def test_shell_with_piped_input_returns_exit_status(cli, sandbox):
    r = cli.run("shell", sandbox, input="echo hi-$((2+3))\nexit 5\n", timeout=60)
    assert r.returncode == 5, r.stderr
    assert "hi-5" in r.stdout
    r = cli.run("shell", sandbox, input="echo only\n", timeout=60)
    assert r.returncode == 0 and "only" in r.stdout
    r = cli.run("shell", "sbx-0000000000000000", input="", timeout=60)
    assert r.returncode == 1 and "not found" in r.stderr


def _read_until(fd, needle, timeout=20):
    out = b""
    deadline = time.monotonic() + timeout
    while needle not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out


def test_shell_in_a_terminal_resizes_and_restores_it(cli, sandbox):
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(CLI, [CLI, "shell", sandbox], cli.env())
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        assert b"# " in _read_until(fd, b"# ")
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
        os.kill(pid, signal.SIGWINCH)
        time.sleep(0.5)
        os.write(fd, b"stty size\r")
        assert b"33 111" in _read_until(fd, b"33 111")
        os.write(fd, b"exit 6\r")
        _read_until(fd, b"\x00", timeout=5)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 6
        lflag = termios.tcgetattr(fd)[3]
        assert lflag & termios.ECHO and lflag & termios.ICANON, "terminal left in raw mode"
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)


def test_host_names_resolve_in_the_static_binary(cli):
    url = cli.base_url.replace("127.0.0.1", "localhost")
    r = cli.run("whoami", SANDFORT_BASE_URL=url)
    assert r.returncode == 0, r.stderr


# --- https (TLS) ----------------------------------------------------------------------------------

class TlsProxy:
    """Terminates TLS on a local port and splices each connection to the plain-HTTP daemon."""

    def __init__(self, target_port, cert, key):
        self.target_port = target_port
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw):
        try:
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        upstream = socket.create_connection(("127.0.0.1", self.target_port))

        def pump(src, dst):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=pump, args=(upstream, tls), daemon=True).start()
        pump(tls, upstream)

    def close(self):
        self.listener.close()


@pytest.fixture
def tls_proxy(cli, tmp_path):
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    proxy = TlsProxy(urllib.parse.urlparse(cli.base_url).port, cert, key)
    yield proxy, cert
    proxy.close()


def test_https_verifies_the_server_and_works_end_to_end(cli, sandbox, tls_proxy):
    proxy, cert = tls_proxy
    url = f"https://localhost:{proxy.port}"
    r = cli.run("whoami", SANDFORT_BASE_URL=url)
    assert r.returncode == 1 and "TLS handshake" in r.stderr  # self-signed: refused by default

    trusted = {"SANDFORT_BASE_URL": url, "SSL_CERT_FILE": cert}
    assert cli.json("whoami", **trusted)["role"] == "admin"
    r = cli.run("exec", sandbox, "python3", "-c", "print(21 * 2)", **trusted)
    assert r.returncode == 0 and r.stdout == "42\n", r.stderr
    r = cli.run("shell", sandbox, input="exit 4\n", timeout=60, **trusted)
    assert r.returncode == 4, r.stderr


# --- completion -----------------------------------------------------------------------------------

def test_bash_completion_offers_commands_and_sandboxes(cli, sandbox):
    top, create, get, pause, resume = cli.complete("sandfort s", "sandfort sandbox cr", "sandfort sandbox get sbx-",
                                                   "sandfort sandbox p", "sandfort sandbox resume sbx-")
    assert {"sandbox", "shell"} <= set(top)
    assert create == ["create"] and sandbox in get
    assert pause == ["pause"] and sandbox in resume
    assert cli.run("completion", "fish").returncode == 2
    zsh = cli.ok("completion", "zsh").stdout
    assert "bashcompinit" in zsh and "complete -F _sandfort sandfort" in zsh
