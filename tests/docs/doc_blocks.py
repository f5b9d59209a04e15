"""The fenced blocks of the user-facing docs, and how each runnable one is run against a daemon.

The conventions (which fences run, their environment, shared state, placeholders, the not-run
marker) are written down in tests/docs/README.md; this module is their implementation.
Standard library only.
"""

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SANDFORT_BUILD_DIR", os.path.join(REPO, "build"))
CLI_DIR = os.path.dirname(os.environ.get("SANDFORT_CLI", os.path.join(BUILD, "cli", "sandfort")))
TS_SDK = os.path.join(REPO, "sdk", "typescript")
PYTHON = "/usr/bin/python3"

# The files whose blocks run, in the order they run.
DOC_FILES = ["README.md", "docs/cli.md", "docs/sdk-python.md", "docs/sdk-typescript.md", "docs/mcp.md",
             "docs/audit.md", "docs/console.md"]

# Fence language -> how it runs. Every other language is not run; a fence without one is an error.
RUNNERS = {"sh": "shell", "bash": "shell", "python": "python", "ts": "ts", "typescript": "ts",
           "js": "js", "javascript": "js"}

BLOCK_TIMEOUT_S = 300
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*not run:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)")


@dataclasses.dataclass
class Block:
    path: str           # relative to the repository, e.g. "docs/cli.md"
    line: int           # 1-based line of the opening fence
    lang: str           # the fence's language ("" when none)
    text: str           # the content, its indentation removed
    not_run: str = None  # the marker's reason, when the block carries one

    @property
    def runner(self):
        return RUNNERS.get(self.lang.lower())

    @property
    def id(self):
        return f"{self.path}:{self.line}"

    def numbered(self, text=None):
        """The block's lines numbered as in the markdown file."""
        lines = (self.text if text is None else text).split("\n")
        return "\n".join(f"{self.line + 1 + i:5} | {line}" for i, line in enumerate(lines))


def extract(path):
    """Every fenced block of a markdown file (relative to the repository), in order, and the lines
    that look like a not-run marker but do not parse as one."""
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return parse(path, f.read())


