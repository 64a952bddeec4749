#!/usr/bin/python3
"""scripts/check_doc_links.py - every local link in the docs resolves.

Usage: check_doc_links.py [ROOT]        (default: the repository this script is in)
       check_doc_links.py --self-test   (only the self-test)

Over every Markdown file of the tree (git's tracked and not-ignored files
when git is there, else a walk that skips build*, hidden and node_modules
directories): each relative link target, `[text](path)`, `[text](path#anchor)`,
`[text](#anchor)`, `[label]: path` and `<a href="path">`, must exist, and each
#anchor must be a heading (or an `id=`/`name=` attribute) of the target
Markdown file, by GitHub's rules: the heading's text as rendered (no
backticks, emphasis or link syntax), lower case, every character that is not
a letter, a digit, a space, '-' or '_' dropped, spaces made '-'; the second
heading with the same slug gets '-1', the third '-2', ... Links in fenced
code blocks and in inline code are not links. Absolute URLs (http:, https:,
mailto:, ...) are not checked.

Every run first runs a self-test (a temporary tree with a good file, a broken
link and a broken anchor: the good one must pass, each broken one must fail),
so a checker that finds nothing cannot pass. Exit 0 when all is well, 1 with
one line per broken link otherwise.
"""
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^\s{0,3}(```+|~~~+)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HREF = re.compile(r"""<a\s[^>]*href\s*=\s*["']([^"']+)["']""", re.I)
HTML_ID = re.compile(r"""<[a-z][^>]*\s(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def lines_outside_code(text):
    """(line number, line) of the lines not in a fenced code block."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if line.startswith("    ") or line.startswith("\t"):
            continue  # an indented code block (or a continuation: no links there in our docs)
        yield n, line


def heading_text(raw):
    """A heading's text as GitHub renders it (what its slug is made from)."""
    t = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", t)  # links and images: their text
    t = re.sub(r"<[^>]+>", "", t)  # inline HTML tags
    t = t.replace("*", "").replace("~~", "")  # emphasis (an '_' is kept: the slug keeps it too)
    return t


def slug(text):
    text = heading_text(text).strip().lower()
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def anchors_of(text):
    seen = {}
    anchors = set()
    prev = None
    for _, line in lines_outside_code(text):
        for m in HTML_ID.finditer(line):
            anchors.add(m.group(1))
        m = HEADING.match(line)
        title = None
        if m:
            title = m.group(2)
        elif prev is not None and prev.strip() and SETEXT.match(line) and not HEADING.match(prev):
            title = prev.strip()
        prev = line
        if title is None:
            continue
        s = slug(title)
        n = seen.get(s, 0)
        seen[s] = n + 1
        anchors.add(s if n == 0 else "%s-%d" % (s, n))
    return anchors


def links_of(text):
    for n, line in lines_outside_code(text):
        bare = CODE_SPAN.sub("", line)
        for m in INLINE_LINK.finditer(bare):
            yield n, m.group(1)
        m = REF_DEF.match(bare)
        if m:
            yield n, m.group(1)
        for m in HREF.finditer(bare):
            yield n, m.group(1)


def markdown_files(root):
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
            check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))]
        if files:
            return sorted(set(files))
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not (x.startswith(".") or x.startswith("build") or x == "node_modules")]
        for name in names:
            if name.endswith(".md"):
                files.append(os.path.relpath(os.path.join(d, name), root))
    return sorted(files)


def check(root, files=None):
    """The broken links of the tree at root: a list of 'file:line: why'."""
    root = os.path.abspath(root)
    files = markdown_files(root) if files is None else files
    anchor_cache = {}
    bad = []

    def anchors(path):
        if path not in anchor_cache:
            with open(path, encoding="utf-8") as f:
                anchor_cache[path] = anchors_of(f.read())
        return anchor_cache[path]

    for rel in files:
        src = os.path.join(root, rel)
        with open(src, encoding="utf-8") as f:
            text = f.read()
        for n, target in links_of(text):
            if not target or SCHEME.match(target) or target.startswith("//"):
                continue
            path, _, anchor = target.partition("#")
            path = re.sub(r"%20", " ", path.split("?", 1)[0])
            if path.startswith("/"):
                dest = os.path.normpath(os.path.join(root, path.lstrip("/")))
            elif path:
                dest = os.path.normpath(os.path.join(os.path.dirname(src), path))
            else:
                dest = src
            where = "%s:%d: %s" % (rel, n, target)
            if not os.path.exists(dest):
                drel = os.path.relpath(dest, root)
                bad.append("%s: no such file %s" % (where, drel))
                continue
            if anchor and dest.endswith(".md") and os.path.isfile(dest):
                if anchor not in anchors(dest):
                    bad.append("%s: no heading #%s in %s" % (where, anchor, os.path.relpath(dest, root)))
    return bad


def self_test():
    """The checker must pass a good tree and fail each broken one."""
    good = {
        "README.md": "# Top\n\nSee [the guide](docs/guide.md#what-we-chose-the-short-story), "
                     "[again](docs/guide.md#setup-1), [here](#top), [a dir](docs/), "
                     "[web](https://example.com/x#y) and [ref][r].\n\n[r]: docs/guide.md#setup\n"
                     "```\n[not a link](nowhere.md)\n```\nand `[code](nowhere.md)`.\n",
        "docs/guide.md": "# Guide\n\n## What we chose: the *short* story\n\n## Setup\n\n## Setup\n\n"
                         "## `verb` lines, and 'quotes'\n\nBack to [top](../README.md#top), "
                         "[verbs](#verb-lines-and-quotes).\n",
    }
    broken = {
        "a broken link": ("docs/guide.md", "See [gone](missing.md).\n"),
        "a broken anchor": ("docs/guide.md", "See [gone](../README.md#no-such-heading).\n"),
        "a third heading's anchor": ("README.md", "[x](docs/guide.md#setup-2)\n"),
    }

    def run(tree):
        with tempfile.TemporaryDirectory() as d:
            for rel, body in tree.items():
                os.makedirs(os.path.dirname(os.path.join(d, rel)) or d, exist_ok=True)
                with open(os.path.join(d, rel), "w", encoding="utf-8") as f:
                    f.write(body)
            return check(d, files=sorted(tree))

    failures = []
    found = run(good)
    if found:
        failures.append("a good tree was refused: %s" % found)
    for what, (rel, extra) in broken.items():
        tree = dict(good)
        tree[rel] = tree[rel] + extra
        if not run(tree):
            failures.append("%s passed" % what)
    return failures


def main(argv):
    failures = self_test()
    if failures:
        for f in failures:
            print("check_doc_links.py self-test: " + f)
        return 1
    if argv[1:] == ["--self-test"]:
        print("check_doc_links.py: self-test passed")
        return 0
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files = markdown_files(os.path.abspath(root))
    if "README.md" not in files:
        print("check_doc_links.py: no README.md under %s (%d Markdown files): wrong root?" % (os.path.abspath(root), len(files)))
        return 1
    bad = check(root, files=files)
    for b in bad:
        print(b)
    if bad:
        print("%d broken link(s) in %d Markdown file(s)" % (len(bad), len(files)))
        return 1
    print("every local link resolves (%d Markdown files; the self-test passed)" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
