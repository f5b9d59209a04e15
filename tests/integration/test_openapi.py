"""docs/openapi.yaml against the daemon: the same routes, a sound document, and real answers that
its schemas accept.

1. The daemon's route registry, as `sandfortd routes --json` prints it (method, pattern,
   permission, kind of every route it serves), is compared with the document's paths and methods,
   and with each operation's `x-sandfort-role`. The registry is the code's own list: a route added
   in any form is in it, so none goes unnoticed.
2. The document itself: OpenAPI 3.1, every $ref resolves, every operation answers something, every
   error response is the shared Error component, every schema is a valid 2020-12 schema.
3. Real answers from a real daemon with real Docker validate against the document's schemas, with
   every object closed (additionalProperties: false unless the document says otherwise) so that a
   field the daemon sends and the document does not name fails too. Every operation of the
   document is called at least once."""

import datetime
import functools
import json
import os
import re
import socket
import subprocess
import tarfile
import tempfile
import io

import pytest
import yaml
from jsonschema import Draft202012Validator, FormatChecker

from sandfort_harness import SANDFORTD, Response, read_sse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(REPO, "docs", "openapi.yaml")
GIT_OPS_SRC = os.path.join(REPO, "src", "agent", "git", "request.cpp")
ERRORS_SRC = os.path.join(REPO, "src", "core", "error.cpp")

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
KINDS = ("buffered", "streamed", "forwarded")
ROLE_OF = {None: "none", "read": "viewer", "use_sandboxes": "member", "manage_org": "admin",
           "superadmin": "superadmin"}


# ------------------------------------------------------------------------------------------------
# The daemon's route registry, as it prints it

