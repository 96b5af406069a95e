#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Report the shape of libnproxy from its object files.

lib-graph.py OBJDIR LIB.so [--prefix npx_] [--map lib/libnproxy.map]
             [--headers include/nproxy] [--skip-cycles]

Prints: the functions the shared library exports, the non-static symbols
of the objects that are neither exported nor carry the internal prefix,
the call cycles between source files (strongly connected components of
the "file A uses a symbol defined in file B" graph), and the calls from
one subsystem (lib/<subsystem>/) into another that the dependency order
(LAYERS below) does not allow.  With --headers, also the functions the
public headers mark NPROXY_API that the map does not list, or the other
way round.  Exits 1 when the map, the headers and the exports disagree,
an internal symbol lacks the prefix, a cycle exists (unless --skip-cycles:
then cycles are reported only) or a call goes against the order, so
`make lint` can use it.
"""
import os
import re
import subprocess
import sys


def nm(path, *args):
    out = subprocess.run(["nm", *args, path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            yield parts[1], parts[2]
        elif len(parts) == 2:
            yield parts[0], parts[1]


def objects(objdir):
    for root, _, files in os.walk(objdir):
        for f in files:
            if f.endswith(".o"):
                yield os.path.join(root, f)


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# Which subsystems (lib/<subsystem>/) a subsystem's files may call into:
# the dependency order of Documentation/development.md ("Library layout").
# A call against it is reported even when it makes no cycle.
LAYERS = {
    "common": set(),
    "handshake": {"common"},
    "bananaphone": {"common"},
    "proxy": {"common", "handshake"},
    "net": {"common", "handshake", "bananaphone"},
    "rank": {"common", "handshake", "bananaphone", "proxy", "net"},
    "coll": {"common", "handshake", "bananaphone", "proxy", "net", "rank"},
}


def layer_violations(used, defined):
    """(caller file, callee file, symbol) for every call against LAYERS."""
    out = []
    for f, syms in sorted(used.items()):
        a = f.split("/")[0]
        for s in sorted(syms):
            if s not in defined:
                continue
            b = defined[s].split("/")[0]
            if a == b:
                continue
            if a not in LAYERS or b not in LAYERS[a]:
                out.append((f, defined[s], s))
    return out


def map_names(path):
    text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    names = set()
    for m in re.finditer(r"global:(.*?)(?:local:|\})", text, flags=re.S):
        names.update(n.strip() for n in m.group(1).split(";") if n.strip())
    return names


def header_api(hdrdir):
    """Functions declared NPROXY_API in the public headers."""
    names = set()
    for f in sorted(os.listdir(hdrdir)):
        if not f.endswith(".h"):
            continue
        text = re.sub(r"/\*.*?\*/", "", open(os.path.join(hdrdir, f)).read(), flags=re.S)
        text = re.sub(r"^#.*$", "", text, flags=re.M)
        for m in re.finditer(r"\bNPROXY_API\b[^;{]*?\b(\w+)\s*\(", text, flags=re.S):
            names.add(m.group(1))
    return names


def main():
    args = sys.argv[1:]
    prefix, mapfile, hdrdir = "npx_", None, None
    skip_cycles = "--skip-cycles" in args
    if skip_cycles:
        args.remove("--skip-cycles")
    if "--headers" in args:
        i = args.index("--headers")
        hdrdir = args[i + 1]
        del args[i:i + 2]
    if "--prefix" in args:
        i = args.index("--prefix")
        prefix = args[i + 1]
        del args[i:i + 2]
    if "--map" in args:
        i = args.index("--map")
        mapfile = args[i + 1]
        del args[i:i + 2]
    objdir, so = args
    sys.setrecursionlimit(10000)

    exported = sorted(s.split("@")[0] for t, s in nm(so, "-D", "--defined-only")
                      if t in "TtWiDdBbRr" and not s.startswith("_"))
    defined, used = {}, {}
    for o in objects(objdir):
        name = os.path.relpath(o, objdir)[:-2]
        used[name] = set()
        for t, s in nm(o):
            if t == "U":
                used[name].add(s)
            elif t.isupper():
                defined[s] = name
    internal = sorted(s for s in defined
                      if s not in exported and not s.startswith(prefix))
    graph = {f: {defined[s] for s in u if s in defined and defined[s] != f}
             for f, u in used.items()}
    cycles = [c for c in sccs(graph) if len(c) > 1]

    bad = 0
    print(f"exported functions and data: {len(exported)}")
    for s in exported:
        print(f"  {s}")
    if mapfile:
        listed = map_names(mapfile)
        wild = sorted(n for n in listed if "*" in n or "?" in n)
        missing = sorted(set(exported) - listed)
        stale = sorted(n for n in listed - set(exported) if n not in wild)
        for n in wild:
            print(f"map: wildcard '{n}' (list every symbol by name)")
        for n in missing:
            print(f"map: {n} is exported but not listed")
        for n in stale:
            print(f"map: {n} is listed but not exported")
        bad |= bool(wild or missing or stale)
        if hdrdir:
            declared = header_api(hdrdir)
            for n in sorted(declared - listed):
                print(f"map: {n} is NPROXY_API in {hdrdir} but not listed")
            for n in sorted(listed - declared - set(wild)):
                print(f"map: {n} is listed but no header in {hdrdir} declares it NPROXY_API")
            bad |= bool(declared ^ (listed - set(wild)))
    print(f"internal non-static symbols without the '{prefix}' prefix: {len(internal)}")
    for s in internal:
        print(f"  {s} ({defined[s]})")
    print(f"call cycles between files: {len(cycles)}")
    for c in cycles:
        print("  " + " <-> ".join(c))
    layers = layer_violations(used, defined)
    print(f"calls against the subsystem order: {len(layers)}")
    for f, g, s in layers:
        print(f"  {f} -> {g}: {s}")
    bad |= bool(internal or layers)
    if cycles and skip_cycles:
        print("call cycles reported only (--skip-cycles)")
    else:
        bad |= bool(cycles)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
