"""Attack: a sandbox fills the directory sandfortd shares with it, then gets deleted.

Its agent-socket directory used to be a host directory that sandfortd removed with a recursive
delete on its only I/O thread: 200,000 files there stalled every tenant's requests for seconds,
and nothing bounded what a sandbox could write to the host's disk there. Staged for real: root
in a sandbox creates as many files as it can in /run/sandfort and 200,000 in its own filesystem,
then the sandbox is deleted while another client keeps asking /healthz."""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FILL = r'''
import os
made = 0
for i in range(100000):
    try:
        open(f"/run/sandfort/f{i}", "w").close()
        made += 1
    except OSError:
        break
os.makedirs("/tmp/many", exist_ok=True)
for i in range(200000):
    open(f"/tmp/many/{i}", "w").close()
print(made)
'''


def test_deleting_a_sandbox_full_of_files_does_not_stall_the_daemon(daemon, member):
    sbx = member.create_sandbox()
    r = member.exec(sbx["id"], argv=["python3", "-c", FILL], timeout_s=300)
    assert r["exit_code"] == 0, r
    # The socket directory is a tmpfs of the container's own with a handful of inodes.
    assert int(r["stdout"]) < 300, r
    assert not os.path.exists(os.path.join(daemon.state_dir, "sandboxes"))

    worst = [0.0]
    stop = threading.Event()

    def poll_health():
        client = daemon.client()
        while not stop.is_set():
            t = time.monotonic()
            assert client.get("/healthz").status == 200
            worst[0] = max(worst[0], time.monotonic() - t)
            time.sleep(0.01)

    poller = threading.Thread(target=poll_health)
    poller.start()
    try:
        assert member.delete(f"/v1/sandboxes/{sbx['id']}").status == 204
    finally:
        stop.set()
        poller.join()
    # A correctness bound, not a benchmark: the I/O thread never sat in a file walk.
    assert worst[0] < 0.5, worst[0]
