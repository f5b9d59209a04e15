"""The harness on a machine that is also used: a network left by ./scripts/run's daemon (the default
10.213.0.0/16 stays after it stops) does not stop the test daemons, and what the daemons of a killed
test process left behind is swept by the next one, while a live run's daemon is left alone."""

import ipaddress
import os
import subprocess
import sys
import textwrap
import uuid

from sandfort_harness import Daemon, docker, firewall_rules, process_identity

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SUBNET = ipaddress.ip_network("10.213.0.0/16")  # core/config.hpp, docs/configuration.md


def networks_covering(subnet):
    status, networks = docker("GET", "/networks")
    assert status == 200, networks
    return [n["Name"] for n in networks for cfg in (n.get("IPAM") or {}).get("Config") or []
            if cfg.get("Subnet") and ipaddress.ip_network(cfg["Subnet"], strict=False).overlaps(subnet)]


def test_a_network_on_the_default_subnet_does_not_stop_the_test_daemons():
    made = None
    if not networks_covering(DEFAULT_SUBNET):
        # What ./scripts/run's daemon leaves: its network on the whole default /16.
        made = "sfrunlike-" + uuid.uuid4().hex[:8]
        status, body = docker("POST", "/networks/create", {
            "Name": made, "Driver": "bridge",
            "IPAM": {"Config": [{"Subnet": str(DEFAULT_SUBNET), "Gateway": "10.213.0.1"}]}})
        assert status == 201, body
    try:
        d = Daemon().start()
        try:
            sbx = d.admin().create_sandbox()
            assert sbx["state"] == "started"
            assert not ipaddress.ip_network(d.network["subnet"]).overlaps(DEFAULT_SUBNET)
        finally:
            d.cleanup()
    finally:
        if made:
            docker("DELETE", f"/networks/{made}")


# A test process that starts a daemon with a sandbox, prints its state directory, network and
# bridge, then sleeps until it is killed (its clean-up never runs).
HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {here!r})
    from sandfort_harness import Daemon
    d = Daemon().start()
    d.admin().create_sandbox()
    print(d.state_dir, d.network["name"], d.network["bridge"], d.proc.pid, flush=True)
    time.sleep(600)
""").format(here=HERE)


def start_holder():
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    state_dir, network, bridge, pid = proc.stdout.readline().split()
    return proc, state_dir, network, bridge, int(pid)


def sweep_in_a_new_process():
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {HERE!r}); "
                    "import sandfort_harness as h; h.sweep_leftovers()"], check=True)


def containers_on(network):
    status, body = docker("GET", "/containers/json?all=true")
    assert status == 200, body
    return [c["Id"] for c in body if network in (c.get("NetworkSettings", {}).get("Networks") or {})]


def test_the_leftovers_of_a_killed_test_process_are_swept_and_a_live_ones_are_not():
    dead, dead_state, dead_net, dead_bridge, dead_daemon = start_holder()
    live, live_state, live_net, live_bridge, live_daemon = start_holder()
    try:
        dead.kill()
        dead.wait()
        # What a killed suite leaves: its sandfortd still running, a container, the network,
        # the firewall chains and the state directory.
        assert process_identity(dead_daemon)
        assert containers_on(dead_net) and firewall_rules(dead_bridge)

        sweep_in_a_new_process()

        assert not process_identity(dead_daemon)
        assert docker("GET", f"/networks/{dead_net}")[0] == 404
        assert containers_on(dead_net) == []
        assert firewall_rules(dead_bridge) == [] and firewall_rules(dead_bridge, "ip6tables") == []
        assert not os.path.exists(dead_state)

        # The other test process still runs: nothing of its daemon is touched.
        assert process_identity(live_daemon)
        assert docker("GET", f"/networks/{live_net}")[0] == 200
        assert containers_on(live_net) and firewall_rules(live_bridge)
        assert os.path.exists(os.path.join(live_state, "sandfort.db"))
    finally:
        for p in (dead, live):
            p.kill()
            p.wait()
        sweep_in_a_new_process()  # this test's own leftovers, the live holder's included
        assert docker("GET", f"/networks/{live_net}")[0] == 404
