"""The sandbox network and the host firewall across daemon restarts: created once, adopted
afterwards, rules removed on a clean stop only by the process that made them and only when no
sandbox is left to be exposed."""

from sandfort_harness import Daemon, docker, firewall_rules


def network_id(d):
    status, info = docker("GET", f"/networks/{d.network['name']}")
    assert status == 200, info
    return info["Id"]


def test_a_clean_stop_without_sandboxes_removes_the_rules():
    d = Daemon().start()
    try:
        bridge = d.network["bridge"]
        assert firewall_rules(bridge), "installed before the daemon is ready"
        assert firewall_rules(bridge, "ip6tables")
        assert d.stop() == 0
        assert firewall_rules(bridge) == []
        assert firewall_rules(bridge, "ip6tables") == []
    finally:
        d.cleanup()


def test_a_restart_adopts_the_network_and_a_running_sandbox_keeps_a_closed_host():
    d = Daemon().start()
    try:
        bridge = d.network["bridge"]
        first = network_id(d)
        client = d.admin()
        sbx = client.create_sandbox()
        rules = firewall_rules(bridge)
        assert d.stop() == 0
        # The sandbox still runs: the host stays closed to it while the daemon is away.
        assert firewall_rules(bridge) == rules

        d.start()
        assert network_id(d) == first
        assert firewall_rules(bridge) == rules  # adopted, not duplicated
        r = client.exec(sbx["id"], command="curl -sS -m 5 -o /dev/null -w '%{http_code}' http://example.com/")
        assert r["stdout"] == "403", r  # the new process's proxy answers for the old sandbox
        assert client.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
        assert d.stop() == 0
        # This process found the rules in place, so it leaves them (the harness removes them).
        assert firewall_rules(bridge) == rules
    finally:
        d.cleanup()


def test_an_unsafe_network_of_that_name_stops_the_daemon():
    d = Daemon()
    try:
        status, body = docker("POST", "/networks/create", {"Name": d.network["name"], "Internal": False,
                                                           "Labels": {"io.sandfort.network": "1"}})
        assert status == 201, body
        try:
            d.start()
            started = True
        except RuntimeError as e:
            started = False
            assert "not internal" in str(e), str(e)
        assert not started
        assert d.proc.wait(10) == 1
    finally:
        d.cleanup()
