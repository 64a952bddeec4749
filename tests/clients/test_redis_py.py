#!/usr/bin/python3
"""test_redis_py.py - the virtual verbs through redis-py, an unmodified client.

Each test is one story a user tells with the verbs (a conveyor, a job queue
with leases, a lock, versioned writes, a rate limiter), plus what a redis-py
user does around them: pipelines, MULTI/EXEC, a connection pool shared by
threads. The test starts its own redis-server (free port, temp dir, no
persistence) and the real verbproxy binary in front of it; nothing is mocked.

Run with Debian's interpreter, which has python3-redis:

    VP_BINARY=build/verbproxy /usr/bin/python3 tests/clients/test_redis_py.py
    /usr/bin/python3 tests/clients/test_redis_py.py build/verbproxy LockTest  # one class

In the cluster variant (ctest's clients-cluster/redis_py: tests/support/
cluster_run.py starts a 3 + 3 Redis Cluster and sets VP_TEST_UPSTREAM_MODE=
cluster and VP_TEST_CLUSTER_NODES) no redis-server is started: the proxy runs
with --upstream-mode cluster in front of that cluster, every primary is
flushed before each test, and the classes whose stories stay sensible there
(`cluster_ok`, and ClusterTest, which runs only there) run; the others skip
with the reason.

VP_TEST_VERBOSE=1 prints verbproxy's stderr at the end (it is always printed
when the proxy did not stop cleanly). Every wait polls a condition until a
deadline; nothing sleeps a fixed time.
"""

import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

import redis

# The server harness (Server, free_port, wait_until, make_certs,
# cluster_nodes, ...) is shared with the model test: tests/support/vt_servers.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from vt_servers import (HOST, REDIS_SERVER, Server, cluster_nodes, free_port,  # noqa: E402
                        make_certs, wait_until)


class Env:
    """redis-server plus verbproxy in front of it, shared by a test class.
    With tls, the proxy also listens on a tls-port (certs from make_certs)."""

    def __init__(self, tls=False):
        binary = os.environ.get("VP_BINARY")
        if not binary:
            raise RuntimeError("set VP_BINARY (or pass the verbproxy binary as the first argument)")
        binary = os.path.abspath(binary)  # the servers run in their temp dir
        self.dir = tempfile.mkdtemp(prefix="vt-clients-")
        self.cluster = cluster_nodes()
        self.redis = Server("redis-server", lambda port: [
            REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", self.dir,
            "--save", "", "--appendonly", "no", "--daemonize", "no"], self.dir)
        self.certs = make_certs(self.dir) if tls else None
        self.tls_port = None
        self.proxy = Server("verbproxy", lambda port: [
            binary, "--port", str(port), "--bind", "127.0.0.1",
            "--upstream", self.upstream()] + self.mode_args() + ["--loglevel", "warning",
            # keys named cv:* are conveyor keys (ConveyorKeysTest); no other story uses such names
            "--conveyor", "cv:*",
            # SIGTERM drains: without a wait, what is owed is written and the clients closed
            "--shutdown-timeout", "0"] + self.tls_args(), self.dir)

    def upstream(self):
        return "%s:%d" % self.cluster[0] if self.cluster else "127.0.0.1:%d" % self.redis.port

    def mode_args(self):
        return ["--upstream-mode", "cluster"] if self.cluster else []

    def flushall(self):
        """Straight to Redis (every primary of a cluster), so a broken proxy cannot hide leftovers."""
        for host, port in self.cluster or [(HOST, self.redis.port)]:
            direct = redis.Redis(host=host, port=port, decode_responses=True)
            if not self.cluster or direct.execute_command("ROLE")[0] == "master":
                direct.flushall()
            direct.close()

    def tls_args(self):
        """The tls-port directives (a new free port on every start attempt); none without tls."""
        if not self.certs:
            return []
        self.tls_port = free_port()
        return ["--tls-port", str(self.tls_port), "--tls-cert-file", os.path.join(self.certs, "server.crt"),
                "--tls-key-file", os.path.join(self.certs, "server.key"), "--tls-auth-clients", "no"]

    def start(self):
        try:
            if not self.cluster:
                self.redis.start()
            self.proxy.start()
        except BaseException:
            self.kill()
            raise

    def stop(self):
        clean = self.proxy.stop()
        if not clean or os.environ.get("VP_TEST_VERBOSE"):
            print(self.proxy.log(), file=sys.stderr)
        self.redis.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return clean

    def kill(self):
        self.proxy.kill()
        self.redis.kill()
        print(self.proxy.log(), file=sys.stderr)
        shutil.rmtree(self.dir, ignore_errors=True)


class ProxyTestCase(unittest.TestCase):
    """Starts the servers once per class; each test starts from an empty database."""

    env = None
    tls = False  # the proxy also on a tls-port (TlsTest)
    # Runs in the cluster variant too: True, or why not (a skip's reason).
    cluster_ok = "its stories use keys in several slots (a queue and its lease set, MULTI over them)"
    cluster_only = False

    @classmethod
    def setUpClass(cls):
        if cluster_nodes() and cls.cluster_ok is not True:
            raise unittest.SkipTest("not in the cluster variant: " + cls.cluster_ok)
        if cls.cluster_only and not cluster_nodes():
            raise unittest.SkipTest("the cluster variant's (clients-cluster/redis_py)")
        cls.env = Env(tls=cls.tls)
        cls.env.start()

    @classmethod
    def tearDownClass(cls):
        env, cls.env = cls.env, None
        if env is not None and not env.stop():
            raise AssertionError("verbproxy did not stop cleanly (its log is above)")

    def setUp(self):
        self.env.flushall()
        self.r = self.client()

    def tearDown(self):
        self.r.close()

    def client(self, **kw):
        kw.setdefault("decode_responses", True)
        kw.setdefault("socket_timeout", 10)
        kw.setdefault("port", self.env.proxy.port)
        return redis.Redis(host=HOST, **kw)

    def v(self, *args):
        return self.r.execute_command(*args)

    def assert_error(self, text, *args):
        """The verb is refused with exactly this text (redis-py strips a leading 'ERR ')."""
        with self.assertRaises(redis.ResponseError) as cm:
            self.v(*args)
        self.assertEqual(str(cm.exception), text, "reply to %r" % (args,))

    def server_ms(self):
        sec, usec = self.r.time()
        return sec * 1000 + usec // 1000

    def wait_server_time(self, ms):
        """Poll Redis's clock (TIME through the proxy) until it reads at least ms."""
        wait_until(lambda: self.server_ms() >= ms, 10, "server time %d" % ms)


