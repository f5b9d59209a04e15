"""The harness on a machine that is also used: a network left by ./scripts/run's daemon (the default
10.213.0.0/16 stays after it stops) does not stop the test daemons, and what the daemons of a killed
test process left behind is swept by the next one, while a live run's daemon is left alone; a port taken between choosing it and the daemon's bind
(suites run in parallel) is chosen again."""

import ipaddress
import json
import os
import socket
import subprocess
import sys
import textwrap
import urllib.parse
import uuid

from sandfort_harness import LISTEN_PORTS, Daemon, docker, firewall_rules, process_identity

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


# A test process that starts a daemon with a sandbox, a volume and a snapshot, prints its state
# directory, network, bridge and sandfortd's pid, then sleeps until it is killed (its clean-up
# never runs).
HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, HARNESS_DIR)
    from sandfort_harness import Daemon
    d = Daemon().start()
    admin = d.admin()
    sbx = admin.create_sandbox()
    assert admin.post("/v1/volumes", {"name": "left"}).status == 201
    assert admin.post("/v1/snapshots", {"sandbox_id": sbx["id"], "name": "left"}).status in (201, 202)
    deadline = time.time() + 120
    while admin.get("/v1/snapshots/left").json()["state"] != "ready":
        assert time.time() < deadline
        time.sleep(0.2)
    print(d.state_dir, d.network["name"], d.network["bridge"], d.proc.pid, flush=True)
    time.sleep(600)
""").replace("HARNESS_DIR", repr(HERE))


def start_holder():
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    state_dir, network, bridge, pid = proc.stdout.readline().split()
    return proc, state_dir, network, bridge, int(pid)


def sweep_in_a_new_process():
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {HERE!r}); "
                    "import sandfort_harness as h; h.sweep_leftovers()"], check=True)


def labelled(kind, label):
    """Docker's containers, volumes or images carrying label."""
    query = urllib.parse.quote(json.dumps({"label": [label]}))
    path = {"containers": "/containers/json?all=true&filters=", "volumes": "/volumes?filters=",
            "images": "/images/json?filters="}[kind]
    status, body = docker("GET", path + query)
    assert status == 200, body
    return (body.get("Volumes") or []) if kind == "volumes" else body


def instance_of(network):
    status, body = docker("GET", f"/networks/{network}")
    assert status == 200, body
    return "io.sandfort.instance=" + body["Labels"]["io.sandfort.instance"]


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
        dead_instance, live_instance = instance_of(dead_net), instance_of(live_net)
        for kind in ("containers", "volumes", "images"):
            assert labelled(kind, dead_instance), kind

        sweep_in_a_new_process()

        assert not process_identity(dead_daemon)
        assert docker("GET", f"/networks/{dead_net}")[0] == 404
        assert containers_on(dead_net) == []
        for kind in ("containers", "volumes", "images"):
            assert labelled(kind, dead_instance) == [], kind
        assert firewall_rules(dead_bridge) == [] and firewall_rules(dead_bridge, "ip6tables") == []
        assert not os.path.exists(dead_state)

        # The other test process still runs: nothing of its daemon is touched.
        assert process_identity(live_daemon)
        assert docker("GET", f"/networks/{live_net}")[0] == 200
        assert containers_on(live_net) and firewall_rules(live_bridge)
        for kind in ("containers", "volumes", "images"):
            assert labelled(kind, live_instance), kind
        assert os.path.exists(os.path.join(live_state, "sandfort.db"))

        # Once it is gone too, the next test process sweeps its daemon's as well.
        live.kill()
        live.wait()
        sweep_in_a_new_process()
        assert docker("GET", f"/networks/{live_net}")[0] == 404
        for kind in ("containers", "volumes", "images"):
            assert labelled(kind, live_instance) == [], kind
        assert not os.path.exists(live_state)
    finally:
        for p in (dead, live):
            p.kill()
            p.wait()
        sweep_in_a_new_process()


def test_a_port_taken_before_the_daemon_binds_it_is_chosen_again():
    d = Daemon()
    taken = d.port
    with socket.socket() as squatter:  # what another suite's daemon does in that moment
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            d.start()
            assert d.port != taken and d.port in LISTEN_PORTS
            assert d.client().get("/healthz").status == 200
            with open(d.config_path) as f:
                assert json.load(f)["listen"] == f"127.0.0.1:{d.port}"
        finally:
            d.cleanup()
