"""Runs every example in examples/ and every gate in examples/gates/ against a real sandfortd and
the real Docker engine, and checks their exit status and what they print.

    SANDFORT_BUILD_DIR=$PWD/build /usr/bin/python3 -m pytest -q tests/examples

One daemon for the module (tests/integration/sandfort_harness.py), configured like the egress
suite: the operator allows 127.0.0.0/8 (egress.allowed_ranges) so that the egress gate has an
allowlisted target without internet access — a server of this test on the host's loopback, which
must see the gate's request arrive through the proxy. Everything else is the shipped default.
Needs root, Docker and sandfort/base:bookworm like the integration suites; node for the
TypeScript example; build/cli/sandfort for the CLI walkthrough and the audit gate."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
EXAMPLES = os.path.join(REPO, "examples")
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from sandfort_harness import BUILD, Daemon, HostUpstream, require_runsc  # noqa: E402

PYTHON = "/usr/bin/python3"
CLI = os.environ.get("SANDFORT_CLI", os.path.join(BUILD, "cli", "sandfort"))
SANDFORTD = os.path.join(BUILD, "src", "sandfortd", "sandfortd")


@pytest.fixture(scope="module")
def upstream():
    u = HostUpstream()
    yield u
    u.close()


@pytest.fixture(scope="module")
def daemon():
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8"}}).start()
    yield d
    d.stop_and_cleanup()


def daemon_env(daemon):
    return dict(os.environ, SANDFORT_BASE_URL=f"http://127.0.0.1:{daemon.port}", SANDFORT_API_KEY=daemon.admin_key,
                SANDFORT_PREVIEW_PORT=str(daemon.preview_port), SANDFORT_CLI=CLI)


@pytest.fixture(scope="module")
def env(daemon):
    return daemon_env(daemon)


def run(args, env, cwd=REPO, timeout=600):
    out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    print(out.stdout)
    print(out.stderr, file=sys.stderr)
    return out


def assert_no_sandbox_left(daemon):
    items = daemon.admin().get("/v1/sandboxes").json()["items"]
    assert [s["id"] for s in items if s["state"] != "deleted"] == [], items


# --- examples ----------------------------------------------------------------------------------

def test_python_agent_loop(daemon, env):
    out = run([PYTHON, "examples/python/agent_loop.py"], env)
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert re.search(r"^sandbox sbx-[0-9a-f]{16} is started$", out.stdout, re.M), out.stdout
    assert any(l.startswith("attempt 1: exit_code=1 stderr: NameError: name 'dta' is not defined") for l in lines)
    assert any(l.startswith("attempt 2: exit_code=1 stderr: AssertionError: unexpected output") for l in lines)
    assert "attempt 3 passed: mean=3.875 median=3.5" in lines
    assert lines[-1] == "PASSED after 3 attempts"
    assert_no_sandbox_left(daemon)


def check_ts_output(out):
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert "attempt 1: exit_code=1 stderr: ReferenceError: dta is not defined" in lines, lines
    assert any(l.startswith("attempt 2: exit_code=1 stderr: unexpected output") for l in lines)
    assert "attempt 3 passed: mean=3.875 median=3.5" in lines
    assert lines[-1] == "PASSED after 3 attempts"


def test_typescript_agent_loop_from_the_repository(daemon, env):
    assert os.path.exists(os.path.join(REPO, "sdk", "typescript", "dist", "esm", "index.js")), "build the TS SDK"
    out = run(["node", "examples/typescript/agent_loop.mjs"], env)
    check_ts_output(out)
    assert_no_sandbox_left(daemon)


def test_typescript_agent_loop_as_an_installed_package(daemon, env, tmp_path):
    """The way a user has it: @sandfort/sdk in node_modules (what `npm install` of the example's
    `file:` dependency makes: a link to sdk/typescript), resolved through its package.json exports."""
    shutil.copy(os.path.join(EXAMPLES, "typescript", "agent_loop.mjs"), tmp_path)
    shutil.copy(os.path.join(EXAMPLES, "typescript", "package.json"), tmp_path)
    (tmp_path / "node_modules" / "@sandfort").mkdir(parents=True)
    os.symlink(os.path.join(REPO, "sdk", "typescript"), tmp_path / "node_modules" / "@sandfort" / "sdk")
    out = run(["node", "agent_loop.mjs"], env, cwd=str(tmp_path))
    assert "sdk: @sandfort/sdk" in out.stdout.splitlines(), out.stdout
    check_ts_output(out)


def test_mcp_client_with_the_configuration(daemon, env, tmp_path):
    """The configuration as a client would use it: a venv's python (docs/mcp.md), absolute paths."""
    subprocess.run([PYTHON, "-m", "venv", str(tmp_path / ".venv")], check=True)
    config = json.load(open(os.path.join(EXAMPLES, "mcp", "mcp_config.json")))
    server = config["mcpServers"]["sandfort"]
    assert server["args"] == ["mcp_server/sandfort_mcp.py"] and set(server["env"]) >= {"SANDFORT_BASE_URL", "SANDFORT_API_KEY"}
    server["command"] = str(tmp_path / ".venv" / "bin" / "python")
    server["args"] = [os.path.join(REPO, "mcp_server", "sandfort_mcp.py")]
    server["env"] = {"SANDFORT_BASE_URL": env["SANDFORT_BASE_URL"], "SANDFORT_API_KEY": env["SANDFORT_API_KEY"]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    clean = {k: v for k, v in env.items() if k not in ("SANDFORT_BASE_URL", "SANDFORT_API_KEY")}
    out = run([PYTHON, "examples/mcp/mcp_client.py", "--config", str(tmp_path / "config.json")], clean)
    assert out.returncode == 0, out
    for expected in ("initialize: server sandfort", "tools/list: create_sandbox, create_snapshot, delete_sandbox",
                     "run_command: exit_code=3 stdout='hello from sandbox\\n'", "run_code: exit_code=0 stdout='42\\n'",
                     "upload_text_file + download_text_file: 'über\\n'", "delete_sandbox: {'deleted': 'sbx-",
                     "MCP example OK"):
        assert expected in out.stdout, (expected, out.stdout)
    assert_no_sandbox_left(daemon)


def test_mcp_client_with_the_shipped_configuration(daemon, env):
    out = run([PYTHON, "examples/mcp/mcp_client.py"], env)
    assert out.returncode == 0, out
    assert "MCP example OK" in out.stdout
    assert_no_sandbox_left(daemon)


def test_cli_walkthrough(daemon, env, tmp_path):
    assert os.access(CLI, os.X_OK), f"no CLI at {CLI}"
    out = run(["bash", "examples/cli/walkthrough.sh"], dict(env, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path)))
    assert out.returncode == 0, out
    for expected in ("==> sandfort sandbox create --wait", "exit status: 7", "downloaded: hello from an uploaded file",
                     "directory round trip identical", "==> sandfort snapshot create", "CLI walkthrough OK"):
        assert expected in out.stdout, (expected, out.stdout)
    assert re.search(r"^created sbx-[0-9a-f]{16} from walkthrough-", out.stdout, re.M)
    assert_no_sandbox_left(daemon)