class ConveyorTest(ProxyTestCase):
    """ZTICK: crates on a conveyor move forward; those reaching the end fall off."""

    cluster_ok = True
    P = ""  # the keys' prefix: "cv:" makes them conveyor keys (ConveyorKeysTest)

    def test_crates_past_the_end_fall_off_and_the_rest_move_on(self):
        self.r.zadd(self.P + "conveyor:positions", {"crate-1": 0, "crate-2": 10, "crate-3": 90})
        self.assertEqual(self.v("ZTICK", self.P + "conveyor:positions", 15, 100), ["crate-3"])
        self.assertEqual(self.r.zrange(self.P + "conveyor:positions", 0, -1, withscores=True),
                         [("crate-1", 15.0), ("crate-2", 25.0)])
        self.assertEqual(self.v("ZTICK", self.P + "conveyor:positions", 80, 100, "WITHSCORES"), ["crate-2", "105"])
        self.assertEqual(self.r.zrange(self.P + "conveyor:positions", 0, -1, withscores=True), [("crate-1", 95.0)])
        self.assertEqual(self.v("ZTICK", self.P + "conveyor:positions", 10, 100, "withscores"), ["crate-1", "105"])
        self.assertEqual(self.r.exists(self.P + "conveyor:positions"), 0)

    def test_what_falls_off_comes_in_score_order_ties_by_member(self):
        self.r.zadd(self.P + "belt", {"b": 5, "a": 5, "c": 1, "z": 0})
        self.assertEqual(self.v("ZTICK", self.P + "belt", 5, 6, "WITHSCORES"), ["c", "6", "a", "10", "b", "10"])
        self.assertEqual(self.r.zrange(self.P + "belt", 0, -1, withscores=True), [("z", 5.0)])

    def test_a_reversing_belt_and_fractional_steps(self):
        self.r.zadd(self.P + "cooling", {"ingot-1": 50, "ingot-2": 70})
        self.assertEqual(self.v("ZTICK", self.P + "cooling", -20, 40, "WITHSCORES"), ["ingot-2", "50"])
        self.assertEqual(self.r.zscore(self.P + "cooling", "ingot-1"), 30.0)
        self.r.zadd(self.P + "drift", {"speck": 0})
        self.assertEqual(self.v("ZTICK", self.P + "drift", 0.1, 0.1, "WITHSCORES"), ["speck", "0.10000000000000001"])

    def test_an_empty_conveyor_and_nothing_reaching_the_end(self):
        self.assertEqual(self.v("ZTICK", self.P + "conveyor:none", 15, 100), [])
        self.assertEqual(self.r.exists(self.P + "conveyor:none"), 0)
        self.r.zadd(self.P + "slow", {"crate": 1})
        self.assertEqual(self.v("ZTICK", self.P + "slow", 1, 100, "WITHSCORES"), [])
        self.assertEqual(self.r.zscore(self.P + "slow", "crate"), 2.0)

    def test_infinities_are_floats_and_nan_is_refused_before_any_write(self):
        self.r.zadd(self.P + "space", {"probe": float("inf"), "rock": 1})
        self.assert_error("resulting score is not a number (NaN)", "ZTICK", self.P + "space", "-inf", 0)
        self.assertEqual(self.r.zrange(self.P + "space", 0, -1, withscores=True),
                         [("rock", 1.0), ("probe", float("inf"))])
        self.assertEqual(self.v("ZTICK", self.P + "space", 1, "+inf", "WITHSCORES"), ["probe", "inf"])
        self.assertEqual(self.r.zscore(self.P + "space", "rock"), 2.0)

    def test_argument_errors(self):
        self.r.zadd(self.P + "conveyor", {"crate": 1})
        self.assert_error("value is not a valid float", "ZTICK", self.P + "conveyor", "fast", 100)
        self.assert_error("value is not a valid float", "ZTICK", self.P + "conveyor", 1, "nan")
        self.assert_error("syntax error", "ZTICK", self.P + "conveyor", 1, 100, "WITHSCORE")
        self.assert_error("wrong number of arguments for 'ztick' command", "ZTICK", self.P + "conveyor", 1)
        self.assert_error("wrong number of arguments for 'ztick' command", "ZTICK")
        self.r.set(self.P + "not-a-zset", "x")
        self.assert_error("WRONGTYPE Operation against a key holding the wrong kind of value",
                          "ZTICK", self.P + "not-a-zset", 1, 100)
        self.assertEqual(self.r.zscore(self.P + "conveyor", "crate"), 1.0)

    def test_raw_bytes_without_decode_responses(self):
        raw = self.client(decode_responses=False)
        try:
            raw.zadd(self.P + "conveyor", {"crate-1": 0, "crate-3": 90})
            self.assertEqual(raw.execute_command("ZTICK", self.P + "conveyor", 15, 100, "WITHSCORES"), [b"crate-3", b"105"])
        finally:
            raw.close()


class ConveyorKeysTest(ConveyorTest):
    """The same stories on conveyor keys (the proxy runs with `conveyor cv:*`,
    docs/conveyor.md): ZTICK moves an offset, not the members, and every reply
    is the same."""

    P = "cv:"

    def test_the_offset_moves_not_the_members(self):
        self.r.zadd("cv:line", {"m%d" % i: i for i in range(1000)})
        self.assertEqual(self.v("ZTICK", "cv:line", 5, 1000, "WITHSCORES"),
                         ["m995", "1000", "m996", "1001", "m997", "1002", "m998", "1003", "m999", "1004"])
        self.assertEqual(self.r.zscore("cv:line", "m0"), 5.0)
        self.assertEqual(self.r.zrangebyscore("cv:line", 990, "+inf", withscores=True),
                         [("m985", 990.0), ("m986", 991.0), ("m987", 992.0), ("m988", 993.0),
                          ("m989", 994.0), ("m990", 995.0), ("m991", 996.0), ("m992", 997.0),
                          ("m993", 998.0), ("m994", 999.0)])
        info = self.v("VERBPROXY", "CONVEYOR", "INFO", "cv:line")
        fields = dict(zip(info[0::2], info[1::2]))
        self.assertEqual((fields["conveyor"], fields["offset"], fields["members"]), (1, "5", 995))
        # Straight to Redis, the stored scores did not move.
        host, port = self.env.cluster[0] if self.env.cluster else (HOST, self.env.redis.port)
        direct = redis.RedisCluster(host=host, port=port) if self.env.cluster else redis.Redis(host=host, port=port)
        try:
            self.assertEqual(direct.zscore("cv:line", "m0"), 0.0)
        finally:
            direct.close()



