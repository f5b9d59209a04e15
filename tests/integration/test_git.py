"""Git in a real sandbox (POST /v1/sandboxes/{id}/git/{op}) against a real git server on the host.

The server is `git http-backend` (Debian's git package) behind a standard-library HTTP server
that checks basic auth itself: the right token is let in, anything else is 401. It listens on
127.0.0.2, which is not in the sandbox's NO_PROXY: the sandbox's git reaches it only through
the egress proxy (the host firewall refuses direct connections), which this module's daemon
lets dial loopback through the operator's config (egress.allowed_ranges).

The token must end up nowhere: not in .git/config, not in any file of the sandbox, not in the
command line or environment of any process seen while a push runs, not in the daemon's log and
not in the audit chain."""

import base64
import http.server
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest

from sandfort_harness import Daemon

BACKEND = "/usr/lib/git-core/git-http-backend"
HOST = "127.0.0.2"
TOKEN = "sfgit-" + secrets.token_hex(20)
USER = "agent-bot"
REPO = "/tmp/gitwork/repo"


@pytest.fixture(scope="module", autouse=True)
def git_http_backend():
    """The git server these tests stand up: without it they are skipped, and fail under CI=true
    (scripts/setup installs git)."""
    if not os.path.exists(BACKEND):
        why = f"{BACKEND} is not installed (Debian: git)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


def host_git(*args, cwd=None):
    r = subprocess.run(["git", "-c", "user.name=Host", "-c", "user.email=host@example.com",
                        "-c", "init.defaultBranch=main", *args],
                       cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


class GitServer:
    """Smart HTTP over git-http-backend (CGI). Every request needs basic auth with TOKEN; the
    push's pack upload can be held for a while so that its processes can be watched."""

    def __init__(self, root):
        outer = self
        self.root = root
        self.log = []  # (method, path, user or None, status)
        self.hold_receive_pack_s = 0.0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.serve(self)

            def do_POST(self):
                outer.serve(self)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, name="repo.git"):
        return f"http://{HOST}:{self.port}/{name}"

    def read_body(self, h):
        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(h.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    while h.rfile.readline().strip():
                        pass
                    return body
                body += h.rfile.read(size)
                h.rfile.readline()
        return h.rfile.read(int(h.headers.get("Content-Length") or 0))

    def serve(self, h):
        path, _, query = h.path.partition("?")
        user = None
        auth = h.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            name, _, password = base64.b64decode(auth[6:]).decode(errors="replace").partition(":")
            if password == TOKEN:
                user = name
        if user is None:
            self.log.append((h.command, path, None, 401))
            body = b"authentication required\n"
            h.send_response(401)
            h.send_header("WWW-Authenticate", 'Basic realm="sandfort-test"')
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        body = self.read_body(h) if h.command == "POST" else b""
        if path.endswith("/git-receive-pack") and self.hold_receive_pack_s:
            time.sleep(self.hold_receive_pack_s)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_PROJECT_ROOT": self.root,
               "GIT_HTTP_EXPORT_ALL": "1", "REMOTE_USER": user, "REMOTE_ADDR": h.client_address[0],
               "REQUEST_METHOD": h.command, "PATH_INFO": urllib.parse.unquote(path), "QUERY_STRING": query,
               "CONTENT_TYPE": h.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body))}
        if h.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = h.headers["Git-Protocol"]
        if h.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = h.headers["Content-Encoding"]
        out = subprocess.run([BACKEND], input=body, env=env, capture_output=True, timeout=60).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, payload = out.partition(sep)
        status, headers = 200, []
        for line in head.decode().splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.log.append((h.command, path, user, status))
        h.send_response(status)
        for name, value in headers:
            if name.lower() != "content-length":
                h.send_header(name, value)
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def host_repo():
    """A bare repository with two commits on main and a dev branch, and a work tree of it."""
    root = tempfile.mkdtemp(prefix="sf-git-")
    bare = os.path.join(root, "repo.git")
    work = os.path.join(root, "host-work")
    host_git("init", "--bare", "-b", "main", bare)
    host_git("clone", bare, work)
    with open(os.path.join(work, "README.md"), "w") as f:
        f.write("# demo\n")
    host_git("add", "README.md", cwd=work)
    host_git("commit", "-m", "first", cwd=work)
    with open(os.path.join(work, "app.py"), "w") as f:
        f.write("print('hi')\n")
    host_git("add", "app.py", cwd=work)
    host_git("commit", "-m", "second", cwd=work)
    host_git("push", "origin", "main", cwd=work)
    host_git("checkout", "-b", "dev", cwd=work)
    with open(os.path.join(work, "dev.txt"), "w") as f:
        f.write("dev\n")
    host_git("add", "dev.txt", cwd=work)
    host_git("commit", "-m", "on dev", cwd=work)
    host_git("push", "origin", "dev", cwd=work)
    host_git("checkout", "main", cwd=work)
    yield {"root": root, "bare": bare, "work": work}
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def server(host_repo):
    s = GitServer(host_repo["root"])
    yield s
    s.close()


