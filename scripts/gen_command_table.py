#!/usr/bin/env python3
"""gen_command_table.py - proxy/cmd/command_table.c, the one command table, from a
real redis-server's COMMAND INFO and COMMAND DOCS, and the proxy's own classification.

Every Redis command the proxy knows is one row there: its name, arity, flags
(write, readonly, blocking, pubsub, admin, ...), request/response policy tips
(the fan-out commands), key specs (begin_search, find_keys, key flags) and
legacy first/last/step, COMMAND DOCS group; a container's subcommands
("object|encoding") in a table of their own. Redis publishes all of that, so
it is generated from a running server instead of being typed in. What the
proxy decides about a command by its name (does it change reply counting,
block, change connection state, need a connection of its own, may it go
while a script is busy) is the one hand-kept part: CLASSES below, with the
reason for each. So are the commands of newer Redis versions (NEWER below).
Readers: proxy/route/route_keys.c (keys), proxy/cmd/command.c (the
classification queries), proxy/cmdid.c (metrics ids and families),
proxy/verbs/verbs.c (a verb may not shadow a command).

    python3 scripts/gen_command_table.py > proxy/cmd/command_table.c      # regenerate
    python3 scripts/gen_command_table.py --check proxy/cmd/command_table.c # the test

Without --socket it starts its own servers, each on a unix socket in a temp
dir: REDIS_SERVER (paths, ':'-separated, newest first), else the newest
supported releases (NEWEST below, built by scripts/upstreams.sh; exit 77,
skipped, where one is not built) and Debian's 7.0.15. A command, and a
subcommand, is taken from the first server that has it, so the table knows
every supported version's commands. --check exits 1 with a unified diff
when the checked-in table and the servers disagree (ctest:
unit/command_table_matches_redis, in the server matrix's legs).

    python3 scripts/gen_command_table.py --covers proxy/cmd/command_table.c

checks instead that the table knows every command and subcommand of one
server, VP_TEST_REDIS_SERVER (else Debian's): ctest's
unit/command_table_covers_redis, run against each server by the matrix.

Commands whose keys cannot be found from their key specs alone (a spec
marked incomplete, variable_flags or of unknown type, or a numkeys that may
be invalid) also have a key-finding procedure in Redis (db.c's *GetKeys);
PROCS names them, and the script refuses a command Redis marks movablekeys
or with such a spec that PROCS does not know, so a new Redis cannot slip one
past the table. No dependency beyond Python's standard library (a small
RESP reader is below).
"""
import argparse
import difflib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# The key-finding procedures of Redis 7.0 (src/db.c), by command; route_keys.c
# implements each under the same name. Used when the specs fail, or at once
# when a spec has variable_flags (Redis's getKeysFromCommandWithSpecs).
PROCS = {
    "zunionstore": "ZUNIONSTORE", "zinterstore": "ZUNIONSTORE", "zdiffstore": "ZUNIONSTORE",
    "zunion": "NUMKEYS_AT_1", "zinter": "NUMKEYS_AT_1", "zdiff": "NUMKEYS_AT_1",
    "sintercard": "NUMKEYS_AT_1", "zintercard": "NUMKEYS_AT_1",
    "lmpop": "NUMKEYS_AT_1", "zmpop": "NUMKEYS_AT_1",
    "blmpop": "NUMKEYS_AT_2", "bzmpop": "NUMKEYS_AT_2",
    "eval": "NUMKEYS_AT_2", "evalsha": "NUMKEYS_AT_2", "eval_ro": "NUMKEYS_AT_2",
    "evalsha_ro": "NUMKEYS_AT_2", "fcall": "NUMKEYS_AT_2", "fcall_ro": "NUMKEYS_AT_2",
    "sort": "SORT", "sort_ro": "FIRST_ONLY", "migrate": "MIGRATE",
    "georadius": "GEORADIUS", "georadiusbymember": "GEORADIUS",
    "xread": "XREAD", "xreadgroup": "XREAD",
    "set": "FIRST_ONLY", "bitfield": "FIRST_ONLY",
}

