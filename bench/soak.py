#!/usr/bin/python3
"""bench/soak.py - a bounded soak of verbproxy (driven by bench/soak.sh).

CONNS connections pipeline a mix of passthrough commands and every verb
through the proxy for SECONDS, each checking every reply against what it
must be, in order. Meanwhile the script cache is flushed (SCRIPT FLUSH
through the proxy, see chaos()) every FLUSH_EVERY seconds, and Redis is
restarted once, at half time (SHUTDOWN SAVE, then soak.sh starts it again on
the same port with the saved data).

Kinds of connection:
  mixed     INCR/SET/GET, HSETVER, the lock verbs, ZWINDOW and the lease verbs
            (QPOP LEASE, QEXTEND, QRECLAIM, QACK) on keys of its own,
            pipelines of 1-16 commands; a MULTI/EXEC now and then (which
            moves it to a connection of its own upstream)
  producer  ZADDs unique jobs into a shared queue
  consumer  QPOPs jobs from it (COUNT 1-8); every job must be popped once
  ticker    ZTICK on a conveyor of its own, where the members that leave are
            known in advance

A connection closed by the proxy while replies were owed (Redis restarting)
is a clean close, not a failure: the client reconnects and re-reads its
state, and its commands that were in flight count as "in doubt" (a QPOP in
doubt may have taken jobs whose reply never came). Any other difference is a
failure: a wrong, lost (batch not answered within 10 s) or reordered reply.

Prints one JSON line per REPORT_EVERY seconds (throughput, proxy RSS,
latency percentiles) and a final JSON summary; exits 1 on any failure.
"""
import asyncio
import json
import os
import random
import sys
import time

PROXY_PORT = int(os.environ["SOAK_PROXY_PORT"])
REDIS_PORT = int(os.environ["SOAK_REDIS_PORT"])
PROXY_PID = int(os.environ["SOAK_PROXY_PID"])
SECONDS = float(os.environ.get("SOAK_SECONDS", "120"))
CONNS = int(os.environ.get("SOAK_CONNS", "200"))
FLUSH_EVERY = float(os.environ.get("SOAK_FLUSH_EVERY", "10"))
REPORT_EVERY = float(os.environ.get("SOAK_REPORT_EVERY", "5"))
RESTART_FILE = os.environ["SOAK_RESTART_FILE"]  # soak.sh restarts Redis when this appears
BATCH_DEADLINE = 10.0


def cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Closed(Exception):
    pass


class Failure(Exception):
    pass


async def read_reply(reader):
    """One RESP2 reply as Python values (bytes, int, None, list, or ('err', text))."""
    line = await reader.readline()
    if not line:
        raise Closed()
    t, rest = line[:1], line[1:-2]
    if t == b"+":
        return rest
    if t == b"-":
        return ("err", rest)
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = await reader.readexactly(n + 2)
        return data[:-2]
    if t == b"*":
        n = int(rest)
        if n < 0:
            return None
        return [await read_reply(reader) for _ in range(n)]
    raise Failure("not RESP: %r" % line[:80])


class Stats:
    def __init__(self):
        self.replies = 0
        self.latencies = []
        self.failures = []
        self.clean_closes = 0
        self.in_doubt = 0
        self.noscript = 0


STATS = Stats()
POPPED = {}
PRODUCED = set()
DOUBT_JOBS = set()  # jobs whose ZADD was in doubt: may or may not exist
DOUBT_POPS = 0
STOP = False
RESTART_AT = None  # monotonic time of the restart
RESTART_GRACE = 20.0


def clean_close(name):
    """A close is clean only around Redis's restart; anywhere else it is a failure."""
    if RESTART_AT is None or not (RESTART_AT - 1 <= time.monotonic() <= RESTART_AT + RESTART_GRACE):
        raise Failure("%s: connection closed, not around the Redis restart" % name)
    STATS.clean_closes += 1
    STATS.in_doubt += 1