@functools.lru_cache(maxsize=None)
def registry():
    """[{method, pattern, permission, role, kind}] of every route the API listener serves, from
    `sandfortd routes --json` (which reads the code's registry and starts nothing)."""
    out = subprocess.run([SANDFORTD, "routes", "--json"], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def git_ops():
    """The operations the agent's /git/{op} knows, from its own table."""
    text = open(GIT_OPS_SRC).read()
    size = re.search(r"std::array<std::pair<op, std::string_view>, (\d+)> names", text)
    names = re.findall(r"\{op::\w+, \"(\w+)\"\}", text)
    assert size and int(size.group(1)) == len(names), "could not read the git operations' table"
    return names


def normalise(path):
    return re.sub(r"\{[^}]+\}", "{}", path)


# E2B's wire (/e2b, /e2b-sandbox): E2B's contract, not Sandfort's; docs/e2b.md documents it and
# tests/compat/e2b tests it through E2B's own SDK (roles, keys and access tokens included).
E2B_PREFIXES = ("/e2b/", "/e2b-sandbox/")


def served_routes():
    """{(METHOD, normalised path): (role, kind)} of the native API, with /git/{op} spelled out per
    operation, as the document does (each operation has its own request schema)."""
    out = {}
    for r in registry():
        path = r["pattern"]
        if path.startswith(E2B_PREFIXES):
            continue
        paths = [path.replace("{op}", op) for op in git_ops()] if path.endswith("/git/{op}") else [path]
        for p in paths:
            key = (r["method"], normalise(p))
            assert key not in out, f"{r['method']} {p} twice in the registry"
            out[key] = (r["role"], r["kind"])
    return out


@pytest.fixture(scope="module")
def doc():
    with open(SPEC) as f:
        return yaml.safe_load(f)


def operations(doc):
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def test_the_registry_lists_every_family():
    served = served_routes()
    assert len(served) >= 70, len(served)
    for must in [("GET", "/healthz"), ("GET", "/v1/sandboxes/{}/pty"), ("POST", "/v1/sandboxes/{}/git/status"),
                 ("PUT", "/v1/sandboxes/{}/files"), ("POST", "/v1/sandboxes/{}/stop"), ("GET", "/v1/pool"),
                 ("DELETE", "/v1/orgs/{}/stop-all"), ("POST", "/v1/sandboxes/{}/process/code-run")]:
        assert must in served, must
    assert {kind for _, kind in served.values()} == set(KINDS)
    assert served[("GET", "/v1/sandboxes/{}/pty")] == ("member", "forwarded")
    assert served[("POST", "/v1/sandboxes/{}/process/exec")] == ("member", "streamed")
    assert served[("GET", "/v1/sandboxes/{}")] == ("viewer", "buffered")
    # E2B's wire is in the same registry, behind the same guard (docs/e2b.md).
    e2b = {(r["method"], r["pattern"]): (r["role"], r["kind"]) for r in registry()
           if r["pattern"].startswith(E2B_PREFIXES)}
    assert e2b[("POST", "/e2b/v2/sandboxes")] == ("member", "buffered")
    assert e2b[("GET", "/e2b/sandboxes/{id}")] == ("viewer", "buffered")
    assert e2b[("POST", "/e2b-sandbox/process.Process/Start")] == ("none", "streamed")
    assert e2b[("GET", "/e2b-sandbox/files")] == ("none", "forwarded")
    assert e2b[("POST", "/e2b-sandbox/execute")] == ("none", "streamed")
    assert e2b[("GET", "/e2b-sandbox/contexts")] == ("none", "buffered")

    assert e2b[("POST", "/e2b-sandbox/files")] == ("none", "streamed")  # uploads of any size (docs/e2b.md)
    assert e2b[("POST", "/e2b/sandboxes/{id}/fork")] == ("member", "buffered")
    assert e2b[("DELETE", "/e2b/templates/{id}")] == ("member", "buffered")
    assert e2b[("GET", "/e2b/sandboxes/{id}/metrics")] == ("viewer", "buffered")


def test_the_registry_is_printed_without_starting_anything():
    """`sandfortd routes --json` needs no configuration, database or Docker: run with none (an
    empty HOME and working directory), it prints the registry and leaves nothing behind."""
    with tempfile.TemporaryDirectory() as empty:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": empty}
        out = subprocess.run([SANDFORTD, "routes", "--json"], capture_output=True, text=True, timeout=30, cwd=empty,
                             env=env)
        assert out.returncode == 0, out.stderr
        assert os.listdir(empty) == []
    routes = json.loads(out.stdout)
    assert routes == registry()
    for r in routes:
        assert set(r) == {"method", "pattern", "permission", "role", "kind"}, r
        assert r["method"] in {m.upper() for m in METHODS} and r["pattern"].startswith("/"), r
        assert r["kind"] in KINDS and ROLE_OF[r["permission"]] == r["role"], r
        # E2B's sandbox plane takes no key: its handlers check the sandbox's access token first.
        assert r["permission"] is not None or r["kind"] == "buffered" or r["pattern"].startswith("/e2b-sandbox/"), \
            f"{r}: whatever streams is authenticated"
    text = subprocess.run([SANDFORTD, "routes"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert len(text.splitlines()) == len(routes) and "/v1/sandboxes/{id}/pty" in text


def test_every_route_is_in_the_document_and_nothing_else(doc):
    served = served_routes()
    documented = {}
    for path, method, op in operations(doc):
        documented[(method.upper(), normalise(path))] = (path, op)
    missing = sorted(set(served) - set(documented))
    extra = sorted(set(documented) - set(served))
    msg = []
    if missing:
        msg.append("served but not in docs/openapi.yaml:\n  " + "\n  ".join(f"{m} {p}" for m, p in missing))
    if extra:
        msg.append("in docs/openapi.yaml but not served:\n  " + "\n  ".join(f"{m} {p}" for m, p in extra))
    assert not msg, "\n".join(msg)
    wrong_role = [f"{m} {documented[(m, p)][0]}: document says {documented[(m, p)][1].get('x-sandfort-role')}, "
                  f"the registry says {role}"
                  for (m, p), (role, _) in sorted(served.items())
                  if documented[(m, p)][1].get("x-sandfort-role") != role]
    assert not wrong_role, "\n".join(wrong_role)
    no_auth = {k for k, (role, _) in served.items() if role == "none"}
    for (m, p), (path, op) in documented.items():
        if (m, p) in no_auth:
            assert op.get("security") == [], f"{m} {path} needs no authentication: security: []"
        else:
            assert op.get("security", doc["security"]), f"{m} {path} is authenticated"
            assert "401" in op["responses"] and "403" in op["responses"], f"{m} {path}: 401 and 403 not listed"
    print(f"{len(served)} routes, all documented")


# ------------------------------------------------------------------------------------------------
# The document itself

def resolve(doc, ref):
    assert ref.startswith("#/"), f"only local references: {ref}"
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, f"{ref} does not resolve"
        node = node[part]
    return node


def deref(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        node = resolve(doc, node["$ref"])
    return node


def walk(node, path=""):
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}/{i}")


def test_the_document_is_sound(doc):
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["title"] and doc["info"]["version"]
    assert doc["security"] == [{"bearerAuth": []}]
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        **doc["components"]["securitySchemes"]["bearerAuth"], "type": "http", "scheme": "bearer"}

    refs = set()
    for where, node in walk(doc):
        if isinstance(node, dict) and "$ref" in node:
            assert isinstance(node["$ref"], str), where
            resolve(doc, node["$ref"])
            refs.add(node["$ref"])
    for kind in ("schemas", "responses", "parameters", "headers"):
        unused = [n for n in doc["components"].get(kind, {}) if f"#/components/{kind}/{n}" not in refs]
        assert not unused, f"components/{kind} never used: {unused}"

    tags = {t["name"] for t in doc["tags"]}
    used_tags, op_ids = set(), set()
    for path, method, op in operations(doc):
        name = f"{method.upper()} {path}"
        assert op.get("responses"), f"{name} has no responses"
        assert op.get("operationId") and op["operationId"] not in op_ids, f"{name}: operationId missing or taken"
        op_ids.add(op["operationId"])
        assert len(op.get("tags", [])) == 1 and op["tags"][0] in tags, f"{name}: one tag of the document's"
        used_tags.add(op["tags"][0])
        assert op.get("x-sandfort-role") in ("none", "viewer", "member", "admin", "superadmin"), name
        params = [deref(doc, p) for p in doc["paths"][path].get("parameters", []) + op.get("parameters", [])]
        in_path = {p["name"] for p in params if p["in"] == "path"}
        assert in_path == set(re.findall(r"\{(\w+)\}", path)), f"{name}: path parameters {in_path}"
        assert all(p.get("required") for p in params if p["in"] == "path"), name
        for p in params:
            assert p.get("in") in ("path", "query", "header", "cookie") and p.get("name") and "schema" in p, \
                f"{name}: parameter {p}"
        if "requestBody" in op:
            assert deref(doc, op["requestBody"]).get("content"), f"{name}: request body without content"
        for status, response in op["responses"].items():
            assert deref(doc, response).get("description"), f"{name} {status}: a response needs a description"
        # A redirect is the success of a route a browser navigates (the console's sign-in).
        success = [s for s in op["responses"] if s.startswith(("1", "2", "3"))]
        assert success, f"{name}: no success response"
        for status, response in op["responses"].items():
            assert re.fullmatch(r"[1-5][0-9][0-9]", status), f"{name}: status {status}"
            if status[0] in "45":
                body = deref(doc, response)
                content = body.get("content", {})
                assert list(content) == ["application/json"] and \
                    content["application/json"].get("schema") == {"$ref": "#/components/schemas/Error"}, \
                    f"{name} {status}: not the shared Error component"
    assert used_tags == tags, f"tags without operations: {tags - used_tags}"

    for name, response in doc["components"]["responses"].items():
        schemas = [c["schema"] for c in response.get("content", {}).values()]
        is_error = schemas == [{"$ref": "#/components/schemas/Error"}]
        # every response component named as an error is the Error shape, and only those are
        assert is_error == (name not in ("SandboxOk", "ExecOk", "SessionExecOk", "GitOk")), name

    for name, schema in doc["components"]["schemas"].items():
        Draft202012Validator.check_schema({**schema, "components": doc["components"]})
    for where, node in walk(doc["paths"]):
        if where.endswith("/schema") and isinstance(node, dict):
            Draft202012Validator.check_schema({**node, "components": doc["components"]})


def test_error_codes_match_the_code(doc):
    text = open(ERRORS_SRC).read()
    codes = re.findall(r"case errc::\w+: return \"(\w+)\";", text)
    assert len(codes) >= 10
    documented = doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
    assert sorted(documented) == sorted(set(codes))


# ------------------------------------------------------------------------------------------------
# Real answers against the schemas

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value):
    if not isinstance(value, str):
        return True
    if not TIMESTAMP.match(value):
        raise ValueError(f"not an RFC 3339 time: {value!r}")
    datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


def closed(node):
    """Every object schema that lists properties and says nothing about others refuses others."""
    if isinstance(node, dict):
        out = {k: closed(v) for k, v in node.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [closed(v) for v in node]
    return node


class Checker:
    """Validates real responses against the document, and counts which operations were seen."""

    def __init__(self, doc):
        self.doc = doc
        self.components = closed(doc["components"])
        self.seen = set()
        self.samples = 0

    def operation(self, method, template):
        assert template in self.doc["paths"], f"{template} is not in the document"
        item = self.doc["paths"][template]
        assert method.lower() in item, f"{method} {template} is not in the document"
        return item[method.lower()]

    def validate(self, schema, value, what):
        wrapper = {"$schema": "https://json-schema.org/draft/2020-12/schema", **closed(schema),
                   "components": self.components}
        validator = Draft202012Validator(wrapper, format_checker=FORMATS)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        assert not errors, f"{what}: " + "\n".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10]) + \
            f"\nbody: {json.dumps(value)[:1500]}"
        self.samples += 1

    def check(self, method, template, r, status=None, content_type=None):
        """r is a harness Response. Its status must be documented for the operation, and its body
        valid against the documented schema of that status and content type. Returns the JSON."""
        op = self.operation(method, template)
        what = f"{method} {template} → {r.status}"
        if status is not None:
            assert r.status == status, f"{what}, expected {status}: {r.body[:500]!r}"
        assert str(r.status) in op["responses"], f"{what}: status not documented; body {r.body[:300]!r}"
        rid = r.headers.get("X-Request-Id") or r.headers.get("x-request-id")
        assert rid and re.fullmatch(r"req-[0-9a-f]{16}", rid), f"{what}: X-Request-Id {rid!r}"
        self.seen.add((method.upper(), template))
        response = deref(self.doc, op["responses"][str(r.status)])
        content = response.get("content")
        if not content:
            assert r.body == b"", f"{what}: documented without a body, got {r.body[:200]!r}"
            return None
        ctype = (r.headers.get("Content-Type") or r.headers.get("content-type") or "").split(";")[0].strip()
        if content_type:
            assert ctype == content_type, f"{what}: Content-Type {ctype}"
        assert ctype in content, f"{what}: Content-Type {ctype} not documented ({list(content)})"
        if ctype == "text/event-stream":
            # each event's data against the schema the document gives that event
            schemas = content[ctype].get("x-sse-events")
            assert schemas, f"{what}: an event stream without x-sse-events"
            events = read_sse(r.body)
            assert events, f"{what}: no events in {r.body[:300]!r}"
            for name, data in events:
                assert name in schemas, f"{what}: event {name!r} not documented ({list(schemas)})"
                self.validate(schemas[name], data, f"{what}, event {name}")
            return events
        if ctype != "application/json":
            return r.body
        body = r.json()
        self.validate(content[ctype]["schema"], body, what)
        if r.status >= 400:
            assert body["error"]["request_id"] == rid, what
        return body

    def check_schema(self, name, value, what):
        self.validate({"$ref": f"#/components/schemas/{name}"}, value, what)