# The proxy's own classification: what proxy/cmd/command.c answers from a
# command's name (and, for "container|sub", its subcommand). Hand-kept: Redis
# has no word for these. The kind (cmd_kind) says how many replies come back;
# it applies only when the call has Redis's arity (a wrong count is one arity
# error and changes nothing). Classes, any number per command:
#   BLOCKING      may block the connection while it waits (needs a connection
#                 of its own, leaves no state there); with BLOCK_OPTION only
#                 when a BLOCK option comes before STREAMS
#   SESSION       changes what a command sent before it would see if run again
#                 after it (database, user, protocol), or blocks: a verb's
#                 NOSCRIPT retry must not land behind it (cmd_changes_session)
#   OWN           needs a connection of its own, whatever its arguments: it
#                 sets or reads connection state, may make the shared
#                 connection unsafe or must reach a busy Redis
#                 (cmd_needs_own_connection; CLIENT but its setters)
#   READ_WHOLE    the proxy reads its arguments (credentials, settings it
#                 follows): never streamed
#   OUT_OF_BAND   Redis 7.0 answers it at once while a script is busy
#                 (allow_busy) and an operator needs it then: from a shared
#                 connection it goes on the side connection
#   REPLY_MODE    CLIENT REPLY ON|OFF|SKIP: whether later commands answer
#   UNSUBSCRIBE   a SUBSCRIBE kind that does not subscribe
#   FANOUT        keyless, and in cluster mode every primary runs it (its
#                 replies merged by its response_policy tip, or by the rule
#                 proxy/route/route_plan.c gives KEYS, RANDOMKEY and SCAN)
# and, set by this script: SUBS (one of its subcommands has a class), NEWER
# (below).
CLASSES = {
    # Reply counting: replies per channel, then pushes.
    "subscribe": ("CMD_SUBSCRIBE", []),
    "psubscribe": ("CMD_SUBSCRIBE", []),
    "ssubscribe": ("CMD_SUBSCRIBE", []),
    "unsubscribe": ("CMD_SUBSCRIBE", ["UNSUBSCRIBE"]),
    "punsubscribe": ("CMD_SUBSCRIBE", ["UNSUBSCRIBE"]),
    "sunsubscribe": ("CMD_SUBSCRIBE", ["UNSUBSCRIBE"]),
    "monitor": ("CMD_MONITOR", []),  # +OK, then a stream of every command
    "reset": ("CMD_RESET", ["SESSION"]),  # leaves subscribe/monitor/multi/reply-off; database 0, default user
    "multi": ("CMD_MULTI", []),
    "exec": ("CMD_EXEC", []),
    "discard": ("CMD_DISCARD", []),
    "replconf": ("CMD_UNCOUNTABLE", ["OWN"]),  # answered or not by its options (ACK pairs are not)
    "sync": ("CMD_REPLICATION", ["OWN"]),  # the connection becomes a replication stream
    "psync": ("CMD_REPLICATION", ["OWN"]),  # (with any arguments: still a replica's)
    "client": (None, ["OWN", "REPLY_MODE"]),  # connection state; CLIENT SETNAME/SETINFO excepted in command.c
    # Connection state: the database, the user, the protocol, the cluster.
    "select": (None, ["OWN", "SESSION"]),
    "swapdb": (None, ["SESSION"]),  # the databases under a connection
    "auth": (None, ["OWN", "SESSION", "READ_WHOLE"]),  # judged by the proxy's users, noted for Redis's
    "hello": (None, ["OWN", "SESSION", "READ_WHOLE"]),
    "readonly": (None, ["OWN", "SESSION"]),
    "readwrite": (None, ["OWN", "SESSION"]),
    "asking": (None, ["OWN"]),
    "watch": (None, ["OWN"]),
    "unwatch": (None, ["OWN"]),
    "script|debug": (None, ["OWN"]),
    # Settings the proxy follows (probed after); CONFIG SET may set an output
    # limit that makes sharing unsafe (upstream_outlimit.c).
    "config": (None, ["READ_WHOLE"]),
    "config|set": (None, ["OWN"]),
    "acl": (None, ["READ_WHOLE"]),
    # SHUTDOWN waits for lagging replicas, and SHUTDOWN NOSAVE must reach a
    # Redis busy with a script the shared connection may be waiting on.
    "shutdown": (None, ["OWN"]),
    # Blocking.
    "blpop": (None, ["BLOCKING", "SESSION"]),
    "brpop": (None, ["BLOCKING", "SESSION"]),
    "brpoplpush": (None, ["BLOCKING", "SESSION"]),
    "blmove": (None, ["BLOCKING", "SESSION"]),
    "blmpop": (None, ["BLOCKING", "SESSION"]),
    "bzpopmin": (None, ["BLOCKING", "SESSION"]),
    "bzpopmax": (None, ["BLOCKING", "SESSION"]),
    "bzmpop": (None, ["BLOCKING", "SESSION"]),
    "xread": (None, ["BLOCKING", "BLOCK_OPTION", "SESSION"]),
    "xreadgroup": (None, ["BLOCKING", "BLOCK_OPTION", "SESSION"]),
    "wait": (None, ["OWN", "SESSION"]),  # blocks until replicas acknowledge
    "waitaof": (None, ["OWN", "SESSION"]),
    # Answered at once while a script or function is busy.
    "function|stats": (None, ["OUT_OF_BAND"]),
    # Cluster mode: sent to every primary, replies merged. (KEYS, RANDOMKEY
    # and SCAN have no response_policy tip; the flushes, DBSIZE and the
    # script cache's commands do.)
    "dbsize": (None, ["FANOUT"]),
    "keys": (None, ["FANOUT"]),
    "flushall": (None, ["FANOUT"]),
    "flushdb": (None, ["FANOUT"]),
    "randomkey": (None, ["FANOUT"]),
    "scan": (None, ["FANOUT"]),
    "script|load": (None, ["FANOUT"]),
    "script|flush": (None, ["FANOUT"]),
    "script|exists": (None, ["FANOUT"]),
    "script|kill": (None, ["OUT_OF_BAND", "FANOUT"]),
    "function|kill": (None, ["OUT_OF_BAND", "FANOUT"]),
}
CLASS_BITS = ["BLOCKING", "BLOCK_OPTION", "SESSION", "OWN", "READ_WHOLE", "OUT_OF_BAND", "REPLY_MODE",
              "UNSUBSCRIBE", "FANOUT", "SUBS", "NEWER"]