class Conn:
    def __init__(self, name):
        self.name = name
        self.reader = self.writer = None

    async def open(self):
        for _ in range(200):
            try:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", PROXY_PORT)
                return
            except OSError:
                await asyncio.sleep(0.05)
        raise Failure("%s: cannot connect" % self.name)

    async def batch(self, reqs):
        """Send a pipeline; return its replies (raises Closed on a clean close)."""
        t0 = time.monotonic()
        self.writer.write(b"".join(reqs))
        try:
            await self.writer.drain()
            out = []
            for _ in reqs:
                out.append(await asyncio.wait_for(read_reply(self.reader), BATCH_DEADLINE))
        except (ConnectionError, asyncio.IncompleteReadError):
            raise Closed()
        except asyncio.TimeoutError:
            raise Failure("%s: a batch of %d not answered within %.0f s" % (self.name, len(reqs), BATCH_DEADLINE))
        # While Redis restarts the proxy answers "upstream unavailable": the
        # batch did not run (or not all of it); like a close, that is clean
        # only around the restart.
        # (So is Redis's -LOADING while it reads its data back after the
        # restart: nothing ran.)
        for r in out:
            if isinstance(r, tuple) and (r[1].startswith(b"ERR upstream unavailable") or r[1].startswith(b"LOADING")):
                raise Closed()
        STATS.latencies.append(time.monotonic() - t0)
        STATS.replies += len(reqs)
        return out

    def close(self):
        if self.writer:
            self.writer.close()


def expect(name, got, want, what):
    if got != want:
        raise Failure("%s: %s: expected %r, got %r" % (name, what, want, got))


async def mixed(i):
    c = Conn("mixed-%d" % i)
    await c.open()
    k = "soak:m:%d" % i
    counter = None
    version = 0
    while not STOP:
        try:
            if counter is None:  # (re)learn its state after a close
                r = await c.batch([cmd("GET", k + ":n"), cmd("HGET", k + ":h", "version")])
                counter = int(r[0] or 0)
                version = int(r[1] or 0)
            reqs, want, what = [], [], []
            for _ in range(random.randint(1, 16)):
                op = random.randrange(9)
                if op == 0:
                    counter += 1
                    reqs.append(cmd("INCR", k + ":n")), want.append(counter), what.append("INCR")
                elif op == 1:
                    v = "%d-%d" % (i, random.getrandbits(40))
                    reqs += [cmd("SET", k + ":s", v), cmd("GET", k + ":s")]
                    want += [b"OK", v.encode()]
                    what += ["SET", "GET"]
                elif op == 2:
                    version += 1
                    reqs.append(cmd("HSETVER", k + ":h", version, "f", version))
                    want.append(1), what.append("HSETVER")
                elif op == 3:
                    # A lock key per use: a verb retried after a NOSCRIPT runs
                    # after the commands pipelined behind it
                    # (docs/verbs.md#how-the-verbs-run, NOSCRIPT recovery), so no
                    # later command of the batch may touch its key.
                    tok = "t%d" % random.getrandbits(32)
                    lk = "%s:l:%d" % (k, len(reqs))
                    reqs += [cmd("SET", lk, tok, "PX", 10000), cmd("LOCKRELEASE", lk, "other"),
                             cmd("LOCKRELEASE", lk, tok)]
                    want += [b"OK", 0, 1]
                    what += ["SET lock", "LOCKRELEASE stranger", "LOCKRELEASE owner"]
                elif op == 4:
                    reqs.append(cmd("ZWINDOW", k + ":w", 60000, "m%d" % random.getrandbits(30), "LIMIT", 1000000))
                    want.append("window"), what.append("ZWINDOW")
                elif op == 6:
                    # the lease verbs on a queue of its own (a key per use,
                    # see the lock keys above)
                    q, lease = "%s:q:%d" % (k, len(reqs)), "%s:lease:%d" % (k, len(reqs))
                    reqs += [cmd("ZADD", q, 7, "job"), cmd("QPOP", q, "LEASE", lease, 60000),
                             cmd("QEXTEND", lease, "job", 120000), cmd("QRECLAIM", lease, q, "NOW"),
                             cmd("QACK", lease, "job")]
                    want += [1, [b"job", b"7"], 1, [], 1]
                    what += ["ZADD job", "QPOP LEASE", "QEXTEND", "QRECLAIM", "QACK"]
                elif op == 7:
                    tok, tok2 = "t%d" % random.getrandbits(32), "u%d" % random.getrandbits(32)
                    lk = "%s:h:%d" % (k, len(reqs))
                    reqs += [cmd("SET", lk, tok, "PX", 10000), cmd("LOCKRENEW", lk, tok, 20000),
                             cmd("LOCKHANDOVER", lk, tok, tok2, 20000), cmd("LOCKRELEASE", lk, tok2)]
                    want += [b"OK", 1, 1, 1]
                    what += ["SET lock", "LOCKRENEW", "LOCKHANDOVER", "LOCKRELEASE"]
                elif op == 5 and random.random() < 0.05:
                    counter += 1
                    reqs += [cmd("MULTI"), cmd("INCR", k + ":n"), cmd("EXEC")]
                    want += [b"OK", b"QUEUED", [counter]]
                    what += ["MULTI", "INCR queued", "EXEC"]
                else:
                    reqs.append(cmd("PING")), want.append(b"PONG"), what.append("PING")
            got = await c.batch(reqs)
            for g, w, wh in zip(got, want, what):
                if w == "window":
                    if not (isinstance(g, list) and len(g) == 2 and g[0] in (0, 1) and isinstance(g[1], int)):
                        raise Failure("%s: ZWINDOW: got %r" % (c.name, g))
                else:
                    expect(c.name, g, w, wh)
        except Closed:
            clean_close(c.name)
            counter = None
            c.close()
            await c.open()


