"""Attack: root in sandbox A asks Docker's embedded DNS about its neighbours.

On a user-defined network Docker answers container names, short ids and reverse lookups of
every address to every container; with names made of sandbox ids, any sandbox could list the ids
of every tenant's sandboxes (and their preview host names). Staged for real from inside a
sandbox: reverse lookups of a neighbour's address and forward lookups of the names the old
scheme used."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandfort_harness import docker_container  # noqa: E402


def test_no_neighbour_id_is_revealed_by_dns(daemon, org):
    member = org["member"]
    a = member.create_sandbox()
    b = member.create_sandbox()
    try:
        b_address = docker_container(b["id"])["NetworkSettings"]["Networks"][daemon.network["name"]]["IPAddress"]
        assert b_address
        # A forward lookup prints the name asked for: only its answer (an address) would tell.
        # The reverse lookup must answer, so it gets glibc's usual patience, not the sandbox's
        # 1 s (the other two, which answer nothing, fail after it).
        script = (f"RES_OPTIONS='timeout:5 attempts:2' getent hosts {b_address}; "
                  f"getent hosts sandfort-{b['id']} | cut -d' ' -f1; getent hosts {b['id']} | cut -d' ' -f1; true")
        r = member.exec(a["id"], command=script)
        assert r["exit_code"] == 0, r
        out = r["stdout"] + r["stderr"]
        # Docker still answers the reverse lookup, with a name that says nothing; the names of
        # the old scheme (sandfort-<id>, the id as hostname) resolve to nothing.
        lines = out.split("\n")
        assert lines[0].startswith(b_address), out
        assert b["id"][4:] not in out, out
        assert out.count(b_address) == 1, out
    finally:
        member.delete(f"/v1/sandboxes/{a['id']}")
        member.delete(f"/v1/sandboxes/{b['id']}")