@pytest.fixture(scope="module")
def checker(doc):
    c = Checker(doc)
    yield c
    print(f"\n{c.samples} real answers validated; {len(c.seen)} operations exercised")


@pytest.fixture(scope="module")
def superadmin(daemon):
    return daemon.admin()


SBX = "/v1/sandboxes/{id}"


def test_health_and_errors(daemon, checker, org):
    anonymous = daemon.client()
    checker.check("GET", "/healthz", anonymous.get("/healthz"), 200)
    checker.check("GET", "/readyz", anonymous.get("/readyz"), 200)
    checker.check("GET", "/metrics", daemon.admin().get("/metrics"), 200, content_type="text/plain")
    checker.check("GET", "/metrics", anonymous.get("/metrics"), 401)
    checker.check("GET", "/metrics", org["admin"].get("/metrics"), 403)
    # The daemon serves the document it was built from: this very file.
    served = checker.check("GET", "/v1/openapi.json", anonymous.get("/v1/openapi.json"), 200)
    assert served == json.loads(json.dumps(checker.doc))
    as_yaml = checker.check("GET", "/v1/openapi.yaml", anonymous.get("/v1/openapi.yaml"), 200,
                            content_type="application/yaml")
    with open(SPEC, "rb") as f:
        assert as_yaml == f.read()
    viewer, member = org["viewer"], org["member"]
    # 401, 403, 404, 400 in the shared shape
    checker.check("GET", "/v1/whoami", anonymous.get("/v1/whoami"), 401)
    checker.check("POST", "/v1/sandboxes", viewer.post("/v1/sandboxes", {}), 403)
    checker.check("GET", SBX, viewer.get("/v1/sandboxes/sbx-0000000000000000"), 404)
    checker.check("POST", "/v1/sandboxes", member.post("/v1/sandboxes", {"image": "debian"}), 400)
    checker.check("POST", "/v1/sandboxes", member.post("/v1/sandboxes", {"resources": {"disk_mb": 10}}), 400)
    checker.check("GET", "/v1/sandboxes", viewer.get("/v1/sandboxes?limit=0"), 400)
    # an unknown path and a wrong method answer the Error shape too (described globally)
    r = viewer.get("/v1/no-such-thing")
    assert r.status == 404
    checker.check_schema("Error", r.json(), "unknown path")
    r = viewer.request("PUT", "/v1/whoami")
    assert r.status == 405
    checker.check_schema("Error", r.json(), "wrong method")
    assert r.json()["error"]["code"] == "invalid_argument"


