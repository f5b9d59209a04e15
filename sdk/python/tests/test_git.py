"""sandbox.git against the live daemon, local operations only.

The daemon these tests run against (tests/integration/with_daemon.py) has the default egress
policy, which does not let a sandbox reach a git server on the host's loopback (that needs
egress.allowed_ranges; tests/integration/test_git.py covers remotes, credentials and the
proxy). So the remote here is a bare repository inside the sandbox, cloned by local path, and
push/pull go to it without credentials."""

import pytest

from sandfort_sdk import GitBranches, GitResult, GitStatus, InvalidArgumentError

ORIGIN = "/tmp/origin.git"
SEED = "/tmp/seed"
REPO = "/work/repo"
ADA = {"name": "Ada", "email": "ada@example.com"}


def sh(sbx, command):
    r = sbx.process.exec(command, timeout_s=60)
    assert r.exit_code == 0, r
    return r.stdout


@pytest.fixture(scope="module")
def sbx(client):
    with client.create_sandbox() as s:
        # A bare origin with one commit on main, made with the sandbox's own git.
        sh(s, f"git init -q --bare -b main {ORIGIN} && git init -q -b main {SEED} && cd {SEED} && "
              "echo '# demo' > README.md && git add README.md && "
              "git -c user.name=Seed -c user.email=seed@example.com commit -q -m first && "
              f"git push -q {ORIGIN} main")
        yield s


def test_clone_status_add_commit_checkout_branches(sbx):
    r = sbx.git.clone(ORIGIN, REPO, branch="main")
    assert isinstance(r, GitResult) and r.ok and r.op == "clone", r
    assert sbx.fs.read_text(f"{REPO}/README.md") == "# demo\n"

    st = sbx.git.status(REPO)
    assert isinstance(st, GitStatus) and st.ok, st
    assert (st.branch, st.upstream, st.ahead, st.behind, st.files) == ("main", "origin/main", 0, 0, [])
    assert len(st.commit) == 40

    sbx.fs.upload_file(f"{REPO}/new.txt", "new\n")
    sbx.fs.upload_file(f"{REPO}/README.md", "# demo\nmore\n")
    files = {f.path: f for f in sbx.git.status(REPO).files}
    assert files["new.txt"].kind == "untracked" and not files["new.txt"].staged
    assert (files["README.md"].index, files["README.md"].worktree) == (".", "M")

    assert sbx.git.add(REPO, ["new.txt"]).ok
    files = {f.path: f for f in sbx.git.status(REPO).files}
    assert files["new.txt"].index == "A" and files["new.txt"].staged
    assert not files["README.md"].staged
    assert sbx.git.add(REPO).ok  # everything
    assert {f.path: f.index for f in sbx.git.status(REPO).files} == {"README.md": "M", "new.txt": "A"}

    assert sbx.git.checkout(REPO, "feature", create=True).ok
    r = sbx.git.commit(REPO, "add things", author=ADA)
    assert r.ok and r.op == "commit", r
    st = sbx.git.status(REPO)
    assert (st.branch, st.upstream, st.files) == ("feature", None, [])
    assert sh(sbx, f"git -C {REPO} log -1 --format='%an <%ae>|%cn|%s'") == "Ada <ada@example.com>|Ada|add things\n"

    b = sbx.git.branches(REPO)
    assert isinstance(b, GitBranches) and b.ok, b
    assert b.current == "feature"
    assert sorted(x.name for x in b.branches) == ["feature", "main"]
    main = next(x for x in b.branches if x.name == "main")
    assert main.upstream == "origin/main" and not main.current and len(main.commit) == 40
    assert b.remote_branches == ["origin/main"]

    # Git's failures are values: nothing to commit, an unknown branch.
    r = sbx.git.commit(REPO, "empty", author="Ada <ada@example.com>")
    assert r.exit_code == 1 and "nothing to commit" in r.stdout, r
    r = sbx.git.checkout(REPO, "no-such-branch")
    assert r.exit_code != 0 and r.stderr


def test_push_then_pull_through_the_local_origin(sbx):
    r = sbx.git.push(REPO, branch="feature")
    assert r.ok and r.op == "push", r
    assert sh(sbx, f"git --git-dir {ORIGIN} log -1 --format=%s feature") == "add things\n"
    assert sbx.git.status(REPO).upstream == "origin/feature"

    # A commit lands on origin's main from elsewhere; pull brings it in.
    sh(sbx, f"cd {SEED} && echo later > later.txt && git add later.txt && "
            f"git -c user.name=Seed -c user.email=seed@example.com commit -q -m later && git push -q {ORIGIN} main")
    assert sbx.git.checkout(REPO, "main").ok
    r = sbx.git.pull(REPO, rebase=False)
    assert r.ok and r.op == "pull", r
    assert sbx.fs.read_text(f"{REPO}/later.txt") == "later\n"
    st = sbx.git.status(REPO)
    assert (st.branch, st.ahead, st.behind) == ("main", 0, 0)


def test_bad_requests_raise_invalid_argument(sbx):
    with pytest.raises(InvalidArgumentError, match="must not carry a password"):
        sbx.git.clone("http://u:secret@example.com/r.git", "/tmp/x")
    with pytest.raises(InvalidArgumentError, match="password does not apply to add"):
        sbx.git.add(REPO, password="secret")  # an unknown keyword goes to the daemon as it is
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        sbx.git.status("/nonexistent/repo")
