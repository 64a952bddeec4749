"""vt_servers.py - child processes, ports, certificates and a raw RESP client
for the Python tests (the ideas of tests/clients/test_redis_py.py's Server and
Env, shared so a test need not copy them; no third-party module).

- Server: one child (redis-server or verbproxy) on a free port, its output in
  a log in the test's temp dir, killed by the kernel when the test process
  dies (PR_SET_PDEATHSIG), started again on another port when the first was
  taken between probing and binding; ready when it answers PING (polled
  against a deadline, never a fixed sleep).
- make_certs: tests/clients/make_certs.sh's CA and 127.0.0.1 certificate.
- cluster_nodes: the cluster variant's nodes (tests/support/cluster_run.py).
- RespConn: one connection (plain or TLS) that sends a command and returns
  the exact bytes of its reply, framed by an independent RESP2/RESP3 framer
  (frame), and parse, which turns such bytes into a tree for the few
  comparisons that cannot be byte for byte (a random member order).
"""

import ctypes
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

REDIS_SERVER = os.environ.get("VP_TEST_REDIS_SERVER") or "/usr/bin/redis-server"
HOST = "127.0.0.1"  # what the servers bind; "localhost" may resolve elsewhere first
START_DEADLINE_S = 10.0
STOP_DEADLINE_S = 10.0
START_ATTEMPTS = 3
REPLY_DEADLINE_S = 30.0  # one reply; a proxy that loses one fails the test, not hangs it

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAKE_CERTS = os.path.join(SOURCE_DIR, "tests", "clients", "make_certs.sh")


def die_with_parent():
    """In the child before exec: the kernel kills it when the test process dies, however it dies."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_until(cond, deadline_s, what):
    """Polls cond until it is true; AssertionError naming `what` at the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError("timed out after %.0f s waiting for %s" % (deadline_s, what))


def answers_ping(port):
    """True when something on port replies +PONG to a PING (raw socket, no retries)."""
    try:
        with socket.create_connection((HOST, port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class Server:
    """One child process with its log in workdir. argv_for_port(port) gives
    its command line (called again on each start attempt)."""

    def __init__(self, name, argv_for_port, workdir):
        self.name = name
        self.argv_for_port = argv_for_port
        self.workdir = workdir
        self.log_path = os.path.join(workdir, name + ".log")
        self.proc = None
        self.port = None

    def start(self):
        last = None
        for _ in range(START_ATTEMPTS):
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    self.argv_for_port(self.port), cwd=self.workdir, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=log, preexec_fn=die_with_parent)
            try:
                wait_until(lambda: self.proc.poll() is not None or answers_ping(self.port),
                           START_DEADLINE_S, "%s to answer PING on port %d" % (self.name, self.port))
                if self.proc.poll() is None:
                    return
                last = "%s exited at start with status %s" % (self.name, self.proc.returncode)
            except AssertionError as e:
                last = str(e)
                self.kill()
        raise RuntimeError("%s did not start: %s\n%s" % (self.name, last, self.log()))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM, wait for the exit; True when the process stopped cleanly."""
        if self.proc is None:
            return True
        p, self.proc = self.proc, None
        if p.poll() is not None:
            print("%s had exited by itself: status %s" % (self.name, p.returncode), file=sys.stderr)
            return False
        p.send_signal(signal.SIGTERM)
        try:
            status = p.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            print("%s ignored SIGTERM for %.0f s; killed" % (self.name, STOP_DEADLINE_S), file=sys.stderr)
            return False
        if status not in (0, -signal.SIGTERM):
            print("%s stopped badly: status %s" % (self.name, status), file=sys.stderr)
            return False
        return True

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def log(self, tail_lines=None):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                lines = f.read().splitlines(True)
        except OSError:
            return "(no %s log)" % self.name
        if tail_lines is not None:
            lines = lines[-tail_lines:]
        return "---- %s log ----\n%s---- end ----" % (self.name, "".join(lines))


def make_certs(workdir):
    """make_certs.sh's certificates (ca.crt, server.crt, server.key, ...) in
    workdir/certs; returns that directory."""
    d = os.path.join(workdir, "certs")
    os.mkdir(d)
    done = subprocess.run(["bash", MAKE_CERTS, d], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError("making certificates failed:\n" + done.stdout.decode(errors="replace"))
    return d


def cluster_nodes():
    """The cluster variant's nodes as [(host, port)], primaries first; [] outside it."""
    if os.environ.get("VP_TEST_UPSTREAM_MODE") != "cluster":
        return []
    return [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in os.environ["VP_TEST_CLUSTER_NODES"].split(","))]


def env_on(name):
    v = os.environ.get(name, "")
    return v not in ("", "0", "no", "false")


# ---------------------------------------------------------------------------
# RESP: an independent framer and a raw connection

LINE_TYPES = b"+-:_,#("      # one line
BULK_TYPES = b"$!="          # a length, then that many bytes
AGG_TYPES = b"*~>"           # n values
MAP_TYPES = b"%|"            # n pairs (| : an attribute, then the value it annotates)


