#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# report.py: turn the record files the benchmark groups wrote (one
# RAW_DIR/<group>.tsv each, format in bench/record.sh) into
#   OUT_DIR/report.md     one table per benchmark: figure, baseline, ratio,
#                         median, p99, rounds, spread; flagged figures (a
#                         starved baseline) say so beside their series; the
#                         steal time of every round, and which were refused
#                         (run again) or invalid
#   OUT_DIR/results.json  every number, the per-round values included, and
#                         the run's provenance (commit, date, kernel, CPUs,
#                         load average before and after, provider, libfabric)
#   OUT_DIR/<table>.png   one gnuplot plot per table (when gnuplot is there)
#
#   bench/report.py RAW_DIR OUT_DIR
#
# Nothing here knows a figure: every number is read from RAW_DIR.  A row's
# figure is the median over rounds of the per-round value; the spread is
# the min..max of the per-round values; the ratio is figure / baseline
# figure (the baseline series with the same pair key, same x), and its
# spread the min..max of the per-round ratios (round r against round r:
# the baseline ran interleaved with nproxy, so they shared the noise).
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys


def parse(raw_dir):
    tables, order, meta, groups, steal = {}, [], {}, {}, []
    for path in sorted(glob.glob(os.path.join(raw_dir, "*.tsv"))):
        for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            f = line.split("\t")
            kind = f[0]
            where = "%s:%d" % (os.path.basename(path), lineno)
            if kind == "table" and len(f) >= 8:
                tid = f[1]
                if tid not in tables:
                    order.append(tid)
                    tables[tid] = dict(id=tid, title=f[2], xlabel=f[3], ylabel=f[4],
                                       better=f[5], xscale=f[6], group=f[7],
                                       samples=[], notes=[], flags=[])
            elif kind == "sample" and len(f) >= 9:
                t = tables.get(f[1])
                if t is None:
                    raise ValueError("%s: sample for undeclared table %s" % (where, f[1]))
                value = num(f[7])
                p99 = num(f[8]) if len(f) > 8 else None
                t["samples"].append(dict(series=f[2], role=f[3], pair=f[4], x=f[5],
                                         round=int(f[6]), value=value, p99=p99))
            elif kind == "note" and len(f) >= 3:
                if f[1] in tables:
                    tables[f[1]]["notes"].append(f[2])
            elif kind == "meta" and len(f) >= 3:
                meta[f[1]] = f[2]
            elif kind == "flag" and len(f) >= 6:
                t = tables.get(f[1])
                if t is None:
                    raise ValueError("%s: flag for undeclared table %s" % (where, f[1]))
                t["flags"].append(dict(series=f[2], x=f[3], round=int(f[4]), text=f[5]))
            elif kind == "steal" and len(f) >= 5:
                # steal GROUP ROUND PCT VERDICT(ok|rerun|invalid|heavy)
                steal.append(dict(group=f[1], round=f[2], pct=num(f[3]), verdict=f[4]))
            elif kind == "group" and len(f) >= 4:
                # group NAME STATUS(ok|failed|skipped) DETAIL [SECONDS]
                groups[f[1]] = dict(status=f[2], detail=f[3],
                                    seconds=num(f[4]) if len(f) > 4 else None)
            else:
                raise ValueError("%s: malformed record: %r" % (where, line))
    return [tables[t] for t in order], meta, groups, steal


def num(s):
    try:
        v = float(s)
    except ValueError:
        return None
    return None if math.isnan(v) or math.isinf(v) else v


def xkey(x):
    v = num(x)
    return (0, v, "") if v is not None else (1, 0.0, x)