def test_identity_and_guardrails(daemon, checker, org, superadmin):
    admin, member = org["admin"], org["member"]
    for who in (superadmin, admin, member):
        checker.check("GET", "/v1/whoami", who.get("/v1/whoami"), 200)
        checker.check("GET", "/v1/orgs", who.get("/v1/orgs"), 200)
    made = checker.check("POST", "/v1/orgs", superadmin.post("/v1/orgs", {"name": "openapi-spare"}), 201)
    checker.check("POST", "/v1/orgs", superadmin.post("/v1/orgs", {"name": "openapi-spare"}), 409)
    checker.check("POST", "/v1/orgs", admin.post("/v1/orgs", {"name": "nope"}), 403)
    spare = made["id"]
    key = checker.check("POST", "/v1/orgs/{org}/api-keys",
                        superadmin.post(f"/v1/orgs/{spare}/api-keys", {"name": "spare-admin", "role": "admin"}), 201)
    spare_admin = daemon.client(key["key"])
    checker.check("GET", "/v1/orgs/{org}/limits", spare_admin.get(f"/v1/orgs/{spare}/limits"), 200)
    checker.check("PUT", "/v1/orgs/{org}/limits",
                  superadmin.request("PUT", f"/v1/orgs/{spare}/limits",
                                     body={"max_sandboxes": 3, "allowed_images": ["*"], "max_cpus": None}), 200)
    checker.check("PUT", "/v1/orgs/{org}/limits",
                  superadmin.request("PUT", f"/v1/orgs/{spare}/limits", body={"max_gpus": 1}), 400)
    # The runtime policy: shown in limits and own, its refusal in the error shape, null resets it.
    limits = checker.check("PUT", "/v1/orgs/{org}/limits",
                           superadmin.request("PUT", f"/v1/orgs/{spare}/limits", body={"allowed_runtimes": ["gvisor"]}),
                           200)
    assert limits["limits"]["allowed_runtimes"] == ["gvisor"] and "allowed_runtimes" in limits["own"], limits
    checker.check("PUT", "/v1/orgs/{org}/limits",
                  superadmin.request("PUT", f"/v1/orgs/{spare}/limits", body={"allowed_runtimes": []}), 400)
    refused = checker.check("POST", "/v1/sandboxes", spare_admin.post("/v1/sandboxes", {"runtime": "runc"}), 403)
    assert refused["error"]["code"] == "runtime_not_allowed", refused
    limits = checker.check("PUT", "/v1/orgs/{org}/limits",
                           superadmin.request("PUT", f"/v1/orgs/{spare}/limits", body={"allowed_runtimes": None}), 200)
    assert limits["limits"]["allowed_runtimes"] == ["runc", "gvisor"] and "allowed_runtimes" not in limits["own"]
    # Egress defaults (docs/egress.md): read by any role, set by the admin, null removes them.
    path = f"/v1/orgs/{spare}/egress-defaults"
    checker.check("GET", "/v1/orgs/{org}/egress-defaults", spare_admin.get(path), 200)
    policy = {"egress_allowlist": ["pypi.org"], "egress_deny": ["evil.example"],
              "egress_rules": [{"host": "api.github.com", "methods": ["GET"], "paths": ["/repos/acme/*"]}]}
    got = checker.check("PUT", "/v1/orgs/{org}/egress-defaults",
                        spare_admin.request("PUT", path, body={"egress_defaults": policy}), 200)
    assert got["egress_defaults"] == policy, got
    checker.check("PUT", "/v1/orgs/{org}/egress-defaults",
                  spare_admin.request("PUT", path, body={"egress_defaults": {"egress_rules": [{"host": "x"}] * 65}}), 400)
    checker.check("PUT", "/v1/orgs/{org}/egress-defaults", member.request("PUT", f"/v1/orgs/{org['org']['id']}/egress-defaults",
                                                                           body={"egress_defaults": None}), 403)
    checker.check("GET", "/v1/orgs/{org}/egress-defaults", admin.get(path), 404)
    checker.check("GET", "/v1/orgs/{org}/egress-defaults", daemon.client("sfk_nope").get(path), 401)
    got = checker.check("PUT", "/v1/orgs/{org}/egress-defaults",
                        spare_admin.request("PUT", path, body={"egress_defaults": None}), 200)
    assert got["egress_defaults"] is None, got
    checker.check("POST", "/v1/orgs/{org}/stop-all", spare_admin.post(f"/v1/orgs/{spare}/stop-all"), 200)
    limits = checker.check("GET", "/v1/orgs/{org}/limits", superadmin.get(f"/v1/orgs/{spare}/limits"), 200)
    assert limits["stopped"] is not None
    checker.check("DELETE", "/v1/orgs/{org}/stop-all", spare_admin.delete(f"/v1/orgs/{spare}/stop-all"), 204)
    checker.check("GET", "/v1/orgs/{org}/limits", admin.get(f"/v1/orgs/{spare}/limits"), 404)
    checker.check("POST", "/v1/orgs/{org}/disable", superadmin.post(f"/v1/orgs/{spare}/disable"), 200)
    checker.check("GET", "/v1/whoami", spare_admin.get("/v1/whoami"), 403)
    checker.check("POST", "/v1/orgs/{org}/api-keys",
                  superadmin.post(f"/v1/orgs/{spare}/api-keys", {"name": "late"}), 409)
    checker.check("POST", "/v1/orgs/{org}/enable", superadmin.post(f"/v1/orgs/{spare}/enable"), 200)
    checker.check("DELETE", "/v1/orgs/{org}", superadmin.delete(f"/v1/orgs/{spare}"), 204)
    checker.check("DELETE", "/v1/orgs/{org}", superadmin.delete(f"/v1/orgs/{spare}"), 404)
    checker.check("GET", "/v1/pool", superadmin.get("/v1/pool"), 200)
    checker.check("GET", "/v1/pool", admin.get("/v1/pool"), 403)

    created = checker.check("POST", "/v1/api-keys",
                            admin.post("/v1/api-keys", {"name": "short-lived", "role": "viewer",
                                                        "expires_in_s": 3600}), 201)
    checker.check("POST", "/v1/api-keys", admin.post("/v1/api-keys", {"name": "x", "role": "owner"}), 400)
    checker.check("GET", "/v1/whoami", daemon.client(created["key"]).get("/v1/whoami"), 200)
    listed = checker.check("GET", "/v1/api-keys", admin.get("/v1/api-keys"), 200)
    assert created["id"] in {k["id"] for k in listed["items"]}
    assert all("key" not in k for k in listed["items"])
    checker.check("DELETE", "/v1/api-keys/{id}", admin.delete(f"/v1/api-keys/{created['id']}"), 204)
    checker.check("DELETE", "/v1/api-keys/{id}", admin.delete(f"/v1/api-keys/{created['id']}"), 404)
    checker.check("GET", "/v1/whoami", daemon.client(created["key"]).get("/v1/whoami"), 401)

    # The console's session (docs/console.md): opened with a key, read and closed with its cookie.
    opened = checker.check("POST", "/v1/console/session", member.post("/v1/console/session"), 201)
    checker.check("POST", "/v1/console/session", daemon.client("sfk_" + "0" * 32).post("/v1/console/session"), 401)
    cookie = member.post("/v1/console/session").headers["Set-Cookie"].split(";")[0]
    browser = daemon.client(None)
    checker.check("GET", "/v1/console/session", browser.get("/v1/console/session", headers={"Cookie": cookie}), 200)
    checker.check("GET", "/v1/console/session", member.get("/v1/console/session"), 404)
    page = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{daemon.port}"}
    checker.check("DELETE", "/v1/console/session", browser.delete("/v1/console/session", headers=page), 403)
    csrf = browser.get("/v1/console/session", headers={"Cookie": cookie}).json()["csrf_token"]
    assert csrf != opened["csrf_token"]  # a session of its own
    checker.check("POST", "/v1/console/session",
                  browser.post("/v1/console/session", headers={**page, "X-Sandfort-CSRF": csrf}), 400)
    checker.check("DELETE", "/v1/console/session",
                  browser.delete("/v1/console/session", headers={**page, "X-Sandfort-CSRF": csrf}), 204)
    # Sign-in through an identity provider: this daemon offers none (test_console_oidc.py has one
    # that does, and walks the flow).
    issuers = checker.check("GET", "/v1/console/oidc/issuers", browser.get("/v1/console/oidc/issuers"), 200)
    assert issuers == {"items": []}
    checker.check("GET", "/v1/console/oidc/start", browser.get("/v1/console/oidc/start"), 400)
    checker.check("GET", "/v1/console/oidc/start", browser.get("/v1/console/oidc/start?issuer=0000000000000000"), 400)
    back = checker.check("GET", "/v1/console/oidc/callback", browser.get("/v1/console/oidc/callback?code=x&state=y"),
                         302)
    assert back is None
    r = browser.get("/v1/console/oidc/callback?code=x&state=y")
    assert r.headers["Location"] == "/console/#/signin?error=bad_callback", r.headers