def parse(path, markdown):
    """extract() on text: the blocks and the malformed markers."""
    lines = markdown.split("\n")
    blocks, bad_markers = [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if "doc-test" in lines[i] and not MARKER.match(lines[i]):
            bad_markers.append(f"{path}:{i + 1}: {lines[i].strip()}")
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
        start = i
        body = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and stripped.strip(fence[0]) == "":
                break
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        reason = None
        j = start - 1
        while j >= 0 and lines[j].strip() == "":
            j -= 1
        if j >= 0:
            mm = MARKER.match(lines[j])
            if mm:
                reason = mm.group(1)
        blocks.append(Block(path, start + 1, lang, "\n".join(body), reason))
        i += 1
    return blocks, bad_markers


def runnable_blocks():
    return [b for path in DOC_FILES for b in extract(path)[0] if b.runner and b.not_run is None]


# What a doc block must not start from a test: the whole CI, a build, another test suite, a second
# deployment. Such a block fails, naming the match, until it carries a not-run marker.
FORBIDDEN = re.compile(r"scripts/(test|setup|build|fuzz|package)\b|\.ci/run|build-base-image|\bcmake\b|\bninja\b"
                       r"|with_daemon\.py|\bpytest\b|node --test|\bnpm (ci|test|run)\b|\bdocker\b|sandfortd (serve|admin)")


def forbidden(block):
    """The first thing in the block a doc test must not run, or None."""
    m = FORBIDDEN.search(block.text) if block.runner == "shell" else None
    return m.group(0) if m else None


SCRIPTS_RUN_LINE = re.compile(r"^\./scripts/run(\s.*)?$", re.M)


def substitute(block, ctx):
    """The block's text with the placeholders of tests/docs/README.md replaced."""
    text = block.text
    if "sbx-…" in text:
        text = text.replace("sbx-…", ctx.sandbox_id())
    text = text.replace("sfk_…", ctx.key).replace("http://127.0.0.1:8080", ctx.url)
    text = text.replace("preview.localhost:8081", f"preview.localhost:{ctx.preview_port}")
    if block.path == "README.md" and block.runner == "shell":
        # README's quick start: the daemon is already running; print what scripts/run prints.
        text = SCRIPTS_RUN_LINE.sub(
            lambda _: "printf 'Sandfort is running at %s\\nAdmin API key: %s\\n' \"$URL\" \"$KEY\"", text)
    return text


# The shell session of one doc file: each sh/bash block runs in a fresh bash that first restores
# the variables, functions and directory the previous block left, and saves them when it ends
# (also when it fails).
SHELL_PRELUDE = r"""
if [ -f "$__SF_STATE" ]; then source "$__SF_STATE"; fi
cd "$(cat "$__SF_CWD")"
curl() { command curl --fail-with-body "$@"; }
__sf_save() {
  local __sf_rc=$?
  {
    local __sf_name
    for __sf_name in $(compgen -v); do
      case $__sf_name in
        BASH*|FUNCNAME|PIPESTATUS|GROUPS|DIRSTACK|RANDOM|SRANDOM|SECONDS|LINENO|HISTCMD|EPOCH*|PPID|UID|EUID|\
        SHELLOPTS|SHLVL|PWD|OLDPWD|_|COMP_*|__sf_*|IFS|OPTIND|OPTARG|OPTERR|HOSTNAME|HOSTTYPE|MACHTYPE|OSTYPE) continue ;;
      esac
      case "$(declare -p "$__sf_name" 2>/dev/null)" in "declare -"*r*" "*) continue ;; esac
      declare -p "$__sf_name" 2>/dev/null
    done
    declare -f | sed '/^curl ()/,/^}/d; /^__sf_save ()/,/^}/d'
  } > "$__SF_STATE.new" && mv "$__SF_STATE.new" "$__SF_STATE"
  pwd > "$__SF_CWD"
  return $__sf_rc
}
trap __sf_save EXIT
set -eo pipefail
"""

TS_TRANSPILE = r"""
const ts = require(process.argv[1]);
const fs = require("fs");
const src = fs.readFileSync(process.argv[2], "utf8");
const out = ts.transpileModule(src, {fileName: process.argv[2], reportDiagnostics: true,
  compilerOptions: {module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022}});
const errors = (out.diagnostics || []).filter(d => d.category === ts.DiagnosticCategory.Error);
if (errors.length) {
  for (const d of errors) console.error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
  process.exit(1);
}
fs.writeFileSync(process.argv[3], out.outputText);
"""


class Outcome:
    def __init__(self, code, stdout, stderr, ran):
        self.code, self.stdout, self.stderr, self.ran = code, stdout, stderr, ran


def copy_checkout(dest):
    """The repository's tracked files as they are on disk (uncommitted changes included), copied:
    what a block writes "from the repository root" stays out of the checkout."""
    out = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True, check=True).stdout
    for rel in out.decode().split("\0"):
        src = os.path.join(REPO, rel)
        if not rel or not os.path.lexists(src):
            continue
        dst = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)


