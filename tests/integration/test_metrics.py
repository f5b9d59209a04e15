"""GET /metrics against a real daemon and Docker, and the real Prometheus from Debian scraping it.

- Only the superadmin's key reads it (it spans every organization): no key 401, an organization's
  admin or member 403.
- The exposition parses with a strict parser of the text format 0.0.4 written here (HELP and TYPE
  once per family and before its samples, escapes, histogram buckets cumulative up to +Inf = count).
- After a sandbox is created and a command runs in it, the request counter of the exec route, the
  exec histogram, Docker's call latency and the egress proxy's decisions went up; sandboxes by
  state shows it started; the warm pool's gauges are there; no label names a sandbox (route
  patterns, not paths).
- /usr/bin/prometheus, started here with a temporary configuration (bearer credentials_file,
  scrape_interval 1s), reports the target up, and its query API returns
  sandfort_http_requests_total for the exec route with the daemon's labels."""

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from sandfort_harness import Daemon, free_port

PROMETHEUS = "/usr/bin/prometheus"
EXEC_ROUTE = "/v1/sandboxes/{id}/process/exec"


# ------------------------------------------------------------------------------------------------
# A strict parser of the text exposition format 0.0.4

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class ParseError(AssertionError):
    pass


def parse_value(text, where):
    special = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
    if text in special:
        return special[text]
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ParseError(f"{where}: bad value {text!r}")
    return float(text)


def parse_labels(text, i, where):
    """Labels from text[i] == '{' to the matching '}'; returns (dict, index after '}')."""
    assert text[i] == "{"
    i += 1
    labels = {}
    while True:
        if text[i] == "}":
            return labels, i + 1
        m = LABEL_NAME.match(text, i)
        if not m:
            raise ParseError(f"{where}: bad label name at {text[i:]!r}")
        name = m.group(0)
        i = m.end()
        if text[i:i + 2] != '="':
            raise ParseError(f"{where}: expected =\" after {name}")
        i += 2
        value = []
        while True:
            if i >= len(text):
                raise ParseError(f"{where}: unterminated label value")
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ParseError(f"{where}: bad escape \\{nxt}")
                value.append("\n" if nxt == "n" else nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise ParseError(f"{where}: raw newline in a label value")
            else:
                value.append(c)
                i += 1
        if name in labels:
            raise ParseError(f"{where}: label {name} twice")
        labels[name] = "".join(value)
        if text[i] == ",":
            i += 1
        elif text[i] != "}":
            raise ParseError(f"{where}: expected , or }} at {text[i:]!r}")


def family_of(sample_name, families):
    """The declared family a sample belongs to (histograms own _bucket, _sum and _count)."""
    if sample_name in families:
        return sample_name
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample_name[:-len(suffix)] if sample_name.endswith(suffix) else None
        if base and families.get(base, {}).get("type") == "histogram":
            return base
    raise ParseError(f"sample {sample_name} has no TYPE line before it")


def parse_exposition(text):
    """{family: {"type", "help", "samples": [(name, labels, value)]}}, checking the format strictly."""
    if not text.endswith("\n"):
        raise ParseError("the exposition must end with a newline")
    families, finished, current = {}, set(), None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {n}: {line[:120]!r}"
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) < 3 or parts[0] != "#" or parts[1] not in ("HELP", "TYPE"):
                raise ParseError(f"{where}: a comment that is neither HELP nor TYPE")
            name = parts[2]
            if not NAME.fullmatch(name):
                raise ParseError(f"{where}: bad metric name")
            if name in finished or (name != current and name in families):
                raise ParseError(f"{where}: family {name} is not contiguous")
            if current and current != name:
                finished.add(current)
            current = name
            fam = families.setdefault(name, {"type": None, "help": None, "samples": []})
            if fam["samples"]:
                raise ParseError(f"{where}: HELP/TYPE after the family's samples")
            if parts[1] == "TYPE":
                if fam["type"] is not None or len(parts) != 4 or parts[3] not in TYPES:
                    raise ParseError(f"{where}: bad or repeated TYPE")
                fam["type"] = parts[3]
            else:
                if fam["help"] is not None:
                    raise ParseError(f"{where}: repeated HELP")
                help_text = parts[3] if len(parts) == 4 else ""
                if re.search(r"\\[^\\n]", help_text.replace("\\\\", "")):
                    raise ParseError(f"{where}: bad escape in HELP")
                fam["help"] = help_text
            continue
        if not line:
            raise ParseError(f"{where}: empty line")
        m = NAME.match(line)
        if not m:
            raise ParseError(f"{where}: bad sample name")
        name, i = m.group(0), m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = parse_labels(line, i, where)
        rest = line[i:]
        if not rest.startswith(" "):
            raise ParseError(f"{where}: no space before the value")
        fields = rest[1:].split(" ")
        if len(fields) != 1:  # sandfortd writes no timestamps
            raise ParseError(f"{where}: expected exactly one value")
        value = parse_value(fields[0], where)
        fam_name = family_of(name, families)
        if fam_name != current:
            raise ParseError(f"{where}: sample outside its family's block")
        families[fam_name]["samples"].append((name, labels, value))
    for name, fam in families.items():
        if fam["type"] is None or fam["help"] is None:
            raise ParseError(f"{name}: HELP and TYPE are both required")
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
        if fam["type"] == "counter":
            assert all(v >= 0 for _, _, v in fam["samples"]), name
    return families