async def producer(i):
    c = Conn("producer-%d" % i)
    await c.open()
    n = 0
    while not STOP:
        jobs = ["j%d.%d" % (i, n + j) for j in range(8)]
        n += 8
        args = ["ZADD", "soak:queue"]
        for j in jobs:
            args += [1, j]
        try:
            got = await c.batch([cmd(*args)])
            expect(c.name, got[0], 8, "ZADD")
            PRODUCED.update(jobs)
        except Closed:
            DOUBT_JOBS.update(jobs)  # the ZADD may or may not have run
            clean_close(c.name)
            c.close()
            await c.open()
        await asyncio.sleep(0.01)


async def consumer(i):
    global DOUBT_POPS
    c = Conn("consumer-%d" % i)
    await c.open()
    while not STOP:
        count = random.randint(1, 8)
        try:
            got = (await c.batch([cmd("QPOP", "soak:queue", "COUNT", count)]))[0]
            if not isinstance(got, list) or len(got) % 2:
                raise Failure("%s: QPOP: got %r" % (c.name, got))
            for j in got[0::2]:
                j = j.decode()
                if j in POPPED:
                    raise Failure("%s: job %s popped twice" % (c.name, j))
                POPPED[j] = c.name
            if not got:
                await asyncio.sleep(0.005)
        except Closed:
            clean_close(c.name)
            DOUBT_POPS += count
            c.close()
            await c.open()


async def ticker(i):
    c = Conn("ticker-%d" % i)
    await c.open()
    k = "soak:t:%d" % i
    while not STOP:
        # ten members at 0..9; a tick of 5 with threshold 10 takes the five
        # top ones, in score order
        try:
            args = ["ZADD", k]
            for s in range(10):
                args += [s, "m%d" % s]
            got = await c.batch([cmd("DEL", k), cmd(*args), cmd("ZTICK", k, 5, 10)])
            expect(c.name, got[1], 10, "ZADD")
            expect(c.name, got[2], [b"m5", b"m6", b"m7", b"m8", b"m9"], "ZTICK")
            # (not in the same batch: see the lock keys in mixed())
            got = await c.batch([cmd("ZCARD", k)])
            expect(c.name, got[0], 5, "ZCARD")
        except Closed:
            clean_close(c.name)
            c.close()
            await c.open()


def proxy_rss_kb():
    with open("/proc/%d/status" % PROXY_PID) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


async def direct(*args, port=REDIS_PORT):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(cmd(*args))
    await w.drain()
    try:
        return await asyncio.wait_for(read_reply(r), 10)
    finally:
        w.close()


