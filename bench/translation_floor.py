#!/usr/bin/python3
"""What any translation of a conveyor-key command must cost Redis at least.

bench/conveyor.sh part 4. Straight to one redis-server, on one connection,
each unit sent P at a time (P = 1 and 16), Redis's main-thread CPU
(INFO cpu, used_cpu_{user,sys}_main_thread) per unit for three shapes of
the same command on a plain sorted set:

  plain    the command alone
  multi    MULTI, HGET of an offset hash, the command, EXEC: an offset read
           atomically with the command, with no script (the proxy could send
           reads this way and add the offset to the scores itself)
  evalsha  EVALSHA of a script that only runs the command (no offset at all):
           the fixed cost of going through Lua
  checked  (the score range with a finite end only, given the text of
           `verbproxy --script conveyor_read`) what the proxy sends for it:
           MULTI, HGET, the command, EVALSHA_RO of that script with the
           offset expected (it is: the script only checks), EXEC
           (docs/conveyor.md, "How reads are sent")

The ratios multi/plain and evalsha/plain are what a translation costs at the
least in each way. Prints CSV rows: test,shape,P,units,us_per_unit.

Usage: translation_floor.py PORT KEY UNITS_P16 UNITS_P1 [CONVEYOR_READ_TEXT]
KEY must hold a sorted set of 1000 members m0..m999 (bench/conveyor.sh's
plain:tr); ZADD only updates those members, so it stays 1000.
"""
import random
import socket
import sys


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise SystemExit("translation_floor: redis closed the connection")
        self.buf += data

    def _line(self, pos):
        while True:
            end = self.buf.find(b"\r\n", pos)
            if end >= 0:
                return end
            self._fill()

    def _skip(self, pos):
        """The end of the reply that starts at pos (reading as needed)."""
        end = self._line(pos)
        kind, head = self.buf[pos:pos + 1], self.buf[pos + 1:end]
        pos = end + 2
        if kind in (b"+", b"-", b":"):
            return pos
        if kind == b"$":
            n = int(head)
            if n < 0:
                return pos
            while len(self.buf) < pos + n + 2:
                self._fill()
            return pos + n + 2
        if kind == b"*":
            for _ in range(max(int(head), 0)):
                pos = self._skip(pos)
            return pos
        raise SystemExit("translation_floor: unexpected reply %r" % self.buf[pos - 1:pos + 40])

    def replies(self, n):
        """Read n whole replies: their bytes."""
        pos = 0
        for _ in range(n):
            pos = self._skip(pos)
        out, self.buf = self.buf[:pos], self.buf[pos:]
        return out

    def call(self, *args):
        self.sock.sendall(resp(*args))
        return self.replies(1)

    def read_bytes(self, n):
        while len(self.buf) < n:
            self._fill()
        self.buf = self.buf[n:]


def main_cpu(c):
    info = c.call("INFO", "cpu").decode()
    return sum(float(line.split(":")[1]) for line in info.split("\r\n")
               if line.startswith(("used_cpu_user_main_thread:", "used_cpu_sys_main_thread:")))


def measure(c, chunks, replies_per_chunk, units_per_chunk, units):
    """Main-thread CPU us per unit over `units` units sent a chunk at a time."""
    lengths = []
    for ch in chunks:  # (warm-up, and each chunk's reply size: reads change nothing)
        c.sock.sendall(ch)
        lengths.append(len(c.replies(replies_per_chunk)))
    rounds = max(1, units // units_per_chunk)
    c0 = main_cpu(c)
    for i in range(rounds):
        k = i % len(chunks)
        c.sock.sendall(chunks[k])
        c.read_bytes(lengths[k])
    c1 = main_cpu(c)
    return (c1 - c0) * 1e6 / (rounds * units_per_chunk), rounds * units_per_chunk


def main():
    port, key = int(sys.argv[1]), sys.argv[2]
    units_for = {16: int(sys.argv[3]), 1: int(sys.argv[4])}
    c = Conn(port)
    okey = "floor:offset"
    c.call("HSET", okey, "offset", "1")
    commands = {
        "zrange": lambda: ["ZRANGE", key, 0, 99, "WITHSCORES"],
        "zrangebyscore": lambda: ["ZRANGEBYSCORE", key, "-inf", "+inf", "LIMIT", 0, 100],
        "zrangebyscore_from": lambda: ["ZRANGEBYSCORE", key, 500, "+inf", "LIMIT", 0, 100],
        "zadd": lambda: ["ZADD", key, random.randrange(1000), "m%d" % random.randrange(1000)],
    }
    scripts = {
        "zrange": "return redis.call('ZRANGE', KEYS[1], 0, 99, 'WITHSCORES')",
        "zrangebyscore": "return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'LIMIT', 0, 100)",
        "zrangebyscore_from": "return redis.call('ZRANGEBYSCORE', KEYS[1], 500, '+inf', 'LIMIT', 0, 100)",
        "zadd": "return redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])",
    }
    sha = {t: c.call("SCRIPT", "LOAD", s).split(b"\r\n")[1].decode() for t, s in scripts.items()}
    check_sha = None
    if len(sys.argv) > 5:
        with open(sys.argv[5], "rb") as f:
            check_sha = c.call("SCRIPT", "LOAD", f.read()).split(b"\r\n")[1].decode()
    random.seed(1)
    print("test,shape,P,units,us_per_unit")
    for test, words in commands.items():
        for shape in ("plain", "multi", "evalsha", "checked"):
            if shape == "checked" and (test != "zrangebyscore_from" or not check_sha):
                continue
            for P in (16, 1):
                chunks = []
                for _ in range(8 if test == "zadd" else 1):
                    parts = []
                    for _ in range(P):
                        w = words()
                        if shape == "plain":
                            parts.append(resp(*w))
                        elif shape == "multi":
                            parts.append(resp("MULTI") + resp("HGET", okey, "offset") + resp(*w) + resp("EXEC"))
                        elif shape == "checked":
                            parts.append(resp("MULTI") + resp("HGET", okey, "offset") + resp(*w)
                                         + resp("EVALSHA_RO", check_sha, 2, key, okey, "expect", "1", "2", "1", *w)
                                         + resp("EXEC"))
                        else:
                            parts.append(resp("EVALSHA", sha[test], 1, key, *(w[2:] if test == "zadd" else [])))
                    chunks.append(b"".join(parts))
                per = {"multi": 4, "checked": 5}.get(shape, 1)
                us, n = measure(c, chunks, P * per, P, units_for[P])
                print("%s,%s,%d,%d,%.3f" % (test, shape, P, n, us), flush=True)
    c.call("DEL", okey)


if __name__ == "__main__":
    main()