class JobQueueTest(ProxyTestCase):
    """QPOP/QACK/QEXTEND/QRECLAIM: workers take jobs under a lease, finish or lose them."""

    def test_pop_by_priority(self):
        self.r.zadd("jobs", {"send-invoice": 2, "resize-image": 1, "send-email": 2})
        self.assertEqual(self.v("QPOP", "jobs"), ["resize-image", "1"])
        self.assertEqual(self.v("QPOP", "jobs", "COUNT", 5), ["send-email", "2", "send-invoice", "2"])
        self.assertIsNone(self.v("QPOP", "jobs"))
        self.assertEqual(self.v("QPOP", "jobs", "COUNT", 3), [])
        self.assertEqual(self.r.exists("jobs"), 0)

    def test_count_zero_repeated_options_and_any_case(self):
        self.r.zadd("jobs", {"a": 1, "b": 2, "c": 3})
        self.assertEqual(self.v("QPOP", "jobs", "COUNT", 0), [])
        self.assertEqual(self.v("QPOP", "jobs", "count", 5, "Count", 1), ["a", "1"])
        self.assertEqual(self.r.zcard("jobs"), 2)

    def test_lease_ack_extend(self):
        self.r.zadd("jobs", {"job-a": 1, "job-b": 2, "job-c": 3})
        t0 = self.server_ms()
        self.assertEqual(self.v("QPOP", "jobs", "COUNT", 2, "LEASE", "jobs:lease", 30000),
                         ["job-a", "1", "job-b", "2"])
        t1 = self.server_ms()
        for job in ("job-a", "job-b"):
            deadline = self.r.zscore("jobs:lease", job)
            self.assertTrue(t0 + 30000 <= deadline <= t1 + 30000, (job, t0, deadline, t1))
        self.assertEqual(self.r.zrange("jobs", 0, -1), ["job-c"])

        # job-a is done; job-x was never leased.
        self.assertEqual(self.v("QACK", "jobs:lease", "job-a", "job-x"), 1)
        # job-b needs more time.
        t0 = self.server_ms()
        self.assertEqual(self.v("QEXTEND", "jobs:lease", "job-b", 60000), 1)
        t1 = self.server_ms()
        deadline = self.r.zscore("jobs:lease", "job-b")
        self.assertTrue(t0 + 60000 <= deadline <= t1 + 60000, (t0, deadline, t1))
        # An acked job cannot be extended.
        self.assertEqual(self.v("QEXTEND", "jobs:lease", "job-a", 60000), 0)
        self.assertEqual(self.v("QACK", "jobs:lease", "job-b"), 1)
        self.assertEqual(self.r.exists("jobs:lease"), 0)
        # A single pop with a lease: [member, score].
        self.assertEqual(self.v("QPOP", "jobs", "LEASE", "jobs:lease", 5000), ["job-c", "3"])
        self.assertEqual(self.r.zrange("jobs:lease", 0, -1), ["job-c"])

    def test_a_crashed_workers_jobs_are_reclaimed(self):
        self.r.zadd("jobs", {"job-1": 1, "job-2": 2, "job-3": 3})
        # worker A takes job-1 and job-2 with a short lease and dies
        self.assertEqual(self.v("QPOP", "jobs", "COUNT", 2, "LEASE", "jobs:lease", 1), ["job-1", "1", "job-2", "2"])
        # worker B takes job-3 for a long time
        self.assertEqual(self.v("QPOP", "jobs", "LEASE", "jobs:lease", 600000), ["job-3", "3"])
        self.wait_server_time(int(self.r.zscore("jobs:lease", "job-2")))
        # a reaper puts expired leases back, oldest deadline first, one at a time here
        self.assertEqual(self.v("QRECLAIM", "jobs:lease", "jobs", 0, "COUNT", 1), ["job-1"])
        t0 = self.server_ms()
        self.assertEqual(self.v("QRECLAIM", "jobs:lease", "jobs", "NOW"), ["job-2"])
        t1 = self.server_ms()
        self.assertEqual(self.v("QRECLAIM", "jobs:lease", "jobs", "NOW"), [])
        self.assertEqual(self.r.zscore("jobs", "job-1"), 0.0)
        self.assertTrue(t0 <= self.r.zscore("jobs", "job-2") <= t1)
        self.assertEqual(self.r.zrange("jobs:lease", 0, -1), ["job-3"])
        # reclaimed work is popped again
        self.assertEqual(self.v("QPOP", "jobs"), ["job-1", "0"])
        # the slow worker's ack still counts; worker A's late ack for a reclaimed job does not
        self.assertEqual(self.v("QACK", "jobs:lease", "job-3", "job-1"), 1)

    def test_an_expired_lease_can_still_be_extended_until_reclaimed(self):
        self.r.zadd("jobs", {"job": 1})
        self.v("QPOP", "jobs", "LEASE", "jobs:lease", 1)
        self.wait_server_time(int(self.r.zscore("jobs:lease", "job")))
        self.assertEqual(self.v("QEXTEND", "jobs:lease", "job", 30000), 1)
        self.assertEqual(self.v("QRECLAIM", "jobs:lease", "jobs", "NOW"), [])
        self.assertEqual(self.v("QACK", "jobs:lease", "job"), 1)

    def test_delayed_jobs_wait_for_their_time(self):
        now = self.server_ms()
        self.r.zadd("delayed", {"reminder-later": now + 3600000, "reminder-due": now - 1000, "reminder-old": 5})
        self.assertEqual(self.v("QPOP", "delayed", "MAXSCORE", "NOW", "COUNT", 10),
                         ["reminder-old", "5", "reminder-due", str(now - 1000)])
        self.assertIsNone(self.v("QPOP", "delayed", "MAXSCORE", "now"))
        self.assertEqual(self.v("QPOP", "delayed", "MAXSCORE", now + 3600000), ["reminder-later", str(now + 3600000)])
        self.r.zadd("prio", {"a": 1, "b": 5})
        self.assertEqual(self.v("QPOP", "prio", "MAXSCORE", 3, "COUNT", 10), ["a", "1"])
        self.assertIsNone(self.v("QPOP", "prio", "MAXSCORE", 3))
        self.assertEqual(self.v("QPOP", "prio", "LEASE", "prio:lease", 1000, "MAXSCORE", "+inf"), ["b", "5"])

    def test_argument_errors(self):
        self.r.zadd("jobs", {"job": 1})
        self.assert_error("value is out of range, must be positive", "QPOP", "jobs", "COUNT", -1)
        self.assert_error("value is not an integer or out of range", "QPOP", "jobs", "COUNT", "01")
        self.assert_error("value is not an integer or out of range", "QPOP", "jobs", "COUNT", "+1")
        self.assert_error("value is not an integer or out of range", "QPOP", "jobs", "COUNT", "1.5")
        self.assert_error("syntax error", "QPOP", "jobs", "COUNT")
        self.assert_error("syntax error", "QPOP", "jobs", "PRIORITY", 1)
        self.assert_error("syntax error", "QPOP", "jobs", "LEASE", "jobs:lease")
        self.assert_error("value is not a valid float", "QPOP", "jobs", "MAXSCORE", "soon")
        self.assert_error("invalid expire time in 'qpop' command", "QPOP", "jobs", "LEASE", "jobs:lease", 0)
        self.assert_error("invalid expire time in 'qextend' command", "QEXTEND", "jobs:lease", "job", -5)
        self.assert_error("value is not an integer or out of range", "QEXTEND", "jobs:lease", "job", "1e3")
        self.assert_error("value is not a valid float", "QRECLAIM", "jobs:lease", "jobs", "later")
        self.assert_error("value is out of range, must be positive", "QRECLAIM", "jobs:lease", "jobs", 0, "COUNT", -2)
        self.assert_error("syntax error", "QRECLAIM", "jobs:lease", "jobs", 0, "LIMIT", 2)
        self.assert_error("wrong number of arguments for 'qpop' command", "QPOP")
        self.assert_error("wrong number of arguments for 'qack' command", "QACK", "jobs:lease")
        self.assert_error("wrong number of arguments for 'qextend' command", "QEXTEND", "jobs:lease", "job")
        self.assert_error("wrong number of arguments for 'qextend' command", "QEXTEND", "jobs:lease", "job", 1, 2)
        self.assert_error("wrong number of arguments for 'qreclaim' command", "QRECLAIM", "jobs:lease", "jobs")
        self.r.set("not-a-queue", "x")
        self.assert_error("WRONGTYPE Operation against a key holding the wrong kind of value", "QPOP", "not-a-queue")
        # nothing was popped by any of that
        self.assertEqual(self.r.zrange("jobs", 0, -1), ["job"])