def encode(args):
    """A command as a RESP array of bulk strings (str is UTF-8)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode("utf-8")
        elif isinstance(a, int):
            a = b"%d" % a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class ProtocolError(Exception):
    pass


def frame(buf, pos=0):
    """The end offset of the one complete reply that starts at buf[pos], or
    None while it is incomplete. ProtocolError for bytes that are no RESP."""
    if pos >= len(buf):
        return None
    t = buf[pos]
    e = buf.find(b"\r\n", pos + 1)
    if e < 0:
        return None
    nxt = e + 2
    if t in LINE_TYPES:
        return nxt
    try:
        n = int(buf[pos + 1:e])
    except ValueError:
        raise ProtocolError("bad length in %r" % bytes(buf[pos:nxt]))
    if t in BULK_TYPES:
        if n < 0:
            if t != ord("$") or n != -1:
                raise ProtocolError("bad length in %r" % bytes(buf[pos:nxt]))
            return nxt
        if len(buf) < nxt + n + 2:
            return None
        if buf[nxt + n:nxt + n + 2] != b"\r\n":
            raise ProtocolError("bulk not ended by CRLF: %r" % bytes(buf[pos:nxt + n + 2]))
        return nxt + n + 2
    if t in AGG_TYPES or t in MAP_TYPES:
        if n < 0:
            if t != ord("*") or n != -1:
                raise ProtocolError("bad length in %r" % bytes(buf[pos:nxt]))
            return nxt
        p = nxt
        for _ in range(2 * n if t in MAP_TYPES else n):
            p = frame(buf, p)
            if p is None:
                return None
        if t == ord("|"):
            p = frame(buf, p)
        return p
    raise ProtocolError("unknown type byte %r at %r" % (chr(t), bytes(buf[pos:pos + 40])))


class Node:
    """A parsed reply: type (one byte as a str), raw (its exact bytes), value
    (bytes for a line or a bulk, None for a null), children (aggregates)."""
    __slots__ = ("type", "raw", "value", "children")

    def __init__(self, type_, raw, value, children):
        self.type, self.raw, self.value, self.children = type_, raw, value, children

    def is_error(self):
        return self.type in "-!"

    def __repr__(self):
        return "Node(%r)" % self.raw


def parse(buf, pos=0):
    """(Node, end) for the complete reply at buf[pos] (frame it first)."""
    t = chr(buf[pos])
    e = buf.find(b"\r\n", pos + 1)
    nxt = e + 2
    head = bytes(buf[pos + 1:e])
    if t.encode() in LINE_TYPES:
        return Node(t, bytes(buf[pos:nxt]), head, None), nxt
    n = int(head)
    if t.encode() in BULK_TYPES:
        if n < 0:
            return Node(t, bytes(buf[pos:nxt]), None, None), nxt
        return Node(t, bytes(buf[pos:nxt + n + 2]), bytes(buf[nxt:nxt + n]), None), nxt + n + 2
    if n < 0:
        return Node(t, bytes(buf[pos:nxt]), None, None), nxt
    kids, p = [], nxt
    count = 2 * n if t.encode() in MAP_TYPES else n
    if t == "|":
        count += 1
    for _ in range(count):
        k, p = parse(buf, p)
        kids.append(k)
    return Node(t, bytes(buf[pos:p]), None, kids), p


def parse_reply(raw):
    node, end = parse(raw, 0)
    if end != len(raw):
        raise ProtocolError("trailing bytes after a reply: %r" % raw[end:])
    return node


class RespConn:
    """One connection; call() sends a command and returns its reply's bytes."""

    def __init__(self, port, host=HOST, ssl_ca=None, name="conn"):
        self.name = name
        self.host, self.port = host, port
        sock = socket.create_connection((host, port), timeout=REPLY_DEADLINE_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_ca:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(ssl_ca)
            sock = ctx.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.buf = bytearray()

    def send(self, args):
        self.sock.sendall(encode(args))

    def read_reply(self):
        deadline = time.monotonic() + REPLY_DEADLINE_S
        while True:
            end = frame(self.buf)
            if end is not None:
                raw = bytes(self.buf[:end])
                del self.buf[:end]
                return raw
            if time.monotonic() > deadline:
                raise TimeoutError("%s: no complete reply within %.0f s (have %r)"
                                   % (self.name, REPLY_DEADLINE_S, bytes(self.buf[:200])))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise ConnectionError("%s: connection closed (have %r)" % (self.name, bytes(self.buf[:200])))
            self.buf += chunk

    def call(self, args):
        """The exact bytes of the reply to one command (nothing may follow it)."""
        self.send(args)
        raw = self.read_reply()
        if self.buf:
            raise ProtocolError("%s: unexpected bytes after a reply: %r" % (self.name, bytes(self.buf[:200])))
        return raw

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
