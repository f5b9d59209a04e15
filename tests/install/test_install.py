"""The SDKs (and the MCP server on an installed SDK) installed the way a user installs them,
into fresh folders, offline:

- Python: `pip install --no-index <repo>/sdk/python` into a fresh venv (pip's build isolation,
  the in-tree standard-library backend), and `python3 -m pip install --no-index
  --no-build-isolation --target DIR` with Debian's own pip; then import it from elsewhere.
- The MCP server copied out of the checkout uses the installed SDK, and says what to do without it.
- TypeScript: `npm pack` in a copy of sdk/typescript without node_modules/ or dist/ (a fresh
  clone: the `prepare` script installs the pinned TypeScript and builds dist/), the tarball
  installed into a fresh project, then `import` (ESM) and `require` (CommonJS); and
  `npm install <folder>` of such a copy (npm links it and runs `prepare` there).

Nothing here writes into the repository: sdk/typescript is copied first (its node_modules and
dist stay as they are for the suites that use them); pip builds the wheel in its own temporary
folder. npm is run with `prefer-offline` (the cache answers when it can).

With SANDFORT_BASE_URL and SANDFORT_API_KEY set (tests/integration/with_daemon.py), each
installed client also calls the live daemon (whoami; the MCP server lists sandboxes); without
them the clients are constructed and their exports checked, and the MCP server gets a
"cannot reach" tool error from a closed port.

    /usr/bin/python3 -m pytest -v tests/install
    /usr/bin/python3 tests/integration/with_daemon.py -- /usr/bin/python3 -m pytest -v tests/install
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SDK_PY = os.path.join(REPO, "sdk", "python")
SDK_TS = os.path.join(REPO, "sdk", "typescript")
MCP = os.path.join(REPO, "mcp_server", "sandfort_mcp.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
NPM = shutil.which("npm")

BASE_URL = os.environ.get("SANDFORT_BASE_URL")
API_KEY = os.environ.get("SANDFORT_API_KEY")
LIVE = bool(BASE_URL and API_KEY)
CLOSED = "http://127.0.0.1:9"  # nothing listens on the discard port


def run(cmd, cwd=None, env=None, timeout=600, check=True, input=None):
    r = subprocess.run(cmd, cwd=cwd, env=env, input=input, capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} (in {cwd}) exited {r.returncode}\n"
                             f"--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}")
    return r


def clean_env(**extra):
    """The environment of a user's shell: no daemon variables unless given, no npm settings of
    an outer npm, no PYTHONPATH pointing into the repository."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("npm_", "SANDFORT_")) and k not in ("PYTHONPATH", "NODE_PATH")}
    env.update(extra)
    return env


# ------------------------------------------------------------------------------------------------
# Python SDK
# ------------------------------------------------------------------------------------------------

PY_PROBE = r"""
import os, sys, sandfort_sdk as s
from sandfort_sdk import Client, Sandbox, SandboxPage, APIError, NotFoundError, ConfigurationError
d = os.path.dirname(s.__file__)
assert d.startswith(os.environ["EXPECT_UNDER"]), d
assert os.path.exists(os.path.join(d, "py.typed"))
assert not any(p.startswith(os.environ["REPO"]) for p in map(os.path.abspath, filter(None, sys.path))), sys.path
c = Client(os.environ.get("URL") or "http://127.0.0.1:9", os.environ.get("KEY") or "sfk_x")
assert c.sandbox("x").id == "x"
print(s.__version__, c.whoami().auth if os.environ.get("URL") else "constructed")
"""