def check_histogram(name, samples):
    series = {}
    for sample_name, labels, value in samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if sample_name == name + "_bucket":
            if "le" not in labels:
                raise ParseError(f"{name}: a bucket without le")
            s["buckets"].append((parse_value(labels["le"], name), value))
        elif sample_name == name + "_sum":
            s["sum"] = value
        elif sample_name == name + "_count":
            s["count"] = value
        else:
            raise ParseError(f"{name}: sample {sample_name} in a histogram")
    for key, s in series.items():
        bounds = [b for b, _ in s["buckets"]]
        counts = [c for _, c in s["buckets"]]
        if not bounds or bounds[-1] != math.inf or bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise ParseError(f"{name}{key}: buckets must ascend to +Inf: {bounds}")
        if counts != sorted(counts):
            raise ParseError(f"{name}{key}: buckets are not cumulative: {counts}")
        if s["count"] is None or s["sum"] is None or counts[-1] != s["count"]:
            raise ParseError(f"{name}{key}: +Inf bucket {counts[-1]} != count {s['count']} (or no _sum)")


def test_the_parser_is_strict():
    good = ('# HELP a_total A \\\\ help.\n# TYPE a_total counter\na_total{x="q\\"\\\\\\n"} 1\n'
            '# HELP h H.\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3.5\nh_count 2\n')
    fams = parse_exposition(good)
    assert fams["a_total"]["samples"] == [("a_total", {"x": 'q"\\\n'}, 1.0)]
    bad = [
        "a 1\n",                                                   # no TYPE
        "# TYPE a gauge\n# HELP a A.\na{x=\"\\t\"} 1\n",           # bad escape
        "# TYPE a gauge\n# HELP a A.\na 1 2 3\n",                  # extra fields
        "# TYPE a gauge\n# HELP a A.\na{x=\"1\",x=\"2\"} 1\n",     # label twice
        "# TYPE a gauge\n# HELP a A.\na one\n",                    # value
        "# TYPE h histogram\n# HELP h H.\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# TYPE a gauge\n# HELP a A.\na 1",                        # no final newline
        "# TYPE a gauge\n# HELP a A.\na 1\n# TYPE b gauge\n# HELP b B.\nb 1\na 2\n",  # not contiguous
    ]
    for text in bad:
        with pytest.raises(ParseError):
            parse_exposition(text)


# ------------------------------------------------------------------------------------------------
# The daemon

@pytest.fixture(scope="module")
def daemon():
    unlimited = {"rate_per_s": 0, "burst": 0}
    d = Daemon({"pools": [{"size": 1}],
                "guardrails": {"rate_limits": {"viewer": unlimited, "member": unlimited, "admin": unlimited,
                                               "org": unlimited}}}).start()
    yield d
    d.stop_and_cleanup()


@pytest.fixture(scope="module")
def keys(daemon):
    admin = daemon.admin()
    r = admin.post("/v1/orgs", {"name": "metrics"})
    assert r.status == 201, r
    org = r.json()
    out = {}
    for role in ("admin", "member"):
        r = admin.post(f"/v1/orgs/{org['id']}/api-keys", {"name": role, "role": role})
        assert r.status == 201, r
        out[role] = r.json()["key"]
    return out


def scrape(daemon):
    r = daemon.admin().get("/metrics")
    assert r.status == 200, r
    ctype = r.headers.get("Content-Type") or r.headers.get("content-type")
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    return parse_exposition(r.body.decode())


def value(fams, family, sample=None, **labels):
    """The value of the one sample of `family` (or its `sample` name) with exactly these labels, or 0."""
    sample = sample or family
    for name, l, v in fams.get(family, {"samples": []})["samples"]:
        if name == sample and l == labels:
            return v
    return 0