@pytest.fixture(scope="module")
def git_daemon():
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8"}}).start()
    yield d
    d.stop()
    d.cleanup()


@pytest.fixture(scope="module")
def clients(git_daemon):
    admin = git_daemon.admin()
    org = admin.post("/v1/orgs", {"name": "git"}).json()
    admin_key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "a", "role": "admin"}).json()["key"]
    member_key = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": "m", "role": "member"}).json()["key"]
    return {"admin": git_daemon.client(admin_key), "member": git_daemon.client(member_key)}


@pytest.fixture(scope="module")
def sbx(clients):
    member = clients["member"]
    s = member.create_sandbox(egress_allowlist=[HOST])
    yield s
    member.delete(f"/v1/sandboxes/{s['id']}")


def git(clients, sbx, op, expect=200, **body):
    r = clients["member"].post(f"/v1/sandboxes/{sbx['id']}/git/{op}", body)
    assert r.status == expect, (op, r)
    return r.json()


def sh(clients, sbx, command, **kw):
    return clients["member"].exec(sbx["id"], command=command, timeout_s=120, **kw)


def read_file(clients, sbx, path):
    r = clients["member"].get(f"/v1/sandboxes/{sbx['id']}/files?path={urllib.parse.quote(path)}")
    assert r.status == 200, r
    return r.body.decode()


def by_path(status):
    return {f["path"]: f for f in status["files"]}


def test_without_credentials_git_fails_at_once_instead_of_asking(clients, sbx, server):
    started = time.time()
    r = git(clients, sbx, "clone", path="/tmp/gitwork/anonymous", url=server.url())
    assert r["exit_code"] != 0 and not r["timed_out"], r
    assert time.time() - started < 30
    assert "could not read Username" in r["stderr"], r["stderr"]
    # The server was reached (through the proxy) and said 401.
    assert any(status == 401 for _, _, _, status in server.log)


def test_clone_a_branch_with_depth(clients, sbx, server):
    r = git(clients, sbx, "clone", path=REPO, url=server.url(), branch="main", depth=1,
            username=USER, password=TOKEN)
    assert r["exit_code"] == 0, r
    assert r["op"] == "clone"
    assert any(user == USER for _, _, user, _ in server.log)
    assert sh(clients, sbx, f"git -C {REPO} rev-list --count HEAD")["stdout"] == "1\n"  # depth 1 of 2
    assert sh(clients, sbx, f"test -f {REPO}/.git/shallow && cat {REPO}/app.py")["stdout"] == "print('hi')\n"
    # A token alone (no user name) works too; another branch.
    r = git(clients, sbx, "clone", path="/tmp/gitwork/dev", url=server.url(), branch="dev", token=TOKEN)
    assert r["exit_code"] == 0, r
    assert sh(clients, sbx, "cat /tmp/gitwork/dev/dev.txt")["stdout"] == "dev\n"


