#!/usr/bin/env python3
"""check_layers.py - the layering check of verbproxy's C code (ctest: unit/layers).

Two rules over every .c and .h file under proxy/, protocol/ and lua/:

  (a) a file includes only headers of its own layer or of a layer below it;
  (b) no module is in an include cycle.  A module is x.c with its x.h.  A file
      without a partner of its own stem joins the module whose stem is the
      longest prefix of its own in the same folder (upstream_server.c and
      upstream_internal.h are part of the upstream module); otherwise it is a
      module alone (server.h).  Module A depends on module B when a file of A
      includes a header of B; a strongly connected component of more than one
      module is a cycle.

The layer order is read from one place: the table between the markers
`<!-- layers:begin -->` and `<!-- layers:end -->` in docs/architecture.md,
top layer first.  Each row is `| layer | paths |`, paths given as backticked
patterns: `dir/` is a folder and everything under it, anything else is a glob
over one path (`*` stays inside a folder).  Every file must fall in exactly one
layer.

Existing violations are listed in scripts/layers_exceptions.txt, one a line
with a reason:

    include proxy/a/x.c -> proxy/b/y.h : why it is there for now
    cycle proxy/a/x proxy/b/y : why it is there for now

The check fails on a violation that is not listed, and on a listed exception
that no longer occurs, so the list only shrinks.  Before the real tree is
checked, the checker checks tiny fake trees of its own (a clean one must pass,
bad ones must fail), so it cannot silently pass.

Usage: check_layers.py [--root DIR] [--order FILE] [--exceptions FILE]
Only the standard library is used.
"""

import argparse
import os
import posixpath
import re
import sys
import tempfile

SCANNED = ("protocol", "proxy", "lua")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
BEGIN, END = "<!-- layers:begin -->", "<!-- layers:end -->"


class CheckError(Exception):
    """The inputs themselves are wrong (a missing table, a file in no layer)."""


def glob_to_re(pattern):
    if pattern.endswith("/"):
        return re.compile(re.escape(pattern) + ".*")
    out = ""
    for ch in pattern:
        if ch == "*":
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        else:
            out += re.escape(ch)
    return re.compile(out)


def read_order(path):
    """[(layer name, [compiled patterns])], bottom layer first."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise CheckError(f"{path}: no layer table between {BEGIN} and {END}")
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    layers = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.strip().startswith("|"):
            continue
        patterns = re.findall(r"`([^`]+)`", cells[1])
        if not patterns:  # the header row and the |---| row
            continue
        layers.append((cells[0].strip("`* "), [(p, glob_to_re(p)) for p in patterns]))
    if not layers:
        raise CheckError(f"{path}: the layer table has no rows")
    layers.reverse()  # the table lists the top first
    return layers


def layer_of(path, layers):
    """The index of the layer that holds path (0 = bottom), or None."""
    hits = [i for i, (_, pats) in enumerate(layers) for _, rx in pats if rx.fullmatch(path)]
    if len(set(hits)) > 1:
        names = ", ".join(layers[i][0] for i in sorted(set(hits)))
        raise CheckError(f"{path} is in more than one layer: {names}")
    return hits[0] if hits else None


def source_files(root):
    files = []
    for top in SCANNED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/"))
    return sorted(files)


def includes_of(root, path):
    """The quoted includes of path that are ours, as paths from the root: a
    name relative to the file's folder is resolved; the rest (system and
    generated headers) are left out."""
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        names = INCLUDE_RE.findall(f.read())
    ours = []
    for inc in names:
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(path), inc))
        if os.path.exists(os.path.join(root, rel)):
            ours.append(rel)
        elif inc.split("/", 1)[0] in SCANNED:
            ours.append(inc)
    return ours


def module_of(path, stems):
    """x.c and x.h are module dir/x; a file without its partner joins the
    module of the longest stem in its folder that prefixes its own."""
    stem = path.rsplit(".", 1)[0]
    exts = stems.get(stem, set())
    if {".c", ".h"} <= exts:
        return stem
    folder, base = stem.rsplit("/", 1)
    best = None
    for other, oexts in stems.items():
        if other == stem or not other.startswith(folder + "/") or ".h" not in oexts:
            continue
        obase = other.rsplit("/", 1)[1]
        if "/" not in other[len(folder) + 1 :] and base.startswith(obase + "_"):
            if best is None or len(other) > len(best):
                best = other
    return best or stem


def strongly_connected(graph):
    """Tarjan's algorithm, iterative: the components, each a sorted list."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                comps.append(sorted(comp))
    return comps