# Commands none of the table's servers has, by COMMAND DOCS group: Redis
# 8.0's HGETDEL, HGETEX, HSETEX and vector sets, and 6.2's STRALGO (gone in
# 7.0). No arity, flags or key specs: they are known by name only (a verb
# may not shadow them, the metrics count them, CLASSES may classify them)
# and cmd_table_lookup, which routes by keys, does not return them.
NEWER = {
    "hgetdel": "hash", "hgetex": "hash", "hsetex": "hash", "stralgo": "string",
    "vadd": "vectorset", "vcard": "vectorset", "vdim": "vectorset", "vemb": "vectorset",
    "vgetattr": "vectorset", "vinfo": "vectorset", "vismember": "vectorset", "vlinks": "vectorset",
    "vrandmember": "vectorset", "vrem": "vectorset", "vsetattr": "vectorset", "vsim": "vectorset",
}

# The name hash (proxy/cmd/command_table.h: cmd_table_find), FNV-1a over the
# lower-case name, into CMD_TABLE_SLOTS open-addressed slots.
SLOTS = 1024
# Names of this length or longer are no command: no class mask for them.
CLASS_LEN_MAX = 16

CMD_FLAGS = ["write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript", "blocking",
             "loading", "stale", "skip_monitor", "skip_slowlog", "asking", "fast", "no_auth",
             "may_replicate", "no_mandatory_keys", "no_multi", "movablekeys", "allow_busy",
             "no_async_loading"]
TIPS = {
    "nondeterministic_output": "CMD_TIP_NONDETERMINISTIC",
    "nondeterministic_output_order": "CMD_TIP_NONDETERMINISTIC_ORDER",
    "request_policy:all_nodes": "CMD_REQ_ALL_NODES",
    "request_policy:all_shards": "CMD_REQ_ALL_SHARDS",
    "request_policy:multi_shard": "CMD_REQ_MULTI_SHARD",
    "request_policy:special": "CMD_REQ_SPECIAL",
    "response_policy:one_succeeded": "CMD_RESP_ONE_SUCCEEDED",
    "response_policy:all_succeeded": "CMD_RESP_ALL_SUCCEEDED",
    "response_policy:agg_logical_and": "CMD_RESP_AGG_LOGICAL_AND",
    "response_policy:agg_logical_or": "CMD_RESP_AGG_LOGICAL_OR",
    "response_policy:agg_min": "CMD_RESP_AGG_MIN",
    "response_policy:agg_max": "CMD_RESP_AGG_MAX",
    "response_policy:agg_sum": "CMD_RESP_AGG_SUM",
    "response_policy:special": "CMD_RESP_SPECIAL",
}
KEY_FLAGS = ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key",
             "incomplete", "variable_flags"]


