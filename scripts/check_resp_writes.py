#!/usr/bin/env python3
"""check_resp_writes.py - nothing outside protocol/ writes a RESP header by hand.

Every reply, command and merged reply the proxy composes goes through the one
RESP writer, protocol/resp_write.h (issue 23). This check keeps it so: it
fails when a C file outside protocol/ and tests/ holds a string literal that
writes a RESP count or length header itself.

    python3 scripts/check_resp_writes.py [ROOT]   # ctest: unit/resp_writes_only_in_protocol

The rule, applied to every string literal (adjacent literals joined first,
comments ignored), at its start and after each CRLF in it:
  - a printf format that writes a header: "*%", "$%", ":%", "~%", ">%", "=%",
    and "%%%" (a RESP3 map "%<n>" through printf);
  - a literal header with its count or length typed in: "*3\\r\\n",
    "$5\\r\\n", "%4\\r\\n", "~2\\r\\n", ">3\\r\\n", "=12\\r\\n" (and "*-1\\r\\n").
    Constant whole replies without a count stay literals, as in Redis
    ("+OK\\r\\n", ":1\\r\\n", an error's exact text); a constant command or
    reply with a count is written with RESP_LIT_ARRAY / RESP_LIT_BULK.
A literal passed straight to a comparison (memcmp, memmem, strncmp, strstr)
reads a reply rather than writing one, and is not a write.

It also checks the writer's compile-time literals, which the preprocessor
cannot count: every RESP_LIT_BULK(n, "text") has n == the text's length
(tests/ included), and a RESP_LIT_ARRAY(n) followed only by bulks has n of
them.

Before the tree it runs its self-test (SELF_TEST below: writes it must find
and reads it must leave alone), and it fails if it scanned too few files, so
it cannot pass by looking at nothing.
"""
import os
import re
import sys

# Folders not scanned for hand-written headers: the writer itself, the tests
# (they build RESP byte by byte on purpose), and build trees.
SKIP_DIRS = ("protocol", "tests", ".git")

# (path, text in the literal, reason): literals the rule would flag that are
# not the proxy composing RESP. Keep it short; each entry says why. An entry
# that matches nothing any more fails the check (delete it).
ALLOW = []

# Calls whose literal arguments read bytes rather than write them.
READERS = {"memcmp", "memmem", "strncmp", "strstr", "strncasecmp", "bytes_are"}

HEADER_TYPES = "*$%~>="
FORMAT_AT = re.compile(r"[*$:~>=]%|%%%")
LITERAL_AT = re.compile(r"[" + re.escape(HEADER_TYPES) + r"]-?\d+\r\n")

MIN_FILES = 20  # the proxy has far more: fewer means the root is wrong


def strip_comments(src):
    """The source with comments blanked (newlines kept), literals intact."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "/" and i + 1 < n and src[i + 1] == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and i + 1 < n and src[i + 1] == "*":
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i : j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


ESCAPES = {"r": "\r", "n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def decode(body):
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            out.append(ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
JOINED = re.compile(r'"(?:[^"\\\n]|\\.)*"(?:\s*"(?:[^"\\\n]|\\.)*")*')


def literals(code):
    """(offset, decoded text) of every string literal, adjacent ones joined."""
    for m in JOINED.finditer(code):
        if m.start() > 0 and code[m.start() - 1] == "'":
            continue  # the '"' character
        yield m.start(), "".join(decode(s) for s in STRING.findall(m.group(0)))


def enclosing_call(code, pos):
    """Name of the call whose argument list holds pos, or ''."""
    depth = 0
    i = pos - 1
    while i >= 0:
        c = code[i]
        if c == ")":
            depth += 1
        elif c == "(":
            if depth == 0:
                m = re.search(r"([A-Za-z_]\w*)\s*$", code[:i])
                return m.group(1) if m else ""
            depth -= 1
        elif c in ";{}" and depth == 0:
            return ""
        i -= 1
    return ""


def header_writes(text):
    """The header-writing pieces of a literal's text (empty: none)."""
    found = []
    starts = [0] + [m.end() for m in re.finditer(r"\r\n", text)]
    for s in starts:
        for rx in (FORMAT_AT, LITERAL_AT):
            m = rx.match(text, s)
            if m:
                found.append(text[s : m.end()])
    return found