def test_status_add_commit_checkout_and_branches(clients, sbx):
    st = git(clients, sbx, "status", path=REPO)
    assert st["exit_code"] == 0, st
    assert (st["branch"], st["upstream"], st["ahead"], st["behind"], st["files"]) == ("main", "origin/main", 0, 0, [])
    assert len(st["commit"]) == 40

    sh(clients, sbx, f"cd {REPO} && echo more >> README.md && echo new > new.txt && mkdir -p sub && echo x > sub/x.txt")
    files = by_path(git(clients, sbx, "status", path=REPO))
    assert files["README.md"]["index"] == "." and files["README.md"]["worktree"] == "M"
    assert files["README.md"]["kind"] == "changed" and not files["README.md"]["staged"]
    assert files["new.txt"]["kind"] == "untracked" and files["new.txt"]["index"] == "?"
    assert files["sub/"]["kind"] == "untracked"

    r = git(clients, sbx, "add", path=REPO, files=["new.txt"])
    assert r["exit_code"] == 0, r
    files = by_path(git(clients, sbx, "status", path=REPO))
    assert files["new.txt"]["index"] == "A" and files["new.txt"]["staged"]
    assert files["README.md"]["worktree"] == "M" and not files["README.md"]["staged"]

    assert git(clients, sbx, "add", path=REPO)["exit_code"] == 0  # everything
    files = by_path(git(clients, sbx, "status", path=REPO))
    assert {p: f["index"] for p, f in files.items()} == {"README.md": "M", "new.txt": "A", "sub/x.txt": "A"}

    r = git(clients, sbx, "checkout", path=REPO, branch="feature", create=True)
    assert r["exit_code"] == 0, r
    r = git(clients, sbx, "commit", path=REPO, message="add things", author={"name": "Ada", "email": "ada@example.com"})
    assert r["exit_code"] == 0, r
    st = git(clients, sbx, "status", path=REPO)
    assert (st["branch"], st["upstream"], st["files"]) == ("feature", None, [])
    assert sh(clients, sbx, f"git -C {REPO} log -1 --format='%an <%ae>|%cn|%s'")["stdout"] == \
        "Ada <ada@example.com>|Ada|add things\n"

    b = git(clients, sbx, "branches", path=REPO)
    assert b["exit_code"] == 0, b
    assert b["current"] == "feature"
    assert sorted(x["name"] for x in b["branches"]) == ["feature", "main"]
    main = next(x for x in b["branches"] if x["name"] == "main")
    assert main["upstream"] == "origin/main" and not main["current"]
    assert b["remote_branches"] == ["origin/main"]

    # Nothing to commit is git's answer, not an error of the call.
    r = git(clients, sbx, "commit", path=REPO, message="empty", author="Ada <ada@example.com>")
    assert r["exit_code"] == 1 and "nothing to commit" in r["stdout"], r


def test_push_with_the_right_token(clients, sbx, server, host_repo):
    # While the push runs (the server holds its upload), a sampler inside the sandbox records
    # the command line and environment of every git process and of the agent in askpass mode.
    sampler = ("while [ ! -e /tmp/stop-sampling ]; do for p in /proc/[0-9]*; do e=$(readlink $p/exe); "
               "case \"$e\" in */git|*/git-remote-http|*/agent) echo \"EXE $e\"; tr '\\0' ' ' < $p/cmdline; echo; "
               "tr '\\0' '\\n' < $p/environ; echo;; esac; done 2>/dev/null; done > /tmp/sampled.txt")
    r = clients["member"].post(f"/v1/sandboxes/{sbx['id']}/commands", {"command": sampler})
    assert r.status == 201, r
    server.hold_receive_pack_s = 1.5
    try:
        r = git(clients, sbx, "push", path=REPO, username=USER, password=TOKEN)
    finally:
        server.hold_receive_pack_s = 0
        sh(clients, sbx, "touch /tmp/stop-sampling; sleep 0.5")
    assert r["exit_code"] == 0, r
    assert host_git("--git-dir", host_repo["bare"], "log", "-1", "--format=%s|%an", "feature") == "add things|Ada\n"
    # The upstream is set (a single-branch clone, as a shallow one is, has no tracking ref for it).
    assert sh(clients, sbx, f"git -C {REPO} config branch.feature.merge")["stdout"] == "refs/heads/feature\n"

    sampled = read_file(clients, sbx, "/tmp/sampled.txt")
    assert "git-remote-http" in sampled, sampled[:2000]  # the sampler saw the push's processes
    assert "GIT_ASKPASS=" in sampled and "GIT_TERMINAL_PROMPT=0" in sampled
    assert TOKEN not in sampled