def test_preview_example(daemon, env):
    out = run([PYTHON, "examples/preview/preview.py"], env)
    assert out.returncode == 0, out
    url = re.search(r"^preview URL: (http://3000-sbx-[0-9a-f]{16}\.preview\.localhost:(\d+))$", out.stdout, re.M)
    assert url and int(url.group(2)) == daemon.preview_port, out.stdout
    for expected in ("with X-Sandfort-Preview-Token -> 200: <!doctype html>", "without the token -> 401",
                     "?sandfort_token=... -> 200, with a cookie", "with that cookie -> 200", "preview example OK"):
        assert expected in out.stdout, (expected, out.stdout)
    assert_no_sandbox_left(daemon)


# --- gates -------------------------------------------------------------------------------------

GATE_CHECKS = {
    "isolation": ["fork bomb contained", "169.254.169.254 unreachable", "env | grep SANDFORT_ shows nothing secret",
                  "/var/run/docker.sock absent", "other sandboxes unreachable", "host unreachable except the proxy port"],
    "egress": ["allowlisted host (localhost) works through the proxy", "another host gets 403",
               "forged proxy credential gets 407", "allowlist change applies at once"],
    "tenancy": ["sandbox routes by id", "sandbox routes by name", "snapshots by name and id", "volumes by name and id",
                "API keys, secrets, webhooks, audit, limits, egress defaults, kill switch of A's organization", "lists", "organization A untouched"],
    "audit": ["GET /v1/audit/verify ok", "downloaded chain verifies offline against the public key",
              "tampered copies fail verification", "sandfort audit verify (CLI) passes, fails on a forged checkpoint",
              "sandfortd audit-verify passes on a copy of the database, fails on a tampered copy"],
    "speed": ["20 creates", "50 short commands", "cleanup"],
}


