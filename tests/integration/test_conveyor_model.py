#!/usr/bin/python3
"""test_conveyor_model.py - the model test of conveyor keys (issue 25).

Seeded random sequences of sorted-set commands run twice, step by step:

  (1) through verbproxy (started with `--conveyor 'cv:*'`) on conveyor keys
      such as `cv:{s42}:line`, where the proxy stores score = position -
      offset and translates every command;
  (2) straight to redis-server on plain keys such as `plain:{s42}:line`
      (the same hash tag: the same slot), where ZTICK is EVALSHA of the
      seed's own script (`verbproxy --script ztick`), which rewrites every
      score.

Every reply must be identical, byte for byte, in RESP2 and in RESP3 (a
second pair of connections after HELLO 3): writes run on one of the pairs,
reads on both. Only ZRANDMEMBER (random order) is compared as a sorted list
(or by its length, below ZCARD), and TTL with any positive value as one.

The steps (OPS, each a generator; OPS_NOT_YET holds the commands the proxy
does not translate yet, to move into OPS when it does): every translated
command with valid and invalid arguments (flags in any combination and case,
odd float spellings, bad floats and bounds, wrong arities), ZTICK (integer
and half deltas, negative, thresholds that remove none, some or all), the
untranslated ZREM family, DEL/UNLINK, EXPIRE family/PERSIST/TTL, a real
expiry (PEXPIRE 1, polled), RENAME/RENAMENX/COPY/MOVE (to db 1 and back),
DUMP and DUMP-then-RESTORE; and, around them: MULTI/EXEC and pipelines of
2-5 of them, WATCH on one connection around another client's command,
HELLO 2 ... HELLO 3 on the RESP3 connection, SCRIPT FLUSH straight to
Redis (NOSCRIPT recovery), a ZADD of 1,500+ pairs (skiplist encoding).

The keys of a sequence (roles): `line` and `line2` (two conveyor lines),
`empty` (read, ticked, deleted, never filled), `str` (a string: WRONGTYPE
paths) and `aux` (a plain sorted set through the proxy: `px:{s42}:aux`, so
multi-key commands mix plain and conveyor keys).

Positions stay small (integers and halves, ties on purpose, members from a
small alphabet including bytes above 0x7f), far below 2^53; ZTICK never
takes an infinite delta in the sequences (test_infinite_and_huge_deltas
checks those, huge values and offsets past the rebase bound on their own).

KNOWN lists the mismatches already reported: the generators draw again (or
use the other RESP version) where one would show, so that further bugs can
be found; VP_TEST_KNOWN=0 shows them. Remove an entry once it is fixed.

A mismatch stops that seed: the report names the seed, the step, the
commands each side got, both replies and the last 20 steps, then shrinks the
sequence (replays on a flushed database; VP_TEST_SHRINK_SECONDS, default
30, 0 = off) to a minimal reproduction and prints it. The other seeds still
run.

Environment:
  VP_BINARY                 the proxy (or the first argument)
  VP_TEST_REDIS_SERVER      redis-server (default /usr/bin/redis-server)
  VP_TEST_SEED=N            run that one seed (printed by every run)
  VP_TEST_SEEDS=N           how many seeds (default 6: the same ones every run)
  VP_TEST_RANDOM_SEEDS=1    random seeds instead (printed: replay one with VP_TEST_SEED)
  VP_TEST_STEPS=N           steps per seed (default 2000)
  VP_TEST_SHARED_UPSTREAMS=0  the proxy with --shared-upstreams 0
  VP_TEST_UPSTREAM_TLS=1    redis-server with TLS, the proxy with --upstream-tls
  VP_TEST_UPSTREAM_MODE=cluster, VP_TEST_CLUSTER_NODES (tests/support/cluster_run.py)
  VP_TEST_KNOWN=0           also generate the KNOWN mismatches (skipped by default)
  VP_TEST_EXTRA_OPS=a,b|all also generate the ops in OPS_NOT_YET (by name)
  VP_TEST_CHECK_STATE=1     after every step, compare every key (db 0 and 1) both ways (slow: to find
                            the step where a state went wrong)
  VP_TEST_VERBOSE=1         print the proxy's log at the end

Run: VP_BINARY=build-test/verbproxy /usr/bin/python3 tests/integration/test_conveyor_model.py
"""

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
import vt_servers as vt  # noqa: E402

CONVEYOR_PATTERN = "cv:*"
STEPS = int(os.environ.get("VP_TEST_STEPS") or 2000)
SEEDS = int(os.environ.get("VP_TEST_SEEDS") or 6)
FIXED_SEED_BASE = 20261206
SHRINK_SECONDS = float(os.environ.get("VP_TEST_SHRINK_SECONDS") or 30)
HISTORY = 20
CHECK_STATE = os.environ.get("VP_TEST_CHECK_STATE", "") not in ("", "0")


# ---------------------------------------------------------------------------
# Commands: arguments with key placeholders, rendered for each side

class Key:
    """A key placeholder: its role (line, line2, empty, str, aux)."""
    __slots__ = ("role",)

    def __init__(self, role):
        self.role = role

    def __repr__(self):
        return "<%s>" % self.role

    def score_role(self):
        """The role whose positions its scores are drawn near (a string
        key's: a line's, for Redis's WRONGTYPE with likely arguments)."""
        return self.role if self.role != "str" else "line"


ROLES = ("line", "line2", "empty", "str", "aux")


def key_name(side, role, tag):
    """cv:{tag}:role through the proxy (px: for aux, a plain key there),
    plain:{tag}:role straight to Redis."""
    if side == "proxy":
        prefix = "px" if role == "aux" else "cv"
    else:
        prefix = "plain"
    return "%s:{%s}:%s" % (prefix, tag, role)


class Cmd:
    """One step: kind (the op's name), args (str or Key), writes (runs on one
    RESP pair; reads run on both), compare ('exact', 'unordered', 'ttl'),
    post (a callable run after both sides replied, e.g. a wait).
    A batch (kind multi or pipeline) has subs (Cmds) instead of args, sent
    together, and allowed (the RESP versions all of them may run in). A
    special step runs itself: special(model, index, step), which may raise
    Mismatch (SCRIPT FLUSH straight to Redis, DUMP then RESTORE, WATCH
    around another client's command), and shows as text(tag)."""

    def __init__(self, kind, args, writes=False, compare="exact", post=None, subs=None, special=None, text=None):
        self.kind, self.args, self.writes, self.compare, self.post = kind, args, writes, compare, post
        self.subs, self.special, self.text = subs, special, text
        self.allowed = None
        self.batch = kind if subs is not None else None  # multi or pipeline
        self.special_keys = []

    def name(self):
        return self.args[0].upper() if self.args else ""

    def keys(self):
        if self.subs:
            return [k for c in self.subs for k in c.keys()]
        if self.special:
            return list(self.special_keys)
        return [a.role for a in self.args if isinstance(a, Key)]

    def words(self):
        """The non-key arguments after the name, upper-cased (for KNOWN predicates)."""
        return [a.upper() for a in self.args[1:] if isinstance(a, str)]


def render(cmd, side, tag, seed_sha):
    args = [key_name(side, a.role, tag) if isinstance(a, Key) else a for a in cmd.args]
    if side == "direct" and cmd.name() == "ZTICK":
        # The seed's script: KEYS[1] = key, ARGV = max members ("0": no limit), delta, threshold, ...
        if len(args) < 2:
            return ["EVALSHA", seed_sha, "0"]
        return ["EVALSHA", seed_sha, "1", args[1], "0"] + args[2:]
    return args


def batch_commands(cmd, side, tag, seed_sha):
    """The commands a step sends to one side, in order."""
    if cmd.special:
        return []
    if cmd.subs is None:
        return [render(cmd, side, tag, seed_sha)]
    body = [render(c, side, tag, seed_sha) for c in cmd.subs]
    return [["MULTI"]] + body + [["EXEC"]] if cmd.batch == "multi" else body


def show_cmd(cmd, side, tag, seed_sha):
    if cmd.special:
        return cmd.text(tag)
    return " | ".join(show(a) for a in batch_commands(cmd, side, tag, seed_sha))


def show(args, most=24):
    """A command as text, quoting what needs it (the first `most` arguments
    of a longer one)."""
    out = []
    if len(args) > most:
        return show(args[:most]) + " ... (%d arguments in all)" % len(args)
    for a in args:
        if a == "" or any(c in a for c in " \"'\\") or any(ord(c) < 32 or ord(c) > 126 for c in a):
            out.append(repr(a))
        else:
            out.append(a)
    return " ".join(out)


# ---------------------------------------------------------------------------
# Values

MEMBERS = ["a", "b", "c", "d", "e", "f", "g", "h", "A", "B", "ab", "ba", "é", "-"]
ODD_SCORES = ["1e1", "+4", "0x8", "-0", "0.25", "3.0", "1E0", "007"]
BAD_FLOATS = ["abc", "", "nan", "1.2.3", "1e", "--1", " 3", "3 ", "0x", "inf3"]
INF_SCORES = ["+inf", "-inf", "inf", "-INF"]
ODD_BOUNDS = ["(", "", " 3", "0x4", "1e1", "(1e1", "INF", "(+inf", "(-inf", "-inf", "+inf", "inf", "(inf"]
BAD_BOUNDS = ["abc", "(abc", "3 ", "nan", "((3", "[3", "1.2.3"]
LEX_BOUNDS = ["-", "+", "[a", "(a", "[b", "(c", "[e", "(f", "[A", "[ab", "(é", "["]
BAD_LEX = ["a", "b", ""]


def fmt(x):
    """A position as an argument: integers without a point, halves as 2.5."""
    if x == int(x) and abs(x) < 1e15:
        return "%d" % x
    return repr(x)