def test_only_the_superadmin_reads_metrics(daemon, keys):
    r = daemon.client().get("/metrics")
    assert r.status == 401, r
    assert (r.headers.get("WWW-Authenticate") or r.headers.get("www-authenticate")) == "Bearer"
    assert daemon.client("sfk_not_a_key").get("/metrics").status == 401
    for role in ("admin", "member"):
        r = daemon.client(keys[role]).get("/metrics")
        assert r.status == 403, (role, r)
        assert r.json()["error"]["code"] == "permission_denied"
    assert daemon.admin().get("/metrics").status == 200


def test_the_exposition_parses(daemon):
    fams = scrape(daemon)
    assert all(name.startswith("sandfort_") for name in fams), sorted(fams)
    expected = {
        "sandfort_http_requests_total": "counter",
        "sandfort_http_request_duration_seconds": "histogram",
        "sandfort_sandboxes": "gauge",
        "sandfort_exec_duration_seconds": "histogram",
        "sandfort_egress_decisions_total": "counter",
        "sandfort_pool_target_size": "gauge",
        "sandfort_pool_ready": "gauge",
        "sandfort_docker_request_duration_seconds": "histogram",
        "sandfort_process_open_fds": "gauge",
        "sandfort_process_max_fds": "gauge",
        "sandfort_process_resident_memory_bytes": "gauge",
        "sandfort_process_uptime_seconds": "gauge",
        "sandfort_build_info": "gauge",
    }
    for name, kind in expected.items():
        assert name in fams and fams[name]["type"] == kind, (name, fams.get(name, {}).get("type"))
    version = daemon.client().get("/healthz").json()["version"]
    assert value(fams, "sandfort_build_info", version=version) == 1
    assert value(fams, "sandfort_process_open_fds") > 0
    assert value(fams, "sandfort_process_resident_memory_bytes") > 1 << 20
    assert 0 <= value(fams, "sandfort_process_uptime_seconds") < 3600
    # Every live state is reported, 0 when empty; the pool of the configuration is there.
    states = {l["state"] for _, l, _ in fams["sandfort_sandboxes"]["samples"]}
    assert {"creating", "pulling", "started", "paused", "stopped", "error"} <= states
    [(_, pool, target)] = fams["sandfort_pool_target_size"]["samples"]
    assert target == 1 and pool["image"] == "sandfort/base:bookworm", pool
    # An unknown path is counted under one label, whatever it was.
    daemon.admin().get("/v1/no-such-thing/sbx-123")
    fams = scrape(daemon)
    assert value(fams, "sandfort_http_requests_total", route="unmatched", method="GET", code="404") >= 1


def test_a_sandbox_and_an_exec_show_up(daemon, keys):
    member = daemon.client(keys["member"])
    before = scrape(daemon)
    assert value(before, "sandfort_sandboxes", state="started") == 0

    sbx = member.create_sandbox()
    try:
        out = member.exec(sbx["id"], command="echo hi")
        assert out["stdout"] == "hi\n", out
        # A host not on the (empty) allowlist: the proxy answers 403 without dialling anything.
        denied = member.exec(sbx["id"], command="curl -sS -m 10 -o /dev/null -w '%{http_code}' http://example.com/",
                             env={"NO_PROXY": "", "no_proxy": ""}, timeout_s=30)
        assert denied["stdout"] == "403", denied
        # The streamed form of the same route (server-sent events), and a route forwarded to the agent.
        r = member.post(f"/v1/sandboxes/{sbx['id']}/process/exec", {"command": "echo streamed"},
                        headers={"Accept": "text/event-stream"})
        assert r.status == 200 and b"streamed" in r.body, r
        r = member.get(f"/v1/sandboxes/{sbx['id']}/files/list?path=/tmp")
        assert r.status == 200, r
        after = scrape(daemon)

        req = dict(route=EXEC_ROUTE, method="POST", code="200")
        assert value(after, "sandfort_http_requests_total", **req) == \
            value(before, "sandfort_http_requests_total", **req) + 3
        count = dict(sample="sandfort_http_request_duration_seconds_count", route=EXEC_ROUTE, method="POST")
        assert value(after, "sandfort_http_request_duration_seconds", **count) == \
            value(before, "sandfort_http_request_duration_seconds", **count) + 3
        for mode, n in (("whole", 2), ("stream", 1)):
            execs = dict(sample="sandfort_exec_duration_seconds_count", mode=mode, outcome="ok")
            assert value(after, "sandfort_exec_duration_seconds", **execs) == \
                value(before, "sandfort_exec_duration_seconds", **execs) + n, mode
        # The agent's own answer is relayed unread: its status is not known to sandfortd.
        listed = dict(route="/v1/sandboxes/{id}/files/list", method="GET", code="relayed")
        assert value(after, "sandfort_http_requests_total", **listed) == \
            value(before, "sandfort_http_requests_total", **listed) + 1
        assert value(after, "sandfort_sandboxes", state="started") == 1
        assert value(after, "sandfort_egress_decisions_total", decision="denied") == \
            value(before, "sandfort_egress_decisions_total", decision="denied") + 1
        # Provisioning went through Docker: a container was created and started (the pool's
        # member, or this sandbox's own), each call timed.
        for op in ("container_create", "container_start"):
            assert value(after, "sandfort_docker_request_duration_seconds",
                         sample="sandfort_docker_request_duration_seconds_count", operation=op, outcome="ok") >= 1, op
        creates = dict(route="/v1/sandboxes", method="POST", code="201")
        assert value(after, "sandfort_http_requests_total", **creates) == \
            value(before, "sandfort_http_requests_total", **creates) + 1

        # Cardinality: routes are patterns, no label anywhere carries the sandbox's id.
        for fam in after.values():
            for _, labels, _ in fam["samples"]:
                assert not any(sbx["id"] in v for v in labels.values()), labels
    finally:
        assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    fams = scrape(daemon)
    assert value(fams, "sandfort_sandboxes", state="started") == 0
    assert value(fams, "sandfort_http_requests_total", route="/v1/sandboxes/{id}", method="DELETE", code="204") == 1


