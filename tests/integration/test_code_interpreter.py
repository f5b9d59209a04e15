"""Stateful code contexts (docs/api.md, "Code interpreter") against a real daemon, real Docker and the
code-interpreter image (scripts/build-code-interpreter-image): state persists, a matplotlib figure
comes back as PNG and a DataFrame as HTML, errors carry a traceback, a timeout interrupts, an endless
print is cut at the cap, what the code forges on the kernel's own descriptors stays bounded, and
another organization's key reaches no context."""

import base64
import json
import os
import re
import subprocess

import pytest

CODE_IMAGE = "sandfort/code-interpreter:bookworm"


def code_image_version():
    """The version scripts/build-code-interpreter-image makes now (scripts/lib.sh)."""
    lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "lib.sh")
    with open(lib) as f:
        return re.search(r"^SF_CODE_IMAGE_VERSION=(\d+)", f.read(), re.M).group(1)


@pytest.fixture(scope="module")
def box(member):
    r = subprocess.run(["docker", "image", "inspect", "-f",
                        '{{index .Config.Labels "io.sandfort.code-interpreter-image-version"}}', CODE_IMAGE],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == code_image_version(), (
        f"{CODE_IMAGE} is needed (scripts/build-code-interpreter-image): {r.stdout}{r.stderr}")
    sbx = member.create_sandbox(name="code-interpreter", snapshot=CODE_IMAGE)
    yield sbx
    member.delete(f"/v1/sandboxes/{sbx['id']}")


def events_of(body):
    """(event, data) pairs of a whole text/event-stream body."""
    out = []
    for block in body.decode().split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


class Run:
    def __init__(self, events):
        self.events = events
        self.stdout = "".join(d["text"] for e, d in events if e == "stdout")
        self.stderr = "".join(d["text"] for e, d in events if e == "stderr")
        self.results = [d for e, d in events if e == "result"]
        errors = [d for e, d in events if e == "error"]
        self.error = errors[-1] if errors else None
        assert events and events[-1][0] == "end", events[-3:]
        self.end = events[-1][1]

    @property
    def text(self):
        return next((r["text"] for r in self.results if r["is_main_result"]), None)


def run(client, sandbox_id, **body):
    r = client.post(f"/v1/sandboxes/{sandbox_id}/code/run", body)
    assert r.status == 200, r
    assert r.headers.get("Content-Type") == "text/event-stream", r.headers
    return Run(events_of(r.body))


def test_state_persists_between_runs(member, box):
    first = run(member, box["id"], code="x = 1")
    assert first.results == [] and first.error is None
    second = run(member, box["id"], code="print('hi')\nx + 1")
    assert second.text == "2" and second.stdout == "hi\n"
    assert second.end["execution_count"] == first.end["execution_count"] + 1
    assert second.end["context_id"] == first.end["context_id"]
    contexts = member.get(f"/v1/sandboxes/{box['id']}/code/contexts").json()["items"]
    assert [c["id"] for c in contexts if c["default"] and c["language"] == "python"] == [first.end["context_id"]]


def test_a_matplotlib_figure_is_a_png(member, box):
    r = run(member, box["id"], code="import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nplt.show()")
    assert r.error is None, r.error
    pngs = [x for x in r.results if "png" in x]
    assert len(pngs) == 1, r.results
    assert base64.b64decode(pngs[0]["png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert pngs[0]["text"].startswith("<Figure")
    # Its data too, in E2B's chart schema (docs/api.md): the same field through both wires.
    chart = pngs[0]["chart"]
    assert chart["type"] == "line" and chart["title"] == "t"
    assert chart["elements"] == [{"label": "", "points": [[0, 1], [1, 3], [2, 2]]}]
    # Drawn and not shown: shown at the end of the run, as a notebook does.
    r = run(member, box["id"], code="plt.figure(); plt.bar([1, 2], [3, 4]); None")
    assert len([x for x in r.results if "png" in x]) == 1


def test_a_dataframe_has_html_and_text(member, box):
    r = run(member, box["id"], code="import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\ndf")
    assert r.error is None, r.error
    assert len(r.results) == 1 and r.results[0]["is_main_result"]
    assert "<table" in r.results[0]["html"] and "<td>x</td>" in r.results[0]["html"]
    assert "a" in r.results[0]["text"] and "y" in r.results[0]["text"]
    shown = run(member, box["id"], code="display(df.head(1), df.shape)")
    assert len(shown.results) == 2 and not any(x["is_main_result"] for x in shown.results)
    assert shown.results[1]["text"] == "(2, 2)"


def test_an_error_is_an_event_with_its_traceback(member, box):
    r = run(member, box["id"], code="def f(d):\n    return d['missing']\nf({})")
    assert r.error["name"] == "KeyError" and r.error["value"] == "'missing'"
    assert "<cell" in r.error["traceback"] and "return d['missing']" in r.error["traceback"]
    assert "kernel.py" not in r.error["traceback"]
    assert run(member, box["id"], code="1 + 1").text == "2"


def test_a_timeout_interrupts_and_the_context_keeps_its_state(member, box):
    run(member, box["id"], code="kept = 'yes'")
    r = run(member, box["id"], code="import time\ntime.sleep(60)", timeout_s=2)
    assert r.error["name"] == "TimeoutError" and "KeyboardInterrupt" in r.error["traceback"]
    assert r.end["timed_out"] is True and r.end["restarted"] is False
    assert r.end["duration_ms"] < 10000
    assert run(member, box["id"], code="kept").text == "'yes'"


def test_js_and_bash_contexts(member, box):
    base = f"/v1/sandboxes/{box['id']}/code/contexts"
    made = member.post(base, {"language": "js", "cwd": "/tmp"})
    assert made.status == 201, made
    ctx = made.json()["id"]
    run(member, box["id"], code="var n = 41", context_id=ctx)
    r = run(member, box["id"], code="console.log(process.cwd()); n + 1", context_id=ctx)
    assert r.text == "42" and r.stdout == "/tmp\n"
    assert member.post(f"{base}/{ctx}/restart", {}).status == 200
    assert run(member, box["id"], code="typeof n", context_id=ctx).text == "'undefined'"
    assert member.delete(f"{base}/{ctx}").status == 204
    assert member.post(f"/v1/sandboxes/{box['id']}/code/run", {"code": "1", "context_id": ctx}).status == 404
    run(member, box["id"], code="cd /tmp; V=3", language="bash")
    assert run(member, box["id"], code="echo $PWD $V", language="bash").stdout == "/tmp 3\n"


def test_an_endless_print_is_cut_at_the_cap(member, box):
    r = run(member, box["id"], code="while True:\n    print('x' * 10000)")
    assert r.error["name"] == "OutputLimitExceeded"
    assert r.end["truncated"] is True
    assert 5 << 20 < len(r.stdout) <= 10 << 20
    assert run(member, box["id"], code="'alive'").text == "'alive'"


def test_forged_kernel_events_from_inside_stay_bounded(member, box):
    """Code in the context writes to the kernel's own event descriptor: garbage, a forged result, a line
    far past the cap. Garbage is ignored; a forged result is the sandbox's own output to its own
    caller; the long line is dropped whole and counts as output past the cap (what follows is cut,
    the run interrupted if it still runs). The agent stays up and the next run works."""
    code = ("import os\n"
            "os.write(4, b'not json\\n')\n"
            "os.write(4, b'{\"type\": \"result\", \"text\": \"forged\", \"is_main_result\": false}\\n')\n"
            "chunk = b'y' * (1 << 20)\n"
            "for _ in range(12): os.write(4, chunk)\n"
            "os.write(4, b'\\n')\n"
            "print('done writing')")
    r = run(member, box["id"], code=code, timeout_s=30)
    assert r.end["truncated"] is True
    # Interrupted, unless it finished before the agent acted on the cap (it does not wait long).
    assert r.error is None or r.error["name"] == "OutputLimitExceeded", r.error
    assert [x["text"] for x in r.results] == ["forged"]
    assert all(len(json.dumps(d)) < (1 << 20) for _, d in r.events if _ == "result")
    assert run(member, box["id"], code="6 * 7").text == "42"
    assert member.get(f"/v1/sandboxes/{box['id']}").json()["state"] == "started"


def test_another_organizations_key_reaches_no_context(daemon, member, box):
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": "code-intruder"})
    assert r.status == 201, r
    key = admin.post(f"/v1/orgs/{r.json()['id']}/api-keys", {"name": "m", "role": "member"}).json()["key"]
    intruder = daemon.client(key)
    ctx = run(member, box["id"], code="secret = 's3cr3t'").end["context_id"]
    base = f"/v1/sandboxes/{box['id']}/code"
    for method, path, body in [("POST", f"{base}/run", {"code": "secret", "context_id": ctx}),
                               ("POST", f"{base}/run", {"code": "secret"}),
                               ("GET", f"{base}/contexts", None),
                               ("GET", f"{base}/contexts/{ctx}", None),
                               ("POST", f"{base}/contexts/{ctx}/restart", {}),
                               ("DELETE", f"{base}/contexts/{ctx}", None)]:
        r = intruder.request(method, path, body=body)
        assert r.status == 404 and b"s3cr3t" not in r.body, (method, path, r)
    # Its own sandbox does not know the context either.
    own = intruder.create_sandbox(name="intruder-box")
    try:
        r = intruder.post(f"/v1/sandboxes/{own['id']}/code/run", {"code": "secret", "context_id": ctx})
        assert r.status == 404, r
    finally:
        intruder.delete(f"/v1/sandboxes/{own['id']}")
    assert run(member, box["id"], code="secret", context_id=ctx).text == "'s3cr3t'"
