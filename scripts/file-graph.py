#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The file-level call graph of a folder of object files, and its cycles.

file-graph.py OBJDIR [--sources SRCDIR] [--dot]

An edge A -> B means file A uses a symbol (function or data) that file B
defines.  Prints every edge, then the call cycles between files (strongly
connected components of more than one file) and exits 1 when there is
one, so `make lint` can use it on tools/ the way scripts/lib-graph.py is
used on lib/.  A symbol defined by two objects (each program's main())
is left out: no file calls it.  With --dot, prints the graph for
graphviz instead.  With --sources, only the objects of SRCDIR's *.c files
are read (an object left behind by a removed source is not).
"""
import importlib.util
import os
import sys

_spec = importlib.util.spec_from_file_location(
    "lib_graph", os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib-graph.py"))
lib_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lib_graph)


def file_graph(objdir, srcdir=None):
    """{file: set(files it uses)} over every object below objdir."""
    defined, twice, used = {}, set(), {}
    for o in lib_graph.objects(objdir):
        name = os.path.relpath(o, objdir)[:-2]
        if srcdir and not os.path.exists(os.path.join(srcdir, name + ".c")):
            continue
        used[name] = set()
        for t, s in lib_graph.nm(o):
            if t == "U":
                used[name].add(s)
            elif t.isupper():
                if s in defined:
                    twice.add(s)
                defined[s] = name
    return {f: {defined[s] for s in u
                if s in defined and s not in twice and defined[s] != f}
            for f, u in used.items()}


def main():
    args = sys.argv[1:]
    dot = "--dot" in args
    if dot:
        args.remove("--dot")
    srcdir = None
    if "--sources" in args:
        i = args.index("--sources")
        srcdir = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    graph = file_graph(args[0], srcdir)
    if not graph:
        print(f"file-graph: no object files below {args[0]} (build first)", file=sys.stderr)
        return 2
    sys.setrecursionlimit(10000)
    if dot:
        print("digraph files {")
        for f in sorted(graph):
            for g in sorted(graph[f]):
                print(f'  "{f}" -> "{g}";')
        print("}")
        return 0
    cycles = [c for c in lib_graph.sccs(graph) if len(c) > 1]
    print(f"files: {len(graph)}, edges: {sum(len(v) for v in graph.values())}")
    for f in sorted(graph):
        if graph[f]:
            print(f"  {f} -> {' '.join(sorted(graph[f]))}")
    print(f"call cycles between files: {len(cycles)}")
    for c in cycles:
        print("  " + " <-> ".join(c))
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
