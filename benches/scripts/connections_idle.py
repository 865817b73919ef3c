"""Idle connections for benches/scripts/connections_peer.sh: opens COUNT TCP connections to a
Kafka-compatible broker, one after another, each answered once (an ApiVersions v0 request and
its response), then holds them all open; prints how long opening took and the broker's
resident memory (VmRSS of PID) before and after.

usage: python3 connections_idle.py HOST:PORT PID COUNT
"""

import socket
import struct
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
pid, count = int(sys.argv[2]), int(sys.argv[3])


def rss_kib():
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("no VmRSS")


CLIENT = b"idle"
# ApiVersions (18) v0, correlation id 1, client id "idle"; an empty body.
HEADER = struct.pack(">hhih", 18, 0, 1, len(CLIENT)) + CLIENT
REQUEST = struct.pack(">i", len(HEADER)) + HEADER


def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


before = rss_kib()
held = []
started = time.monotonic()
for i in range(count):
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(REQUEST)
    (size,) = struct.unpack(">i", read_exactly(sock, 4))
    read_exactly(sock, size)
    held.append(sock)
opened = time.monotonic() - started
time.sleep(2)
after = rss_kib()
print(f"connections={count} open_seconds={opened:.2f} per_second={count / opened:.0f} "
      f"rss_before_MiB={before / 1024:.0f} rss_after_MiB={after / 1024:.0f} "
      f"KiB_per_connection={(after - before) / count:.1f}")
for sock in held:
    sock.close()