class LockTest(ProxyTestCase):
    """LOCKRELEASE/LOCKRENEW/LOCKHANDOVER: a lock taken with SET NX PX, only its holder may touch it."""

    cluster_ok = True

    def test_release_renew_handover(self):
        self.assertTrue(self.r.set("lock:report", "tok-A", nx=True, px=30000))
        self.assertIsNone(self.r.set("lock:report", "tok-B", nx=True, px=30000))
        # B does not hold it: nothing it does changes the lock
        self.assertEqual(self.v("LOCKRELEASE", "lock:report", "tok-B"), 0)
        self.assertEqual(self.v("LOCKRENEW", "lock:report", "tok-B", 90000), 0)
        self.assertEqual(self.v("LOCKHANDOVER", "lock:report", "tok-B", "tok-C", 90000), 0)
        self.assertEqual(self.r.get("lock:report"), "tok-A")
        self.assertLessEqual(self.r.pttl("lock:report"), 30000)
        # A renews for longer
        self.assertEqual(self.v("LOCKRENEW", "lock:report", "tok-A", 60000), 1)
        self.assertTrue(30000 < self.r.pttl("lock:report") <= 60000)
        # A hands it to B with a fresh TTL
        self.assertEqual(self.v("LOCKHANDOVER", "lock:report", "tok-A", "tok-B", 45000), 1)
        self.assertEqual(self.r.get("lock:report"), "tok-B")
        self.assertTrue(0 < self.r.pttl("lock:report") <= 45000)
        # A no longer holds it
        self.assertEqual(self.v("LOCKRELEASE", "lock:report", "tok-A"), 0)
        self.assertEqual(self.v("LOCKRENEW", "lock:report", "tok-A", 1000), 0)
        # B releases
        self.assertEqual(self.v("LOCKRELEASE", "lock:report", "tok-B"), 1)
        self.assertEqual(self.r.exists("lock:report"), 0)
        # and it can be taken again
        self.assertTrue(self.r.set("lock:report", "tok-C", nx=True, px=30000))

    def test_a_missing_lock_is_held_by_nobody(self):
        self.assertEqual(self.v("LOCKRELEASE", "lock:none", "tok"), 0)
        self.assertEqual(self.v("LOCKRENEW", "lock:none", "tok", 1000), 0)
        self.assertEqual(self.v("LOCKHANDOVER", "lock:none", "tok", "tok2", 1000), 0)
        self.assertEqual(self.r.exists("lock:none"), 0)

    def test_tokens_compare_exactly(self):
        self.r.set("lock:bin", "tok\x00A \u00e9", px=30000)
        self.assertEqual(self.v("LOCKRELEASE", "lock:bin", "tok\x00A"), 0)
        self.assertEqual(self.v("LOCKRELEASE", "lock:bin", "TOK\x00A \u00e9"), 0)
        self.assertEqual(self.v("LOCKRELEASE", "lock:bin", "tok\x00A \u00e9"), 1)

    def test_argument_errors(self):
        self.r.set("lock:job", "tok", px=30000)
        self.assert_error("invalid expire time in 'lockrenew' command", "LOCKRENEW", "lock:job", "tok", 0)
        self.assert_error("invalid expire time in 'lockhandover' command", "LOCKHANDOVER", "lock:job", "tok", "t2", -1)
        self.assert_error("value is not an integer or out of range", "LOCKRENEW", "lock:job", "tok", "soon")
        self.assert_error("value is not an integer or out of range", "LOCKRENEW", "lock:job", "tok",
                          "9223372036854775808")
        self.assert_error("wrong number of arguments for 'lockrelease' command", "LOCKRELEASE", "lock:job")
        self.assert_error("wrong number of arguments for 'lockrelease' command", "LOCKRELEASE", "lock:job", "tok", "x")
        self.assert_error("wrong number of arguments for 'lockrenew' command", "LOCKRENEW", "lock:job", "tok")
        self.assert_error("wrong number of arguments for 'lockhandover' command", "LOCKHANDOVER", "lock:job", "a", "b")
        self.assertEqual(self.r.get("lock:job"), "tok")


