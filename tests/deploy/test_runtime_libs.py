#!/usr/bin/python3
"""tests/deploy/test_runtime_libs.py BINARY - the Dockerfile's runtime stage
installs every shared library the binary needs. No Docker engine here, so:

1. `ldd BINARY`: every resolved library path;
2. `dpkg -S` of each (tried as given, resolved, and with and without the
   /usr prefix: Debian 12 is merged-/usr, dpkg knows one spelling) gives the
   Debian package that ships it, e.g. libuv1, libssl3, libhttp-parser2.9:
   those are the runtime packages themselves (a library's -dev package only
   ships the unversioned .so symlink the linker used);
3. each must be in the runtime stage's `apt-get install` list, or in
   ASSUMED_PRESENT: the packages debian:12-slim already has. That set is
   checked, not trusted: each must be a dependency (Depends/Pre-Depends) of
   an installed package that is Essential or of Priority required here,
   which is what a minbase image such as debian:12-slim is made of (apt,
   Priority required, depends on all three);
4. the other way round: every lib* package installed there must be needed
   (no stale library left behind when a dependency goes).

It then proves it can fail: the same check on the Dockerfile with one needed
package taken out of its install list must complain.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# In debian:12-slim already (apt needs them); checked in assumed_ok().
ASSUMED_PRESENT = {"libc6", "libgcc-s1", "libstdc++6"}


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def ldd_paths(binary):
    out = run("ldd", binary)
    if out.returncode != 0:
        sys.exit("ldd %s failed: %s" % (binary, out.stderr))
    paths = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if "not found" in line:
            sys.exit("ldd: unresolved library: " + line)
        m = re.match(r"\S+ => (/\S+) \(", line) or re.match(r"(/\S+) \(", line)
        if m:
            paths.append(m.group(1))
        elif not line.startswith("linux-vdso") and not line.startswith("linux-gate"):
            sys.exit("ldd: cannot read the line %r" % line)
    return paths


def package_of(path):
    tries = [path, os.path.realpath(path)]
    for p in list(tries):
        tries.append(p[4:] if p.startswith("/usr/") else "/usr" + p)
    for p in tries:
        out = run("dpkg", "-S", p)
        if out.returncode == 0:
            # "libssl3:amd64: /usr/lib/x86_64-linux-gnu/libssl.so.3"
            return out.stdout.split(":", 1)[0].split(",")[0].strip()
    sys.exit("no Debian package ships %s (tried %s)" % (path, tries))


def runtime_installs(dockerfile):
    """The packages of every `apt-get install` in the last stage."""
    text = re.sub(r"\\\n", " ", dockerfile)
    stages = re.split(r"(?im)^FROM\s", text)
    pkgs = set()
    for cmd in re.findall(r"apt-get install([^&;\n]*)", stages[-1]):
        pkgs |= {w for w in cmd.split() if not w.startswith("-")}
    return pkgs


def assumed_ok():
    """Every ASSUMED_PRESENT package is a dependency of an Essential or
    Priority-required package installed here."""
    out = run("dpkg-query", "-W", "-f=${Package}\t${Essential}\t${Priority}\t${Pre-Depends}, ${Depends}\n")
    base_deps = set()
    for line in out.stdout.splitlines():
        name, essential, prio, deps = (line.split("\t") + ["", "", ""])[:4]
        if essential == "yes" or prio == "required":
            base_deps |= {re.split(r"[\s(:]", d.strip())[0] for d in re.split(r"[,|]", deps) if d.strip()}
    return ASSUMED_PRESENT - base_deps


def check(needed, installed):
    problems = []
    for pkg, paths in sorted(needed.items()):
        if pkg not in installed and pkg not in ASSUMED_PRESENT:
            problems.append("%s (for %s) is not installed by the runtime stage" % (pkg, ", ".join(paths)))
    for pkg in sorted(installed):
        if pkg.startswith("lib") and pkg not in needed:
            problems.append("the runtime stage installs %s, which the binary does not need" % pkg)
    return problems


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        dockerfile = f.read()
    needed = {}
    for path in ldd_paths(binary):
        needed.setdefault(package_of(path), []).append(os.path.basename(path))
    installed = runtime_installs(dockerfile)
    print("needed by %s: %s" % (binary, ", ".join("%s (%s)" % (p, " ".join(l)) for p, l in sorted(needed.items()))))
    print("runtime stage installs: %s" % " ".join(sorted(installed)))
    print("assumed in debian:12-slim: %s" % " ".join(sorted(ASSUMED_PRESENT)))
    problems = check(needed, installed)
    unproven = assumed_ok()
    if unproven:
        problems.append("assumed in the slim image but no Essential/required package depends on: %s" % sorted(unproven))
    for p in problems:
        print("PROBLEM: " + p)

    # A check that cannot fail is no check: drop each needed, installed
    # package in turn from the list.
    missed = []
    for pkg in sorted(set(needed) & installed):
        if not check(needed, installed - {pkg}):
            missed.append(pkg)
    if not set(needed) & installed:
        missed.append("(nothing to drop: the binary needs no installed package?)")
    for m in missed:
        print("MUTATION NOT CAUGHT: dropping " + m)
    if problems or missed:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
