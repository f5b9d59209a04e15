"""docs/security.md's surface inventory against the code: every route the daemon serves (its route
registry, as `sandfortd routes --json` prints it), every listener in the configuration and every
reference the inventory promises must be listed there, and every attacker's test it names must exist.

A route added without a line in the inventory fails here, so the question "whose is this
reference, how big can this buffer get, how many of these connections can one source hold" is
asked before a surface lands, not after an audit."""

import os
import re

import test_openapi as routes

REPO = routes.REPO
SECURITY = os.path.join(REPO, "docs", "security.md")
CONFIG_HPP = os.path.join(REPO, "include", "sandfort", "core", "config.hpp")
TESTS = os.path.join(REPO, "tests")
TABLES = ("Listeners", "Routes", "References a client supplies", "Buffers sized by someone else's bytes")
ROW = re.compile(r"^\|(.+)\|\s*$", re.M)
ROUTE = re.compile(r"`((?:GET|POST|PUT|PATCH|DELETE|\*)(?:,(?:GET|POST|PUT|PATCH|DELETE))*) (/[^`\s]*)`")
TEST_REF = re.compile(r"`([\w/.-]+\.(?:py|cpp|mjs))(?:::(\w+)(?:\[[^\]]*\])?)?`")


def inventory_tables():
    """{table name: [[cell, …], …]} of the "## Surface inventory" section, header rows dropped."""
    text = open(SECURITY).read()
    start = text.index("## Surface inventory")
    end = text.find("\n## ", start + 3)
    section = text[start:end if end > 0 else len(text)]
    tables = {}
    for part in re.split(r"^### ", section, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        rows = [[c.strip() for c in re.split(r"(?<!\\)\|", m.group(1))] for m in ROW.finditer(body)]
        tables[title.strip()] = [r for r in rows[2:]]  # header and its --- line
    return tables


def route_patterns(rows):
    """[(methods or None for any, compiled path pattern)] from the first cell of the route rows.
    `{x}` is one path segment, a trailing `*` is anything below."""
    out = []
    for row in rows:
        for methods, path in ROUTE.findall(row[0]):
            verbs = None if methods == "*" else set(methods.split(","))
            body = re.escape(routes.normalise(path)).replace(r"\{\}", "[^/]+")
            body = body[:-2] + ".*" if body.endswith(r"\*") else body
            out.append((verbs, re.compile("^" + body + "$")))
    return out


def unlisted(served, patterns):
    return sorted((m, p) for m, p in served
                  if not any((v is None or m in v) and rx.match(p.replace("{}", "x")) for v, rx in patterns))


def test_the_inventory_has_its_four_tables_and_every_row_names_a_check_and_a_test():
    tables = inventory_tables()
    assert set(TABLES) <= set(tables), sorted(tables)
    for name in TABLES:
        assert len(tables[name]) >= 4, (name, tables[name])
        for row in tables[name]:
            assert len(row) >= 4 and all(row), (name, row)
            assert TEST_REF.search(row[-1]), f"{name}: no attacker's test named in {row}"


def test_every_served_route_is_in_the_inventory():
    served = routes.served_routes()
    missing = unlisted(served, route_patterns(inventory_tables()["Routes"]))
    assert not missing, "served routes without a line in docs/security.md's inventory (Routes):\n  " + \
        "\n  ".join(f"{m} {p}" for m, p in missing)


def test_a_new_route_would_be_noticed():
    patterns = route_patterns(inventory_tables()["Routes"])
    assert unlisted({("POST", "/v1/new-surface"): None, ("GET", "/v1/sandboxes/{}/new"): None}, patterns) == \
        [("GET", "/v1/sandboxes/{}/new"), ("POST", "/v1/new-surface")]
    assert unlisted({("GET", "/healthz"): None}, patterns) == []


def test_every_listener_is_in_the_inventory():
    """Each `listen`/`*_port` the configuration has is a socket someone else can open."""
    config = open(CONFIG_HPP).read()
    keys = set(re.findall(r"\b(listen|proxy_port)\b", config))
    assert keys == {"listen", "proxy_port"}, keys
    text = " ".join(" ".join(r) for r in inventory_tables()["Listeners"])
    for must in ("api.listen", "preview.listen", "egress.proxy_port", "agent socket", "Docker"):
        assert must in text, must


def test_every_reference_a_client_supplies_is_listed():
    text = " ".join(r[0] for r in inventory_tables()["References a client supplies"]).lower()
    for must in ("snapshot", "volume", "sandbox id", "git url", "path", "port", "host", "command id",
                 "session name", "organization", "key id", "env", "user", "workdir"):
        assert must in text, must


def test_every_test_the_inventory_names_exists():
    tables = inventory_tables()
    names = 0
    for name in TABLES:
        for row in tables[name]:
            for file, func in TEST_REF.findall(row[-1]):
                candidates = [os.path.join(TESTS, "integration", file), os.path.join(TESTS, file),
                              os.path.join(REPO, file)]
                found = next((c for c in candidates if os.path.isfile(c)), None)
                assert found, f"{name}: {file} (in {row[0]}) does not exist"
                if func:
                    assert re.search(r"^def " + func + r"\(", open(found).read(), re.M), \
                        f"{name}: {file}::{func} does not exist"
                names += 1
    assert names >= 40, names