class VersionedWriteTest(ProxyTestCase):
    """HSETVER: writers racing to store a document; an older version never overwrites a newer one."""

    cluster_ok = True

    def test_newer_versions_win(self):
        self.assertEqual(self.v("HSETVER", "doc:42", 3, "title", "Draft", "body", "hello"), 1)
        self.assertEqual(self.r.hgetall("doc:42"), {"title": "Draft", "body": "hello", "version": "3"})
        # a late writer with version 2
        self.assertEqual(self.v("HSETVER", "doc:42", 2, "title", "Stale"), 0)
        self.assertEqual(self.r.hget("doc:42", "title"), "Draft")
        # the same version again is applied (not greater than stored)
        self.assertEqual(self.v("HSETVER", "doc:42", 3, "title", "Draft 2"), 1)
        self.assertEqual(self.r.hgetall("doc:42"), {"title": "Draft 2", "body": "hello", "version": "3"})
        # a field named version cannot override the version
        self.assertEqual(self.v("HSETVER", "doc:42", 4, "version", "99", "title", "Final"), 1)
        self.assertEqual(self.r.hgetall("doc:42"), {"title": "Final", "body": "hello", "version": "4"})
        self.assertEqual(self.v("HSETVER", "doc:42", 98, "title", "x"), 1)
        self.assertEqual(self.v("HSETVER", "doc:42", -1, "title", "y"), 0)

    def test_versions_compare_as_64_bit_integers(self):
        self.assertEqual(self.v("HSETVER", "doc:big", "9007199254740993", "f", "a"), 1)
        # equal as doubles, smaller as integers
        self.assertEqual(self.v("HSETVER", "doc:big", "9007199254740992", "f", "b"), 0)
        self.assertEqual(self.v("HSETVER", "doc:big", "9223372036854775807", "f", "c"), 1)
        self.assertEqual(self.r.hgetall("doc:big"), {"f": "c", "version": "9223372036854775807"})
        self.assertEqual(self.v("HSETVER", "doc:neg", "-9223372036854775808", "f", "a"), 1)
        self.assertEqual(self.r.hget("doc:neg", "version"), "-9223372036854775808")

    def test_errors(self):
        self.assert_error("value is not an integer or out of range", "HSETVER", "doc", "v1", "f", "x")
        self.assert_error("value is not an integer or out of range", "HSETVER", "doc", "9223372036854775808", "f", "x")
        self.assert_error("wrong number of arguments for 'hsetver' command", "HSETVER", "doc", 1, "f")
        self.r.hset("doc:legacy", mapping={"version": "abc", "f": "old"})
        self.assert_error("hash value is not an integer", "HSETVER", "doc:legacy", 1, "f", "new")
        self.assertEqual(self.r.hget("doc:legacy", "f"), "old")
        self.r.set("doc:string", "x")
        self.assert_error("WRONGTYPE Operation against a key holding the wrong kind of value",
                          "HSETVER", "doc:string", 1, "f", "v")
        self.assertEqual(self.r.exists("doc"), 0)


class RateLimiterTest(ProxyTestCase):
    """ZWINDOW: at most N requests per sliding window, on the server's clock."""

    cluster_ok = True

    def test_three_requests_a_minute(self):
        t0 = self.server_ms()
        self.assertEqual(self.v("ZWINDOW", "rl:user:7", 60000, "req-1", "LIMIT", 3), [1, 1])
        self.assertEqual(self.v("ZWINDOW", "rl:user:7", 60000, "req-2", "LIMIT", 3), [1, 2])
        self.assertEqual(self.v("ZWINDOW", "rl:user:7", 60000, "req-3", "limit", 3), [1, 3])
        self.assertEqual(self.v("ZWINDOW", "rl:user:7", 60000, "req-4", "LIMIT", 3), [0, 3])
        t1 = self.server_ms()
        self.assertEqual(self.r.zrange("rl:user:7", 0, -1), ["req-1", "req-2", "req-3"])
        for _, score in self.r.zrange("rl:user:7", 0, -1, withscores=True):
            self.assertTrue(t0 <= score <= t1, (t0, score, t1))
        self.assertTrue(0 < self.r.pttl("rl:user:7") <= 60000)
        # without LIMIT the request is always logged
        self.assertEqual(self.v("ZWINDOW", "rl:user:7", 60000, "req-5"), [1, 4])
        # LIMIT 0 admits nothing
        self.assertEqual(self.v("ZWINDOW", "rl:user:8", 60000, "req-1", "LIMIT", 0), [0, 0])
        self.assertEqual(self.r.exists("rl:user:8"), 0)

    def test_old_requests_leave_the_window(self):
        self.assertEqual(self.v("ZWINDOW", "rl:burst", 50, "req-1", "LIMIT", 1), [1, 1])
        self.assertEqual(self.v("ZWINDOW", "rl:burst", 50, "req-2", "LIMIT", 1), [0, 1])
        first = int(self.r.zscore("rl:burst", "req-1"))
        self.wait_server_time(first + 50)
        self.assertEqual(self.v("ZWINDOW", "rl:burst", 50, "req-3", "LIMIT", 1), [1, 1])
        self.assertEqual(self.r.zrange("rl:burst", 0, -1), ["req-3"])

    def test_a_repeated_member_is_refreshed(self):
        self.assertEqual(self.v("ZWINDOW", "rl:ip", 60000, "10.0.0.1"), [1, 1])
        before = self.r.zscore("rl:ip", "10.0.0.1")
        self.wait_server_time(int(before) + 1)
        self.assertEqual(self.v("ZWINDOW", "rl:ip", 60000, "10.0.0.1"), [1, 1])
        self.assertGreater(self.r.zscore("rl:ip", "10.0.0.1"), before)

    def test_argument_errors(self):
        self.assert_error("invalid expire time in 'zwindow' command", "ZWINDOW", "rl", 0, "req")
        self.assert_error("value is not an integer or out of range", "ZWINDOW", "rl", "1m", "req")
        self.assert_error("value is not an integer or out of range", "ZWINDOW", "rl", 1000, "req", "LIMIT", "x")
        self.assert_error("syntax error", "ZWINDOW", "rl", 1000, "req", "LIMIT")
        self.assert_error("syntax error", "ZWINDOW", "rl", 1000, "req", "BURST", 3)
        self.assert_error("wrong number of arguments for 'zwindow' command", "ZWINDOW", "rl", 1000)
        self.assertEqual(self.r.exists("rl"), 0)