def check_python_import(python, expect_under, extra_env=None):
    env = clean_env(EXPECT_UNDER=expect_under, REPO=REPO, **(extra_env or {}))
    if LIVE:
        env.update(URL=BASE_URL, KEY=API_KEY)
    out = run([python, "-c", PY_PROBE], cwd=os.path.dirname(expect_under), env=env)
    assert out.stdout.split() == ["0.1.0", "api_key" if LIVE else "constructed"], out.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv (Debian's python3-venv) with `pip install --no-index <repo>/sdk/python`."""
    root = tmp_path_factory.mktemp("pyvenv")
    venv = root / "venv"
    run([PYTHON, "-m", "venv", str(venv)], env=clean_env())
    py = str(venv / "bin" / "python")
    r = run([py, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", SDK_PY],
            cwd=str(root), env=clean_env())
    assert "Successfully installed sandfort-sdk-0.1.0" in r.stdout, r.stdout
    return venv


def test_pip_install_into_a_fresh_venv(venv):
    check_python_import(str(venv / "bin" / "python"), str(venv))


def test_pip_install_target_without_build_isolation(tmp_path):
    """Debian's pip and the system interpreter, no venv and no index: --target a folder."""
    if run([PYTHON, "-m", "pip", "--version"], check=False).returncode != 0:
        pytest.fail(f"{PYTHON} -m pip is missing: install Debian's python3-pip")
    target = tmp_path / "site"
    run([PYTHON, "-m", "pip", "install", "--no-index", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(target), SDK_PY],
        cwd=str(tmp_path), env=clean_env())
    assert (target / "sandfort_sdk" / "__init__.py").exists()
    assert (target / "sandfort_sdk-0.1.0.dist-info" / "METADATA").exists()
    check_python_import(PYTHON, str(target), {"PYTHONPATH": str(target)})


def mcp_converse(python, script, env, lines):
    inp = "".join(json.dumps(m) + "\n" for m in lines)
    r = run([python, script], cwd=os.path.dirname(script), env=env, input=inp, check=False,
            timeout=120)
    return r, [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_mcp_server_outside_a_checkout_uses_the_installed_sdk(venv, tmp_path):
    alone = tmp_path / "mcp"
    alone.mkdir()
    script = str(alone / "sandfort_mcp.py")
    shutil.copy(MCP, script)
    env = clean_env(SANDFORT_BASE_URL=BASE_URL if LIVE else CLOSED, SANDFORT_API_KEY=API_KEY or "sfk_x")
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "install-test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "list_sandboxes", "arguments": {"limit": 1}}},
    ]
    r, answers = mcp_converse(str(venv / "bin" / "python"), script, env, lines)
    assert r.returncode == 0, r.stderr
    by_id = {a["id"]: a for a in answers}
    assert by_id[1]["result"]["serverInfo"]["name"] == "sandfort"
    # The installed copy offers every tool the checkout's server offers (beside its own SDK).
    r_here, here = mcp_converse(PYTHON, MCP, env, lines[:3])
    assert r_here.returncode == 0, r_here.stderr
    in_checkout = sorted(t["name"] for t in {a["id"]: a for a in here}[2]["result"]["tools"])
    assert sorted(t["name"] for t in by_id[2]["result"]["tools"]) == in_checkout
    assert {"create_sandbox", "list_snapshots", "get_preview_link", "start_command"} <= set(in_checkout)
    call = by_id[3]["result"]
    if LIVE:
        assert call["isError"] is False, call
        assert "sandboxes" in call["structuredContent"]
    else:
        assert call["isError"] is True
        assert "cannot reach sandfortd at http://127.0.0.1:9" in call["content"][0]["text"]
    # The log names the SDK it uses: the venv's, not the repository's.
    assert f"sandfort_sdk 0.1.0 from {venv}" in r.stderr, r.stderr

    # The same copy with an interpreter that has no SDK: a clear message and exit status 1.
    r, answers = mcp_converse(PYTHON, script, env, lines[:1])
    assert r.returncode == 1 and answers == []
    assert "cannot use the Sandfort Python SDK" in r.stderr
    assert "pip install /path/to/sandfort/sdk/python" in r.stderr


# ------------------------------------------------------------------------------------------------
# TypeScript SDK
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def npm():
    """npm: a test without it is skipped, and fails under CI=true (scripts/setup installs it)."""
    if NPM is None:
        why = "npm is not installed (Debian: apt-get install npm)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return NPM


def copy_ts_sources(dest):
    """sdk/typescript as a fresh clone has it: no node_modules/, no dist/, no tarballs."""
    def ignore(folder, names):
        skip = {"node_modules", "dist"}
        if os.path.abspath(folder) == SDK_TS:
            skip |= {"test", "testlib"}
        return [n for n in names if n in skip or n.endswith(".tgz")]
    shutil.copytree(SDK_TS, dest, ignore=ignore, symlinks=True)
    assert not os.path.exists(os.path.join(dest, "dist"))
    assert os.path.exists(os.path.join(dest, "src", "index.ts"))
    return dest


def npm_env():
    return clean_env(npm_config_prefer_offline="true", npm_config_audit="false",
                     npm_config_fund="false", npm_config_update_notifier="false")


def new_project(folder):
    os.makedirs(folder)
    with open(os.path.join(folder, "package.json"), "w") as f:
        json.dump({"name": "my-agent", "version": "1.0.0", "private": True}, f)
    return folder


TS_PROBE = """
const ok = typeof SandfortClient === "function" && typeof Sandbox === "function"
  && typeof Sandbox.create === "function" && typeof SandfortError === "function" && typeof verifyChain === "function";
const url = process.env.URL, key = process.env.KEY;
const c = new SandfortClient({ baseUrl: url || "http://127.0.0.1:9", apiKey: key || "sfk_x" });
const e = new SandfortError("x", { code: "not_found", status: 404 });
(url ? c.whoami().then((w) => w.auth) : Promise.resolve("constructed"))
  .then((how) => console.log(KIND, ok, e instanceof Error, how))
  .catch((err) => { console.error(err); process.exit(1); });
"""


def check_ts_import(project):
    with open(os.path.join(project, "esm.mjs"), "w") as f:
        f.write('import { SandfortClient, Sandbox, SandfortError, verifyChain } from "@sandfort/sdk";\n'
                'const KIND = "esm";\n' + TS_PROBE)
    with open(os.path.join(project, "cjs.cjs"), "w") as f:
        f.write('const { SandfortClient, Sandbox, SandfortError, verifyChain } = require("@sandfort/sdk");\n'
                'const KIND = "cjs";\n' + TS_PROBE)
    env = clean_env(**({"URL": BASE_URL, "KEY": API_KEY} if LIVE else {}))
    how = "api_key" if LIVE else "constructed"
    for kind in ("esm", "cjs"):
        out = run(["node", f"{kind}.{'mjs' if kind == 'esm' else 'cjs'}"], cwd=project, env=env)
        assert out.stdout.split() == [kind, "true", "true", how], out.stdout + out.stderr


@pytest.mark.usefixtures("npm")
def test_npm_pack_in_a_fresh_clone_then_install_the_tarball(tmp_path):
    src = copy_ts_sources(str(tmp_path / "sandfort" / "sdk" / "typescript"))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    # `npm pack` alone: `prepare` installs the build tools and builds dist/ first.
    r = run([NPM, "pack", "--json", "--pack-destination", str(out_dir)], cwd=src, env=npm_env())
    [info] = json.loads(r.stdout)  # stdout is only npm's JSON: prepare writes to stderr
    files = {f["path"] for f in info["files"]}
    for f in ("package.json", "README.md", "dist/esm/index.js", "dist/cjs/index.js",
              "dist/cjs/package.json", "dist/types/index.d.ts", "dist/cjs/index.d.ts"):
        assert f in files, f
    assert not any(f.startswith(("src/", "test/", "scripts/", "node_modules/")) for f in files), files
    tarball = out_dir / info["filename"]
    assert info["filename"] == "sandfort-sdk-0.1.0.tgz" and tarball.exists()

    project = new_project(str(tmp_path / "my-agent"))
    run([NPM, "install", str(tarball)], cwd=project, env=npm_env())
    installed = os.path.join(project, "node_modules", "@sandfort", "sdk")
    assert os.path.isdir(installed) and not os.path.islink(installed)
    with open(os.path.join(project, "package.json")) as f:
        assert json.load(f)["dependencies"]["@sandfort/sdk"].startswith("file:")
    check_ts_import(project)
    # The installed copy is whole without the clone.
    shutil.rmtree(tmp_path / "sandfort")
    check_ts_import(project)


@pytest.mark.usefixtures("npm")
def test_npm_install_of_the_folder_builds_it(tmp_path):
    src = copy_ts_sources(str(tmp_path / "sandfort" / "sdk" / "typescript"))
    project = new_project(str(tmp_path / "my-agent"))
    run([NPM, "install", src], cwd=project, env=npm_env())
    installed = os.path.join(project, "node_modules", "@sandfort", "sdk")
    # npm links the folder and runs its `prepare`: dist/ is built in the folder.
    assert os.path.islink(installed) and os.path.realpath(installed) == os.path.realpath(src)
    assert os.path.exists(os.path.join(src, "dist", "esm", "index.js"))
    check_ts_import(project)