# Sandboxes with no network interface (gVisor) have no proxy credential to forge: the egress gate
# checks that a claimed identity is not believed instead (examples/gates/egress.py).
GVISOR_GATE_CHECKS = dict(GATE_CHECKS, egress=[
    "allowlisted host (localhost) works through the proxy", "another host gets 403",
    "a claimed identity is not believed (the door is the identity)", "allowlist change applies at once"])


def gate_env_for(daemon, upstream):
    return dict(daemon_env(daemon), SANDFORT_GATE_ALLOWED_URL=f"http://localhost:{upstream.port}/gate",
                SANDFORT_GATE_SANDFORTD_CONFIG=daemon.config_path, SANDFORT_GATE_SANDFORTD=SANDFORTD,
                SANDFORT_GATE_STRICT="1", PYTHON=PYTHON)


@pytest.fixture(scope="module")
def gate_env(daemon, upstream):
    return gate_env_for(daemon, upstream)


def test_every_gate_through_run_all(daemon, gate_env, upstream):
    before = len(upstream.paths)
    out = run(["bash", "examples/gates/run_all.sh"], gate_env, timeout=1200)
    check_every_gate_passed(out, GATE_CHECKS, upstream.paths[before:])
    assert_no_sandbox_left(daemon)


def test_every_gate_on_gvisor(upstream):
    """The same gates against a daemon whose sandboxes are gVisor's (default_runtime gvisor): no
    network interface, the agent dialing home, runsc's own limits (docs/gvisor.md)."""
    require_runsc()
    d = Daemon({"egress": {"allowed_ranges": "127.0.0.0/8"}, "default_runtime": "gvisor"}).start()
    try:
        before = len(upstream.paths)
        out = run(["bash", "examples/gates/run_all.sh"], gate_env_for(d, upstream), timeout=1200)
        check_every_gate_passed(out, GVISOR_GATE_CHECKS, upstream.paths[before:])
        # The gates met gVisor sandboxes, and said so.
        assert "PASS isolation: fork bomb contained (pids 128 (gVisor): the sandbox ended whole" in out.stdout
        assert "PASS isolation: host unreachable except the proxy port (no interface but lo;" in out.stdout
        assert_no_sandbox_left(d)
    finally:
        d.stop_and_cleanup()


def check_every_gate_passed(out, gate_checks, arrived):
    """run_all's output has every check of every gate passed; `arrived`: the paths the upstream
    was asked for during the run."""
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert not [l for l in lines if l.startswith(("FAIL", "SKIP"))], out.stdout
    for gate, checks in gate_checks.items():
        for check in checks:
            assert any(l.startswith(f"PASS {gate}: {check}") for l in lines), (gate, check, out.stdout)
        assert f"{gate}: {len(checks)} passed, 0 failed" in lines, (gate, out.stdout)
    assert lines[-1] == "all gates passed: isolation egress tenancy audit speed"
    assert "/gate" in arrived  # the egress gate's request arrived, through the proxy
    assert re.search(r"^machine: .*\d+ cores .* memory, kernel ", out.stdout, re.M)
    assert re.search(r"20 creates waiting for started: p50 [\d.]+ ms, p99 [\d.]+ ms", out.stdout)
    assert re.search(r"50 short commands: p50 [\d.]+ ms, p99 [\d.]+ ms", out.stdout)


def offline_env(gate_env, **extra):
    """The gates' environment without an allowlisted URL, as an operator of an offline host has it."""
    return dict({k: v for k, v in gate_env.items() if k != "SANDFORT_GATE_ALLOWED_URL"}, **extra)