class Resp:
    """Just enough of RESP2 to read COMMAND INFO."""

    def __init__(self, sock):
        self.sock = sock
        self.f = sock.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise EOFError("connection closed")
        t, v = line[:1], line[1:-2]
        if t == b"*":
            n = int(v)
            return None if n < 0 else [self.read() for _ in range(n)]
        if t == b"$":
            n = int(v)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode()
        if t == b":":
            return int(v)
        if t == b"+":
            return v.decode()
        if t == b"-":
            raise RuntimeError(v.decode())
        raise ValueError("bad RESP type %r" % t)


# The servers the table is made from, newest first: a command (or a
# subcommand) is taken from the first that has it. Redis 7.4 and Valkey 8.0
# are the newest supported (scripts/upstreams.sh builds them from
# ../shared/upstreams); Debian's 7.0.15 is the one the main suites run on.
NEWEST = ["redis-7.4.1", "valkey-8.0.1"]
DEBIAN_SERVER = "/usr/bin/redis-server"
SKIP = 77  # ctest's SKIP_RETURN_CODE


def table_servers():
    """REDIS_SERVER (paths, ':'-separated, newest first), else the newest
    releases built by scripts/upstreams.sh and Debian's server. Exits SKIP
    when a release is not built."""
    if os.environ.get("REDIS_SERVER"):
        return os.environ["REDIS_SERVER"].split(":")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = []
    for name in NEWEST:
        p = subprocess.run(["bash", os.path.join(root, "scripts", "upstreams.sh"), "built", name],
                           capture_output=True, text=True)
        path = p.stdout.strip()
        if p.returncode != 0 or not path or not os.access(path, os.X_OK):
            print("gen_command_table: skipped: %s is not built (scripts/upstreams.sh build %s)" % (name, name))
            sys.exit(SKIP)
        paths.append(path)
    return paths + [DEBIAN_SERVER]