class Gen:
    """What generators draw from: r (random.Random), the oracle (Redis's
    plain keys, read straight: positions), the server's version."""

    def __init__(self, r, model, ops=()):
        self.r = r
        self.model = model
        self.ops = list(ops)
        self.in_batch = False  # generating the commands of a batch: its kind (multi, pipeline, watch, hello)
        self.stale = set()  # the proxy's scripts not run since a SCRIPT FLUSH behind its back
        self._positions = {}
        self._lex_ok = None

    def new_step(self):
        self._positions = {}
        self._lex_ok = None

    def positions(self, role):
        if role not in self._positions:
            self._positions[role] = self.model.oracle_positions(role)
        return self._positions[role]

    def lex_ok(self):
        """Whether a lex range (BYLEX, ZREMRANGEBYLEX) is deterministic here:
        on members of different scores Redis's answer is unspecified, and on
        a skiplist-encoded set (over 128 members, ever) it depends on the
        skiplist's random levels, so it differs between two equal sets. Only
        while no key is skiplist-encoded (any key: in a batch the commands
        before may copy a big line over the key)."""
        if self._lex_ok is None:
            self._lex_ok = not any(self.model.oracle_encoding(role) == b"skiplist" for role in ROLES)
        return self._lex_ok

    def word(self, w):
        """An option word, sometimes in another case."""
        x = self.r.random()
        if x < 0.75:
            return w
        if x < 0.9:
            return w.lower()
        return "".join(c.upper() if self.r.random() < 0.5 else c.lower() for c in w)

    def key(self, roles=ROLES):
        w = {"line": 60, "line2": 20, "empty": 7, "str": 5, "aux": 8}
        roles = list(roles)
        return Key(self.r.choices(roles, [w[x] for x in roles])[0])

    def member(self):
        return self.r.choice(MEMBERS)

    def small(self):
        """An integer or half near the usual positions."""
        if self.r.random() < 0.75:
            return self.r.randint(-6, 14)
        return self.r.randint(-12, 28) / 2

    def near(self, role, spread=(0, 0, 0, 0.5, -0.5, 1, -1)):
        """A position near one of role's, or a small one if it has none."""
        pos = self.positions(role)
        if pos and self.r.random() < 0.7:
            return self.r.choice(pos) + self.r.choice(spread)
        return self.small()

    def score(self, role, bad=0.03):
        """A ZADD score: mostly a position near the line's, sometimes an odd
        spelling, an infinity, or no float at all."""
        x = self.r.random()
        if x < bad:
            return self.r.choice(BAD_FLOATS)
        if x < bad + 0.04:
            return self.r.choice(ODD_SCORES)
        if x < bad + 0.05:
            return self.r.choice(INF_SCORES)
        return fmt(self.near(role))

    def delta(self, bad=0.02):
        x = self.r.random()
        if x < bad:
            return self.r.choice(BAD_FLOATS)
        if x < bad + 0.03:
            return self.r.choice(["1e0", "+2", "0x2", "-0", "0.5", "-1.5"])
        if x < 0.8:
            return fmt(self.r.randint(-3, 6))
        return fmt(self.r.randint(-8, 12) / 2)

    def threshold(self, role, delta_text):
        """Removes some, none or all of role's members (given the delta)."""
        pos = self.positions(role)
        try:
            d = float(delta_text)
        except ValueError:
            d = 0.0
        x = self.r.random()
        if pos and d == d and abs(d) != float("inf"):
            if x < 0.3:
                top = sorted(pos)[len(pos) // 2:]  # some: mostly the highest few
                return fmt(self.r.choice(top) + d + self.r.choice([0, 0, 0.5, -0.5, 1]))
            if x < 0.34:
                return fmt(min(pos) + d - self.r.choice([0, 1, 3]))  # all
            if x < 0.8:
                return fmt(max(pos) + d + self.r.choice([0, 0.5, 1, 5]))  # none (or just the top at 0)
        if x < 0.85:
            return self.r.choice(["+inf", "+inf", "inf", "-inf", "(3", "abc"])
        return fmt(self.small() + 8)

    def bound(self, role, bad=0.03):
        """A score range's end."""
        x = self.r.random()
        if x < bad:
            return self.r.choice(BAD_BOUNDS)
        if x < bad + 0.12:
            return self.r.choice(ODD_BOUNDS)
        v = fmt(self.near(role))
        return "(" + v if self.r.random() < 0.3 else v

    def bounds(self, role, rev=False):
        """min, max (max, min when rev), usually in order."""
        a, b = self.bound(role), self.bound(role)
        try:
            if float(a.lstrip("(")) > float(b.lstrip("(")) and self.r.random() < 0.85:
                a, b = b, a
        except ValueError:
            pass
        return (b, a) if rev else (a, b)

    def lex(self):
        return self.r.choice(BAD_LEX) if self.r.random() < 0.04 else self.r.choice(LEX_BOUNDS)

    def rank(self):
        x = self.r.random()
        if x < 0.02:
            return self.r.choice(["abc", "1.5", ""])
        return str(self.r.randint(-6, 6))

    def limit(self):
        return [self.word("LIMIT"), str(self.r.choice([0, 0, 0, 1, 2, 3, -1])),
                str(self.r.choice([-1, -1, 0, 1, 2, 3, 5, 10]))]

    def count(self):
        return str(self.r.choice([0, 1, 1, 1, 2, 2, 3, 5, 20]))


# ---------------------------------------------------------------------------
# The ops: one generator per kind of command. Each returns a Cmd (or None to
# draw again). OPS are generated in every run; OPS_NOT_YET are the commands
# the proxy does not translate yet (issue 25): add them to OPS when it does,
# or run them now with VP_TEST_EXTRA_OPS=name,name (or all).

def op_zadd(g):
    r = g.r
    key = g.key(("line", "line", "line2", "str", "aux"))
    flags = []
    if r.random() < 0.55:
        flags = r.sample(["NX", "XX", "GT", "LT", "CH", "INCR"], r.choice([1, 1, 1, 2, 2, 3]))
    incr = "INCR" in flags
    npairs = 1 if incr and r.random() < 0.85 else r.choice([1, 1, 2, 3, 4, 6])
    args = ["ZADD", key] + [g.word(f) for f in flags]
    role = key.score_role()
    for _ in range(npairs):
        args += [g.score(role), g.member()]
    x = r.random()
    if x < 0.02:
        args.append(g.member())  # an odd count: syntax error
    elif x < 0.03:
        args = args[:2 + len(flags)]  # no pair at all
    return Cmd("zadd", args, writes=True)


def op_zincrby(g):
    key = g.key(("line", "line", "line2", "str", "aux"))
    x = g.r.random()
    incr = g.delta(bad=0.05) if x < 0.9 else g.r.choice(INF_SCORES + ["0"])
    args = ["ZINCRBY", key, incr, g.member()]
    if g.r.random() < 0.01:
        args = args[:3]
    return Cmd("zincrby", args, writes=True)


def op_zscore(g):
    args = ["ZSCORE", g.key(), g.member()]
    if g.r.random() < 0.01:
        args.append(g.member())
    return Cmd("zscore", args)


def op_zmscore(g):
    n = g.r.randint(1, 4) if g.r.random() < 0.99 else 0  # none: an arity error
    return Cmd("zmscore", ["ZMSCORE", g.key()] + [g.member() for _ in range(n)])


def op_zrank(g, name="ZRANK"):
    args = [name, g.key(), g.member()]
    if g.model.withscore and g.r.random() < 0.6:
        args.append(g.word("WITHSCORE"))
    return Cmd(name.lower(), args)


def op_zrevrank(g):
    return op_zrank(g, "ZREVRANK")


def op_zrank_withscore_old(g):
    """ZRANK ... WITHSCORE where the server is older than 7.2 (an arity
    error from Redis; Redis 7.4's command table says it is fine)."""
    if g.model.withscore:
        return None
    return Cmd("zrank_withscore_old", [g.r.choice(["ZRANK", "ZREVRANK"]), g.key(), g.member(), g.word("WITHSCORE")])


def op_zrange(g, form=None):
    r = g.r
    key = g.key()
    form = form or r.choice(["rank", "byscore", "byscore", "bylex"])
    rev = r.random() < 0.4
    if form == "rank":
        a, b = g.rank(), g.rank()
        head = []
    elif form == "byscore":
        a, b = g.bounds(key.role, rev=rev)
        head = [g.word("BYSCORE")]
    else:
        a, b = g.lex(), g.lex()
        if (a > b) != rev and r.random() < 0.7:
            a, b = b, a
        head = [g.word("BYLEX")]
    groups = [head] if head else []
    if rev:
        groups.append([g.word("REV")])
    if r.random() < (0.45 if form != "rank" else 0.05):
        groups.append(g.limit())
    if r.random() < (0.6 if form != "bylex" else 0.1):
        groups.append([g.word("WITHSCORES")])
    if r.random() < 0.02:
        groups.append([r.choice(["FOO", "BYSCORE", "BYLEX", "LIMIT"])])  # a syntax error
    if r.random() < 0.3:
        r.shuffle(groups)
    args = ["ZRANGE", key, a, b] + [w for grp in groups for w in grp]
    return Cmd("zrange_" + form, args)


def op_zrange_rank(g):
    return op_zrange(g, "rank")


def op_zrange_byscore(g):
    return op_zrange(g, "byscore")


def op_zrange_bylex(g):
    return op_zrange(g, "bylex") if g.lex_ok() else None


def op_zrevrange(g):
    args = ["ZREVRANGE", g.key(), g.rank(), g.rank()]
    if g.r.random() < 0.7:
        args.append(g.word("WITHSCORES"))
    if g.r.random() < 0.01:
        args.append("LIMIT")
    return Cmd("zrevrange", args)


def op_zrangebyscore(g, name="ZRANGEBYSCORE"):
    key = g.key()
    a, b = g.bounds(key.role, rev=(name == "ZREVRANGEBYSCORE"))
    groups = []
    if g.r.random() < 0.6:
        groups.append([g.word("WITHSCORES")])
    if g.r.random() < 0.45:
        groups.append(g.limit())
    if g.r.random() < 0.02:
        groups.append([g.r.choice(["REV", "BYSCORE", "FOO"])])
    g.r.shuffle(groups)
    return Cmd(name.lower(), [name, key, a, b] + [w for grp in groups for w in grp])


def op_zrevrangebyscore(g):
    return op_zrangebyscore(g, "ZREVRANGEBYSCORE")


def op_zcount(g):
    key = g.key()
    a, b = g.bounds(key.role)
    return Cmd("zcount", ["ZCOUNT", key, a, b])


def op_zremrangebyscore(g):
    key = g.key(("line", "line", "line2", "empty", "str", "aux"))
    a, b = g.bounds(key.role)
    return Cmd("zremrangebyscore", ["ZREMRANGEBYSCORE", key, a, b], writes=True)


def op_zpop(g, name=None):
    name = name or g.r.choice(["ZPOPMIN", "ZPOPMAX"])
    args = [name, g.key(("line", "line", "line2", "empty", "str", "aux"))]
    x = g.r.random()
    if x < 0.6:
        args.append(g.count())
    elif x < 0.63:
        args.append(g.r.choice(["-1", "abc", "1.5"]))
    return Cmd(name.lower(), args, writes=True)


def op_zrandmember(g):
    """Compared only where it is not random: a count >= ZCARD gives every
    member (in an order of its own: compared sorted)."""
    key = g.key()
    card = len(g.positions(key.role))
    count = card + g.r.choice([0, 0, 1, 3]) if g.r.random() < 0.85 else -g.r.randint(1, 4)
    args = ["ZRANDMEMBER", key, str(count)]
    x = g.r.random()
    if x < 0.8:
        args.append(g.word("WITHSCORES"))
    elif x < 0.83:
        args[2] = g.r.choice(["abc", "1.5"])
        args.append("WITHSCORES")
    return Cmd("zrandmember", args, compare="unordered")


def op_ztick(g):
    r = g.r
    key = g.key(("line", "line", "line", "line2", "empty", "str", "aux"))
    delta = g.delta()
    role = key.score_role()
    args = ["ZTICK", key, delta, g.threshold(role, delta)]
    if r.random() < 0.5:
        args.append(g.word("WITHSCORES"))
    x = r.random()
    if x < 0.01:
        args.append("FOO")
    elif x < 0.02 and not g.in_batch:
        # (a verb's wrong arity is the proxy's own error, before MULTI queues it;
        # the seed's EVALSHA is queued: not compared in a batch)
        args = args[:3]
    return Cmd("ztick", args, writes=True)


def op_del(g):
    name = g.r.choice(["DEL", "DEL", "UNLINK"])
    roles = ("line", "line2", "empty", "aux")
    keys = [g.key(roles)]
    if g.r.random() < 0.25:
        keys.append(g.key(roles))
    return Cmd(name.lower(), [name] + keys, writes=True)


def op_expire(g):
    r = g.r
    key = g.key(("line", "line2", "empty", "aux"))
    name, value = r.choice([("EXPIRE", lambda: str(r.randint(500, 5000))),
                            ("PEXPIRE", lambda: str(r.randint(500000, 5000000))),
                            ("EXPIREAT", lambda: str(int(time.time()) + r.randint(500, 5000)))])
    args = [name, key, value()]
    if r.random() < 0.4:
        args.append(g.word(r.choice(["NX", "XX", "GT", "LT"])))
    return Cmd("expire", args, writes=True)


def op_persist(g):
    return Cmd("persist", ["PERSIST", g.key(("line", "line2", "empty", "aux"))], writes=True)


def op_ttl(g):
    return Cmd("ttl", ["TTL", g.key()], compare="ttl")


def op_pexpireat_past(g):
    """A time in the past: Redis deletes the key at once."""
    return Cmd("pexpireat_past", ["PEXPIREAT", g.key(("line", "line2", "empty")), "1"], writes=True)


def op_pexpire_wait(g):
    """A real expiry: PEXPIRE 1, then both keys are polled until gone."""
    key = g.key(("line", "line2"))
    return Cmd("pexpire_wait", ["PEXPIRE", key, "1"], writes=True, post=lambda m, cmd: m.wait_gone(key.role))


def op_plain_reads(g):
    """Commands on the key the proxy passes through untouched."""
    name = g.r.choice(["ZCARD", "EXISTS", "TYPE", "ZLEXCOUNT"])
    args = [name, g.key()]
    if name == "ZLEXCOUNT":
        args += ["-", "+"]
    return Cmd(name.lower(), args)


def op_snapshot(g):
    return Cmd("snapshot", ["ZRANGE", g.key(("line", "line2", "aux")), "0", "-1", "WITHSCORES"])


def op_script_flush(g):
    """SCRIPT FLUSH straight to Redis, behind the proxy's back: its
    translation scripts must come back (NOSCRIPT recovery). The seed's
    script is loaded again at once for the direct side."""
    g.stale = set(SCRIPTS)
    return Cmd("script_flush", [], writes=True, special=lambda m, i, st: m.script_flush(),
               text=lambda tag: "SCRIPT FLUSH (straight to Redis), then SCRIPT LOAD of the seed's ztick")


def op_zrem_plain(g):
    """Writes the proxy passes through untouched (they can empty a line)."""
    r = g.r
    key = g.key(("line", "line", "line2", "empty", "str", "aux"))
    x = r.random()
    if x < 0.5:
        return Cmd("zrem", ["ZREM", key] + [g.member() for _ in range(r.randint(1, 3))], writes=True)
    if x < 0.75 or not g.lex_ok():
        return Cmd("zremrangebyrank", ["ZREMRANGEBYRANK", key, g.rank(), g.rank()], writes=True)
    return Cmd("zremrangebylex", ["ZREMRANGEBYLEX", key, g.lex(), g.lex()], writes=True)


def op_zadd_big(g):
    """More pairs than the write script sends per ZADD (1,500), repeated
    members among them: a line over 128 members (skiplist encoding) too."""
    r = g.r
    key = g.key(("line", "line2"))
    flags = [g.word(f) for f in r.choice([[], [], ["CH"], ["NX"], ["XX", "CH"], ["GT", "CH"]])]
    args = ["ZADD", key] + flags
    for _ in range(r.randint(1501, 1700)):
        args += [fmt(g.small()), "m%d" % r.randint(0, 399)]
    return Cmd("zadd_big", args, writes=True)


KEY_MOVE_ROLES = ("line", "line2", "empty", "aux")


def op_rename(g):
    name = g.r.choice(["RENAME", "RENAME", "RENAMENX"])
    return Cmd(name.lower(), [name, g.key(KEY_MOVE_ROLES), g.key(KEY_MOVE_ROLES)], writes=True)


def op_copy(g):
    args = ["COPY", g.key(KEY_MOVE_ROLES), g.key(KEY_MOVE_ROLES)]
    if g.r.random() < 0.5:
        args.append(g.word("REPLACE"))
    if g.r.random() < 0.15:
        args += [g.word("DB"), "1"]  # (back with op_move's MOVE ... 0 from db 1)
    return Cmd("copy", args, writes=True)


def op_move(g):
    """MOVE to db 1 and back (SELECT 1, MOVE key 0, SELECT 0 on one connection)."""
    key = g.key(KEY_MOVE_ROLES)
    if g.r.random() < 0.5:
        return Cmd("move", ["MOVE", key, "1"], writes=True)
    subs = [Cmd("select", ["SELECT", "1"]), Cmd("move", ["MOVE", key, "0"]), Cmd("select", ["SELECT", "0"])]
    cmd = Cmd("move_back", [], writes=True, subs=subs)
    cmd.batch = "pipeline"
    cmd.allowed = [2, 3]
    return cmd


def op_hello_switch(g):
    """On the RESP3 connections: HELLO 2, a command, HELLO 3 (the client's
    protocol changes under the proxy's translation). HELLO's own replies are
    not compared (the proxy's server fields and client ids are its own)."""
    ops = [o for o in g.ops if o[0] not in BATCH_EXCLUDE]
    g.in_batch = "hello"
    try:
        inner = generate(g, ops)
    finally:
        g.in_batch = False
    if 2 not in inner.cmd.allowed or 3 not in inner.cmd.allowed:
        return None

    def text(tag):
        return "[RESP3 connection] HELLO 2 ; %s ; HELLO 3" % show(render(inner.cmd, "proxy", tag, ""))
    cmd = Cmd("hello_switch", [], writes=True, text=text,
              special=lambda m, i, st: m.hello_switch(i, st, inner.cmd))
    cmd.special_keys = inner.cmd.keys()
    cmd.allowed = [3]
    return cmd


def op_dump(g):
    return Cmd("dump", ["DUMP", g.key()])


def op_dump_restore(g):
    """DUMP one key, RESTORE the bytes (each side its own) into another."""
    src, dst = g.key(KEY_MOVE_ROLES), g.key(KEY_MOVE_ROLES)
    extra = [g.word("REPLACE")] if g.r.random() < 0.7 else []

    def text(tag):
        return "DUMP %s -> payload; RESTORE %s 0 payload %s" % (
            key_name("proxy", src.role, tag), key_name("proxy", dst.role, tag), " ".join(extra))
    cmd = Cmd("dump_restore", [], writes=True, text=text,
              special=lambda m, i, st: m.dump_restore(i, st, src.role, dst.role, extra))
    cmd.special_keys = [src.role, dst.role]
    return cmd


def op_watch(g):
    """WATCH a key on one connection, another client's command on the other
    connection, then MULTI, a read, EXEC on the first: a command that changes
    the line (a tick too: every position moves) must abort the EXEC, one that
    changes nothing must not."""
    key = g.key(("line", "line", "line2", "aux"))
    ops = [o for o in g.ops if o[0] not in BATCH_EXCLUDE and o[0] not in ("zadd_big", "zrem_plain")]
    g.in_batch = "watch"
    try:
        other = generate(g, ops)
        read = generate(g, [o for o in ops if o[0] in ("zscore", "zrange_rank", "zrange_byscore", "snapshot", "zcount")])
    finally:
        g.in_batch = False
    watcher = g.r.choice((2, 3))
    if watcher not in read.cmd.allowed or (5 - watcher) not in other.cmd.allowed:
        return None

    def text(tag):
        return "[RESP%d] WATCH %s ; [RESP%d] %s ; [RESP%d] MULTI ; %s ; EXEC" % (
            watcher, key_name("proxy", key.role, tag), 5 - watcher, show(render(other.cmd, "proxy", tag, "")),
            watcher, show(render(read.cmd, "proxy", tag, "")))
    cmd = Cmd("watch", [], writes=True, text=text,
              special=lambda m, i, st: m.watch(i, st, key.role, watcher, other.cmd, read.cmd))
    cmd.watch_other, cmd.watch_role = other.cmd, key.role
    cmd.special_keys = [key.role] + other.cmd.keys() + read.cmd.keys()
    cmd.allowed = [watcher]
    return cmd


# The proxy's scripts a command on these keys runs (conveyor.c's table): which
# ones a step has loaded again since a SCRIPT FLUSH (Gen.stale).
SCRIPTS = ("read", "write", "key", "tick", "seed")
_SCRIPT_OF = {  # name: (script, fewest arguments, most, option that must be there from index, or None)
    "zscore": ("read", 3, 3, None), "zmscore": ("read", 3, 99, None), "zcount": ("read", 4, 4, None),
    "zrank": ("read", 3, 4, ("WITHSCORE", 3)), "zrevrank": ("read", 3, 4, ("WITHSCORE", 3)),
    "zrange": ("read", 4, 99, (("WITHSCORES", "BYSCORE"), 4)), "zrevrange": ("read", 4, 5, ("WITHSCORES", 3)),
    "zrangebyscore": ("read", 4, 99, None), "zrevrangebyscore": ("read", 4, 99, None),
    "zrandmember": ("read", 2, 4, ("WITHSCORES", 3)),
    "zadd": ("write", 4, 99, None), "zincrby": ("write", 4, 4, None), "zremrangebyscore": ("write", 4, 4, None),
    "zpopmin": ("write", 2, 3, None), "zpopmax": ("write", 2, 3, None),
    "del": ("key", 2, 99, None), "unlink": ("key", 2, 99, None), "expire": ("key", 3, 4, None),
    "pexpire": ("key", 3, 4, None), "expireat": ("key", 3, 4, None), "pexpireat": ("key", 3, 4, None),
    "persist": ("key", 2, 2, None), "rename": ("key", 3, 3, None), "renamenx": ("key", 3, 3, None),
    "copy": ("key", 3, 99, None), "move": ("key", 3, 3, None), "dump": ("key", 2, 2, None),
    "restore": ("key", 4, 99, None),
}


def script_used(cmd):
    """The script the proxy runs for cmd (a plain command: no batch), or None."""
    name, n, roles = cmd.name().lower(), len(cmd.args), cmd.keys()
    if name == "ztick":
        return ("seed" if roles[0] == "aux" else "tick") if n >= 4 and roles else None
    if name not in _SCRIPT_OF or not _conveyor(cmd):
        return None
    script, least, most, option = _SCRIPT_OF[name]
    if not least <= n <= most:
        return None
    if option:
        words, start = option
        words = (words,) if isinstance(words, str) else words
        if not any(isinstance(a, str) and a.upper() in words for a in cmd.args[start:]):
            return None
    return script


# Ops never put in a batch: random or timed replies, batches themselves, specials.
BATCH_EXCLUDE = {"zrandmember", "ttl", "pexpire_wait", "multi", "pipeline", "script_flush", "dump_restore", "watch",
                 "move", "hello_switch", "zadd_big", "qpop", "qreclaim", "zpage", "zsnapshot"}


def op_batch(g, kind):
    """2-5 steps in one MULTI/EXEC (kind multi) or sent back to back before
    any reply is read (kind pipeline), in one RESP version."""
    ops = [o for o in g.ops if o[0] not in BATCH_EXCLUDE]
    g.in_batch = kind
    try:
        subs, allowed = [], {2, 3}
        for _ in range(g.r.randint(2, 5)):
            st = generate(g, ops)
            if allowed & set(st.cmd.allowed):
                subs.append(st.cmd)
                allowed &= set(st.cmd.allowed)
    finally:
        g.in_batch = False
    if not subs:
        return None
    cmd = Cmd(kind, [], writes=True, subs=subs)
    cmd.allowed = sorted(allowed)
    return cmd


def op_multi(g):
    return op_batch(g, "multi")


def op_pipeline(g):
    return op_batch(g, "pipeline")


# Not translated yet (issue 25): generators ready for when they are.

def op_zmpop(g):
    keys = [g.key() for _ in range(g.r.choice([1, 1, 2]))]
    args = ["ZMPOP", str(len(keys))] + keys + [g.word(g.r.choice(["MIN", "MAX"]))]
    if g.r.random() < 0.6:
        args += [g.word("COUNT"), g.count()]
    return Cmd("zmpop", args, writes=True)


def op_bzpop(g):
    name = g.r.choice(["BZPOPMIN", "BZPOPMAX"])
    return Cmd(name.lower(), [name, g.key(("line", "line2", "aux")), "0.01"], writes=True)


def op_bzmpop(g):
    cmd = op_zmpop(g)
    cmd.args = ["BZMPOP", "0.01"] + cmd.args[1:]
    cmd.kind = "bzmpop"
    return cmd


def op_zrangestore(g):
    src = g.key()
    dst = g.key(("line", "line2", "aux"))
    form = op_zrange(g)
    args = ["ZRANGESTORE", dst, src] + [a for a in form.args[2:] if not (isinstance(a, str) and a.upper() == "WITHSCORES")]
    return Cmd("zrangestore", args, writes=True)


def op_zsetop(g):
    r = g.r
    name = r.choice(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"])
    keys = [g.key() for _ in range(r.choice([1, 2, 2, 3]))]
    args = [name]
    store = name.endswith("STORE")
    if store:
        args.append(g.key(("line", "line2", "aux")))
    args += [str(len(keys))] + keys
    if name not in ("ZDIFF", "ZDIFFSTORE"):
        if r.random() < 0.4:
            args += [g.word("WEIGHTS")] + [r.choice(["1", "2", "0.5", "-1"]) for _ in keys]
        if r.random() < 0.4:
            args += [g.word("AGGREGATE"), r.choice(["SUM", "MIN", "MAX"])]
    if not store and r.random() < 0.7:
        args.append(g.word("WITHSCORES"))
    return Cmd(name.lower(), args, writes=store)


def op_zscan(g):
    """Compared exactly: on small lines only (a skiplist-encoded set scans
    its dict, in an order of its own)."""
    if not g.lex_ok():
        return None
    args = ["ZSCAN", g.key(), "0", "COUNT", "1000"]
    if g.r.random() < 0.3:
        args += ["MATCH", g.r.choice(["a*", "*", "?"])]
    return Cmd("zscan", args)


# The verbs: run on the direct side through the proxy (plain keys there:
# the plain verb's script), as they have no Redis command of their own.
VERB_NAMES = ("QPOP", "QRECLAIM", "ZPAGE", "ZSNAPSHOT")


def op_qpop(g):
    """QPOP with COUNT and MAXSCORE (LEASE writes server time: a story's)."""
    r = g.r
    key = g.key(("line", "line", "line2", "empty", "str", "aux"))
    role = key.score_role()
    args = ["QPOP", key]
    if r.random() < 0.6:
        args += [g.word("COUNT"), r.choice([g.count(), g.count(), "-1", "x"])]
    if r.random() < 0.7:
        args += [g.word("MAXSCORE"), r.choice([fmt(g.near(role))] * 8 + ["abc", "+inf", "-inf"])]
    return Cmd("qpop", args, writes=True)


def op_qreclaim(g):
    """QRECLAIM from a lease set whose deadlines are all past (positions are
    small numbers, server time is not) into a queue at a position."""
    r = g.r
    roles = ("line", "line", "line2", "empty", "str", "aux")
    lease, key = g.key(roles), g.key(roles)
    role = key.score_role()
    args = ["QRECLAIM", lease, key, r.choice([fmt(g.near(role))] * 10 + ["abc", "inf"])]
    if r.random() < 0.5:
        args += [g.word("COUNT"), g.count()]
    return Cmd("qreclaim", args, writes=True)


def op_zpage(g):
    """A walk of ZPAGE pages, each from the cursor the last one gave (the
    first from 0, or from a cursor made here: a position and a member)."""
    r = g.r
    key = g.key(("line", "line", "line2", "empty", "str", "aux"))
    role = key.score_role()
    opts = [g.word(w) for w in ("REV", "WITHSCORES") if r.random() < 0.5]
    r.shuffle(opts)
    count = str(r.choice([1, 2, 3, 5, 100]))
    rev = any(o.upper() == "REV" for o in opts)
    start = "0"
    if r.random() < 0.3:
        start = "%s%s:%s" % ("r" if rev else "a", fmt(g.near(role)), g.member().encode().hex())
    elif r.random() < 0.03:
        start = r.choice(["x", "a1:6", "r1:61" if not rev else "a1:61"])

    def text(tag):
        return "ZPAGE %s %s %s %s, then each next cursor" % (key_name("proxy", key.role, tag), start, count,
                                                             " ".join(opts))
    cmd = Cmd("zpage", [], text=text, special=lambda m, i, st: m.zpage_walk(i, st, key.role, start, count, opts))
    cmd.special_keys = [key.role]
    return cmd


def op_zsnapshot(g):
    """ZSNAPSHOT into a key that may be there already (its remaining time to
    live is not compared)."""
    r = g.r
    dest = g.key(("line2", "empty", "empty", "aux"))
    sources = [g.key(("line", "line", "line2", "empty", "aux")) for _ in range(r.choice([1, 1, 2]))]
    args = ["ZSNAPSHOT", dest, "100000", str(len(sources))] + sources
    if r.random() < 0.3:
        args += [g.word("WEIGHTS")] + [r.choice(["1", "2", "-1", "0.5"]) for _ in sources]
    if r.random() < 0.3:
        args += [g.word("AGGREGATE"), g.word(r.choice(["SUM", "MIN", "MAX", "COUNT"]))]
    return Cmd("zsnapshot", args, writes=True, compare="snapshot")


# (name, weight, generator)
OPS = [
    ("zadd", 18, op_zadd),
    ("zincrby", 4, op_zincrby),
    ("zscore", 3, op_zscore),
    ("zmscore", 2, op_zmscore),
    ("zrank", 2, op_zrank),
    ("zrevrank", 2, op_zrevrank),
    ("zrank_withscore_old", 0.3, op_zrank_withscore_old),
    ("zrange_rank", 3, op_zrange_rank),
    ("zrange_byscore", 5, op_zrange_byscore),
    ("zrange_bylex", 1.5, op_zrange_bylex),
    ("zrevrange", 2, op_zrevrange),
    ("zrangebyscore", 3, op_zrangebyscore),
    ("zrevrangebyscore", 3, op_zrevrangebyscore),
    ("zcount", 3, op_zcount),
    ("zremrangebyscore", 1.5, op_zremrangebyscore),
    ("zpop", 2.5, op_zpop),
    ("zrandmember", 1.5, op_zrandmember),
    ("ztick", 14, op_ztick),
    ("del", 0.8, op_del),
    ("expire", 1, op_expire),
    ("persist", 0.6, op_persist),
    ("ttl", 0.6, op_ttl),
    ("pexpireat_past", 0.25, op_pexpireat_past),
    ("pexpire_wait", 0.2, op_pexpire_wait),
    ("plain_reads", 1.5, op_plain_reads),
    ("snapshot", 2, op_snapshot),
    ("multi", 2, op_multi),
    ("pipeline", 2, op_pipeline),
    ("script_flush", 0.3, op_script_flush),
    ("zrem_plain", 1.5, op_zrem_plain),
    ("zadd_big", 0.04, op_zadd_big),
    ("rename", 0.8, op_rename),
    ("copy", 0.6, op_copy),
    ("move", 0.5, op_move),
    ("dump", 0.5, op_dump),
    ("dump_restore", 0.5, op_dump_restore),
    ("watch", 1.5, op_watch),
    ("hello_switch", 0.5, op_hello_switch),
    ("zmpop", 2, op_zmpop),
    ("bzpop", 1, op_bzpop),
    ("bzmpop", 1, op_bzmpop),
    ("zrangestore", 2, op_zrangestore),
    ("zsetop", 3, op_zsetop),
    ("zscan", 1, op_zscan),
    ("qpop", 2, op_qpop),
    ("qreclaim", 1.5, op_qreclaim),
    ("zpage", 1.5, op_zpage),
    ("zsnapshot", 1, op_zsnapshot),
]

# The commands issue 25 translates that the proxy does not yet: move an
# entry to OPS when it does (VP_TEST_EXTRA_OPS=zmpop,... runs it before).
OPS_NOT_YET = []


# ---------------------------------------------------------------------------
# KNOWN mismatches: commands the generators would make that show a bug
# already reported (each with its reproduction in the report). They are not
# generated (drawn again) unless VP_TEST_KNOWN=0, so further bugs can be
# found. Remove an entry once its bug is fixed.
# (id, what is wrong, predicate(cmd, gen) -> True for a command it covers
# (gen.model.oracle_* read the plain keys' state before the step), the RESP
# versions it shows in)

def _is(cmd, *names):
    return cmd.name() in names


def _conveyor(cmd):
    return any(r != "aux" for r in cmd.keys())


def _negative_zero(a):
    try:
        return isinstance(a, str) and float(a) == 0 and a.strip().startswith("-")
    except ValueError:
        return False


KNOWN = [
    ("multi-null-resp2",
     "RESP2, inside MULTI: a translated command whose Redis reply is a null array (ZRANK/ZREVRANK ... "
     "WITHSCORE of a member a conveyor key does not hold, Redis >= 7.2; ZMPOP, BZMPOP, BZPOPMIN, BZPOPMAX of "
     "nothing) is a null bulk $-1 in EXEC's array instead of *-1 (right outside MULTI)",
     lambda cmd, g: g.in_batch == "multi" and _conveyor(cmd) and (
         (_is(cmd, "ZRANK", "ZREVRANK") and "WITHSCORE" in cmd.words())
         or _is(cmd, "ZMPOP", "BZMPOP", "BZPOPMIN", "BZPOPMAX")),
     (2,)),
    ("watch-ttl-6.2",
     "Redis 6.2 has no PEXPIRETIME: the offset key's time to live is set from its key's PTTL, and can end up "
     "to a millisecond after it. A WATCH in that millisecond, on a line already expired, watches an offset "
     "key still there, whose expiry then counts as a change (EXEC aborted, where Redis runs it)",
     lambda cmd, g: g.model.version < (7, 0) and cmd.kind == "watch",
     (2, 3)),
    ("negative-zero",
     "Redis keeps a score of -0 in a skiplist-encoded sorted set (over 128 members; Redis 6.2 in a small one "
     "too): ZADD key -0 m, ZSCORE answers \"-0\". On a conveyor key with an offset the proxy answers \"0\" "
     "(stored -offset, + offset: 0)",
     lambda cmd, g: _conveyor(cmd) and _is(cmd, "ZADD", "ZINCRBY") and any(_negative_zero(a) for a in cmd.args[2:]),
     (2, 3)),
    ("noscript-reorder",
     "After a SCRIPT FLUSH behind the proxy's back, the pipelined commands after a translated command that "
     "meets NOSCRIPT run before its retry: e.g. ZADD cv 5 x | ZSCORE cv x | ZTICK cv 1 100 | ZSCORE cv x "
     "answers nil to both ZSCOREs and leaves x at 5 (the tick ran before the ZADD), where Redis answers 5 "
     "and 6 and leaves x at 6 "
     "(docs/verbs.md allows this for verbs; here it reaches ordinary sorted-set commands, and writes)",
     lambda cmd, g: cmd.batch == "pipeline" and bool(g.stale),
     (2, 3)),
]


def known_resps(cmd, g):
    """The RESP versions cmd may run in (those no KNOWN entry covers), and the
    ids of the entries that took some away."""
    # a batch's or a special's versions are worked out by its generator
    resps, ids = list(cmd.allowed) if cmd.allowed is not None else [2, 3], []
    if os.environ.get("VP_TEST_KNOWN", "1") == "0":
        return resps, ids
    for kid, _, pred, affected in KNOWN:
        if pred(cmd, g):
            resps = [x for x in resps if x not in affected]
            ids.append(kid)
    return resps, ids


# ---------------------------------------------------------------------------
# Comparison

def normalize(cmd, compare, raw):
    """The form two replies are compared in: the bytes themselves, but for
    ZRANDMEMBER (its members in a random order: sorted; or only how many
    when the count is below ZCARD) and TTL (any positive value)."""
    if compare == "length":
        node = vt.parse_reply(raw)
        return raw if node.type != "*" else b"*%d" % len(node.children or [])
    if compare == "snapshot":  # [0, remaining ttl]: any remaining ttl
        node = vt.parse_reply(raw)
        if node.type == "*" and node.children and node.children[0].raw == b":0\r\n":
            return b"*2\r\n:0\r\n:<left>\r\n"
        return raw
    if compare == "ttl":
        if raw.startswith(b":") and int(raw[1:-2]) > 0:
            return b":<positive>\r\n"
        return raw
    if compare == "unordered":
        node = vt.parse_reply(raw)
        if node.type != "*" or node.children is None:
            return raw
        kids = node.children
        if kids and kids[0].type == "*":  # RESP3 pairs
            items = sorted(k.raw for k in kids)
        elif any(isinstance(a, str) and a.upper() == "WITHSCORES" for a in cmd.args):
            items = sorted(kids[i].raw + kids[i + 1].raw for i in range(0, len(kids) - 1, 2))
        else:
            items = sorted(k.raw for k in kids)
        return b"*%d\r\n<sorted>" % len(kids) + b"".join(items)
    return raw


class Mismatch(Exception):
    def __init__(self, index, step, proxy_args, direct_args, proxy_reply, direct_reply, resp, tag=""):
        self.index, self.step, self.tag = index, step, tag
        self.proxy_args, self.direct_args = proxy_args, direct_args
        self.proxy_reply, self.direct_reply = proxy_reply, direct_reply
        self.resp = resp

    def describe(self):
        out = "step %d (%s, RESP%d)\n  proxy  : %s\n  direct : %s\n  proxy reply : %r\n  redis reply : %r" % (
            self.index, self.step.cmd.kind, self.resp, show(self.proxy_args), show(self.direct_args),
            self.proxy_reply, self.direct_reply)
        if self.step.cmd.subs is not None or self.step.cmd.special:
            out += "\n  (in the %s: %s)" % (self.step.cmd.kind, show_cmd(self.step.cmd, "proxy", self.tag, ""))
        return out


class Step:
    """A command as it runs: the Cmd, the RESP versions it runs in (a write
    in one, a read in both but those a KNOWN bug takes away), and the
    replies (proxy, direct) per version."""

    def __init__(self, cmd, resps):
        self.cmd, self.resps = cmd, tuple(resps)
        self.replies = {}


# ---------------------------------------------------------------------------
# The servers and the connections

class Env:
    """redis-server (or the cluster variant's cluster) and verbproxy with
    `--conveyor cv:*` in front of it."""

    def __init__(self):
        binary = os.environ.get("VP_BINARY")
        if not binary:
            raise RuntimeError("set VP_BINARY (or pass the verbproxy binary as the first argument)")
        self.binary = os.path.abspath(binary)
        self.dir = tempfile.mkdtemp(prefix="vt-conveyor-model-")
        self.cluster = vt.cluster_nodes()
        self.tls = vt.env_on("VP_TEST_UPSTREAM_TLS") and not self.cluster
        self.shared = os.environ.get("VP_TEST_SHARED_UPSTREAMS", "")
        self.certs = vt.make_certs(self.dir) if self.tls else None
        self.tls_port = None
        self.redis = vt.Server("redis-server", self.redis_argv, self.dir)
        self.proxy = vt.Server("verbproxy", self.proxy_argv, self.dir)

    def redis_argv(self, port):
        argv = [vt.REDIS_SERVER, "--port", str(port), "--bind", vt.HOST, "--dir", self.dir,
                "--save", "", "--appendonly", "no", "--daemonize", "no"]
        if self.tls:
            self.tls_port = vt.free_port()
            c = self.certs
            argv += ["--tls-port", str(self.tls_port), "--tls-cert-file", os.path.join(c, "server.crt"),
                     "--tls-key-file", os.path.join(c, "server.key"), "--tls-ca-cert-file",
                     os.path.join(c, "ca.crt"), "--tls-auth-clients", "no"]
        return argv

    def proxy_argv(self, port):
        argv = [self.binary, "--port", str(port), "--bind", vt.HOST, "--conveyor", CONVEYOR_PATTERN,
                "--loglevel", "warning", "--shutdown-timeout", "0"]
        if self.cluster:
            argv += ["--upstream-mode", "cluster", "--upstream", "%s:%d" % self.cluster[0]]
        elif self.tls:
            argv += ["--upstream", "%s:%d" % (vt.HOST, self.tls_port), "--upstream-tls", "yes",
                     "--upstream-tls-ca-cert-file", os.path.join(self.certs, "ca.crt")]
        else:
            argv += ["--upstream", "%s:%d" % (vt.HOST, self.redis.port)]
        if self.shared != "":
            argv += ["--shared-upstreams", self.shared]
        return argv

    def start(self):
        try:
            if not self.cluster:
                self.redis.start()
            self.proxy.start()
        except BaseException:
            self.kill()
            raise

    def variant(self):
        parts = ["cluster" if self.cluster else "standalone"]
        if self.tls:
            parts.append("upstream TLS")
        if self.shared != "":
            parts.append("shared-upstreams %s" % self.shared)
        return ", ".join(parts)

    def seed_script(self):
        out = subprocess.run([self.binary, "--script", "ztick"], stdout=subprocess.PIPE, check=True).stdout
        return out.decode()

    def direct_conn(self, tag, name):
        """A connection straight to the Redis that holds {tag} (TLS in the TLS variant)."""
        if not self.cluster:
            if self.tls:
                return vt.RespConn(self.tls_port, ssl_ca=os.path.join(self.certs, "ca.crt"), name=name)
            return vt.RespConn(self.redis.port, name=name)
        host, port = self.cluster_owner(tag)
        return vt.RespConn(port, host=host, name=name)

    def cluster_owner(self, tag):
        host, port = self.cluster[0]
        c = vt.RespConn(port, host=host, name="cluster-probe")
        try:
            slot = int(c.call(["CLUSTER", "KEYSLOT", "{%s}" % tag])[1:-2])
            slots = vt.parse_reply(c.call(["CLUSTER", "SLOTS"]))
        finally:
            c.close()
        for rng in slots.children:
            lo, hi = int(rng.children[0].value), int(rng.children[1].value)
            if lo <= slot <= hi:
                primary = rng.children[2]
                return primary.children[0].value.decode(), int(primary.children[1].value)
        raise RuntimeError("no node owns slot %d" % slot)

    def stop(self):
        clean = self.proxy.stop()
        if not clean or vt.env_on("VP_TEST_VERBOSE"):
            print(self.proxy.log(), file=sys.stderr)
        self.redis.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return clean

    def kill(self):
        self.proxy.kill()
        self.redis.kill()
        print(self.proxy.log(), file=sys.stderr)
        shutil.rmtree(self.dir, ignore_errors=True)


class Model:
    """One seed's keys and connections: proxy and direct, in RESP2 and RESP3."""

    def __init__(self, env, tag, seed_text, seed_sha):
        self.env, self.tag = env, tag
        self.seed_text, self.seed_sha = seed_text, seed_sha
        self.proxy = {}
        self.direct = {}
        for resp in (2, 3):
            self.proxy[resp] = vt.RespConn(env.proxy.port, name="proxy-resp%d" % resp)
            self.direct[resp] = env.direct_conn(tag, "direct-resp%d" % resp)
            if resp == 3:
                for c in (self.proxy[3], self.direct[3]):
                    reply = c.call(["HELLO", "3"])
                    if not reply.startswith(b"%"):
                        raise RuntimeError("%s: HELLO 3 answered %r" % (c.name, reply[:200]))
        self.oracle = env.direct_conn(tag, "oracle")
        version = vt.parse_reply(self.oracle.call(["INFO", "server"])).value.decode()
        ver = next(l.split(":", 1)[1] for l in version.splitlines() if l.startswith("redis_version:"))
        self.version = tuple(int(x) for x in ver.strip().split(".")[:2])
        self.withscore = self.version >= (7, 2)

    def close(self):
        for c in list(self.proxy.values()) + list(self.direct.values()) + [self.oracle]:
            c.close()
        for pair in getattr(self, "state_conns", {}).values():
            for c in pair:
                c.close()

    def reset(self):
        """An empty database (straight to Redis) with the string keys set again."""
        self.oracle_call(["FLUSHALL"])
        self.oracle_call(["SCRIPT", "LOAD", self.seed_text])  # (a batch has no NOSCRIPT fallback)
        for side in ("proxy", "direct"):
            self.oracle_call(["SET", key_name(side, "str", self.tag), "not a sorted set"])

    def oracle_call(self, args):
        raw = self.oracle.call(args)
        if raw.startswith(b"-"):
            raise RuntimeError("%s answered %r" % (show(args), raw))
        return raw

    def oracle_positions(self, role):
        """The positions of role's plain key (Redis's, straight): the model's state."""
        node = vt.parse_reply(self.oracle.call(["ZRANGE", key_name("direct", role, self.tag), "0", "-1", "WITHSCORES"]))
        if node.type != "*":
            return []
        vals = [float(node.children[i].value) for i in range(1, len(node.children), 2)]
        return [v for v in vals if abs(v) != float("inf")]

    def same(self, proxy_reply, direct_reply):
        """Byte for byte, but for the keys' own names (ZMPOP, BZPOPMIN, ...
        reply the key; an unknown command's error quotes them): each side's
        name of a role counts as the role."""
        if proxy_reply == direct_reply:
            return True
        return self.unkey(proxy_reply, "proxy") == self.unkey(direct_reply, "direct")

    def unkey(self, raw, side):
        for role in ROLES:
            name = key_name(side, role, self.tag).encode()
            raw = raw.replace(b"$%d\r\n%s\r\n" % (len(name), name), b"<key %s>" % role.encode())
            if raw.startswith(b"-"):  # an error that quotes the arguments (an unknown command)
                raw = raw.replace(name, b"<key %s>" % role.encode())
        return raw

    def oracle_encoding(self, role):
        """OBJECT ENCODING of role's plain key (both sides' keys had the same
        sizes, so the same encodings), or None."""
        node = vt.parse_reply(self.oracle.call(["OBJECT", "ENCODING", key_name("direct", role, self.tag)]))
        return node.value if node.type in "$+" else None

    def oracle_has(self, role, member):
        """Whether role's plain key holds member (None: not a sorted set)."""
        raw = self.oracle.call(["ZSCORE", key_name("direct", role, self.tag), member])
        if raw.startswith(b"-"):
            return None
        return not raw.startswith(b"$-1")

    def direct_call(self, conn, args):
        raw = conn.call(args)
        if args[0] == "EVALSHA" and raw.startswith(b"-NOSCRIPT"):
            raw = conn.call(["EVAL", self.seed_text] + args[2:])
        return raw

    def wait_gone(self, role):
        """Polls both sides (EXISTS, which expires a key due) until the key is gone."""
        pk, dk = key_name("proxy", role, self.tag), key_name("direct", role, self.tag)
        vt.wait_until(lambda: self.proxy[2].call(["EXISTS", pk]) == b":0\r\n"
                      and self.direct[2].call(["EXISTS", dk]) == b":0\r\n", 5.0, "%s and %s to expire" % (pk, dk))

    def script_flush(self):
        self.oracle_call(["SCRIPT", "FLUSH"])
        self.oracle_call(["SCRIPT", "LOAD", self.seed_text])

    def dump_restore(self, index, step, src, dst, extra):
        for resp in step.resps:
            replies = []
            for side, conns in (("proxy", self.proxy), ("direct", self.direct)):
                c = conns[resp]
                dump = c.call(["DUMP", key_name(side, src, self.tag)])
                node = vt.parse_reply(dump)
                if node.type == "$" and node.value is not None:
                    restore = c.call(["RESTORE", key_name(side, dst, self.tag), "0", node.value] + extra)
                else:
                    restore = b"(no payload)"
                replies.append((dump, restore))
            (pd, pr), (dd, dr) = replies
            step.replies[resp] = (pd + pr, dd + dr)
            if (pd[:1] == b"$") != (dd[:1] == b"$") or pr != dr:
                raise Mismatch(index, step, ["DUMP", key_name("proxy", src, self.tag), "...", "RESTORE",
                                             key_name("proxy", dst, self.tag)] + extra,
                               ["DUMP", key_name("direct", src, self.tag), "...", "RESTORE",
                                key_name("direct", dst, self.tag)] + extra, pd + pr, dd + dr, resp, self.tag)

    def hello_switch(self, index, step, inner):
        for conns in (self.proxy, self.direct):
            reply = conns[3].call(["HELLO", "2"])
            if not reply.startswith(b"*"):
                raise RuntimeError("%s: HELLO 2 answered %r" % (conns[3].name, reply[:200]))
        pargs = render(inner, "proxy", self.tag, self.seed_sha)
        dargs = render(inner, "direct", self.tag, self.seed_sha)
        rp = self.proxy[3].call(pargs)
        rd = self.direct_call(self.direct[3], dargs)
        for conns in (self.proxy, self.direct):
            reply = conns[3].call(["HELLO", "3"])
            if not reply.startswith(b"%"):
                raise RuntimeError("%s: HELLO 3 answered %r" % (conns[3].name, reply[:200]))
        step.replies[3] = (rp, rd)
        if not self.same(rp, rd):
            raise Mismatch(index, step, pargs, dargs, rp, rd, 2, self.tag)

    def zpage_walk(self, index, step, role, start, count, opts):
        """ZPAGE from start, then from each cursor given, on both sides
        (both through the proxy: plain keys on the direct side)."""
        for resp in step.resps:
            walks = []
            for side in ("proxy", "direct"):
                key, cursor, walk = key_name(side, role, self.tag), start, []
                for _ in range(12):
                    args = ["ZPAGE", key, cursor, count] + opts
                    raw = self.proxy[resp].call(args)
                    walk.append((args, raw))
                    node = vt.parse_reply(raw)
                    if node.type != "*" or not node.children or node.children[0].value in (None, b"0"):
                        break
                    cursor = node.children[0].value.decode("latin-1")
                walks.append(walk)
            step.replies[resp] = tuple(b"".join(raw for _, raw in w) for w in walks)
            for (pa, rp), (da, rd) in zip(*walks):
                if not self.same(rp, rd):
                    raise Mismatch(index, step, pa, da, rp, rd, resp, self.tag)
            if len(walks[0]) != len(walks[1]):
                raise Mismatch(index, step, walks[0][-1][0], walks[1][-1][0], b"(%d pages)" % len(walks[0]),
                               b"(%d pages)" % len(walks[1]), resp, self.tag)

    def watch(self, index, step, role, watcher, other, read):
        res = {}
        for side, conns in (("proxy", self.proxy), ("direct", self.direct)):
            w, o = conns[watcher], conns[5 - watcher]
            seq = [(w, ["WATCH", key_name(side, role, self.tag)]), (o, render(other, side, self.tag, self.seed_sha)),
                   (w, ["MULTI"]), (w, render(read, side, self.tag, self.seed_sha)), (w, ["EXEC"])]
            res[side] = [(args, self.direct_call(c, args)) for c, args in seq]
        step.replies[watcher] = (b"".join(r for _, r in res["proxy"]), b"".join(r for _, r in res["direct"]))
        for (pa, rp), (da, rd) in zip(res["proxy"], res["direct"]):
            if not self.same(rp, rd):
                raise Mismatch(index, step, pa, da, rp, rd, watcher, self.tag)

    def run_batch(self, index, step):
        cmd = step.cmd
        pcmds = batch_commands(cmd, "proxy", self.tag, self.seed_sha)
        dcmds = batch_commands(cmd, "direct", self.tag, self.seed_sha)
        for resp in step.resps:
            replies = []
            for conn, cmds in ((self.proxy[resp], pcmds), (self.direct[resp], dcmds)):
                for c in cmds:
                    conn.send(c)
                replies.append([conn.read_reply() for _ in cmds])
            step.replies[resp] = (b"".join(replies[0]), b"".join(replies[1]))
            for pa, da, rp, rd in zip(pcmds, dcmds, replies[0], replies[1]):
                if not self.same(rp, rd):
                    raise Mismatch(index, step, pa, da, rp, rd, resp, self.tag)

    def run(self, index, step):
        """Runs one step on both sides; Mismatch when the replies differ."""
        cmd = step.cmd
        if cmd.special or cmd.subs is not None:
            if cmd.special:
                cmd.special(self, index, step)
            else:
                self.run_batch(index, step)
            if CHECK_STATE:
                self.check_state(index, step)
            return
        pargs = render(cmd, "proxy", self.tag, self.seed_sha)
        dargs = render(cmd, "direct", self.tag, self.seed_sha)
        compare = cmd.compare
        if compare == "unordered":
            # random unless the count covers the whole set: then compared sorted, else by length
            card = self.oracle.call(["ZCARD", dargs[1]])
            card = int(card[1:-2]) if card.startswith(b":") else 0
            try:
                if int(dargs[2]) < card:
                    compare = "length"
            except ValueError:
                pass
        direct = self.proxy if cmd.name() in VERB_NAMES else self.direct
        for resp in step.resps:
            rp = self.proxy[resp].call(pargs)
            rd = self.direct_call(direct[resp], dargs)
            step.replies[resp] = (rp, rd)
            same = self.same(rp, rd)
            if not same and compare != "exact":
                try:
                    same = normalize(cmd, compare, rp) == normalize(cmd, compare, rd)
                except (vt.ProtocolError, ValueError):
                    same = False
            if not same:
                raise Mismatch(index, step, pargs, dargs, rp, rd, resp, self.tag)
        if cmd.post:
            cmd.post(self, cmd)
        if CHECK_STATE:
            self.check_state(index, step)

    def check_state(self, index, step):
        """Every key's whole state through the proxy and straight, in db 0 and
        db 1 (VP_TEST_CHECK_STATE): Mismatch at the first difference."""
        if not hasattr(self, "state_conns"):
            self.state_conns = {}
            for db in ((0,) if self.env.cluster else (0, 1)):
                p = vt.RespConn(self.env.proxy.port, name="proxy-state-db%d" % db)
                d = self.env.direct_conn(self.tag, "direct-state-db%d" % db)
                if db:
                    p.call(["SELECT", str(db)])
                    d.call(["SELECT", str(db)])
                self.state_conns[db] = (p, d)
        for db, (p, d) in sorted(self.state_conns.items()):
            for role in ROLES:
                for args in (["TYPE", Key(role)], ["ZRANGE", Key(role), "0", "-1", "WITHSCORES"]):
                    pargs = render(Cmd("state", args), "proxy", self.tag, "")
                    dargs = render(Cmd("state", args), "direct", self.tag, "")
                    rp, rd = p.call(pargs), d.call(dargs)
                    if not self.same(rp, rd):
                        raise Mismatch(index, step, ["(db %d)" % db] + pargs, ["(db %d)" % db] + dargs, rp, rd, 2,
                                       self.tag)

    def replay(self, steps):
        """Runs steps on an empty database: the first Mismatch, or None."""
        self.reset()
        for i, st in enumerate(steps):
            st = Step(st.cmd, st.resps)
            try:
                self.run(i, st)
            except Mismatch as m:
                return m
        return None


def extra_ops():
    want = os.environ.get("VP_TEST_EXTRA_OPS", "")
    if not want:
        return []
    names = set(want.split(","))
    return [op for op in OPS_NOT_YET if "all" in names or op[0] in names]


def generate(g, ops):
    """One Step: an op drawn by weight (drawn again when KNOWN bugs leave it
    no RESP version), in one RESP version for a write, both for a read."""
    names = [o[0] for o in ops]
    weights = [o[1] for o in ops]
    gens = {o[0]: o[2] for o in ops}
    for _ in range(1000):
        cmd = gens[g.r.choices(names, weights)[0]](g)
        if cmd is None:
            continue
        if cmd.args and g.r.random() < 0.1:
            cmd.args[0] = g.word(cmd.args[0])  # command names in any case too
        resps, _ = known_resps(cmd, g)
        pick = g.r.choice((2, 3))  # drawn always, so a seed's sequence does not depend on KNOWN
        if not resps:
            continue
        cmd.allowed = list(resps)
        if g.stale and not g.in_batch and cmd.subs is None and not cmd.special:
            g.stale.discard(script_used(cmd))
        if cmd.writes:
            resps = [pick if pick in resps else resps[0]]
        return Step(cmd, resps)
    raise RuntimeError("no op could be generated")


def shrink(model, steps, first):
    """A short sequence that still ends in a mismatch of the same kind:
    steps up to the first mismatch, then the reads before it dropped, then
    chunks removed while it still fails (ddmin), within SHRINK_SECONDS.
    Returns (steps, Mismatch) or None when the failure does not replay."""
    deadline = time.monotonic() + SHRINK_SECONDS
    kind = first.step.cmd.kind

    def fails(cand):
        m = model.replay(cand)
        if m is not None and m.step.cmd.kind == kind:
            return cand[:m.index + 1], m
        return None

    cur = steps[:first.index + 1]
    got = fails(cur)
    if got is None:
        return None
    cur, mm = got
    # the reads before the last step change nothing: try without them all
    cand = [s for s in cur[:-1] if s.cmd.writes] + [cur[-1]]
    got = fails(cand)
    if got:
        cur, mm = got
    n = 2
    while len(cur) > 1 and time.monotonic() < deadline:
        chunk = max(1, -(-(len(cur) - 1) // n))
        removed = False
        start = 0
        while start < len(cur) - 1 and time.monotonic() < deadline:
            cand = cur[:start] + cur[min(start + chunk, len(cur) - 1):]
            got = fails(cand)
            if got:
                cur, mm = got
                removed = True
            else:
                start += chunk
        if not removed:
            if chunk == 1:
                break
            n = min(2 * n, len(cur) - 1)
    # the replies of the final sequence, for the report
    final = [Step(s.cmd, s.resps) for s in cur]
    model.reset()
    mm = None
    for i, st in enumerate(final):
        try:
            model.run(i, st)
        except Mismatch as m:
            mm = m
            final = final[:i + 1]
            break
    if mm is None:
        return None
    return final, mm


def report_shrunk(model, final, mm):
    lines = ["  minimal reproduction (%d commands, on an empty database; tag {%s}):" % (len(final), model.tag)]
    for i, st in enumerate(final):
        pargs = show_cmd(st.cmd, "proxy", model.tag, model.seed_sha)
        dargs = show_cmd(st.cmd, "direct", model.tag, model.seed_sha)
        if st.cmd.special:
            lines.append("           %s" % pargs)
        for resp, (rp, rd) in sorted(st.replies.items()):
            mark = "  <-- differs" if rp != rd else ""
            lines.append("    RESP%d  %s\n           proxy -> %r\n           %s\n           redis -> %r%s"
                         % (resp, pargs, rp, dargs, rd, mark))
    return "\n".join(lines)


class Stats:
    """What a sequence covered: steps per kind, error and empty replies,
    the line's size, members a ZTICK removed."""

    def __init__(self):
        self.kinds = {}
        self.errors = self.empty = self.replies = 0
        self.sizes = []
        self.tick_exits = []

    def count(self, st, g):
        self.kinds[st.cmd.kind] = self.kinds.get(st.cmd.kind, 0) + 1
        self.sizes.append(len(g.positions("line")))

    def replied(self, st):
        for rp, _ in st.replies.values():
            self.replies += 1
            if rp[:1] in (b"-", b"!"):
                self.errors += 1
            elif rp in (b"*0\r\n", b"$-1\r\n", b"_\r\n", b"*-1\r\n"):
                self.empty += 1
        if st.cmd.kind == "ztick" and st.replies:
            rp = next(iter(st.replies.values()))[0]
            if rp.startswith(b"*"):
                n = int(rp[1:rp.index(b"\r\n")])
                self.tick_exits.append(n // 2 if "WITHSCORES" in st.cmd.words() else n)

    def summary(self):
        ex = self.tick_exits or [0]
        return ("%d replies, %d%% errors, %d%% empty; line size mean %.1f max %d; ZTICK exits: none %d%%, "
                "mean %.1f, max %d" % (self.replies, 100 * self.errors // max(1, self.replies),
                                       100 * self.empty // max(1, self.replies),
                                       sum(self.sizes) / max(1, len(self.sizes)), max(self.sizes or [0]),
                                       100 * sum(1 for x in ex if x == 0) // len(ex), sum(ex) / len(ex), max(ex)))


def run_seed(env, seed, seed_text, seed_sha, steps_count, ops):
    """Runs one seed's sequence; None, or the failure's report."""
    tag = "s%d" % seed
    model = Model(env, tag, seed_text, seed_sha)
    try:
        model.reset()
        r = random.Random(seed)
        g = Gen(r, model, ops)
        stats = Stats()
        steps = []
        for i in range(steps_count):
            g.new_step()
            st = generate(g, ops)
            steps.append(st)
            stats.count(st, g)
            try:
                model.run(i, st)
                stats.replied(st)
            except Mismatch as m:
                out = ["MISMATCH seed=%d (%s; replay: VP_TEST_SEED=%d VP_TEST_STEPS=%d)"
                       % (seed, env.variant(), seed, steps_count), "  " + m.describe().replace("\n", "\n  "),
                       "  the %d steps before it:" % min(HISTORY, i)]
                for j in range(max(0, i - HISTORY), i):
                    s = steps[j]
                    out.append("    [%d] %s RESP%s %s" % (j, s.cmd.kind, "+".join(map(str, s.resps)),
                                                         show_cmd(s.cmd, "proxy", tag, seed_sha)))
                print("\n".join(out), file=sys.stderr, flush=True)
                if SHRINK_SECONDS > 0:
                    t0 = time.monotonic()
                    got = shrink(model, steps, m)
                    if got is None:
                        out.append("  (the mismatch did not replay on an empty database: not shrunk)")
                    else:
                        out.append(report_shrunk(model, *got))
                        out.append("  (shrunk in %.1f s)" % (time.monotonic() - t0))
                    print("\n".join(out[-2:]), file=sys.stderr, flush=True)
                return "\n".join(out)
        print("  seed %d: %s" % (seed, stats.summary()), file=sys.stderr, flush=True)
        # the end: every key's whole state, both ways
        for role in ROLES:
            for args in (["ZRANGE", Key(role), "0", "-1", "WITHSCORES"], ["TYPE", Key(role)], ["TTL", Key(role)]):
                cmd = Cmd("final", args, compare="ttl" if args[0] == "TTL" else "exact")
                try:
                    model.run(steps_count, Step(cmd, (2, 3)))
                except Mismatch as m:
                    return "MISMATCH at the end of seed=%d (%s)\n  %s" % (seed, env.variant(), m.describe())
        return None
    finally:
        model.close()


# ---------------------------------------------------------------------------
# The tests

class ConveyorModelTest(unittest.TestCase):
    env = None

    @classmethod
    def setUpClass(cls):
        cls.env = Env()
        cls.env.start()
        cls.seed_text = cls.env.seed_script()
        c = cls.env.direct_conn("s0", "loader")
        try:
            node = vt.parse_reply(c.call(["SCRIPT", "LOAD", cls.seed_text]))
            if node.type != "$" and cls.seed_text.startswith("#!"):
                # Redis < 7.0 knows no shebang line: the script without it, as the proxy sends it there
                cls.seed_text = cls.seed_text.split("\n", 1)[1]
                node = vt.parse_reply(c.call(["SCRIPT", "LOAD", cls.seed_text]))
            if node.type != "$":
                raise RuntimeError("SCRIPT LOAD of the seed's ztick script answered %r" % node.raw)
            cls.seed_sha = node.value.decode()
        finally:
            c.close()

    @classmethod
    def tearDownClass(cls):
        if cls.env is not None:
            clean = cls.env.stop()
            cls.env = None
            if not clean:
                raise AssertionError("the proxy did not stop cleanly")

    def test_sequences(self):
        """Seeded random sequences: every reply as Redis's on plain keys."""
        if os.environ.get("VP_TEST_SEED"):
            seeds = [int(os.environ["VP_TEST_SEED"])]
        elif vt.env_on("VP_TEST_RANDOM_SEEDS"):
            base = random.SystemRandom().randrange(1, 10 ** 6)
            seeds = [base + i for i in range(SEEDS)]
        else:
            # The same seeds on every run (a suite's verdict must not depend
            # on luck); VP_TEST_RANDOM_SEEDS=1 looks further.
            seeds = [FIXED_SEED_BASE + i for i in range(SEEDS)]
        ops = OPS + extra_ops()
        print("\nconveyor model (%s): seeds %s, %d steps each, ops: %s%s"
              % (self.env.variant(), ",".join(map(str, seeds)), STEPS, ",".join(o[0] for o in ops),
                 "" if os.environ.get("VP_TEST_KNOWN", "1") == "0" or not KNOWN
                 else "; KNOWN skipped: " + ",".join(k[0] for k in KNOWN)), file=sys.stderr, flush=True)
        failures = []
        t0 = time.monotonic()
        for seed in seeds:
            t = time.monotonic()
            failure = run_seed(self.env, seed, self.seed_text, self.seed_sha, STEPS, ops)
            print("  seed %d: %s (%.1f s)" % (seed, "MISMATCH" if failure else "ok", time.monotonic() - t),
                  file=sys.stderr, flush=True)
            if failure:
                failures.append(failure)
        print("  %d seeds in %.1f s" % (len(seeds), time.monotonic() - t0), file=sys.stderr)
        if failures:
            self.fail("%d of %d seeds mismatched:\n%s" % (len(failures), len(seeds), "\n\n".join(failures)))
        if not self.env.cluster and self.env.shared != "0":
            # Score ranges with a finite end went checked (docs/conveyor.md,
            # "How reads are sent"), both ways: with the offset expected, and
            # answered by the script after a tick moved it.
            c = vt.RespConn(self.env.proxy.port, name="stats")
            text = vt.parse_reply(c.call(["VERBPROXY", "STATS"])).value.decode()
            c.close()
            stats = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
            checked, stale = int(stats["conveyor_checked"]), int(stats["conveyor_checked_stale"])
            print("  checked reads: %d, %d of them answered by the script" % (checked, stale), file=sys.stderr)
            self.assertGreater(stale, 0)
            self.assertGreater(checked - stale, 0)

    def test_infinite_and_huge_deltas(self):
        """ZTICK with an infinite delta, huge values, and offsets past the
        rebase bound (2^32), against the seed: fixed stories, each on an
        empty database, in RESP2 and in RESP3."""
        cases = [
            [["ZADD", "L", "1", "a", "2", "b", "3", "c"], ["ZTICK", "L", "inf", "10", "WITHSCORES"], ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            [["ZADD", "L", "1", "a", "2", "b", "3", "c"], ["ZTICK", "L", "-inf", "0", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZADD", "L", "5", "d"], ["ZRANGE", "L", "0", "-1", "WITHSCORES"],
             ["ZSCORE", "L", "d"], ["ZTICK", "L", "1", "0", "WITHSCORES"], ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            [["ZADD", "L", "1", "a", "2", "b"], ["ZTICK", "L", "-inf", "-inf", "WITHSCORES"], ["EXISTS", "L"]],
            [["ZADD", "L", "1", "a", "2", "b"], ["ZTICK", "L", "+inf", "+inf", "WITHSCORES"], ["EXISTS", "L"]],
            [["ZADD", "L", "-inf", "x", "1", "a"], ["ZTICK", "L", "inf", "0"], ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            [["ZADD", "L", "+inf", "y", "1", "a"], ["ZTICK", "L", "-inf", "0"], ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            [["ZADD", "L", "+inf", "y", "1", "a"], ["ZTICK", "L", "1", "5", "WITHSCORES"], ["ZTICK", "L", "-1", "100", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZRANGEBYSCORE", "L", "-inf", "+inf", "WITHSCORES"]],
            [["ZADD", "L", "2", "a", "4", "b"], ["ZTICK", "L", "3", "100"], ["ZTICK", "L", "inf", "+inf", "WITHSCORES"]],
            [["ZADD", "L", "2", "a", "4", "b"], ["ZTICK", "L", "3", "100"], ["ZTICK", "L", "-inf", "-inf", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            [["ZADD", "L", "1e300", "a", "1", "b"], ["ZTICK", "L", "1e308", "inf", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZTICK", "L", "1e308", "inf", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            # the offset past 2^32 (the rebase), positions with halves, then back
            [["ZADD", "L", "0", "a", "0.5", "b", "1", "c"], ["ZTICK", "L", "4294967296", "1e300", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZTICK", "L", "1", "1e300"], ["ZRANGE", "L", "0", "-1", "WITHSCORES"],
             ["ZADD", "L", "3", "d"], ["ZRANGEBYSCORE", "L", "4294967297", "+inf", "WITHSCORES"],
             ["ZCOUNT", "L", "(4294967297.5", "+inf"], ["ZTICK", "L", "-4294967297", "1", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZSCORE", "L", "d"], ["ZINCRBY", "L", "2.5", "a"],
             ["ZPOPMAX", "L", "2"], ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            [["ZADD", "L", "1", "a", "2", "b"], ["ZTICK", "L", "2147483648", "1e300"], ["ZTICK", "L", "2147483648", "1e300"],
             ["ZTICK", "L", "2147483648", "1e300", "WITHSCORES"], ["ZRANGE", "L", "0", "-1", "WITHSCORES"],
             ["ZADD", "L", "6442450946", "c"], ["ZTICK", "L", "-2147483648.5", "4294967298", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZREMRANGEBYSCORE", "L", "-inf", "(4294967297"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            [["ZADD", "L", "-4294967296", "a", "5", "b"], ["ZTICK", "L", "-4294967296.5", "0", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZTICK", "L", "8589934593", "1", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
            [["ZADD", "L", "0", "a", "1", "b"], ["ZTICK", "L", "1e16", "1e16", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZTICK", "L", "1", "1e17", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"], ["ZTICK", "L", "-1e16", "1e17", "WITHSCORES"],
             ["ZRANGE", "L", "0", "-1", "WITHSCORES"]],
        ]
        failures = []
        for n, case in enumerate(cases):
            tag = "inf%d" % n
            model = Model(self.env, tag, self.seed_text, self.seed_sha)
            try:
                for resp in (2, 3):
                    model.reset()
                    for i, args in enumerate(case):
                        cmd = Cmd("inf", [Key("line") if a == "L" else a for a in args], writes=True)
                        try:
                            model.run(i, Step(cmd, (resp,)))
                        except Mismatch as m:
                            failures.append("case %d: %s\n  commands: %s" % (
                                n, m.describe(), " ; ".join(show(render(Cmd("x", [Key("line") if a == "L" else a for a in c]),
                                                                       "proxy", tag, "SHA")) for c in case[:i + 1])))
                            break
            finally:
                model.close()
        if failures:
            self.fail("%d infinite-delta cases mismatched:\n%s" % (len(failures), "\n".join(failures)))


if __name__ == "__main__":
    argv = sys.argv[:1]
    for a in sys.argv[1:]:
        if not os.environ.get("VP_BINARY") and os.path.isfile(a) and os.access(a, os.X_OK):
            os.environ["VP_BINARY"] = a
        else:
            argv.append(a)
    unittest.main(argv=argv, verbosity=2)