def check_hand_written(path, code, allow, used):
    problems = []
    for pos, text in literals(code):
        if code[:pos].rstrip().endswith("#include"):
            continue
        pieces = header_writes(text)
        if not pieces or enclosing_call(code, pos) in READERS:
            continue
        hit = [e for e in allow if path == e[0] and e[1] in text]
        if hit:
            used.update(hit)
            continue
        line = code.count("\n", 0, pos) + 1
        problems.append(
            "%s:%d: RESP header written by hand (%s): use protocol/resp_write.h"
            % (path, line, ", ".join(repr(p) for p in pieces))
        )
    return problems


LIT_BULK = re.compile(r"RESP_LIT_BULK\(\s*(\d+)\s*,\s*((?:\"(?:[^\"\\\n]|\\.)*\"\s*)+|[A-Za-z_]\w*)\s*\)")
LIT_ARRAY_OF_BULKS = re.compile(r"RESP_LIT_ARRAY\(\s*(\d+)\s*\)((?:\s*RESP_LIT_BULK\([^()]*\))+)\s*[;,)]")


def check_literals(path, code, defines):
    problems = []
    for m in LIT_BULK.finditer(code):
        arg = m.group(2).strip()
        if arg.startswith('"'):
            text = "".join(decode(s) for s in STRING.findall(arg))
        elif arg in defines:
            text = defines[arg]
        elif arg == "s" and "#define RESP_LIT_BULK" in code[max(0, m.start() - 40) : m.start()]:
            continue  # the macro's own definition
        else:
            problems.append("%s:%d: RESP_LIT_BULK of %s: no string macro of that name found"
                            % (path, code.count("\n", 0, m.start()) + 1, arg))
            continue
        if int(m.group(1)) != len(text.encode("latin-1")):
            problems.append("%s:%d: RESP_LIT_BULK(%s, %r): the text is %d bytes"
                            % (path, code.count("\n", 0, m.start()) + 1, m.group(1), text, len(text)))
    for m in LIT_ARRAY_OF_BULKS.finditer(code):
        nbulks = m.group(2).count("RESP_LIT_BULK(")
        if int(m.group(1)) != nbulks:
            problems.append("%s:%d: RESP_LIT_ARRAY(%s) followed by %d bulks"
                            % (path, code.count("\n", 0, m.start()) + 1, m.group(1), nbulks))
    return problems


DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+((?:\"(?:[^\"\\\n]|\\.)*\"\s*)+)$", re.M)


def check_sources(files, allow=()):
    """files: {path: source}; allow: ALLOW's shape. Every problem found, as lines."""
    codes = {p: strip_comments(s) for p, s in files.items()}
    defines = {}
    for code in codes.values():
        for m in DEFINE.finditer(code):
            defines[m.group(1)] = "".join(decode(s) for s in STRING.findall(m.group(2)))
    problems = []
    used = set()
    for path in sorted(codes):
        code = codes[path]
        if not path.startswith(tuple(d + "/" for d in SKIP_DIRS)):
            problems += check_hand_written(path, code, allow, used)
        problems += check_literals(path, code, defines)
    for entry in allow:
        if entry not in used:
            problems.append("allow-list entry matches nothing (delete it): %r" % (entry,))
    return problems


# Each bad sample must be found, each good one must pass.
SELF_TEST_BAD = {
    "fmt_array": 'void f(vp_buf *b, int n) { vp_buf_appendf(b, "*%d\\r\\n", n); }',
    "fmt_bulk": 'int f(char *o, size_t n, const char *s) { return snprintf(o, 64, "$%zu\\r\\n%s\\r\\n", n, s); }',
    "fmt_integer": 'void f(vp_buf *b, long long v) { vp_buf_appendf(b, ":%lld\\r\\n", v); }',
    "fmt_map": 'void f(char *o, long long n) { snprintf(o, 32, "%%%lld\\r\\n", n); }',
    "fmt_after_crlf": 'void f(vp_buf *b, int n) { vp_buf_appendf(b, "+OK\\r\\n*%d\\r\\n", n); }',
    "lit_command": 'static const char c[] = "*1\\r\\n$4\\r\\nPING\\r\\n";',
    "lit_split": 'static const char c[] = "*2\\r\\n"\n    "$4\\r\\nPING\\r\\n$1\\r\\nx\\r\\n";',
    "lit_empty_array": 'void f(void) { send("*0\\r\\n", 4); }',
    "lit_map": 'void f(vp_buf *b) { PUT_LIT(b, "%4\\r\\n"); }',
    "lit_nil_array": 'void f(void) { send("*-1\\r\\n", 5); }',
    "bulk_length": 'static const char c[] = RESP_LIT_ARRAY(1) RESP_LIT_BULK(5, "PING");',
    "array_count": 'static const char c[] = RESP_LIT_ARRAY(2) RESP_LIT_BULK(4, "PING");',
    "bulk_of_macro": '#define CHAN "+switch-master"\nstatic const char c[] = RESP_LIT_BULK(13, CHAN);',
}
SELF_TEST_GOOD = {
    "ok_reply": 'void f(void) { send("+OK\\r\\n", 5); }',
    "int_reply": 'void f(void) { send(":1\\r\\n", 4); }',
    "error_text": '#define NOAUTH "-NOAUTH Authentication required.\\r\\n"',
    "address": 'void f(char *o, int p) { snprintf(o, 64, "%s:%d", "h", p); }',
    "info_line": 'void f(vp_buf *b, int d) { vp_buf_appendf(b, "draining:%d\\r\\n", d); }',
    "line_fmt": 'void f(char *o, const char *t) { snprintf(o, 64, "%s\\r\\n", t); }',
    "read_sha": 'int f(const char *p) { return memcmp(p, "$40\\r\\n", 5) == 0; }',
    "read_nested": 'int f(const char *p, size_t n) { return memmem(p, n, "$5\\r\\nflags\\r\\n", 11) != 0; }',
    "comment": '/* "*3\\r\\n$3\\r\\nSET\\r\\n" is what a client sends */',
    "writer_literals": 'static const char c[] = RESP_LIT_ARRAY(2) RESP_LIT_BULK(7, "CLUSTER") RESP_LIT_BULK(5, "SLOTS");',
    "writer_mixed": 'static const char c[] = RESP_LIT_ARRAY(2) RESP_LIT_BULK(1, "0") RESP_LIT_ARRAY(0);',
    "bulk_of_macro_ok": '#define CHAN "+switch-master"\nstatic const char c[] = RESP_LIT_BULK(14, CHAN);',
    "char_quote": "int f(char c) { return c == '\"' || c == '*'; }",
}


def self_test():
    failures = []
    for name, src in SELF_TEST_BAD.items():
        if not check_sources({"proxy/%s.c" % name: src}):
            failures.append("self-test: %s not found: %s" % (name, src))
    for name, src in SELF_TEST_GOOD.items():
        found = check_sources({"proxy/%s.c" % name: src})
        if found:
            failures.append("self-test: %s flagged: %s" % (name, "; ".join(found)))
    # the allow-list lets exactly its entry through, and a stale entry fails
    entry = ("proxy/a.c", "PING", "self-test")
    if check_sources({"proxy/a.c": SELF_TEST_BAD["lit_command"]}, [entry]):
        failures.append("self-test: an allowed literal flagged")
    if not check_sources({"proxy/a.c": SELF_TEST_GOOD["ok_reply"]}, [entry]):
        failures.append("self-test: a stale allow-list entry passed")
    # the writer itself and the tests may write headers by hand
    if check_sources({"protocol/w.c": SELF_TEST_BAD["fmt_array"], "tests/unit/t.c": SELF_TEST_BAD["lit_command"]}):
        failures.append("self-test: protocol/ or tests/ flagged")
    return failures


def tree_sources(root):
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        top = rel.split(os.sep)[0]
        if top.startswith("build") or top == ".git":
            dirnames[:] = []
            continue
        for f in filenames:
            if f.endswith((".c", ".h")):
                path = os.path.normpath(os.path.join(rel, f)).replace(os.sep, "/")
                with open(os.path.join(dirpath, f), encoding="latin-1") as fh:
                    files[path] = fh.read()
    return files


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    failures = self_test()
    if failures:
        print("\n".join(failures))
        return 1
    files = tree_sources(root)
    scanned = [p for p in files if not p.startswith(tuple(d + "/" for d in SKIP_DIRS))]
    if len(scanned) < MIN_FILES:
        print("only %d C files outside protocol/ and tests/ under %s: wrong root?" % (len(scanned), root))
        return 1
    problems = check_sources(files, ALLOW)
    if problems:
        print("\n".join(problems))
        print("%d problem(s): RESP is written by protocol/resp_write.h only" % len(problems))
        return 1
    print("ok: %d C files outside protocol/ and tests/ write no RESP header by hand" % len(scanned))
    return 0


if __name__ == "__main__":
    sys.exit(main())