# ------------------------------------------------------------------------------------------------
# The real Prometheus

def http_json(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def prometheus(daemon):
    if not os.path.exists(PROMETHEUS):
        pytest.fail(f"{PROMETHEUS} is not installed (apt-get install prometheus)")
    work = tempfile.mkdtemp(prefix="sf-prom-")
    key_file = os.path.join(work, "sandfort.key")
    with open(key_file, "w") as f:
        f.write(daemon.admin_key + "\n")
    os.chmod(key_file, 0o600)
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: sandfort
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: {key_file}
    static_configs:
      - targets: ["127.0.0.1:{daemon.port}"]
""")
    port = free_port()
    log = open(os.path.join(work, "prometheus.log"), "w")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={os.path.join(work, 'data')}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)

    def prometheus_log():
        with open(os.path.join(work, "prometheus.log")) as f:
            return f.read()[-4000:]

    try:
        deadline = time.time() + 30
        while True:
            assert proc.poll() is None, "prometheus exited:\n" + prometheus_log()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.time() < deadline, "prometheus did not become ready:\n" + prometheus_log()
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", prometheus_log
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def test_prometheus_scrapes_and_answers_a_query(daemon, keys, prometheus):
    base, prometheus_log = prometheus
    member = daemon.client(keys["member"])
    sbx = member.create_sandbox()
    try:
        member.exec(sbx["id"], command="true")
    finally:
        member.delete(f"/v1/sandboxes/{sbx['id']}")

    deadline = time.time() + 60
    target = None
    while time.time() < deadline:
        targets = http_json(base + "/api/v1/targets")["data"]["activeTargets"]
        target = next((t for t in targets if t["labels"].get("job") == "sandfort"), None)
        if target and target["health"] == "up":
            break
        time.sleep(0.5)
    assert target and target["health"] == "up", (target, prometheus_log())
    assert target["scrapeUrl"] == f"http://127.0.0.1:{daemon.port}/metrics"

    query = "sandfort_http_requests_total"
    found = []
    while time.time() < deadline:
        answer = http_json(base + "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
        assert answer["status"] == "success", answer
        found = [s for s in answer["data"]["result"]
                 if s["metric"].get("route") == EXEC_ROUTE and s["metric"].get("method") == "POST"
                 and s["metric"].get("code") == "200"]
        if found:
            break
        time.sleep(0.5)
    assert found, (answer, prometheus_log())
    [series] = found
    print("prometheus answered", query, "→", json.dumps(series))
    assert series["metric"] == {"__name__": "sandfort_http_requests_total", "job": "sandfort",
                                "instance": f"127.0.0.1:{daemon.port}", "route": EXEC_ROUTE, "method": "POST",
                                "code": "200"}, series
    assert float(series["value"][1]) >= 1

    # A histogram made it through too, summed by Prometheus itself.
    answer = http_json(base + "/api/v1/query?" + urllib.parse.urlencode(
        {"query": 'sum(sandfort_exec_duration_seconds_count{job="sandfort"})'}))
    assert answer["status"] == "success" and float(answer["data"]["result"][0]["value"][1]) >= 1, answer