def test_push_with_a_wrong_token_fails_fast(clients, sbx, host_repo):
    sh(clients, sbx, f"cd {REPO} && echo again >> new.txt")
    assert git(clients, sbx, "commit", path=REPO, message="second change", files=["new.txt"],
               author="Ada <ada@example.com>")["exit_code"] == 0
    started = time.time()
    r = git(clients, sbx, "push", path=REPO, username=USER, password="wrong-" + secrets.token_hex(8))
    assert r["exit_code"] != 0 and not r["timed_out"], r
    assert time.time() - started < 30
    assert "Authentication failed" in r["stderr"], r["stderr"]
    assert host_git("--git-dir", host_repo["bare"], "log", "-1", "--format=%s", "feature") == "add things\n"


def test_pull_gets_a_commit_made_on_the_host(clients, sbx, host_repo):
    work = host_repo["work"]
    with open(os.path.join(work, "from-host.txt"), "w") as f:
        f.write("made on the host\n")
    host_git("add", "from-host.txt", cwd=work)
    host_git("commit", "-m", "host commit", cwd=work)
    host_git("push", "origin", "main", cwd=work)

    assert git(clients, sbx, "checkout", path=REPO, branch="main")["exit_code"] == 0
    st = git(clients, sbx, "status", path=REPO)
    assert st["branch"] == "main" and st["behind"] == 0  # not fetched yet
    r = git(clients, sbx, "pull", path=REPO, username=USER, password=TOKEN)
    assert r["exit_code"] == 0, r
    assert sh(clients, sbx, f"cat {REPO}/from-host.txt")["stdout"] == "made on the host\n"
    st = git(clients, sbx, "status", path=REPO)
    assert (st["branch"], st["ahead"], st["behind"]) == ("main", 0, 0)


def test_bad_requests_are_400_with_the_error_shape(clients, sbx):
    for op, body, words in [
        ("status", {}, "path is required"),
        ("status", {"path": "/nonexistent/repo"}, "does not exist"),
        ("clone", {"path": "/tmp/x", "url": f"http://{USER}:{TOKEN}@{HOST}/repo.git"}, "must not carry a password"),
        ("clone", {"path": "/tmp/x", "url": "http://h/r", "depth": 0}, "depth"),
        ("commit", {"path": REPO}, "message is required"),
        ("add", {"path": REPO, "password": TOKEN}, "password does not apply to add"),
        ("push", {"path": REPO, "password": TOKEN + "\n"}, "line breaks"),
    ]:
        r = clients["member"].post(f"/v1/sandboxes/{sbx['id']}/git/{op}", body)
        assert r.status == 400, (op, body, r)
        err = r.json()["error"]
        assert err["code"] == "invalid_argument" and words in err["message"], err
        assert TOKEN not in r.body.decode()
        assert err["request_id"] == r.headers.get("X-Request-Id")
    r = clients["member"].post(f"/v1/sandboxes/{sbx['id']}/git/fetch", {"path": REPO})
    assert r.status == 404 and r.json()["error"]["code"] == "not_found", r


def test_the_token_is_nowhere(clients, sbx, git_daemon):
    config = read_file(clients, sbx, f"{REPO}/.git/config")
    assert TOKEN not in config and "password" not in config.lower(), config
    assert f"url = http://{HOST}:" in config
    # No file of the sandbox holds it (the needle travels in an environment variable, which
    # the audit chain records by name only).
    r = sh(clients, sbx, 'grep -rlsF -D skip --exclude-dir=proc --exclude-dir=sys -e "$NEEDLE" / ; echo "rc=$?"',
           env={"NEEDLE": TOKEN})
    assert r["stdout"] == "rc=1\n", r
    r = sh(clients, sbx, 'grep -rlsF -D skip --exclude-dir=proc --exclude-dir=sys -e "$NEEDLE" /',
           env={"NEEDLE": "made on the host"})
    assert f"{REPO}/from-host.txt" in r["stdout"].split(), r  # the same search does find things
    with open(git_daemon.log_path) as f:
        log = f.read()
    assert TOKEN not in log
    # Git went through the egress proxy.
    assert any("egress" in line and "decision=allow" in line and f"host={HOST}" in line for line in log.splitlines())
    r = clients["admin"].get("/v1/audit?limit=1000")
    assert r.status == 200, r
    assert TOKEN not in r.body.decode()
    actions = [e["action"] for e in r.json()["items"] if e.get("target") == sbx["id"]]
    for op in ("clone", "status", "add", "commit", "checkout", "branches", "push", "pull"):
        assert f"sandbox.git.{op}" in actions, (op, sorted(set(actions)))
