#!/usr/bin/python3
"""bench/idle_clients.py - how much memory an idle client costs a server.

Usage: idle_clients.py [--burst] HOST PORT N PID [PID ...]

Reads VmRSS of every PID from /proc/PID/status with no client at all (the
idle server), opens one warm-up connection (PING, reply read, kept open),
reads VmRSS again, then opens N more connections, each sending
one PING and reading its +PONG before the next is opened, and reads VmRSS
again while all N are open and idle. With --burst the N connections are all
opened first, then all send their PING before any reply is read (what a
server holds for many clients at once stays in its RSS if it keeps freed
memory). Prints one line per PID:

    PID RSS_IDLE_KB RSS_BEFORE_KB RSS_AFTER_KB BYTES_PER_CLIENT

then closes every socket with a reset (SO_LINGER 0), so that no TIME_WAIT is
left behind to exhaust ports over many rounds. Used by bench/idle_memory.sh;
the caller raises `ulimit -n` above N.
"""
import socket
import struct
import sys


def vm_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


PING = b"*1\r\n$4\r\nPING\r\n"


def connect(host, port):
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return s


def read_pong(s):
    got = b""
    while not got.endswith(b"\r\n"):
        chunk = s.recv(64)
        if not chunk:
            raise RuntimeError("connection closed before the PING reply")
        got += chunk
    if got != b"+PONG\r\n":
        raise RuntimeError("unexpected PING reply %r" % got)


def ping(host, port):
    s = connect(host, port)
    s.sendall(PING)
    read_pong(s)
    return s


def main():
    args = sys.argv[1:]
    burst = bool(args) and args[0] == "--burst"
    if burst:
        args = args[1:]
    if len(args) < 4:
        sys.exit(__doc__)
    host, port, n = args[0], int(args[1]), int(args[2])
    pids = [int(p) for p in args[3:]]
    idle = {p: vm_rss_kb(p) for p in pids}
    socks = [ping(host, port)]
    before = {p: vm_rss_kb(p) for p in pids}
    if burst:
        batch = [connect(host, port) for _ in range(n)]
        for s in batch:
            s.sendall(PING)
        for s in batch:
            read_pong(s)
        socks += batch
    else:
        for _ in range(n):
            socks.append(ping(host, port))
    after = {p: vm_rss_kb(p) for p in pids}
    for p in pids:
        print(p, idle[p], before[p], after[p], "%.0f" % ((after[p] - before[p]) * 1024.0 / n))
    sys.stdout.flush()
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
