#!/usr/bin/python3
"""cluster_run.py - run a command beside a real 3 + 3 Redis Cluster.

    cluster_run.py COMMAND [ARGS...]

Starts six redis-servers (free ports, one temp dir, --cluster-enabled, a
cluster bus port of their own, no persistence), creates the cluster with
`redis-cli --cluster create ... --cluster-replicas 1`, waits (polling, with a
deadline) until every node says cluster_state:ok and knows all six
nodes, then runs COMMAND with

    VP_TEST_UPSTREAM_MODE=cluster
    VP_TEST_CLUSTER_NODES=127.0.0.1:p1,...,127.0.0.1:p6   (the first is a primary)

in its environment, and stops the cluster after it. Its exit status is the
command's. This is how CTest's integration-cluster/ and clients-cluster/
entries get one cluster per suite (a start costs ~5 s) instead of one per
test: the stories FLUSHALL every primary between tests (servers.c,
test_redis_py.py, test_ioredis.js). The servers die with this process
(PR_SET_PDEATHSIG), and the temp dir is removed unless VP_TEST_KEEP=1.
tests/support/cluster.c is the same cluster for stories that need one of
their own (resharding, failover).
"""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REDIS_SERVER = os.environ.get("VP_TEST_REDIS_SERVER") or "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"
NODES = 6
DEADLINE_S = 30.0

_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_ports(n):
    """n distinct free ports (all held open together, so none is handed out twice)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def ask(port, *args):
    """One command on a raw socket, its reply as text (enough for PING/INFO/ROLE/CLUSTER)."""
    req = "*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(req.encode())
            s.settimeout(0.3)
            out = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    break
                if not chunk:
                    break
                out += chunk
            return out.decode(errors="replace")
    except OSError:
        return ""


def wait_until(cond, what):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out after %.0f s waiting for %s" % (DEADLINE_S, what))


def cluster_ok(ports):
    for p in ports:
        info = ask(p, "CLUSTER", "INFO")
        if "cluster_state:ok" not in info or "cluster_slots_assigned:16384" not in info:
            return False
        if "cluster_known_nodes:%d" % NODES not in info:
            return False
    # (replicas may still be syncing: the proxy routes to primaries only)
    return True


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="vt-cluster-run-")
    procs = []
    try:
        for attempt in range(3):
            ports = free_ports(2 * NODES)
            data, bus = ports[:NODES], ports[NODES:]
            for i, (p, b) in enumerate(zip(data, bus)):
                d = os.path.join(tmp, "node%d-%d" % (i, attempt))
                os.mkdir(d)
                log = open(os.path.join(d, "redis.log"), "ab")
                procs.append(subprocess.Popen(
                    [REDIS_SERVER, "--port", str(p), "--bind", "127.0.0.1", "--dir", d,
                     "--save", "", "--appendonly", "no", "--daemonize", "no",
                     "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-port", str(b), "--cluster-node-timeout", "15000",
                     "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"],
                    cwd=d, stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=die_with_parent))
                log.close()
            try:
                wait_until(lambda: all(ask(p, "PING").startswith("+PONG") for p in data)
                           or any(x.poll() is not None for x in procs), "the nodes to answer PING")
            except RuntimeError:
                pass
            if all(x.poll() is None for x in procs):
                break
            for x in procs:  # a port was taken between probing and binding: again
                x.kill()
                x.wait()
            procs = []
        else:
            raise RuntimeError("the cluster's nodes did not start (logs in %s)" % tmp)
        create = subprocess.run(
            [REDIS_CLI, "--cluster", "create"] + ["127.0.0.1:%d" % p for p in data]
            + ["--cluster-replicas", "1", "--cluster-yes"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=DEADLINE_S,
            preexec_fn=die_with_parent)
        if create.returncode != 0:
            raise RuntimeError("redis-cli --cluster create failed:\n" + create.stdout.decode(errors="replace"))
        wait_until(lambda: cluster_ok(data), "cluster_state:ok on every node")
        primaries = [p for p in data if ask(p, "ROLE").startswith("*3\r\n$6\r\nmaster")]
        others = [p for p in data if p not in primaries]
        env = dict(os.environ, VP_TEST_UPSTREAM_MODE="cluster",
                   VP_TEST_CLUSTER_NODES=",".join("127.0.0.1:%d" % p for p in primaries + others))
        cmd = subprocess.Popen(sys.argv[1:], env=env, preexec_fn=die_with_parent)
        try:
            return cmd.wait()
        except KeyboardInterrupt:
            cmd.kill()
            return 130
    finally:
        for x in procs:
            if x.poll() is None:
                x.terminate()
        for x in procs:
            try:
                x.wait(timeout=10)
            except subprocess.TimeoutExpired:
                x.kill()
                x.wait()
        if not os.environ.get("VP_TEST_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