def summarize(t):
    """rows: one per (x, series), in first-seen series order, x ascending"""
    series_order = []
    cells = {}
    for s in t["samples"]:
        k = (s["series"], s["x"])
        if s["series"] not in series_order:
            series_order.append(s["series"])
        c = cells.setdefault(k, dict(series=s["series"], role=s["role"], pair=s["pair"],
                                     x=s["x"], rounds={}, p99s={}))
        if s["value"] is not None:
            c["rounds"][s["round"]] = s["value"]
        if s["p99"] is not None:
            c["p99s"][s["round"]] = s["p99"]
    xs_cat = []
    for s in t["samples"]:
        if s["x"] not in xs_cat:
            xs_cat.append(s["x"])
    xs = xs_cat if t["xscale"] == "category" else sorted(xs_cat, key=xkey)
    for fl in t["flags"]:
        c = cells.get((fl["series"], fl["x"]))
        if c is not None:
            c.setdefault("flags", []).append(fl)
    for c in cells.values():
        c.setdefault("flags", [])
        v = list(c["rounds"].values())
        c["values"] = [c["rounds"][r] for r in sorted(c["rounds"])]
        c["median"] = statistics.median(v) if v else None
        c["min"] = min(v) if v else None
        c["max"] = max(v) if v else None
        c["p99"] = statistics.median(c["p99s"].values()) if c["p99s"] else None
        c["n_rounds"] = len(v)
    rows = []
    for x in xs:
        for sname in series_order:
            c = cells.get((sname, x))
            if c is None or c["role"] == "baseline":
                continue
            bases = []
            for bname in series_order:
                b = cells.get((bname, x))
                if b is None or b["role"] != "baseline" or b["pair"] != c["pair"]:
                    continue
                ratio = c["median"] / b["median"] if c["median"] is not None and b["median"] else None
                per_round = [c["rounds"][r] / b["rounds"][r] for r in c["rounds"]
                             if r in b["rounds"] and b["rounds"][r]]
                bases.append(dict(series=bname, median=b["median"], p99=b["p99"], flags=b["flags"],
                                  min=b["min"], max=b["max"], values=b["values"],
                                  n_rounds=b["n_rounds"], ratio=ratio,
                                  ratio_min=min(per_round) if per_round else None,
                                  ratio_max=max(per_round) if per_round else None))
            rows.append(dict(c, baselines=bases))
    return rows, xs, series_order, cells


def fmt(v):
    if v is None:
        return "n/a"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 0.1:
        return "%.2f" % v
    return "%.3g" % v


def spread(lo, hi, n):
    if n is None or n < 2 or lo is None:
        return "1 round"
    return "%s..%s" % (fmt(lo), fmt(hi))


def flag_text(flags, n_rounds):
    """' (starved baseline in 1 of 2 rounds: why)' for a flagged series, else ''"""
    if not flags:
        return ""
    rounds = sorted({f["round"] for f in flags})
    return " (%s in %d of %d round%s: %s)" % (
        flags[0]["text"].split(":")[0], len(rounds), max(n_rounds or 1, len(rounds)),
        "s" if max(n_rounds or 1, len(rounds)) > 1 else "",
        "; ".join(f["text"].split(":", 1)[-1].strip() for f in flags).replace("|", "/"))


def steal_table(steal, w):
    w("\n## Steal time\n\nCPU time the hypervisor gave to someone else (/proc/stat's steal column) over\n"
      "each round; a round above the limit is refused and run once more, and kept but marked\n"
      "invalid if the second attempt is heavy-steal too.\n\n")
    if not steal:
        w("No steal records in this run.\n")
        return
    w("| group | round | steal | verdict |\n|---|---|---|---|\n")
    for st in steal:
        verdict = {"ok": "ok", "rerun": "refused, run again", "invalid": "**INVALID** (kept)",
                   "heavy": "heavy (whole group)"}.get(st["verdict"], st["verdict"])
        w("| %s | %s | %s%% | %s |\n" % (st["group"], st["round"], fmt(st["pct"]), verdict))


