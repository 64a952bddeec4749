#!/usr/bin/env python3
"""The text Redis runs for one of lua/'s scripts, as verbproxy's build
makes it (proxy/verbs/script_text.c; `verbproxy --script NAME` prints the
embedded one): each `--#include lib/NAME.lua` line replaced by that
helper's lines but its comment-only ones, then every helper function
("local function NAME(" at a line's start through its line "end") that
nothing else in the text names dropped, to a fixed point.

Usage: assemble_script.py lua/NAME.lua   (the text on standard output)
For the bench scripts (bench/lib.sh's assemble_script), which load the files
of a tree that may not be built."""
import os
import re
import sys

INCLUDE = re.compile(rb"^--#include (lib/[a-z0-9_]+\.lua)$")
HEAD = re.compile(rb"^local function ([A-Za-z0-9_]+)")


def assemble(path):
    out = bytearray()
    spans = []  # [start, end, name]
    with open(path, "rb") as f:
        src = f.read()
    for line in src.splitlines(keepends=True):
        m = INCLUDE.match(line.rstrip(b"\n"))
        if not m:
            out += line
            continue
        with open(os.path.join(os.path.dirname(path), m.group(1).decode()), "rb") as f:
            lib = f.read()
        open_span = None
        for lib_line in lib.splitlines(keepends=True):
            body = lib_line.rstrip(b"\n")
            if body.lstrip(b" \t").startswith(b"--"):
                continue
            body = body[:-1] if body.endswith(b"\r") else body
            if open_span is not None:
                if body == b"end":
                    open_span[1] = len(out) + len(lib_line)
                    spans.append(open_span)
                    open_span = None
                    out += lib_line
                    continue
                if body == b"" or body[:1] in (b" ", b"\t"):
                    out += lib_line
                    continue
                open_span = None  # not in the style: kept
            h = HEAD.match(body)
            if h and not body.endswith(b" end"):  # (one line: kept)
                open_span = [len(out), 0, h.group(1)]
            out += lib_line
    text = bytes(out)
    dead = set()

    def named(i):
        start, end, name = spans[i]
        for m in re.finditer(rb"(?<![A-Za-z0-9_])" + re.escape(name) + rb"(?![A-Za-z0-9_])", text):
            at = m.start()
            if start <= at < end:
                continue
            if any(spans[j][0] <= at < spans[j][1] for j in dead):
                continue
            return True
        return False

    changed = True
    while changed:
        changed = False
        for i in range(len(spans)):
            if i not in dead and not named(i):
                dead.add(i)
                changed = True
    keep = bytearray()
    pos = 0
    for start, end, _ in sorted(spans[i] for i in dead):
        keep += text[pos:start]
        pos = end
    keep += text[pos:]
    return bytes(keep)


if __name__ == "__main__":
    sys.stdout.buffer.write(assemble(sys.argv[1]))