class ClientFeaturesTest(ProxyTestCase):
    """What a redis-py user does around the verbs."""

    def test_ordinary_commands_still_work(self):
        self.assertTrue(self.r.set("greeting", "hello"))
        self.assertEqual(self.r.get("greeting"), "hello")
        self.assertEqual(self.r.incrby("visits", 5), 5)
        self.assertEqual(self.r.hset("user:1", mapping={"name": "Ada", "lang": "en"}), 2)
        self.assertEqual(self.r.hgetall("user:1"), {"name": "Ada", "lang": "en"})
        self.assertEqual(self.r.rpush("list", "a", "b", "c"), 3)
        self.assertEqual(self.r.lrange("list", 0, -1), ["a", "b", "c"])
        self.assertEqual(self.r.zadd("z", {"m": 1.5}), 1)
        self.assertEqual(self.r.zrange("z", 0, -1, withscores=True), [("m", 1.5)])
        self.assertEqual(self.r.eval("return redis.call('GET', KEYS[1])", 1, "greeting"), "hello")
        self.assertTrue(self.r.ping())
        self.assertEqual(self.r.dbsize(), 5)
        with self.assertRaises(redis.ResponseError) as cm:
            self.r.execute_command("NOSUCHCOMMAND", "x")
        # (Redis's words: 6.2 quotes with `)
        self.assertTrue(str(cm.exception).startswith(("unknown command 'NOSUCHCOMMAND'",
                                                      "unknown command `NOSUCHCOMMAND`")), str(cm.exception))

    def test_clients_share_the_upstream_connection_and_keep_their_names(self):
        """Plain clients (a name set as they connect included) stay on the
        proxy's shared upstream connection; one that asks for connection state
        gets its own, with its name."""

        def stat(name):
            text = self.r.execute_command("VERBPROXY", "STATS")
            return int(dict(line.split(":", 1) for line in text.split("\r\n") if line)[name])

        direct = redis.Redis(host=HOST, port=self.env.redis.port, decode_responses=True)
        pinned = stat("clients_pinned")
        before = direct.info("clients")["connected_clients"]
        clients = [self.client(client_name="worker-%d" % i) for i in range(8)]
        for i, c in enumerate(clients):
            self.assertTrue(c.set("shared:%d" % i, i))
            self.assertEqual(c.get("shared:%d" % i), str(i))
            self.assertIsNone(c.execute_command("QPOP", "shared:q"))
        self.assertEqual(stat("clients_pinned"), pinned, "a plain client moved to its own connection")
        self.assertEqual(direct.info("clients")["connected_clients"], before)
        self.assertEqual(clients[5].client_getname(), "worker-5")
        self.assertEqual(stat("clients_pinned"), pinned + 1)
        for c in clients:
            c.close()
        direct.close()

    def test_verbs_survive_a_script_flush(self):
        self.r.zadd("jobs", {"a": 1, "b": 2})
        self.assertEqual(self.v("QPOP", "jobs"), ["a", "1"])
        self.assertTrue(self.r.script_flush())
        self.assertEqual(self.v("QPOP", "jobs"), ["b", "2"])

    def test_pipeline_mixing_verbs_and_plain_commands(self):
        self.r.zadd("conveyor", {"crate-1": 0, "crate-2": 90})
        self.r.zadd("jobs", {"job-1": 1})
        p = self.r.pipeline(transaction=False)
        p.set("lock:p", "tok", px=30000)
        p.execute_command("ZTICK", "conveyor", 15, 100)
        p.get("lock:p")
        p.execute_command("QPOP", "jobs", "LEASE", "jobs:lease", 30000)
        p.execute_command("LOCKRELEASE", "lock:p", "tok")
        p.execute_command("HSETVER", "doc", 1, "f", "v")
        p.incr("counter")
        p.execute_command("ZWINDOW", "rl", 60000, "req", "LIMIT", 5)
        p.execute_command("QACK", "jobs:lease", "job-1")
        p.exists("lock:p")
        self.assertEqual(p.execute(), [True, ["crate-2"], "tok", ["job-1", "1"], 1, 1, 1, [1, 1], 1, 0])

    def test_pipeline_with_a_refused_verb_keeps_the_rest(self):
        p = self.r.pipeline(transaction=False)
        p.set("a", "1")
        p.execute_command("ZTICK", "conveyor", "fast", 100)
        p.execute_command("LOCKRELEASE", "lock:x")
        p.get("a")
        res = p.execute(raise_on_error=False)
        self.assertEqual(len(res), 4)
        self.assertEqual(res[0], True)
        self.assertIsInstance(res[1], redis.ResponseError)
        self.assertEqual(str(res[1]), "value is not a valid float")
        self.assertIsInstance(res[2], redis.ResponseError)
        self.assertEqual(str(res[2]), "wrong number of arguments for 'lockrelease' command")
        self.assertEqual(res[3], "1")

    def test_transaction_returns_the_verbs_real_replies(self):
        self.r.zadd("conveyor", {"crate-1": 0, "crate-2": 90})
        self.r.zadd("jobs", {"job-1": 1, "job-2": 2})
        self.r.set("lock:t", "tok-A", px=30000)
        p = self.r.pipeline(transaction=True)
        p.execute_command("ZTICK", "conveyor", 15, 100, "WITHSCORES")
        p.execute_command("QPOP", "jobs", "COUNT", 1, "LEASE", "jobs:lease", 30000)
        p.execute_command("QEXTEND", "jobs:lease", "job-1", 60000)
        p.execute_command("QACK", "jobs:lease", "job-1")
        p.execute_command("LOCKHANDOVER", "lock:t", "tok-A", "tok-B", 30000)
        p.execute_command("LOCKRENEW", "lock:t", "tok-B", 40000)
        p.get("lock:t")
        p.execute_command("HSETVER", "doc", 7, "title", "T")
        p.hget("doc", "version")
        p.execute_command("ZWINDOW", "rl", 60000, "req", "LIMIT", 1)
        p.execute_command("QRECLAIM", "jobs:lease", "jobs", "NOW")
        p.execute_command("LOCKRELEASE", "lock:t", "tok-B")
        self.assertEqual(p.execute(), [["crate-2", "105"], ["job-1", "1"], 1, 1, 1, 1, "tok-B", 1, "7",
                                       [1, 1], [], 1])
        self.assertEqual(self.r.zrange("jobs", 0, -1), ["job-2"])
        self.assertEqual(self.r.exists("lock:t", "jobs:lease"), 0)
        # the connection is back to normal afterwards
        self.assertEqual(self.v("QPOP", "jobs"), ["job-2", "2"])

    def test_transaction_with_a_verb_failing_at_exec_time(self):
        # as with Redis's own commands, a bad argument fails that command only
        self.r.set("lock:t", "tok", px=30000)
        p = self.r.pipeline(transaction=True)
        p.set("a", "1")
        p.execute_command("ZTICK", "conveyor", "fast", 100)
        p.execute_command("LOCKRELEASE", "lock:t", "tok")
        res = p.execute(raise_on_error=False)
        self.assertEqual(len(res), 3)
        self.assertEqual(res[0], True)
        self.assertIsInstance(res[1], redis.ResponseError)
        self.assertEqual(str(res[1]), "value is not a valid float")
        self.assertEqual(res[2], 1)
        self.assertEqual(self.r.get("a"), "1")

    def test_transaction_with_a_malformed_verb_is_discarded_as_redis_does(self):
        # Redis refuses a command with the wrong argument count when it is queued, and EXEC then
        # discards the whole transaction (EXECABORT); redis-py raises the queue-time error.
        p = self.r.pipeline(transaction=True)
        p.set("a", "1")
        p.execute_command("LOCKRELEASE", "lock:t")
        p.incr("b")
        with self.assertRaises(redis.ResponseError) as cm:
            p.execute()
        self.assertEqual(self.r.exists("a", "b"), 0, "EXEC ran the rest of the transaction")
        self.assertEqual(str(cm.exception), "Command # 2 (LOCKRELEASE lock:t) of pipeline caused error: "
                         "wrong number of arguments for 'lockrelease' command")
        self.assertEqual(self.r.set("a", "2"), True)

    def test_watched_transaction_aborted_by_another_client(self):
        self.r.zadd("jobs", {"job-1": 1})
        other = self.client()
        try:
            p = self.r.pipeline(transaction=True)
            p.watch("jobs")
            self.assertEqual(p.zrange("jobs", 0, -1), ["job-1"])
            self.assertEqual(other.execute_command("QPOP", "jobs"), ["job-1", "1"])
            p.multi()
            p.execute_command("QPOP", "jobs", "COUNT", 1)
            with self.assertRaises(redis.WatchError):
                p.execute()
            p.reset()
        finally:
            other.close()
        self.r.zadd("jobs", {"job-2": 2})
        self.assertEqual(self.v("QPOP", "jobs"), ["job-2", "2"])

    def test_pool_of_threads_pops_every_job_exactly_once(self):
        jobs = ["job-%04d" % i for i in range(600)]
        self.r.zadd("work", {j: i % 7 for i, j in enumerate(jobs)})
        pool = redis.ConnectionPool(host=HOST, port=self.env.proxy.port, decode_responses=True,
                                    max_connections=8, socket_timeout=10)
        shared = redis.Redis(connection_pool=pool)
        taken = [[] for _ in range(8)]
        errors = []

        def worker(n):
            try:
                while True:
                    if n % 2:
                        got = shared.execute_command("QPOP", "work", "COUNT", 1 + n % 4,
                                                     "LEASE", "work:lease", 60000)
                        members = got[0::2]
                        if members:
                            acked = shared.execute_command("QACK", "work:lease", *members)
                            if acked != len(members):
                                errors.append("worker %d acked %r of %r" % (n, acked, members))
                    else:
                        got = shared.execute_command("QPOP", "work")
                        members = got[0::2] if got else []
                    if not members:
                        return
                    taken[n].extend(members)
            except Exception as e:  # reported below, on the main thread
                errors.append("worker %d: %r" % (n, e))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads), "a worker hung")
        pool.disconnect()
        self.assertEqual(errors, [])
        everything = [m for t in taken for m in t]
        self.assertEqual(len(everything), len(jobs))
        self.assertEqual(sorted(everything), jobs)
        self.assertEqual(self.r.exists("work", "work:lease"), 0)
        self.assertTrue(sum(1 for t in taken if t) > 1, "only one worker got jobs")