def analyse(root, layers):
    """(upward includes [(file, header, from layer, to layer)], cycles [[module]],
    pairs of layers that include each other [(lower, higher)])."""
    files = source_files(root)
    stems = {}
    for p in files:
        stem, ext = p.rsplit(".", 1)
        stems.setdefault(stem, set()).add("." + ext)
    upward, graph, layer_edges = [], {}, set()
    for p in files:
        lp = layer_of(p, layers)
        if lp is None:
            raise CheckError(f"{p} is in no layer: add it to the layer table")
        mp = module_of(p, stems)
        graph.setdefault(mp, set())
        for inc in includes_of(root, p):
            li = layer_of(inc, layers)
            if li is None:
                raise CheckError(f"{p} includes {inc}, which is in no layer")
            if li > lp:
                upward.append((p, inc, layers[lp][0], layers[li][0]))
            layer_edges.add((lp, li))
            mi = module_of(inc, stems)
            if mi != mp:
                graph[mp].add(mi)
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    cycles.sort(key=lambda c: (-len(c), c))
    pairs = sorted((layers[a][0], layers[b][0]) for a, b in layer_edges if a < b and (b, a) in layer_edges)
    return upward, cycles, pairs


def read_exceptions(path):
    """({(file, header): reason}, {frozenset(modules): reason})."""
    incs, cycles = {}, {}
    if not os.path.exists(path):
        return incs, cycles
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            body, sep, reason = line.partition(" : ")
            if not sep or not reason.strip():
                raise CheckError(f"{path}:{n}: an exception needs ' : ' and a reason")
            words = body.split()
            if words[0] == "include" and len(words) == 4 and words[2] == "->":
                incs[(words[1], words[3])] = reason.strip()
            elif words[0] == "cycle" and len(words) > 2:
                cycles[frozenset(words[1:])] = reason.strip()
            else:
                raise CheckError(f"{path}:{n}: expected 'include A -> B : reason' or 'cycle M1 M2 ... : reason'")
    return incs, cycles


def check(root, order, exceptions, out=sys.stdout):
    """Print the findings; return the number of problems (0 = pass)."""
    layers = read_order(order)
    upward, cycles, pairs = analyse(root, layers)
    exc_incs, exc_cycles = read_exceptions(exceptions)
    problems = 0
    found = set()
    for f, h, lf, lh in upward:
        found.add((f, h))
        if (f, h) not in exc_incs:
            print(f"UPWARD  {f} ({lf}) includes {h} ({lh})", file=out)
            print(f"        fix it, or list it: include {f} -> {h} : <reason>", file=out)
            problems += 1
    for key in sorted(set(exc_incs) - found):
        print(f"STALE   include {key[0]} -> {key[1]} no longer goes up: remove it from the exceptions", file=out)
        problems += 1
    found_cycles = set()
    for c in cycles:
        key = frozenset(c)
        found_cycles.add(key)
        if key not in exc_cycles:
            print(f"CYCLE   {len(c)} modules include each other: {' '.join(c)}", file=out)
            print(f"        break it, or list it: cycle {' '.join(c)} : <reason>", file=out)
            problems += 1
    for key in sorted(set(exc_cycles) - found_cycles, key=sorted):
        print(f"STALE   cycle {' '.join(sorted(key))} no longer occurs as listed: remove or update it", file=out)
        problems += 1
    sizes = ", ".join(str(len(c)) for c in cycles) or "none"
    print(
        f"layers: {len(layers)}; upward includes: {len(upward)} "
        f"(listed {len(found & set(exc_incs))}); cycles: {len(cycles)} (sizes: {sizes}); "
        f"layers including each other: {len(pairs)}; problems: {problems}",
        file=out,
    )
    return problems