def markdown(tables, meta, groups, plots, out, steal=()):
    w = out.write
    w("# nproxy benchmark report\n\n")
    w("Written by `make bench%s` (bench/run, bench/report.py). Every number below comes from\n"
      "this run; `results.json` beside this file has all of them, per round.\n\n"
      % (" QUICK=1" if meta.get("quick") == "1" else ""))
    w("| | |\n|---|---|\n")
    first = ("commit", "date", "host_kernel", "cpus", "cpu_model", "load_before", "load_after",
             "provider", "libfabric", "openmpi", "quick", "rounds", "duration_s", "plots")
    for k in [k for k in first if k in meta] + [k for k in meta if k not in first]:
        w("| %s | %s |\n" % (k, meta[k].replace("|", "/")))
    w("\nHow to read it: *figure* is the median over rounds of the per-round value (each round's\n"
      "value is itself a median over many iterations unless the table says otherwise); *spread*\n"
      "is the min..max of the per-round values; *ratio* = figure / baseline figure, measured in the\n"
      "same run with the baseline interleaved (baseline, nproxy, baseline, nproxy, ...), and its\n"
      "spread is the min..max of the per-round ratios. For a latency (lower is better) a ratio\n"
      "below 1 means nproxy is faster; for a bandwidth (higher is better) above 1 means faster.\n"
      "The machine is shared: read the ratios, not the absolute numbers.\n\n")
    w("## Groups\n\n| group | status | detail | seconds |\n|---|---|---|---|\n")
    for g, d in groups.items():
        w("| %s | %s | %s | %s |\n" % (g, d["status"], d["detail"].replace("|", "/"),
                                       fmt(d["seconds"])))
    steal_table(steal, w)
    for t in tables:
        rows = t["rows"]
        w("\n## %s\n\n" % t["title"])
        invalid = [st for st in steal if st["group"] == t["group"] and st["verdict"] == "invalid"]
        if invalid:
            w("**INVALID rounds**: %s ran under heavy steal twice; their figures below measure the "
              "host's other tenants as much as nproxy.\n\n"
              % ", ".join("%s (%s%%)" % (st["round"], fmt(st["pct"])) for st in invalid))
        w("`%s` (group %s): %s, %s is better." % (t["id"], t["group"], t["ylabel"], t["better"]))
        if t["id"] in plots:
            w(" Plot: [%s](%s)." % (plots[t["id"]], plots[t["id"]]))
        w("\n\n| %s | figure | median | p99 | rounds | spread | baseline | baseline median "
          "| ratio | ratio spread |\n|---|---|---|---|---|---|---|---|---|---|\n" % t["xlabel"])
        for r in rows:
            head = "| %s | %s%s | %s | %s | %d | %s " % (
                r["x"], r["series"], flag_text(r["flags"], r["n_rounds"]), fmt(r["median"]),
                fmt(r["p99"]), r["n_rounds"], spread(r["min"], r["max"], r["n_rounds"]))
            if not r["baselines"]:
                w(head + "| - | - | - | - |\n")
            for b in r["baselines"]:
                w(head + "| %s%s | %s | %s%s | %s |\n" % (
                    b["series"], flag_text(b["flags"], b["n_rounds"]), fmt(b["median"]),
                    "%.2f" % b["ratio"] if b["ratio"] is not None else "n/a",
                    " (baseline flagged)" if b["flags"] else "",
                    spread(b["ratio_min"], b["ratio_max"], min(r["n_rounds"], b["n_rounds"]))))
        for n in t["notes"]:
            w("\n%s\n" % n)