class ClusterTest(ProxyTestCase):
    """A plain (non-cluster) redis-py client on the proxy in front of a Redis
    Cluster: keys over every slot, one slot's keys (a hash tag) for what
    Redis Cluster keeps to one slot. Runs only in the cluster variant."""

    cluster_ok = True
    cluster_only = True

    def primaries_holding_keys(self):
        n = 0
        for host, port in self.env.cluster:
            direct = redis.Redis(host=host, port=port, decode_responses=True)
            if direct.execute_command("ROLE")[0] == "master" and direct.dbsize() > 0:
                n += 1
            direct.close()
        return n

    def test_a_pipeline_over_every_slot_gets_its_replies_in_order(self):
        p = self.r.pipeline(transaction=False)
        for i in range(600):
            p.set("key:%d" % i, "value-%d" % i)
            p.incr("counter:%d" % (i % 50))
            p.get("key:%d" % i)
        replies = p.execute()
        for i in range(600):
            self.assertEqual(replies[3 * i], True)
            self.assertEqual(replies[3 * i + 1], i // 50 + 1)
            self.assertEqual(replies[3 * i + 2], "value-%d" % i)
        self.assertEqual(self.primaries_holding_keys(), 3, "the keys did not reach every primary")
        self.assertEqual([self.r.get("key:%d" % i) for i in range(0, 600, 97)],
                         ["value-%d" % i for i in range(0, 600, 97)])

    def test_a_transaction_on_one_hash_tag(self):
        p = self.r.pipeline(transaction=True)
        p.set("{order:7}:state", "paid")
        p.incrby("{order:7}:items", 3)
        p.rpush("{order:7}:log", "created", "paid")
        p.get("{order:7}:state")
        self.assertEqual(p.execute(), [True, 3, 2, "paid"])
        # and the client reaches every node after it
        for i in range(30):
            self.assertTrue(self.r.set("after:%d" % i, i))
        self.assertEqual(self.r.lrange("{order:7}:log", 0, -1), ["created", "paid"])

    def test_a_transaction_over_two_slots_is_refused_as_redis_cluster_does(self):
        p = self.r.pipeline(transaction=True)
        p.set("{a}x", "1")
        p.set("{b}x", "2")
        with self.assertRaises(redis.ResponseError):
            p.execute()
        self.assertEqual(self.r.exists("{a}x"), 0, "EXEC ran half a transaction")
        self.assertEqual(self.r.exists("{b}x"), 0, "EXEC ran half a transaction")

    def test_a_watched_transaction_aborted_by_another_client(self):
        self.r.set("{acct}:balance", 10)
        other = self.client()
        try:
            p = self.r.pipeline(transaction=True)
            p.watch("{acct}:balance")
            self.assertEqual(p.get("{acct}:balance"), "10")
            self.assertEqual(other.incrby("{acct}:balance", 5), 15)
            p.multi()
            p.set("{acct}:balance", 0)
            with self.assertRaises(redis.WatchError):
                p.execute()
            p.reset()
        finally:
            other.close()
        self.assertEqual(self.r.get("{acct}:balance"), "15")

    def test_a_job_queue_and_its_leases_on_one_hash_tag(self):
        self.r.zadd("{jobs}:ready", {"job-a": 1, "job-b": 2, "job-c": 3})
        self.assertEqual(self.v("QPOP", "{jobs}:ready", "COUNT", 2, "LEASE", "{jobs}:lease", 30000),
                         ["job-a", "1", "job-b", "2"])
        self.assertEqual(self.v("QACK", "{jobs}:lease", "job-a"), 1)
        self.assertEqual(self.v("QEXTEND", "{jobs}:lease", "job-b", 60000), 1)
        self.assertEqual(self.r.zrange("{jobs}:lease", 0, -1), ["job-b"])
        with self.assertRaises(redis.ResponseError) as cm:
            self.v("QPOP", "jobs-elsewhere", "LEASE", "{jobs}:lease", 1000)
        self.assertEqual(str(cm.exception), "CROSSSLOT Keys in request don't hash to the same slot")

    def test_pub_sub_through_the_proxy(self):
        sub = self.client()
        ps = sub.pubsub()
        try:
            ps.subscribe("news")
            self.assertEqual(ps.get_message(timeout=10)["type"], "subscribe")
            # published from another client of the proxy to whichever node it
            # reaches; the cluster bus carries it to the subscriber's node (so
            # PUBLISH counts that node's subscribers only): until it arrives
            msg = None
            end = time.monotonic() + 10
            while msg is None and time.monotonic() < end:
                self.r.publish("news", "hello")
                m = ps.get_message(timeout=0.2)
                if m and m["type"] == "message":
                    msg = m
            self.assertIsNotNone(msg, "no message arrived")
            self.assertEqual((msg["channel"], msg["data"]), ("news", "hello"))
        finally:
            ps.close()
            sub.close()

    def test_a_pool_of_threads_pops_a_hash_tagged_queue_exactly_once(self):
        jobs = ["job-%04d" % i for i in range(400)]
        self.r.zadd("{work}", {j: i % 7 for i, j in enumerate(jobs)})
        pool = redis.ConnectionPool(host=HOST, port=self.env.proxy.port, decode_responses=True,
                                    max_connections=8, socket_timeout=10)
        shared = redis.Redis(connection_pool=pool)
        taken = [[] for _ in range(8)]
        errors = []

        def worker(n):
            try:
                while True:
                    got = shared.execute_command("QPOP", "{work}", "COUNT", 1 + n % 3,
                                                 "LEASE", "{work}:lease", 60000)
                    members = got[0::2]
                    if not members:
                        return
                    if shared.execute_command("QACK", "{work}:lease", *members) != len(members):
                        errors.append("worker %d: an ack was lost" % n)
                    shared.set("done:%s" % members[0], n)  # and keys of every slot meanwhile
                    taken[n].extend(members)
            except Exception as e:  # reported below, on the main thread
                errors.append("worker %d: %r" % (n, e))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads), "a worker hung")
        pool.disconnect()
        self.assertEqual(errors, [])
        self.assertEqual(sorted(m for t in taken for m in t), jobs)
        self.assertEqual(self.r.exists("{work}"), 0)
        self.assertEqual(self.r.exists("{work}:lease"), 0)