def test_sandboxes_volumes_and_snapshots(daemon, checker, org):
    member, viewer = org["member"], org["viewer"]
    vol = checker.check("POST", "/v1/volumes", member.post("/v1/volumes", {"name": "openapi-cache"}), 201)
    checker.check("POST", "/v1/volumes", member.post("/v1/volumes", {"name": "openapi-cache"}), 409)
    checker.check("POST", "/v1/volumes", member.post("/v1/volumes", {"name": "x", "size_mb": 10}), 400)
    checker.check("GET", "/v1/volumes", viewer.get("/v1/volumes?limit=10"), 200)
    checker.check("GET", "/v1/volumes/{name}", viewer.get("/v1/volumes/openapi-cache"), 200)
    checker.check("GET", "/v1/volumes/{name}", viewer.get(f"/v1/volumes/{vol['id']}"), 200)
    checker.check("GET", "/v1/volumes/{name}", viewer.get("/v1/volumes/none-such"), 404)

    spec = {"name": "openapi-full", "wait": True, "env": {"FOO": "bar"}, "labels": {"suite": "openapi"},
            "resources": {"cpus": 0.5, "memory_mb": 256, "pids": 128}, "egress_allowlist": ["example.com"],
            "ttl_s": 3600, "idle_timeout_s": 900, "public_preview": False, "workdir": "/tmp",
            "volumes": [{"name": "openapi-cache", "mount_path": "/cache", "read_only": False}]}
    sbx = checker.check("POST", "/v1/sandboxes", member.post("/v1/sandboxes", spec), 201)
    sid = sbx["id"]
    try:
        assert sbx["state"] == "started" and sbx["env_keys"] == ["FOO"]
        checker.check("POST", "/v1/sandboxes", member.post("/v1/sandboxes", {"name": "openapi-full"}), 409)
        checker.check("DELETE", "/v1/volumes/{name}", member.delete("/v1/volumes/openapi-cache"), 409)
        checker.check("GET", SBX, viewer.get(f"/v1/sandboxes/{sid}"), 200)
        checker.check("GET", SBX, viewer.get("/v1/sandboxes/openapi-full?wait_for=started&timeout_s=5"), 200)
        page = checker.check("GET", "/v1/sandboxes", viewer.get("/v1/sandboxes?label=suite:openapi&limit=5"), 200)
        assert [s["id"] for s in page["items"]] == [sid]
        checker.check("GET", "/v1/sandboxes", viewer.get("/v1/sandboxes?state=started"), 200)
        checker.check("PATCH", SBX, member.request("PATCH", f"/v1/sandboxes/{sid}",
                                                   body={"labels": {"suite": "openapi", "x": "y"}, "ttl_s": 7200}), 200)
        checker.check("PATCH", SBX, member.request("PATCH", f"/v1/sandboxes/{sid}", body={"name": "other"}), 400)
        checker.check("GET", SBX + "/metrics", viewer.get(f"/v1/sandboxes/{sid}/metrics"), 200)
        checker.check("GET", SBX + "/ports", viewer.get(f"/v1/sandboxes/{sid}/ports"), 200)
        checker.check("GET", SBX + "/preview/{port}", member.get(f"/v1/sandboxes/{sid}/preview/8080"), 200)
        checker.check("GET", SBX + "/preview/{port}", member.get(f"/v1/sandboxes/{sid}/preview/70000"), 400)
        checker.check("GET", SBX + "/preview/{port}", viewer.get(f"/v1/sandboxes/{sid}/preview/8080"), 403)

        checker.check("POST", SBX + "/pause", member.post(f"/v1/sandboxes/{sid}/pause"), 200)
        checker.check("POST", SBX + "/process/exec",
                      member.post(f"/v1/sandboxes/{sid}/process/exec", {"command": "true"}), 409)
        checker.check("POST", SBX + "/resume", member.post(f"/v1/sandboxes/{sid}/resume"), 200)
        checker.check("POST", SBX + "/resume", member.post(f"/v1/sandboxes/{sid}/resume"), 200)

        snap = checker.check("POST", "/v1/snapshots",
                             member.post("/v1/snapshots", {"sandbox_id": sid, "name": "openapi-snap"}), 201)
        checker.check("POST", "/v1/snapshots",
                      member.post("/v1/snapshots", {"sandbox_id": sid, "name": "openapi-snap"}), 409)
        checker.check("POST", "/v1/snapshots", member.post("/v1/snapshots", {"sandbox_id": sid}), 400)
        checker.check("GET", "/v1/snapshots", viewer.get("/v1/snapshots"), 200)
        checker.check("GET", "/v1/snapshots/{name}", viewer.get("/v1/snapshots/openapi-snap"), 200)
        checker.check("GET", "/v1/snapshots/{name}", viewer.get(f"/v1/snapshots/{snap['id']}"), 200)
        checker.check("GET", "/v1/snapshots/{name}", viewer.get("/v1/snapshots/none-such"), 404)

        checker.check("POST", SBX + "/stop", member.post(f"/v1/sandboxes/{sid}/stop"), 200)
        checker.check("POST", SBX + "/pause", member.post(f"/v1/sandboxes/{sid}/pause"), 409)
        checker.check("GET", SBX + "/sessions", viewer.get(f"/v1/sandboxes/{sid}/sessions"), 409)
        checker.check("POST", SBX + "/start", member.post(f"/v1/sandboxes/{sid}/start"), 200)
    finally:
        checker.check("DELETE", SBX, member.delete(f"/v1/sandboxes/{sid}"), 204)
    checker.check("DELETE", SBX, member.delete(f"/v1/sandboxes/{sid}"), 404)
    checker.check("DELETE", "/v1/snapshots/{name}", member.delete("/v1/snapshots/openapi-snap"), 204)
    checker.check("DELETE", "/v1/snapshots/{name}", member.delete("/v1/snapshots/openapi-snap"), 404)
    checker.check("DELETE", "/v1/volumes/{name}", member.delete("/v1/volumes/openapi-cache"), 204)
    checker.check("DELETE", "/v1/volumes/{name}", member.delete("/v1/volumes/openapi-cache"), 404)

    # wait: false answers at once, before the agent does
    quick = checker.check("POST", "/v1/sandboxes", member.post("/v1/sandboxes", {"wait": False}), 201)
    try:
        assert quick["state"] in ("creating", "pulling", "started")
        ready = checker.check("GET", SBX, viewer.get(f"/v1/sandboxes/{quick['id']}?wait_for=started&timeout_s=60"),
                              200)
        assert ready["state"] == "started", ready
    finally:
        checker.check("DELETE", SBX, member.delete(f"/v1/sandboxes/{quick['id']}"), 204)