def check_egress_passed_with_its_own_upstream(out):
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert not [l for l in lines if l.startswith(("FAIL", "SKIP"))], out.stdout
    local = re.search(r"^note: local upstream (http://localhost:\d+/gate-[0-9a-f]{8})$", out.stdout, re.M)
    assert local, out.stdout
    # The gate's own server saw the request arrive through the proxy.
    assert re.search(r"^PASS egress: allowlisted host \(localhost\) works through the proxy \("
                     + re.escape(local.group(1)) + r" -> 200, [1-9]\d* requests arrived through ", out.stdout, re.M), out.stdout
    for check in GATE_CHECKS["egress"]:
        assert any(l.startswith(f"PASS egress: {check}") for l in lines), (check, out.stdout)
    assert lines[-1] == "all gates passed: egress"


def test_egress_gate_offline_with_its_own_upstream(daemon, gate_env):
    """SANDFORT_GATE_UPSTREAM=local (examples/README.md): no URL to reach, the gate serves its own
    target on 127.0.0.1, which the deployment allows in egress.allowed_ranges."""
    out = run(["bash", "examples/gates/run_all.sh", "egress"], offline_env(gate_env, SANDFORT_GATE_UPSTREAM="local"))
    check_egress_passed_with_its_own_upstream(out)
    assert_no_sandbox_left(daemon)


def test_egress_gate_goes_offline_by_itself_when_nothing_resolves(daemon, gate_env):
    """Neither variable set on a host that resolves no internet name (here: a name under .invalid,
    which never resolves): the gate says so and uses its own upstream."""
    out = run(["bash", "examples/gates/run_all.sh", "egress"],
              offline_env(gate_env, SANDFORT_GATE_PROBE_HOST="sandfort-gate.invalid"))
    assert "note: sandfort-gate.invalid does not resolve here (no internet?)" in out.stdout, out.stdout
    check_egress_passed_with_its_own_upstream(out)


def test_a_failing_check_fails_the_gate_and_run_all(daemon, gate_env):
    """The gates exit non-zero on a failure: an allowlisted target that does not answer fails the
    egress gate, and run_all reports it."""
    out = run(["bash", "examples/gates/run_all.sh", "egress"],
              dict(gate_env, SANDFORT_GATE_ALLOWED_URL="http://localhost:1/"))
    assert out.returncode == 1, out
    assert re.search(r"^FAIL egress: allowlisted host \(localhost\) works through the proxy — ", out.stdout, re.M)
    assert "FAILED gates: egress" in out.stdout
    out = run([PYTHON, "examples/gates/tenancy.py"], dict(gate_env, SANDFORT_API_KEY="sfk_invalid"))
    assert out.returncode == 1 and "FAIL tenancy: setup — AuthenticationError" in out.stdout, out


def test_tenancy_gate_covers_every_resource_route_of_the_api():
    """Every route of docs/api.md's role table that names a sandbox, snapshot, volume, key or
    organization is probed by the tenancy gate (superadmin-only routes excepted: their role check
    comes first and names nothing)."""
    docs = open(os.path.join(REPO, "docs", "api.md")).read()
    section = docs[docs.index("## Roles, route by route"):]
    table = re.findall(r"^\| (GET|POST|PUT|PATCH|DELETE) \| `([^`]+)` \| (\w+) \|$", section, re.M)
    probed = subprocess.run([PYTHON, os.path.join(EXAMPLES, "gates", "tenancy.py"), "--list-routes"],
                            capture_output=True, text=True, check=True).stdout
    seen = set()
    for line in probed.splitlines():
        method, path, _ = line.split()
        path = path.split("?")[0].split("#")[0]
        path = re.sub(r"\{(sbx)\}", "{id}", path)
        path = re.sub(r"\{(snap|snap_id|vol|vol_id|session|secret)\}", "{name}", path)
        path = re.sub(r"\{key\}", "{id}", path)
        # {webhook} is named alike in docs/api.md: nothing to map.
        path = re.sub(r"/preview/8080$", "/preview/{port}", path)
        seen.add((method, path))
    missing = [(m, p) for m, p, role in table
               if "{" in p and role != "superadmin" and (m, p) not in seen]
    assert not missing, missing