class TlsTest(ProxyTestCase):
    """A redis-py client on the proxy's tls-port: it checks the proxy's certificate against its CA."""

    tls = True
    cluster_ok = "the client side's TLS does not depend on the upstream mode"

    def tls_client(self, ca="ca.crt"):
        return self.client(port=self.env.tls_port, ssl=True, ssl_cert_reqs="required",
                           ssl_ca_certs=os.path.join(self.env.certs, ca))

    def stat(self, name):
        for line in self.v("VERBPROXY", "STATS").splitlines():
            key, _, value = line.partition(":")
            if key == name:
                return int(value)
        raise AssertionError("no %s in VERBPROXY STATS" % name)

    def test_commands_a_pipeline_and_a_verb_over_tls(self):
        t = self.tls_client()
        self.assertTrue(t.set("greeting", "hello over TLS"))
        self.assertEqual(t.get("greeting"), "hello over TLS")
        self.assertEqual(t.incrby("visits", 3), 3)
        big = "v" * 100000  # several TLS records each way
        self.assertTrue(t.set("big", big))
        self.assertEqual(t.get("big"), big)
        with t.pipeline(transaction=False) as p:
            for i in range(200):
                p.rpush("tls:list", i)
            p.lrange("tls:list", 0, -1)
            replies = p.execute()
        self.assertEqual(replies[:200], list(range(1, 201)))
        self.assertEqual(replies[200], [str(i) for i in range(200)])
        t.zadd("belt", {"crate-1": 0, "crate-2": 90})
        self.assertEqual(t.execute_command("ZTICK", "belt", 15, 100, "WITHSCORES"), ["crate-2", "105"])
        self.assertEqual(t.zrange("belt", 0, -1, withscores=True), [("crate-1", 15.0)])
        # the same data through the plain port
        self.assertEqual(self.r.get("greeting"), "hello over TLS")
        t.close()

    def test_a_client_that_trusts_another_ca_is_refused(self):
        before = self.stat("tls_client_handshake_failures")
        t = self.tls_client(ca="other-ca.crt")
        with self.assertRaises(redis.ConnectionError) as cm:
            t.ping()
        self.assertIn("certificate verify failed", str(cm.exception))
        t.close()
        # the proxy counts the handshake its client broke off (an alert may
        # reach it after the client's error: polled)
        wait_until(lambda: self.stat("tls_client_handshake_failures") > before, 10,
                   "tls_client_handshake_failures to count the refused handshake")
        # and serves the next TLS client
        good = self.tls_client()
        self.assertTrue(good.ping())
        good.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and os.path.isfile(sys.argv[1]) and os.access(sys.argv[1], os.X_OK):
        os.environ["VP_BINARY"] = sys.argv.pop(1)
    unittest.main(verbosity=2)