def start_server(binary):
    tmp = tempfile.mkdtemp(prefix="vp-gen-cmd-")
    path = os.path.join(tmp, "redis.sock")
    proc = subprocess.Popen([binary, "--port", "0", "--unixsocket", path, "--save", "",
                             "--appendonly", "no", "--dir", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            r = Resp(s)
            r.cmd("PING")
            return proc, tmp, r
        except (OSError, EOFError, RuntimeError):
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                shutil.rmtree(tmp, ignore_errors=True)
                sys.exit("gen_command_table: %s did not start" % binary)
            time.sleep(0.02)


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spec_line(sp, cname):
    d = dict(zip(sp[0::2], sp[1::2]))
    flags = []
    for f in d["flags"]:
        if f not in KEY_FLAGS:
            sys.exit("gen_command_table: %s: unknown key flag %s" % (cname, f))
        flags.append("CMD_KEY_" + f.upper())
    bs_type, bs = d["begin_search"][1], dict(zip(d["begin_search"][3][0::2], d["begin_search"][3][1::2]))
    fk_type, fk = d["find_keys"][1], dict(zip(d["find_keys"][3][0::2], d["find_keys"][3][1::2]))
    if bs_type == "index":
        bsv = "CMD_BS_INDEX, %d, NULL" % bs["index"]
    elif bs_type == "keyword":
        bsv = "CMD_BS_KEYWORD, %d, %s" % (bs["startfrom"], c_str(bs["keyword"]))
    else:
        bsv = "CMD_BS_UNKNOWN, 0, NULL"
    if fk_type == "range":
        fkv = "CMD_FK_RANGE, {%d, %d, %d}" % (fk["lastkey"], fk["keystep"], fk["limit"])
    elif fk_type == "keynum":
        fkv = "CMD_FK_KEYNUM, {%d, %d, %d}" % (fk["keynumidx"], fk["firstkey"], fk["keystep"])
    else:
        fkv = "CMD_FK_UNKNOWN, {0, 0, 0}"
    needs_proc = bs_type == "unknown" or fk_type == "unknown" or fk_type == "keynum" or \
        "incomplete" in d["flags"] or "variable_flags" in d["flags"]
    return "{%s, %s, %s}" % (" | ".join(flags) or "0", bsv, fkv), needs_proc


def command_entry(c, out_specs, ident):
    name, arity, flags, first, last, step, _acl, tips, specs, subs = c[:10]
    if "FANOUT" in CLASSES.get(name, (None, []))[1] and specs:
        sys.exit("gen_command_table: %s has keys: it cannot be FANOUT" % name)
    fl = []
    for f in flags:
        if f not in CMD_FLAGS:
            sys.exit("gen_command_table: %s: unknown command flag %s" % (name, f))
        fl.append("CMD_F_" + f.upper())
    for t in tips:
        if t not in TIPS:
            sys.exit("gen_command_table: %s: unknown tip %s" % (name, t))
        fl.append(TIPS[t])
    specs_ref, needs_proc = "NULL", False
    if specs:
        lines = []
        for sp in specs:
            line, np = spec_line(sp, name)
            lines.append(line)
            needs_proc = needs_proc or np
        out_specs.append("static const cmd_keyspec specs_%s[] = {\n    %s,\n};" % (ident, ",\n    ".join(lines)))
        specs_ref = "specs_" + ident
    if "movablekeys" in flags:
        needs_proc = True
    proc = PROCS.get(name)
    if needs_proc and proc is None:
        sys.exit("gen_command_table: %s needs a key-finding procedure (proxy/route/route_keys.c) and PROCS names none" % name)
    return name, arity, fl, first, last, step, proc or "NONE", specs_ref, len(specs)


def fnv1a(name):
    h = 2166136261
    for b in name.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def class_bit(ch):
    return 1 << ((ord(ch) | 0x20) & 31)


def classify(name):
    """The (kind, classes) CLASSES gives name; every CLASSES name must be a command."""
    kind, cls = CLASSES.get(name, (None, []))
    for c in cls:
        if c not in CLASS_BITS or c in ("SUBS", "NEWER"):
            sys.exit("gen_command_table: %s: unknown class %s (SUBS and NEWER are the script's)" % (name, c))
    return kind or "CMD_PLAIN", cls


def cls_expr(cls):
    return " | ".join("CMD_P_" + c for c in cls) or "0"


def server_name(r):
    """"Redis 7.4.1", "Valkey 8.0.1" (Valkey 7.2 says redis_version 7.2.4
    and valkey_version 7.2.7)."""
    fields = dict(line.split(":", 1) for line in r.cmd("INFO", "server").split("\r\n") if ":" in line)
    if "valkey_version" in fields:
        return "Valkey " + fields["valkey_version"]
    return "Redis " + fields.get("redis_version", "?")


def merged_info(rs):
    """COMMAND INFO and COMMAND DOCS groups of several servers, newest
    first: each command, and each subcommand, from the first server that
    has it (a container's subcommands are the union of all of them)."""
    info, docs = {}, {}
    for r in rs:
        for c in r.cmd("COMMAND", "INFO"):
            have = info.get(c[0])
            if have is None:
                info[c[0]] = list(c[:9]) + [list(c[9] or [])] + list(c[10:])
                continue
            subs = {sc[0] for sc in have[9]}
            have[9] += [sc for sc in (c[9] or []) if sc[0] not in subs]
        docs_list = r.cmd("COMMAND", "DOCS")
        for name, doc in zip(docs_list[0::2], docs_list[1::2]):
            d = dict(zip(doc[0::2], doc[1::2]))
            docs.setdefault(name, d.get("group", ""))
            subdocs = d.get("subcommands") or []
            for sname, sdoc in zip(subdocs[0::2], subdocs[1::2]):
                docs.setdefault(sname, dict(zip(sdoc[0::2], sdoc[1::2])).get("group", ""))
    return list(info.values()), docs


def generate(rs):
    info, docs = merged_info(rs)
    version = ", ".join(server_name(r) for r in rs)
    known = {c[0] for c in info} | {sc[0] for c in info for sc in (c[9] or [])}
    for name in NEWER:
        if name in known:
            sys.exit("gen_command_table: %s is in the server's COMMAND INFO now: drop it from NEWER" % name)
    for name in CLASSES:
        if name not in known and name not in NEWER:
            sys.exit("gen_command_table: CLASSES names %s, which is no command" % name)

    specs, subtabs, rows = [], [], []

    def row(e, group, subs_ref, nsubs, kind, cls):
        name, arity, fl, first, last, step, proc, specs_ref, nspecs = e
        return ("    {%s, %s, %d, %s, %d, %d, %d, CMD_KEYPROC_%s, %d, %s, %d, %s, %s, %s},"
                % (c_str(name), c_str(group), arity, " | ".join(fl) or "0", first, last, step, proc, nspecs,
                   specs_ref, nsubs, subs_ref, kind, cls_expr(cls)))

    entries = [(c[0], c) for c in info] + [(n, None) for n in NEWER]
    entries.sort(key=lambda e: e[0])
    first_mask, last_mask = [0] * CLASS_LEN_MAX, [0] * CLASS_LEN_MAX
    for name, c in entries:
        kind, cls = classify(name)
        if c is None:
            cls = cls + ["NEWER"]
            rows.append(row((name, 0, [], 0, 0, 0, "NONE", "NULL", 0), NEWER[name], "NULL", 0, kind, cls))
        else:
            ident = name.replace("-", "_")
            e = command_entry(c, specs, ident)
            subs_ref, nsubs = "NULL", 0
            if c[9]:
                subrows = []
                for sc in sorted(c[9], key=lambda s: s[0]):
                    sident = sc[0].replace("|", "_").replace("-", "_")
                    skind, scls = classify(sc[0])
                    if skind != "CMD_PLAIN":
                        sys.exit("gen_command_table: %s: a kind is a command's, not a subcommand's" % sc[0])
                    if scls and "SUBS" not in cls:
                        cls = cls + ["SUBS"]
                    subrows.append(row(command_entry(sc, specs, sident), docs.get(sc[0], ""), "NULL", 0,
                                       skind, scls))
                subtabs.append("static const cmd_info subs_%s[] = {\n%s\n};" % (ident, "\n".join(subrows)))
                subs_ref, nsubs = "subs_" + ident, len(c[9])
            rows.append(row(e, docs.get(name, ""), subs_ref, nsubs, kind, cls))
        if (kind != "CMD_PLAIN" or set(cls) - {"NEWER"}) and len(name) < CLASS_LEN_MAX:
            first_mask[len(name)] |= class_bit(name[0])
            last_mask[len(name)] |= class_bit(name[-1])

    slots = [-1] * SLOTS
    for i, (name, _) in enumerate(entries):
        s = fnv1a(name) & (SLOTS - 1)
        while slots[s] >= 0:
            s = (s + 1) & (SLOTS - 1)
        slots[s] = i

    def numbers(vals, per_line, fmt):
        lines = []
        for i in range(0, len(vals), per_line):
            lines.append("    " + ", ".join(fmt % v for v in vals[i:i + per_line]) + ",")
        return "\n".join(lines)

    out = []
    out.append("/* command_table.c - GENERATED by scripts/gen_command_table.py from the\n"
               " * COMMAND INFO and COMMAND DOCS of %s (newest first:\n"
               " * each command and subcommand from the first that has it), and the proxy's own\n"
               " * classification (CLASSES and NEWER there): do not edit. Regenerate with\n"
               " *     python3 scripts/gen_command_table.py > proxy/cmd/command_table.c\n"
               " * ctest's unit/command_table_matches_redis fails when this file and those\n"
               " * servers disagree; unit/command_table_covers_redis when a command of the\n"
               " * server under test is missing. Each command's group, arity, flags, tips,\n"
               " * legacy first/last/step, key specs, kind and classes, sorted by name; a\n"
               " * container's subcommands (\"object|encoding\") in a table of their own. Read\n"
               " * through proxy/cmd/command_table.h. */" % version)
    out.append('#include "proxy/cmd/command_table.h"\n\n#include <stddef.h>\n')
    out.append("\n\n".join(specs))
    out.append("")
    out.append("\n\n".join(subtabs))
    out.append("")
    out.append("const cmd_info cmd_table[] = {\n%s\n};\n" % "\n".join(rows))
    out.append("const int cmd_table_len = (int)(sizeof(cmd_table) / sizeof(cmd_table[0]));")
    out.append('const char cmd_table_servers[] = "%s";\n' % version)
    out.append("_Static_assert(CMD_TABLE_SLOTS == %d && CMD_CLASS_LEN_MAX == %d, \"regenerate the table\");\n"
               % (SLOTS, CLASS_LEN_MAX))
    out.append("/* FNV-1a of the name -> its index, open addressing, -1: empty. */")
    out.append("const short cmd_table_slots[CMD_TABLE_SLOTS] = {\n%s\n};\n" % numbers(slots, 16, "%d"))
    out.append("/* By name length: the first and the last letters (CMD_CLASS_BIT) of the\n"
               " * names with a kind or a class. */")
    out.append("const uint32_t cmd_table_class_first[CMD_CLASS_LEN_MAX] = {\n%s\n};"
               % numbers(first_mask, 4, "0x%08x"))
    out.append("const uint32_t cmd_table_class_last[CMD_CLASS_LEN_MAX] = {\n%s\n};"
               % numbers(last_mask, 4, "0x%08x"))
    return "\n".join(out) + "\n"

# In Redis 6.2's COMMAND, not a command the table needs: an HTTP request's
# first word, which Redis (7.0 and later before parsing) and the proxy answer
# by closing the connection (securityWarningCommand).
NOT_COMMANDS = {"host:", "post"}


def table_names(path):
    """The commands and subcommands of a generated table, and which of them
    it knows by name only (NEWER)."""
    names, by_name = set(), set()
    with open(path) as f:
        for line in f:
            m = re.match(r'\s+\{"([^"]+)", "[^"]*", -?\d+, .*\},$', line)
            if m:
                names.add(m.group(1))
                if "CMD_P_NEWER" in line:
                    by_name.add(m.group(1))
    return names, by_name


def covers(path, binary):
    """Does the table know every command and subcommand of this server
    (any supported one, 6.2's COMMAND without subcommands too)? 0, or 1
    naming what is missing."""
    names, by_name = table_names(path)
    proc, tmp, r = start_server(binary)
    try:
        what = server_name(r)
        theirs = set()
        for c in r.cmd("COMMAND"):
            theirs.add(c[0])
            theirs.update(sc[0] for sc in (c[9] if len(c) > 9 and c[9] else []))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    missing = sorted(theirs - names - NOT_COMMANDS)
    if missing:
        print("gen_command_table: %s has commands %s does not know: %s; add that server to the table's"
              " (table_servers)" % (what, path, " ".join(missing)))
        return 1
    only = sorted(theirs & by_name)
    print("gen_command_table: %s knows all %d commands and subcommands of %s%s" %
          (path, len(theirs), what, " (by name only: %s)" % " ".join(only) if only else ""))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", help="an already running redis-server's unix socket (the only server)")
    ap.add_argument("--check", metavar="FILE", help="compare FILE with what the servers say; exit 1 on a difference")
    ap.add_argument("--covers", metavar="FILE",
                    help="check that FILE knows every command of VP_TEST_REDIS_SERVER (else Debian's)")
    args = ap.parse_args()
    if args.covers:
        return covers(args.covers, os.environ.get("VP_TEST_REDIS_SERVER") or DEBIAN_SERVER)
    started, rs = [], []
    try:
        if args.socket:
            s = socket.socket(socket.AF_UNIX)
            s.connect(args.socket)
            rs.append(Resp(s))
        else:
            for binary in table_servers():
                proc, tmp, r = start_server(binary)
                started.append((proc, tmp))
                rs.append(r)
        text = generate(rs)
    finally:
        for proc, tmp in started:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            shutil.rmtree(tmp, ignore_errors=True)
    if not args.check:
        sys.stdout.write(text)
        return 0
    with open(args.check) as f:
        have = f.read()
    if have == text:
        print("gen_command_table: %s agrees with the servers" % args.check)
        return 0
    sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), text.splitlines(True),
                                               args.check, "the servers' COMMAND INFO"))
    print("gen_command_table: %s disagrees with the servers (diff above); regenerate it" % args.check)
    return 1


if __name__ == "__main__":
    sys.exit(main())
