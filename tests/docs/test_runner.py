"""The doc-block runner's own rules, without a daemon: what is a block, what runs, what is
substituted, what a shell session carries from one block to the next, what fails."""

import http.server
import os
import shutil
import tempfile
import threading

import pytest

from doc_blocks import DocSession, Block, forbidden, parse, substitute

DOC = """# A page
```sh
echo one
```
Prose.
- a list item with a block:

  ```python
  print("indented")
  ```
<!-- doc-test: not run: needs the internet -->
```bash
curl https://example.com
```
```text
output, not run
```
```
no language
```
<!-- doc-test: not run because -->
"""


def test_blocks_their_lines_languages_and_markers():
    blocks, bad = parse("docs/x.md", DOC)
    assert [(b.id, b.lang, b.runner, b.not_run) for b in blocks] == [
        ("docs/x.md:2", "sh", "shell", None),
        ("docs/x.md:8", "python", "python", None),
        ("docs/x.md:12", "bash", "shell", "needs the internet"),
        ("docs/x.md:15", "text", None, None),
        ("docs/x.md:18", "", None, None),
    ]
    assert blocks[1].text == 'print("indented")'  # the list item's indentation removed
    assert bad == ["docs/x.md:21: <!-- doc-test: not run because -->"]


@pytest.mark.parametrize("text, expected", [
    ("./scripts/test", "scripts/test"),
    ("cmake -S . -B build", "cmake"),
    ("/usr/bin/python3 tests/integration/with_daemon.py -- node --test test/", "with_daemon.py"),
    ("cd sdk/typescript && npm ci", "npm ci"),
    ("sandfort run 'echo hi'", None),
    ("./scripts/run", None),
])
def test_what_a_doc_test_must_not_start(text, expected):
    assert forbidden(Block("README.md", 1, "sh", text)) == expected


class FakeContext:
    url, key, preview_port = "http://127.0.0.1:1234", "sfk_secret", 4321

    def sandbox_id(self):
        return "sbx-0123456789abcdef"


def test_placeholders_and_the_readme_start():
    text = ("./scripts/run   # starts it\n"
            "curl http://127.0.0.1:8080/v1/sandboxes/sbx-…/x -H 'Authorization: Bearer sfk_…'\n"
            "curl http://8080-sbx-….preview.localhost:8081/")
    out = substitute(Block("README.md", 1, "sh", text), FakeContext()).split("\n")
    assert out[0] == "printf 'Sandfort is running at %s\\nAdmin API key: %s\\n' \"$URL\" \"$KEY\""
    assert out[1] == ("curl http://127.0.0.1:1234/v1/sandboxes/sbx-0123456789abcdef/x "
                      "-H 'Authorization: Bearer sfk_secret'")
    assert out[2] == "curl http://8080-sbx-0123456789abcdef.preview.localhost:4321/"
    # ./scripts/run is the README's alone
    assert substitute(Block("docs/cli.md", 1, "sh", "./scripts/run"), FakeContext()) == "./scripts/run"


@pytest.fixture
def session():
    """A DocSession without a daemon: enough for blocks that do not call one."""
    s = DocSession.__new__(DocSession)
    s.path, s.url, s.key, s.preview_port, s._sandbox = "docs/x.md", "http://127.0.0.1:1", "sfk_x", 2, None
    s.root = tempfile.mkdtemp(prefix="sf-docs-test-")
    s.home, s.work, s.blocks_dir = (os.path.join(s.root, d) for d in ("home", "work", "blocks"))
    for d in (s.home, s.work, s.blocks_dir):
        os.makedirs(d)
    s.state, s.cwd_file = os.path.join(s.root, "shell-state.sh"), os.path.join(s.root, "shell-cwd")
    with open(s.cwd_file, "w") as f:
        f.write(s.work + "\n")
    yield s
    shutil.rmtree(s.root)


def run(session, line, lang, text):
    return session.run(Block("docs/x.md", line, lang, text))


def test_shell_blocks_of_a_file_share_variables_functions_and_directory(session):
    first = run(session, 1, "sh", "COUNT=41\nexport SHARED='a b'\ngreet() { echo \"hi $1\"; }\nmkdir -p sub && cd sub")
    assert first.code == 0, first.stderr
    second = run(session, 5, "bash", "greet there\necho $((COUNT + 1)) \"$SHARED\" \"${PWD##*/}\"")
    assert (second.code, second.stdout) == (0, "hi there\n42 a b sub\n"), second.stderr


def test_a_failing_command_fails_the_block_and_stops_it(session):
    r = run(session, 1, "sh", "false\necho after")
    assert r.code != 0 and "after" not in r.stdout
    r = run(session, 1, "sh", "false | true\necho after")  # pipefail
    assert r.code != 0 and "after" not in r.stdout


def test_curl_fails_on_an_http_error(session):
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"error":{"code":"not_found"}}')

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r = run(session, 1, "sh", f"curl -s http://127.0.0.1:{server.server_port}/v1/nothing")
        assert r.code == 22 and "not_found" in r.stdout  # the body still shows what went wrong
    finally:
        server.shutdown()


def test_python_blocks_are_whole_programs_with_the_sdk_importable(session):
    r = run(session, 1, "python", "import sandfort_sdk, os\nprint(os.environ['SANDFORT_BASE_URL'])")
    assert (r.code, r.stdout) == (0, "http://127.0.0.1:1\n"), r.stderr
    assert run(session, 3, "python", "raise SystemExit(3)").code == 3