def test_processes_sessions_and_commands(daemon, checker, org, sandbox):
    member, viewer = org["member"], org["viewer"]
    base = f"/v1/sandboxes/{sandbox['id']}"
    out = checker.check("POST", SBX + "/process/exec",
                        member.post(base + "/process/exec", {"command": "echo build; exit 7"}), 200)
    assert out["exit_code"] == 7 and out["stdout"] == "build\n"
    checker.check("POST", SBX + "/process/exec",
                  member.post(base + "/process/exec", {"argv": ["printf", "\\377"], "binary": True,
                                                       "env": {"A": "1"}, "cwd": "/tmp", "stdin": ""}), 200)
    checker.check("POST", SBX + "/process/exec", member.post(base + "/process/exec", {}), 400)
    checker.check("POST", SBX + "/process/exec",
                  member.post(base + "/process/exec", {"command": "sleep 5", "timeout_s": 1}), 200)
    out = checker.check("POST", SBX + "/process/code-run",
                        member.post(base + "/process/code-run", {"language": "python", "code": "print(21 * 2)"}), 200)
    assert out["stdout"] == "42\n"
    checker.check("POST", SBX + "/process/code-run",
                  member.post(base + "/process/code-run", {"language": "cobol", "code": "x"}), 400)
    # the streamed form
    r = member.post(base + "/process/exec", {"command": "echo a; echo b >&2"}, headers={"Accept": "text/event-stream"})
    events = checker.check("POST", SBX + "/process/exec", r, 200, content_type="text/event-stream")
    assert {name for name, _ in events} >= {"stdout", "stderr", "exit"}, events
    assert events[-1][0] == "exit" and events[-1][1]["exit_code"] == 0, events
    r = member.post(base + "/process/code-run", {"language": "sh", "code": "echo hi"},
                    headers={"Accept": "text/event-stream"})
    checker.check("POST", SBX + "/process/code-run", r, 200, content_type="text/event-stream")

    # sessions (the shared sandbox's default session is left as it was: other tests use it)
    out = checker.check("POST", SBX + "/exec", member.post(base + "/exec", {"command": "echo hi"}), 200)
    assert out["stdout"] == "hi\n" and out["session_restarted"] is False
    checker.check("POST", SBX + "/exec", member.post(base + "/exec", {"command": "x", "bogus": 1}), 400)
    checker.check("POST", SBX + "/sessions", member.post(base + "/sessions", {"name": "openapi"}), 201)
    checker.check("POST", SBX + "/sessions", member.post(base + "/sessions", {"name": "openapi"}), 409)
    checker.check("POST", SBX + "/sessions/{name}/exec",
                  member.post(base + "/sessions/openapi/exec", {"command": "cd /tmp && export T=abc"}), 200)
    out = checker.check("POST", SBX + "/sessions/{name}/exec",
                        member.post(base + "/sessions/openapi/exec", {"command": "pwd; echo $T"}), 200)
    assert out["stdout"] == "/tmp\nabc\n" and out["session_restarted"] is False
    out = checker.check("POST", SBX + "/sessions/{name}/exec",
                        member.post(base + "/sessions/openapi/exec", {"command": "exit 3"}), 200)
    assert out["exit_code"] == 3 and out["session_restarted"] is True
    checker.check("POST", SBX + "/sessions/{name}/exec",
                  member.post(base + "/sessions/openapi/exec", {"command": "printf x", "binary": True,
                                                                "timeout_ms": 5000}), 200)
    r = member.post(base + "/sessions/openapi/exec", {"command": "echo s"}, headers={"Accept": "text/event-stream"})
    events = checker.check("POST", SBX + "/sessions/{name}/exec", r, 200, content_type="text/event-stream")
    assert events[-1][0] == "exit" and events[-1][1]["session_restarted"] is False, events
    checker.check("GET", SBX + "/sessions", viewer.get(base + "/sessions"), 200)
    checker.check("DELETE", SBX + "/sessions/{name}", member.delete(base + "/sessions/openapi"), 204)
    checker.check("DELETE", SBX + "/sessions/{name}", member.delete(base + "/sessions/openapi"), 404)

    # background commands
    cmd = checker.check("POST", SBX + "/commands",
                        member.post(base + "/commands", {"command": "cat; echo done", "cwd": "/tmp",
                                                         "env": {"X": "1"}}), 201)
    cid = cmd["id"]
    checker.check("POST", SBX + "/commands", member.post(base + "/commands", {"command": ""}), 400)
    checker.check("GET", SBX + "/commands", viewer.get(base + "/commands"), 200)
    checker.check("GET", SBX + "/commands/{cmd}", viewer.get(f"{base}/commands/{cid}"), 200)
    checker.check("GET", SBX + "/commands/{cmd}", viewer.get(f"{base}/commands/cmd-0000000000000000"), 404)
    checker.check("POST", SBX + "/commands/{cmd}/stdin",
                  member.post(f"{base}/commands/{cid}/stdin?eof=true", raw=b"hello\n"), 204)
    r = viewer.get(f"{base}/commands/{cid}/logs?follow=true")
    events = checker.check("GET", SBX + "/commands/{cmd}/logs", r, 200, content_type="text/event-stream")
    assert events[-1] == ("exit", {"exit_code": 0}), events
    logs = checker.check("GET", SBX + "/commands/{cmd}/logs", viewer.get(f"{base}/commands/{cid}/logs"), 200)
    assert logs["stdout"] == "hello\ndone\n"
    done = checker.check("GET", SBX + "/commands/{cmd}", viewer.get(f"{base}/commands/{cid}"), 200)
    assert done["state"] == "exited" and done["exit_code"] == 0
    checker.check("POST", SBX + "/commands/{cmd}/kill", member.post(f"{base}/commands/{cid}/kill"), 409)
    sleeper = member.post(base + "/commands", {"command": "sleep 600"}).json()["id"]
    checker.check("POST", SBX + "/commands/{cmd}/kill",
                  member.post(f"{base}/commands/{sleeper}/kill", {"signal": "KILL"}), 204)
    checker.check("POST", SBX + "/commands/{cmd}/kill",
                  member.post(f"{base}/commands/{sleeper}/kill", {"signal": "BOOM"}), 400)


def test_code_contexts(daemon, checker, org, sandbox):
    member, viewer = org["member"], org["viewer"]
    base = f"/v1/sandboxes/{sandbox['id']}/code"
    CODE = "/v1/sandboxes/{id}/code"
    ctx = checker.check("POST", CODE + "/contexts",
                        member.post(base + "/contexts", {"language": "python", "cwd": "/tmp", "env": {"A": "1"}}), 201)
    checker.check("POST", CODE + "/contexts", member.post(base + "/contexts", {"language": "cobol"}), 400)
    checker.check("GET", CODE + "/contexts", viewer.get(base + "/contexts"), 200)
    checker.check("GET", CODE + "/contexts/{ctx}", viewer.get(f"{base}/contexts/{ctx['id']}"), 200)
    checker.check("GET", CODE + "/contexts/{ctx}", viewer.get(f"{base}/contexts/ctx-0000000000000000"), 404)
    events = checker.check("POST", CODE + "/run",
                           member.post(base + "/run", {"code": "x = 20\nprint(x)\nx + 1", "context_id": ctx["id"]}),
                           200, content_type="text/event-stream")
    assert [name for name, _ in events] == ["stdout", "result", "end"], events
    events = checker.check("POST", CODE + "/run", member.post(base + "/run", {"code": "1/0\n", "language": "python"}),
                           200, content_type="text/event-stream")
    assert events[0][0] == "error" and events[0][1]["name"] == "ZeroDivisionError", events
    checker.check("POST", CODE + "/run", member.post(base + "/run", {"code": 1}), 400)
    checker.check("POST", CODE + "/run", member.post(base + "/run", {"code": "1", "context_id": "ctx-0000000000000000"}), 404)
    checker.check("POST", CODE + "/contexts/{ctx}/restart", member.post(f"{base}/contexts/{ctx['id']}/restart", {}), 200)
    checker.check("DELETE", CODE + "/contexts/{ctx}", member.delete(f"{base}/contexts/{ctx['id']}"), 204)
    checker.check("DELETE", CODE + "/contexts/{ctx}", member.delete(f"{base}/contexts/{ctx['id']}"), 404)
    checker.check("POST", CODE + "/contexts/{ctx}/restart", member.post(f"{base}/contexts/{ctx['id']}/restart", {}), 404)