def xlabel(x):
    """1024 -> 1K, 1048576 -> 1M: tick labels for sizes"""
    v = num(x)
    if v is None or v != int(v) or v < 1024:
        return x
    for div, suffix in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if v >= div and int(v) % div == 0:
            return "%d%s" % (int(v) // div, suffix)
    return x


_terminal = {}


def terminal(gnuplot):
    """pngcairo (draws dashes) when this gnuplot has it, else the libgd png"""
    if gnuplot not in _terminal:
        r = subprocess.run([gnuplot, "-e", "set terminal pngcairo"], capture_output=True,
                           text=True)
        _terminal[gnuplot] = "pngcairo" if r.returncode == 0 and not r.stderr.strip() else "png"
    return _terminal[gnuplot]


def plot(t, out_dir, gnuplot):
    """one PNG per table: every series, figure with its round spread as error bars"""
    rows_by_series = {}
    for (sname, x), c in t["cells"].items():
        rows_by_series.setdefault(sname, {})[x] = c
    xs = t["xs"]
    data = os.path.join(out_dir, "data")
    os.makedirs(data, exist_ok=True)
    cat = t["xscale"] == "category" or any(num(x) is None for x in xs)
    plots = []
    allv = []
    for i, sname in enumerate(t["series_order"]):
        path = os.path.join(data, "%s.%d.dat" % (t["id"], i))
        with open(path, "w") as f:
            for j, x in enumerate(xs):
                c = rows_by_series[sname].get(x)
                if c is None or c["median"] is None:
                    continue
                allv += [c["min"], c["max"]]
                f.write("%s %s %r %r %r\n" % (j if cat else x, '"%s"' % xlabel(x), c["median"],
                                               c["min"], c["max"]))
        baseline = next(iter(rows_by_series[sname].values()))["role"] == "baseline"
        title = sname.replace('"', "'") + (" (baseline)" if baseline else "")
        # nproxy solid, baselines dashed
        plots.append("'%s' using 1:3:4:5:xtic(2) with yerrorlines lw 2 dt %d title \"%s\"" % (
            path, 2 if baseline else 1, title))
    if not allv:
        return None
    png = "%s.png" % t["id"]
    lines = ["set terminal %s size 1000,600 font ',10'" % terminal(gnuplot),
             "set output '%s'" % os.path.join(out_dir, png),
             "set title \"%s\" noenhanced" % t["title"].replace('"', "'"),
             "set xlabel \"%s\" noenhanced" % t["xlabel"],
             "set ylabel \"%s\" noenhanced" % t["ylabel"],
             "set key top left box opaque noenhanced",
             "set grid", "set bars small"]
    if t["xscale"] == "log" and not cat:
        lines.append("set logscale x 2")
    if cat:
        lines.append("set xrange [-0.5:%f]" % (len(xs) - 0.5))
        lines.append("set offsets 0, 0, graph 0.05, 0")
    pos = [v for v in allv if v and v > 0]
    if pos and len(pos) == len(allv) and max(pos) / min(pos) > 50:
        lines.append("set logscale y 10")
    else:
        lines.append("set yrange [0:*]")
    lines.append("plot " + ", \\\n     ".join(plots))
    script = os.path.join(data, "%s.gp" % t["id"])
    with open(script, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = subprocess.run([gnuplot, script], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("gnuplot %s: %s" % (script, r.stderr.strip()))
    return png


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: report.py RAW_DIR OUT_DIR")
    raw_dir, out_dir = sys.argv[1:]
    tables, meta, groups, steal = parse(raw_dir)
    os.makedirs(out_dir, exist_ok=True)
    for t in tables:
        t["rows"], t["xs"], t["series_order"], t["cells"] = summarize(t)
    gnuplot = shutil.which("gnuplot")
    plots = {}
    if gnuplot:
        for t in tables:
            png = plot(t, out_dir, gnuplot)
            if png:
                plots[t["id"]] = png
    else:
        meta["plots"] = "none: gnuplot not installed (apt-get install gnuplot-nox)"
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        markdown(tables, meta, groups, plots, f, steal)
    doc = dict(meta=meta, groups=groups, steal=steal, tables=[])
    for t in tables:
        doc["tables"].append(dict(
            id=t["id"], title=t["title"], group=t["group"], xlabel=t["xlabel"],
            ylabel=t["ylabel"], better=t["better"], xscale=t["xscale"],
            plot=plots.get(t["id"]), notes=t["notes"], flags=t["flags"],
            series=[dict(series=c["series"], role=c["role"], pair=c["pair"], x=c["x"],
                         values=c["values"], p99s=[c["p99s"][r] for r in sorted(c["p99s"])],
                         median=c["median"], p99=c["p99"], min=c["min"], max=c["max"],
                         rounds=c["n_rounds"]) for c in t["cells"].values()],
            rows=[dict(x=r["x"], series=r["series"], pair=r["pair"], median=r["median"],
                       p99=r["p99"], rounds=r["n_rounds"], min=r["min"], max=r["max"],
                       flags=r["flags"], baselines=r["baselines"]) for r in t["rows"]]))
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    print("bench/report: %s/report.md, results.json, %d plot(s)" % (out_dir, len(plots)))


if __name__ == "__main__":
    main()