# ---- the checker's own test: fake trees that must pass or fail -------------

SELF_ORDER = f"""# fake
{BEGIN}
| layer | paths |
|-------|-------|
| top   | `top.c` |
| mid   | `proxy/mid/` |
| base  | `protocol/` `proxy/base.*` |
{END}
"""


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def self_test():
    """Returns a list of failures of the checker itself."""
    clean = {
        "protocol/p.h": "",
        "protocol/p.c": '#include "protocol/p.h"\n',
        "proxy/base.h": '#include "protocol/p.h"\n',
        "proxy/base.c": '#include "proxy/base.h"\n',
        "proxy/mid/a.h": '#include "proxy/base.h"\n',
        "proxy/mid/a.c": '#include "proxy/mid/a.h"\n#include "proxy/mid/b.h"\n',
        "proxy/mid/a_part.c": '#include "proxy/mid/a.h"\n',
        "proxy/mid/b.h": "struct a;\n",
        "proxy/mid/b.c": '#include "proxy/mid/b.h"\n#define X "--#include "\n',
    }
    upward = dict(clean)
    upward["protocol/p.c"] += '#include "proxy/mid/b.h"\n'
    cycle = dict(clean)
    cycle["proxy/mid/b.c"] += '#include "proxy/mid/a.h"\n'
    upward_relative = dict(clean)  # "mid/b.h" from proxy/base.c is proxy/mid/b.h
    upward_relative["proxy/base.c"] += '#include "mid/b.h"\n'
    cycle_part = dict(clean)  # a_internal.h belongs to module a: b -> a closes a cycle
    cycle_part["proxy/mid/b.h"] = '#include "proxy/mid/a_internal.h"\n'
    cycle_part["proxy/mid/a_internal.h"] = ""
    cases = [
        # name, tree, exceptions, expected problems (None: any > 0)
        ("clean tree", clean, "", 0),
        ("upward include", upward, "", 1),
        ("upward include by a relative name", upward_relative, "", 1),
        ("upward include listed", upward, "include protocol/p.c -> proxy/mid/b.h : fake\n", 0),
        ("stale include exception", clean, "include protocol/p.c -> proxy/mid/b.h : fake\n", 1),
        ("cycle", cycle, "", 1),
        ("cycle listed", cycle, "cycle proxy/mid/a proxy/mid/b : fake\n", 0),
        ("stale cycle exception", clean, "cycle proxy/mid/a proxy/mid/b : fake\n", 1),
        ("cycle through a module's part", cycle_part, "", 1),
        ("file in no layer", dict(clean, **{"proxy/stray.c": ""}), "", None),
    ]
    failures = []
    for name, tree, exc, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(tmp, tree)
            write_tree(tmp, {"order.md": SELF_ORDER, "exceptions.txt": exc})
            sink = open(os.devnull, "w")
            try:
                got = check(tmp, os.path.join(tmp, "order.md"), os.path.join(tmp, "exceptions.txt"), sink)
            except CheckError:
                got = None
            finally:
                sink.close()
            if got != want:
                failures.append(f"self-test '{name}': {got} problems, expected {want}")
    return failures


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--order", help="default: ROOT/docs/architecture.md")
    ap.add_argument("--exceptions", help="default: ROOT/scripts/layers_exceptions.txt")
    args = ap.parse_args()
    order = args.order or os.path.join(args.root, "docs", "architecture.md")
    exceptions = args.exceptions or os.path.join(args.root, "scripts", "layers_exceptions.txt")

    failures = self_test()
    for f in failures:
        print("CHECKER BROKEN: " + f)
    if failures:
        return 2
    try:
        problems = check(args.root, order, exceptions)
    except CheckError as e:
        print("ERROR   " + str(e))
        return 2
    if problems:
        print("See docs/architecture.md, 'The rule and its check'.")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
