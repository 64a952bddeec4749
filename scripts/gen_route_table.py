#!/usr/bin/env python3
"""gen_route_table.py - proxy/route/route_table.c from a real redis-server's COMMAND INFO.

The routing layer (proxy/route/route_keys.c) needs, for every Redis command, where
its keys are and how it may be routed: Redis 7.0's key specs (begin_search,
find_keys, key flags), its legacy first/last/step, its command flags (write,
readonly, blocking, pubsub, admin, ...) and its request/response policy tips
(the fan-out commands). Redis itself publishes exactly that in COMMAND INFO,
so the table is generated from a running server instead of being typed in.

    python3 scripts/gen_route_table.py > proxy/route/route_table.c      # regenerate
    python3 scripts/gen_route_table.py --check proxy/route/route_table.c # the test

Without --socket it starts its own redis-server (REDIS_SERVER, default
/usr/bin/redis-server) on a unix socket in a temp dir, so the check runs on
any machine that has the server the table was made from (Debian's 7.0.15).
--check exits 1 with a unified diff when the checked-in table and the
server disagree (ctest: unit/route_table_matches_redis).

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

CMD_FLAGS = ["write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript", "blocking",
             "loading", "stale", "skip_monitor", "skip_slowlog", "asking", "fast", "no_auth",
             "may_replicate", "no_mandatory_keys", "no_multi", "movablekeys", "allow_busy",
             "no_async_loading"]
TIPS = {
    "nondeterministic_output": "RKEYS_TIP_NONDETERMINISTIC",
    "nondeterministic_output_order": "RKEYS_TIP_NONDETERMINISTIC_ORDER",
    "request_policy:all_nodes": "RKEYS_REQ_ALL_NODES",
    "request_policy:all_shards": "RKEYS_REQ_ALL_SHARDS",
    "request_policy:multi_shard": "RKEYS_REQ_MULTI_SHARD",
    "request_policy:special": "RKEYS_REQ_SPECIAL",
    "response_policy:one_succeeded": "RKEYS_RESP_ONE_SUCCEEDED",
    "response_policy:all_succeeded": "RKEYS_RESP_ALL_SUCCEEDED",
    "response_policy:agg_logical_and": "RKEYS_RESP_AGG_LOGICAL_AND",
    "response_policy:agg_logical_or": "RKEYS_RESP_AGG_LOGICAL_OR",
    "response_policy:agg_min": "RKEYS_RESP_AGG_MIN",
    "response_policy:agg_max": "RKEYS_RESP_AGG_MAX",
    "response_policy:agg_sum": "RKEYS_RESP_AGG_SUM",
    "response_policy:special": "RKEYS_RESP_SPECIAL",
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


def start_server():
    binary = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
    tmp = tempfile.mkdtemp(prefix="vp-gen-route-")
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
                sys.exit("gen_route_table: %s did not start" % binary)
            time.sleep(0.02)


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spec_line(sp, cname):
    d = dict(zip(sp[0::2], sp[1::2]))
    flags = []
    for f in d["flags"]:
        if f not in KEY_FLAGS:
            sys.exit("gen_route_table: %s: unknown key flag %s" % (cname, f))
        flags.append("RKEYS_KEY_" + f.upper())
    bs_type, bs = d["begin_search"][1], dict(zip(d["begin_search"][3][0::2], d["begin_search"][3][1::2]))
    fk_type, fk = d["find_keys"][1], dict(zip(d["find_keys"][3][0::2], d["find_keys"][3][1::2]))
    if bs_type == "index":
        bsv = "RKEYS_BS_INDEX, %d, NULL" % bs["index"]
    elif bs_type == "keyword":
        bsv = "RKEYS_BS_KEYWORD, %d, %s" % (bs["startfrom"], c_str(bs["keyword"]))
    else:
        bsv = "RKEYS_BS_UNKNOWN, 0, NULL"
    if fk_type == "range":
        fkv = "RKEYS_FK_RANGE, {%d, %d, %d}" % (fk["lastkey"], fk["keystep"], fk["limit"])
    elif fk_type == "keynum":
        fkv = "RKEYS_FK_KEYNUM, {%d, %d, %d}" % (fk["keynumidx"], fk["firstkey"], fk["keystep"])
    else:
        fkv = "RKEYS_FK_UNKNOWN, {0, 0, 0}"
    needs_proc = bs_type == "unknown" or fk_type == "unknown" or fk_type == "keynum" or \
        "incomplete" in d["flags"] or "variable_flags" in d["flags"]
    return "{%s, %s, %s}" % (" | ".join(flags) or "0", bsv, fkv), needs_proc


def command_entry(c, out_specs, ident):
    name, arity, flags, first, last, step, _acl, tips, specs, subs = c[:10]
    fl = []
    for f in flags:
        if f not in CMD_FLAGS:
            sys.exit("gen_route_table: %s: unknown command flag %s" % (name, f))
        fl.append("RKEYS_CMD_" + f.upper())
    for t in tips:
        if t not in TIPS:
            sys.exit("gen_route_table: %s: unknown tip %s" % (name, t))
        fl.append(TIPS[t])
    specs_ref, needs_proc = "NULL", False
    if specs:
        lines = []
        for sp in specs:
            line, np = spec_line(sp, name)
            lines.append(line)
            needs_proc = needs_proc or np
        out_specs.append("static const rkeys_spec specs_%s[] = {\n    %s,\n};" % (ident, ",\n    ".join(lines)))
        specs_ref = "specs_" + ident
    if "movablekeys" in flags:
        needs_proc = True
    proc = PROCS.get(name)
    if needs_proc and proc is None:
        sys.exit("gen_route_table: %s needs a key-finding procedure (route_keys.c) and PROCS names none" % name)
    return name, arity, fl, first, last, step, proc or "NONE", specs_ref, len(specs)


def generate(r):
    info = r.cmd("COMMAND", "INFO")
    version = ""
    for line in r.cmd("INFO", "server").split("\r\n"):
        if line.startswith("redis_version:"):
            version = line.split(":", 1)[1]
    info.sort(key=lambda c: c[0])
    specs, subtabs, rows = [], [], []

    def row(e, subs_ref, nsubs):
        name, arity, fl, first, last, step, proc, specs_ref, nspecs = e
        return ("    {%s, %d, %s, %d, %d, %d, RKEYS_PROC_%s, %d, %s, %d, %s},"
                % (c_str(name), arity, " | ".join(fl) or "0", first, last, step, proc, nspecs,
                   specs_ref, nsubs, subs_ref))

    for c in info:
        ident = c[0].replace("-", "_")
        e = command_entry(c, specs, ident)
        subs_ref, nsubs = "NULL", 0
        if c[9]:
            subrows = []
            for sc in sorted(c[9], key=lambda s: s[0]):
                sident = sc[0].replace("|", "_").replace("-", "_")
                subrows.append(row(command_entry(sc, specs, sident), "NULL", 0))
            subtabs.append("static const rkeys_cmd subs_%s[] = {\n%s\n};" % (ident, "\n".join(subrows)))
            subs_ref, nsubs = "subs_" + ident, len(c[9])
        rows.append(row(e, subs_ref, nsubs))

    out = []
    out.append("/* route_table.c - GENERATED by scripts/gen_route_table.py from redis-server %s's\n"
               " * COMMAND INFO: do not edit. Regenerate with\n"
               " *     python3 scripts/gen_route_table.py > proxy/route/route_table.c\n"
               " * ctest's unit/route_table_matches_redis fails when this file and the server\n"
               " * disagree. Each command's key specs, legacy first/last/step, flags and\n"
               " * tips, sorted by name; a container's subcommands (\"object|encoding\") in a\n"
               " * table of its own. Read by proxy/route/route_keys.c. */" % version)
    out.append('#include "proxy/route/route_keys.h"\n\n#include <stddef.h>\n')
    out.append("\n\n".join(specs))
    out.append("")
    out.append("\n\n".join(subtabs))
    out.append("")
    out.append("const rkeys_cmd rkeys_table[] = {\n%s\n};\n" % "\n".join(rows))
    out.append("const int rkeys_table_len = (int)(sizeof(rkeys_table) / sizeof(rkeys_table[0]));")
    out.append('const char rkeys_table_redis_version[] = "%s";' % version)
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", help="an already running redis-server's unix socket")
    ap.add_argument("--check", metavar="FILE", help="compare FILE with what the server says; exit 1 on a difference")
    args = ap.parse_args()
    proc = tmp = None
    if args.socket:
        s = socket.socket(socket.AF_UNIX)
        s.connect(args.socket)
        r = Resp(s)
    else:
        proc, tmp, r = start_server()
    try:
        text = generate(r)
    finally:
        if proc:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            shutil.rmtree(tmp, ignore_errors=True)
    if not args.check:
        sys.stdout.write(text)
        return 0
    with open(args.check) as f:
        have = f.read()
    if have == text:
        print("gen_route_table: %s agrees with the server" % args.check)
        return 0
    sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), text.splitlines(True),
                                               args.check, "redis-server COMMAND INFO"))
    print("gen_route_table: %s disagrees with the server (diff above); regenerate it" % args.check)
    return 1


if __name__ == "__main__":
    sys.exit(main())
