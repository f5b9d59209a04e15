"""Isolation defaults, checked on the real container and from inside it."""

from sandfort_harness import docker_container


def test_container_spec_has_the_isolation_defaults(sandbox):
    c = docker_container(sandbox["id"])
    host = c["HostConfig"]
    assert host["Init"] is True
    assert host["PidsLimit"] > 0
    assert host["Memory"] > 0 and host["MemorySwap"] == host["Memory"]
    assert host["NanoCpus"] > 0
    assert host["CapDrop"] == ["ALL"]
    assert "NET_RAW" not in host["CapAdd"] and "SYS_ADMIN" not in host["CapAdd"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["Privileged"] is False
    assert host["NetworkMode"].startswith("sandfort-test-")
    assert not any("docker.sock" in b for b in host["Binds"])
    agent_bind = [b for b in host["Binds"] if b.endswith(":/.sandfort/agent:ro")]
    assert agent_bind, host["Binds"]
    assert c["Config"]["Entrypoint"][0] == "/.sandfort/agent"


def test_inside_no_daemon_env_no_docker_socket_reduced_caps(member, sandbox):
    r = member.exec(sandbox["id"], command="env | grep -c '^SANDFORT_' || true")
    assert r["stdout"].strip() == "0"
    r = member.exec(sandbox["id"], command="ls /var/run/docker.sock /run/docker.sock 2>&1; true")
    assert "No such file" in r["stdout"]
    r = member.exec(sandbox["id"], command="grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
    fields = dict(line.split(":\t") for line in r["stdout"].strip().splitlines())
    cap_eff = int(fields["CapEff"], 16)
    assert cap_eff != 0 and cap_eff & (1 << 21) == 0, "CAP_SYS_ADMIN must be absent"
    assert cap_eff & (1 << 13) == 0, "CAP_NET_RAW must be absent"
    assert fields["NoNewPrivs"].strip() == "1"


def test_the_agent_binary_is_read_only_inside(member, sandbox):
    r = member.exec(sandbox["id"], command="echo x > /.sandfort/agent")
    assert r["exit_code"] != 0 and "Read-only" in r["stderr"]