class DocSession:
    """The environment of one doc file's blocks: a daemon of its own, a temporary HOME with the CLI
    logged in, a working directory holding a copy of the checkout, the shell state."""

    def __init__(self, path, daemon):
        self.path = path
        self.daemon = daemon
        self.url = f"http://127.0.0.1:{daemon.port}"
        self.key = daemon.admin_key
        self.preview_port = daemon.preview_port
        self.root = tempfile.mkdtemp(prefix="sf-docs-")
        self.home = os.path.join(self.root, "home")
        self.work = os.path.join(self.root, "work")
        self.blocks_dir = os.path.join(self.root, "blocks")
        for d in (self.home, self.work, self.blocks_dir, os.path.join(self.blocks_dir, "node_modules", "@sandfort")):
            os.makedirs(d)
        copy_checkout(self.work)
        os.symlink(TS_SDK, os.path.join(self.blocks_dir, "node_modules", "@sandfort", "sdk"))
        self.state = os.path.join(self.root, "shell-state.sh")
        self.cwd_file = os.path.join(self.root, "shell-cwd")
        with open(self.cwd_file, "w") as f:
            f.write(self.work + "\n")
        self._sandbox = None
        login = subprocess.run([os.path.join(CLI_DIR, "sandfort"), "login", "--url", self.url, "--api-key-stdin"],
                               input=self.key, env=self.env(), capture_output=True, text=True, timeout=60)
        assert login.returncode == 0, f"sandfort login failed: {login.stdout}{login.stderr}"

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SANDFORT_", "XDG_", "PYENV", "VIRTUAL_ENV", "NODE_", "npm_"))}
        env.update(HOME=self.home, URL=self.url, KEY=self.key, SANDFORT_BASE_URL=self.url,
                   SANDFORT_API_KEY=self.key, SANDFORT_PREVIEW_PORT=str(self.preview_port),
                   PYTHONPATH=os.path.join(REPO, "sdk", "python"),
                   PATH=os.pathsep.join([CLI_DIR, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin",
                                         "/sbin", "/bin"]),
                   npm_config_cache=os.path.join(os.path.expanduser("~"), ".npm"),
                   __SF_STATE=self.state, __SF_CWD=self.cwd_file)
        return env

    def sandbox_id(self):
        """A started sandbox for `sbx-…`: the same one while it lives, a new one once a block deleted it."""
        admin = self.daemon.admin()
        if self._sandbox is not None:
            r = admin.get(f"/v1/sandboxes/{self._sandbox}")
            if r.status == 200 and r.json().get("state") == "started":
                return self._sandbox
        self._sandbox = admin.create_sandbox()["id"]
        return self._sandbox

    def run(self, block):
        text = substitute(block, self)
        stem = os.path.join(self.blocks_dir, f"{os.path.basename(block.path)}-{block.line}")
        if block.runner == "shell":
            with open(stem + ".sh", "w") as f:
                f.write(SHELL_PRELUDE + text + "\n")
            argv = ["/bin/bash", stem + ".sh"]
        elif block.runner == "python":
            with open(stem + ".py", "w") as f:
                f.write(text + "\n")
            argv = [PYTHON, stem + ".py"]
        else:
            with open(stem + (".ts" if block.runner == "ts" else ".mjs"), "w") as f:
                f.write(text + "\n")
            if block.runner == "ts":
                ts = os.path.join(TS_SDK, "node_modules", "typescript")
                assert os.path.isdir(ts), f"no {ts}: run `cd sdk/typescript && npm ci` first"
                r = subprocess.run(["node", "-e", TS_TRANSPILE, ts, stem + ".ts", stem + ".mjs"],
                                   capture_output=True, text=True, timeout=120)
                if r.returncode != 0:
                    return Outcome(r.returncode, r.stdout, "TypeScript did not transpile:\n" + r.stderr, text)
            assert os.path.isfile(os.path.join(TS_SDK, "dist", "esm", "index.js")), \
                "sdk/typescript is not built: run `cd sdk/typescript && npm ci` first"
            argv = ["node", stem + ".mjs"]
        cwd = self.work
        try:
            r = subprocess.run(argv, cwd=cwd, env=self.env(), stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, errors="replace", timeout=BLOCK_TIMEOUT_S)
            return Outcome(r.returncode, r.stdout, r.stderr, text)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            return Outcome(None, out, err + f"\n(timed out after {BLOCK_TIMEOUT_S} s)", text)

    def close(self):
        """Deletes what the blocks made through the API (snapshots are images), then the directory."""
        admin = self.daemon.admin()
        try:
            for kind in ("sandboxes", "snapshots", "volumes"):
                r = admin.get(f"/v1/{kind}?limit=100")
                if r.status != 200:
                    continue
                for item in r.json().get("items", []):
                    admin.delete(f"/v1/{kind}/{item['id']}")
        except OSError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


def failure_report(block, outcome, daemon_log=""):
    def tail(s, n=6000):
        s = s or ""
        return s if len(s) <= n else "…" + s[-n:]
    status = "timed out" if outcome.code is None else f"exit status {outcome.code}"
    where = ""
    if block.runner in ("python", "js"):
        where = f"; line N of its program is line {block.line}+N of {block.path}"
    parts = [f"{block.id}: the ```{block.lang} block failed ({status}{where})", "--- the block as run:",
             block.numbered(outcome.ran), "--- stdout:", tail(outcome.stdout), "--- stderr:", tail(outcome.stderr)]
    if daemon_log:
        parts += ["--- sandfortd log (tail):", tail(daemon_log, 2500)]
    return "\n".join(parts)


def not_run_blocks():
    return [b for path in DOC_FILES for b in extract(path)[0] if b.runner and b.not_run is not None]