async def chaos():
    global RESTART_AT
    start = time.monotonic()
    restarted = False
    next_flush = start + FLUSH_EVERY
    while not STOP:
        await asyncio.sleep(0.2)
        now = time.monotonic()
        if now >= next_flush:
            next_flush += FLUSH_EVERY
            try:
                # Through the proxy, as an operator would: it marks every
                # upstream connection as needing its scripts loaded, so no
                # verb meets NOSCRIPT. (One behind its back is recovered, but
                # the recovery may let a later pipelined verb of the same
                # client run first, a documented difference: a lease verb
                # pipelined right behind QPOP then sees no lease yet.
                # test_verbs_noscript tells that story.)
                await direct("SCRIPT", "FLUSH", port=PROXY_PORT)
            except (OSError, Closed, asyncio.TimeoutError):
                pass  # Redis restarting
        if not restarted and now - start >= SECONDS / 2:
            restarted = True
            RESTART_AT = time.monotonic()
            try:
                await direct("SHUTDOWN", "SAVE")
            except (OSError, Closed, asyncio.IncompleteReadError, asyncio.TimeoutError):
                pass
            open(RESTART_FILE, "w").close()  # soak.sh brings it back on the same port


async def reporter(samples):
    start = time.monotonic()
    last_replies, last_t = 0, start
    while not STOP:
        await asyncio.sleep(REPORT_EVERY)
        now = time.monotonic()
        lat = sorted(STATS.latencies)
        STATS.latencies = []
        s = {"t": round(now - start, 1), "replies_per_s": round((STATS.replies - last_replies) / (now - last_t)),
             "proxy_rss_kb": proxy_rss_kb(),
             "p50_ms": round(lat[len(lat) // 2] * 1000, 2) if lat else None,
             "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2) if lat else None}
        samples.append(s)
        print(json.dumps(s), flush=True)
        last_replies, last_t = STATS.replies, now


async def main():
    global STOP
    kinds = []
    n_cons, n_prod, n_tick = CONNS // 10, CONNS // 20, CONNS // 20
    for i in range(n_cons):
        kinds.append(consumer(i))
    for i in range(n_prod):
        kinds.append(producer(i))
    for i in range(n_tick):
        kinds.append(ticker(i))
    for i in range(CONNS - n_cons - n_prod - n_tick):
        kinds.append(mixed(i))
    samples = []
    tasks = [asyncio.ensure_future(k) for k in kinds]
    side = [asyncio.ensure_future(chaos()), asyncio.ensure_future(reporter(samples))]
    done, _ = await asyncio.wait(tasks, timeout=SECONDS, return_when=asyncio.FIRST_EXCEPTION)
    failure = None
    for t in done:
        if t.exception():
            failure = repr(t.exception())
    STOP = True
    await asyncio.wait(tasks + side, timeout=BATCH_DEADLINE + 5)
    # drain the queue: every job produced is popped exactly once, but for
    # those whose QPOP or ZADD was in doubt
    c = Conn("drain")
    await c.open()
    while True:
        got = (await c.batch([cmd("QPOP", "soak:queue", "COUNT", 1000)]))[0]
        if not got:
            break
        for j in got[0::2]:
            j = j.decode()
            if j in POPPED:
                failure = failure or "job %s popped twice" % j
            POPPED[j] = "drain"
    never = len(PRODUCED - set(POPPED))
    strangers = set(POPPED) - PRODUCED - DOUBT_JOBS
    if strangers and not failure:
        failure = "%d jobs popped that were never produced" % len(strangers)
    rss = [s["proxy_rss_kb"] for s in samples]
    summary = {"seconds": SECONDS, "connections": CONNS, "replies_checked": STATS.replies,
               "clean_closes": STATS.clean_closes, "jobs_produced": len(PRODUCED), "jobs_in_doubt": len(DOUBT_JOBS), "jobs_popped": len(POPPED),
               "jobs_never_popped": never, "qpop_jobs_in_doubt": DOUBT_POPS,
               "rss_kb_first": rss[0] if rss else None, "rss_kb_last": rss[-1] if rss else None,
               "rss_kb_max": max(rss) if rss else None,
               "p50_ms_median": sorted(s["p50_ms"] for s in samples if s["p50_ms"])[len(samples) // 2] if samples else None,
               "p99_ms_max": max((s["p99_ms"] for s in samples if s["p99_ms"]), default=None),
               "failure": failure}
    if never > DOUBT_POPS and not failure:
        summary["failure"] = "%d jobs never popped, more than the %d QPOP jobs in doubt" % (never, DOUBT_POPS)
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 1 if summary["failure"] else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