def test_files_git_and_terminal(daemon, checker, org, sandbox):
    member, viewer = org["member"], org["viewer"]
    base = f"/v1/sandboxes/{sandbox['id']}"
    checker.check("PUT", SBX + "/files",
                  member.request("PUT", base + "/files?path=/tmp/oa/a.py&mode=0640", raw=b"print(1)\n"), 201)
    checker.check("PUT", SBX + "/files", member.request("PUT", base + "/files?path=/tmp/oa/b&mode=4755", raw=b"x"), 400)
    r = viewer.get(base + "/files?path=/tmp/oa/a.py")
    assert checker.check("GET", SBX + "/files", r, 200, content_type="application/octet-stream") == b"print(1)\n"
    checker.check("GET", SBX + "/files", viewer.get(base + "/files?path=/tmp/oa"), 400)
    checker.check("GET", SBX + "/files", viewer.get(base + "/files?path=/tmp/none"), 404)
    listed = checker.check("GET", SBX + "/files/list", viewer.get(base + "/files/list?path=/tmp/oa"), 200)
    assert [e["name"] for e in listed["items"]] == ["a.py"]
    checker.check("GET", SBX + "/files/list", viewer.get(base + "/files/list?path=tmp"), 400)
    checker.check("GET", SBX + "/files/stat", viewer.get(base + "/files/stat?path=/tmp/oa/a.py"), 200)
    checker.check("GET", SBX + "/files/stat", viewer.get(base + "/files/stat?path=/tmp/oa/none"), 404)
    member.post(base + "/process/exec", {"command": "ln -sf /tmp/oa/a.py /tmp/oa/link"})
    link = checker.check("GET", SBX + "/files/stat", viewer.get(base + "/files/stat?path=/tmp/oa/link"), 200)
    assert link["type"] == "symlink" and link["target"] == "/tmp/oa/a.py"
    deep = {"path": "/tmp/oa/d/e", "parents": True}
    checker.check("POST", SBX + "/files/mkdir", member.post(base + "/files/mkdir", {**deep, "mode": "0750"}), 201)
    checker.check("POST", SBX + "/files/mkdir", member.post(base + "/files/mkdir", deep), 200)
    checker.check("POST", SBX + "/files/mkdir", member.post(base + "/files/mkdir", {"path": "/tmp/oa/d"}), 409)
    checker.check("POST", SBX + "/files/move", member.post(base + "/files/move", {"from": "/tmp/oa/a.py",
                                                                                 "to": "/tmp/oa/d/a.py"}), 200)
    checker.check("POST", SBX + "/files/move", member.post(base + "/files/move", {"from": "/tmp/oa/gone",
                                                                                 "to": "/tmp/oa/x"}), 404)
    r = viewer.get(base + "/files/archive?path=/tmp/oa/d")
    tar_bytes = checker.check("GET", SBX + "/files/archive", r, 200, content_type="application/x-tar")
    names = tarfile.open(fileobj=io.BytesIO(tar_bytes)).getnames()
    assert any(n.rstrip("/").endswith("e") for n in names), names
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        data = b"hello"
        info = tarfile.TarInfo("x/hello.txt")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    checker.check("PUT", SBX + "/files/archive",
                  member.request("PUT", base + "/files/archive?path=/tmp/oa/t", raw=buf.getvalue()), 200)
    checker.check("DELETE", SBX + "/files", member.delete(base + "/files?path=/tmp/oa/d"), 409)  # not empty
    checker.check("DELETE", SBX + "/files", member.delete(base + "/files?path=/tmp/oa&recursive=true"), 204)
    checker.check("DELETE", SBX + "/files", member.delete(base + "/files?path=/tmp/oa"), 404)

    # a directory watch: its events until the directory itself goes, which ends the stream
    member.post(base + "/process/exec", {"command": "mkdir -p /tmp/ow"})
    conn = viewer.connection()
    conn.request("GET", base + "/files/watch?path=/tmp/ow&include_entry=true",
                 headers={"Authorization": "Bearer " + org["keys"]["viewer"], "Accept": "text/event-stream"})
    resp = conn.getresponse()
    started = b""
    while not started.endswith(b"\n\n"):  # the start event: the watch is in place
        line = resp.readline()
        assert line, started
        started += line
    member.post(base + "/process/exec", {"command": "cd /tmp/ow && echo 1 > f && chmod 600 f && mv f g && rm g && "
                                                    "cd / && rmdir /tmp/ow"})
    r = Response(resp.status, dict(resp.getheaders()), started + resp.read())
    conn.close()
    events = checker.check("GET", SBX + "/files/watch", r, 200, content_type="text/event-stream")
    assert [n for n, _ in events][0] == "start" and [n for n, _ in events][-1] == "end", events
    assert {"create", "write", "chmod", "rename", "remove"} <= {n for n, _ in events}, events
    checker.check("GET", SBX + "/files/watch", viewer.get(base + "/files/watch?path=/tmp/none"), 404)
    checker.check("GET", SBX + "/files/watch", viewer.get(base + "/files/watch?path=tmp"), 400)

    # git: the image has no git, so each call runs and answers 127 — the shape is what counts here
    bodies = {"clone": {"path": "/tmp/oa-clone", "url": "https://example.com/r.git", "depth": 1},
              "pull": {"path": "/tmp", "rebase": False}, "push": {"path": "/tmp", "remote": "origin"},
              "add": {"path": "/tmp", "files": ["a"]}, "commit": {"path": "/tmp", "message": "m",
                                                                  "author": {"name": "A", "email": "a@b"}},
              "checkout": {"path": "/tmp", "branch": "main", "create": True}, "branches": {"path": "/tmp"},
              "status": {"path": "/tmp", "timeout_s": 30}}
    for op in git_ops():
        out = checker.check("POST", SBX + f"/git/{op}", member.post(f"{base}/git/{op}", bodies[op]), 200)
        assert out["op"] == op
    checker.check("POST", SBX + "/git/status", member.post(base + "/git/status", {"path": "/tmp", "url": "x"}), 400)
    checker.check("POST", SBX + "/git/add", member.post(base + "/git/add", {"path": "relative"}), 400)
    r = member.post(base + "/git/rebase", {"path": "/tmp"})
    assert r.status == 404
    checker.check_schema("Error", r.json(), "unknown git op")

    # the terminal: a WebSocket upgrade answers 101
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=30) as s:
        s.sendall((f"GET {base}/pty?cols=80&rows=24 HTTP/1.1\r\nHost: localhost\r\n"
                   f"Authorization: Bearer {org['keys']['member']}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                   "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    status = int(head.split(b" ", 2)[1])
    assert status == 101, head[:300]
    assert "101" in checker.operation("GET", SBX + "/pty")["responses"]
    checker.seen.add(("GET", SBX + "/pty"))
    checker.check("GET", SBX + "/pty", viewer.get(base + "/pty"), 403)


def test_audit(daemon, checker, org, superadmin):
    admin, viewer = org["admin"], org["viewer"]
    page = checker.check("GET", "/v1/audit", admin.get("/v1/audit?limit=5"), 200)
    assert page["items"] and page["next_cursor"] is not None
    checker.check("GET", "/v1/audit", admin.get(f"/v1/audit?cursor={page['next_cursor']}&action=sandbox.create"), 200)
    checker.check("GET", "/v1/audit", admin.get("/v1/audit?since=yesterday"), 400)
    checker.check("GET", "/v1/audit", viewer.get("/v1/audit"), 403)
    checker.check("GET", "/v1/audit", superadmin.get(f"/v1/audit?org={org['org']['id']}&limit=3"), 200)
    r = admin.get("/v1/audit?format=jsonl&limit=50")
    checker.check("GET", "/v1/audit", r, 200, content_type="application/x-ndjson")
    lines = r.body.decode().splitlines()
    assert lines
    for line in lines:
        checker.check_schema("AuditEvent", json.loads(line), "a JSON Lines event")
    checker.check("GET", "/v1/audit/verify", admin.get("/v1/audit/verify"), 200)
    first = admin.post("/v1/audit/checkpoints")
    checker.check("POST", "/v1/audit/checkpoints", first)
    assert first.status in (200, 201)
    again = checker.check("POST", "/v1/audit/checkpoints", admin.post("/v1/audit/checkpoints"))
    assert again is not None
    checker.check("GET", "/v1/audit/checkpoints", admin.get("/v1/audit/checkpoints?limit=2"), 200)
    checker.check("GET", "/v1/audit/checkpoints", admin.get("/v1/audit/checkpoints?after_seq=x"), 400)
    checker.check("GET", "/v1/audit/public-key", viewer.get("/v1/audit/public-key"), 200)


def test_events(daemon, checker, org):
    """The organization's stored life-cycle events (its sandboxes were made and deleted by the
    tests above): the first few, each validated against its schema, then the stream closed."""
    viewer = org["viewer"]
    conn = viewer.connection()
    conn.request("GET", "/v1/events?types=sandbox.created,sandbox.started,sandbox.stopped,sandbox.deleted",
                 headers={"Authorization": "Bearer " + org["keys"]["viewer"], "Accept": "text/event-stream"})
    resp = conn.getresponse()
    body = b""
    while body.count(b"\nid: ") < 3:
        line = resp.readline()
        assert line, body
        body += line
    while not body.endswith(b"\n\n"):  # the last event's end
        body += resp.readline()
    r = Response(resp.status, dict(resp.getheaders()), body)
    conn.close()
    events = checker.check("GET", "/v1/events", r, 200, content_type="text/event-stream")
    assert len(events) >= 3 and events[0][0] == "sandbox.created", events
    checker.check("GET", "/v1/events", viewer.get("/v1/events?types=nope"), 400)
    checker.check("GET", "/v1/events", viewer.get("/v1/events", headers={"Last-Event-ID": "x"}), 400)


def test_secrets(daemon, checker, org):
    admin, viewer = org["admin"], org["viewer"]
    body = {"name": "openapi-secret", "value": "openapi-value", "hosts": ["api.example.com"],
            "header": "Authorization", "format": "Bearer {value}"}
    checker.check("POST", "/v1/secrets", admin.post("/v1/secrets", body), 201)
    checker.check("POST", "/v1/secrets", admin.post("/v1/secrets", body), 409)
    checker.check("POST", "/v1/secrets", admin.post("/v1/secrets", {**body, "name": "Bad"}), 400)
    checker.check("POST", "/v1/secrets", admin.post("/v1/secrets", {**body, "name": "big", "value": "x" * 9000}), 413)
    checker.check("POST", "/v1/secrets", viewer.post("/v1/secrets", body), 403)
    checker.check("POST", "/v1/secrets", admin.post("/v1/secrets", {"name": "q", "value": "v", "hosts": ["*.example.com"],
                                                                  "query": "key"}), 201)
    checker.check("POST", "/v1/secrets", admin.post("/v1/secrets", {"name": "b", "value": "v", "hosts": ["example.com"],
                                                                  "basic_auth": {"username": "u"}}), 201)
    checker.check("GET", "/v1/secrets", viewer.get("/v1/secrets"), 200)
    checker.check("GET", "/v1/secrets/{name}", viewer.get("/v1/secrets/openapi-secret"), 200)
    checker.check("GET", "/v1/secrets/{name}", viewer.get("/v1/secrets/none-such"), 404)
    checker.check("PUT", "/v1/secrets/{name}", admin.request("PUT", "/v1/secrets/openapi-secret", {"value": "v2"}), 200)
    checker.check("PUT", "/v1/secrets/{name}", admin.request("PUT", "/v1/secrets/openapi-secret", {}), 400)
    checker.check("PUT", "/v1/secrets/{name}", admin.request("PUT", "/v1/secrets/none-such", {"value": "v"}), 404)
    checker.check("PUT", "/v1/secrets/{name}", viewer.request("PUT", "/v1/secrets/openapi-secret", {"value": "v"}), 403)
    for name in ("openapi-secret", "q", "b"):
        checker.check("DELETE", "/v1/secrets/{name}", admin.delete(f"/v1/secrets/{name}"), 204)
    checker.check("DELETE", "/v1/secrets/{name}", admin.delete("/v1/secrets/q"), 404)
    checker.check("DELETE", "/v1/secrets/{name}", viewer.delete("/v1/secrets/q"), 403)
    checker.check("GET", "/v1/interception-ca", viewer.get("/v1/interception-ca"), 200)
    checker.check("GET", "/v1/interception-ca", daemon.client().get("/v1/interception-ca"), 401)


def test_webhooks(daemon, checker, org):
    admin, viewer = org["admin"], org["viewer"]
    # A public IP literal: registration resolves nothing. No snapshot is deleted in this organization
    # while the webhook is enabled, so nothing is ever sent there.
    body = {"url": "https://1.1.1.1/openapi", "types": ["snapshot.deleted"], "description": "openapi"}
    made = checker.check("POST", "/v1/webhooks", admin.post("/v1/webhooks", body), 201)
    checker.check("POST", "/v1/webhooks", admin.post("/v1/webhooks", {"url": "http://127.0.0.1/"}), 400)
    checker.check("POST", "/v1/webhooks", viewer.post("/v1/webhooks", body), 403)
    checker.check("POST", "/v1/webhooks", daemon.client().post("/v1/webhooks", body), 401)
    hook = made["id"]
    checker.check("GET", "/v1/webhooks", admin.get("/v1/webhooks"), 200)
    checker.check("GET", "/v1/webhooks", viewer.get("/v1/webhooks"), 403)
    checker.check("GET", "/v1/webhooks", daemon.client().get("/v1/webhooks"), 401)
    checker.check("GET", "/v1/webhooks/{webhook}", admin.get(f"/v1/webhooks/{hook}"), 200)
    checker.check("GET", "/v1/webhooks/{webhook}", admin.get("/v1/webhooks/whk-0000000000000000"), 404)
    checker.check("PATCH", "/v1/webhooks/{webhook}", admin.request("PATCH", f"/v1/webhooks/{hook}", {"enabled": False}), 200)
    checker.check("PATCH", "/v1/webhooks/{webhook}", admin.request("PATCH", f"/v1/webhooks/{hook}", {}), 400)
    checker.check("POST", "/v1/webhooks/{webhook}/rotate-secret", admin.post(f"/v1/webhooks/{hook}/rotate-secret"), 200)
    checker.check("POST", "/v1/webhooks/{webhook}/rotate-secret",
                  admin.post(f"/v1/webhooks/{hook}/rotate-secret", {"keep_previous_s": 60}), 200)
    checker.check("POST", "/v1/webhooks/{webhook}/rotate-secret",
                  admin.post(f"/v1/webhooks/{hook}/rotate-secret", {"keep_previous_s": -1}), 400)
    checker.check("POST", "/v1/webhooks/{webhook}/rotate-secret", viewer.post(f"/v1/webhooks/{hook}/rotate-secret"), 403)
    checker.check("GET", "/v1/webhooks/{webhook}/deliveries", admin.get(f"/v1/webhooks/{hook}/deliveries"), 200)
    checker.check("GET", "/v1/webhooks/{webhook}/deliveries", admin.get(f"/v1/webhooks/{hook}/deliveries?limit=0"), 400)
    checker.check("DELETE", "/v1/webhooks/{webhook}", viewer.delete(f"/v1/webhooks/{hook}"), 403)
    checker.check("DELETE", "/v1/webhooks/{webhook}", admin.delete(f"/v1/webhooks/{hook}"), 204)
    checker.check("DELETE", "/v1/webhooks/{webhook}", admin.delete(f"/v1/webhooks/{hook}"), 404)


def test_every_operation_was_exercised(doc, checker):
    """Runs last (pytest keeps the file's order): every operation of the document was called on
    the real daemon and its answer validated."""
    every = {(method.upper(), path) for path, method, _ in operations(doc)}
    missing = sorted(every - checker.seen)
    assert not missing, "operations never exercised against the daemon:\n  " + \
        "\n  ".join(f"{m} {p}" for m, p in missing)
