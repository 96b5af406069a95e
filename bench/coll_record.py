#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# coll_record.py: coll_run.sh's per-round records -> the report's records
# (bench/record.sh's format): latency and bus bandwidth per collective,
# nproxy-run (each device delay) and Open MPI (+ that delay) paired by rank
# count and delay, and the CPU while waiting on the device.  coll_run.sh exports COLL_DELAYS,
# COLL_WAIT and COLL_WAIT_DELAY.
#
#   coll_record.py COLL_RECORDS OUT_TSV GROUP
import os
import sys

recs, out, group = sys.argv[1:4]
delays = os.environ["COLL_DELAYS"].split()
w = open(out, "a")


def rec(*fields):
    w.write("\t".join(str(f) for f in fields) + "\n")


for c in ("allgather", "allreduce"):
    rec("table", "coll_lat_" + c, "%s latency vs size: nproxy-run vs Open MPI, 2 and 4 ranks" % c,
        "size (bytes, whole result buffer)", "latency (us, slowest rank)", "lower", "log", group)
    rec("table", "coll_busbw_" + c, "%s bus bandwidth vs size: nproxy-run vs Open MPI, 2 and 4 ranks" % c,
        "size (bytes, whole result buffer)", "bus bandwidth (GB/s, as nccl-tests)", "higher", "log", group)


def pair_of(p, d):
    """nproxy-run at device delay d pairs with Open MPI + d at the same rank count"""
    return "%s ranks" % p if int(d) == 0 else "%s ranks, device delay %s us" % (p, d)


def sample(c, series, role, pair, P, size, rnd, med, p99):
    rec("sample", "coll_lat_" + c, series, role, pair, size, rnd, "%.6g" % med, p99)
    if med > 0:
        factor = (P - 1) / P * (2 if c == "allreduce" else 1)
        rec("sample", "coll_busbw_" + c, series, role, pair, size, rnd,
            "%.6g" % (size / (med * 1e-6) / 1e9 * factor), "-")


for line in open(recs):
    f = line.split()
    if len(f) < 12 or f[5] == "FAILED":
        continue
    impl, p, c, d, rnd, _, size, _, med, p99 = f[:10]
    P, size, med = int(p), int(size), float(med)
    if impl == "np":
        series = "nproxy-run %s ranks" % p
        if len(delays) > 1:
            series += ", device delay %s us" % d
        sample(c, series, "nproxy", pair_of(p, d), P, size, rnd, med, p99)
        continue
    # MPI has no device: against a device delay D its figure is MPI's + D.
    for d in delays:
        series = "Open MPI %s ranks" % p
        p99_d = p99
        if int(d):
            series += " + %s us device delay" % d
            p99_d = "%.6g" % (float(p99) + int(d)) if p99 not in ("-", "nan") else p99
        sample(c, series, "baseline", pair_of(p, d), P, size, rnd, med + int(d), p99_d)
for c in ("allgather", "allreduce"):
    rec("note", "coll_lat_" + c,
        "Per round: one mpirun of coll_mpi (Open MPI, btl self,vader), then one nproxy-run per device "
        "delay, for each rank count and collective; a round's figure is the median over its timed "
        "iterations (an iteration's time is the slowest rank's), its p99 nearest-rank (the maximum "
        "below 100 iterations). Ratio = nproxy-run / Open MPI at the same rank count; at a device "
        "delay D against Open MPI + D (MPI has no device; the device's step counted once per "
        "collective).")
    rec("note", "coll_busbw_" + c,
        "busbw = size / median x (P-1)/P (allgather) or 2(P-1)/P (allreduce), as nccl-tests; "
        "a ratio above 1 means nproxy-run moves more.")
wait = os.environ.get("COLL_WAIT", "").split()
rec("table", "coll_wait_cpu", "CPU per wall second while waiting on the device (nproxy-run -p 2, "
    "device delay %d ms)" % (int(os.environ["COLL_WAIT_DELAY"]) // 1000),
    "phase", "cores per process", "lower", "category", group)
if len(wait) == 4:
    cpu, wall, procs = float(wait[0]), float(wait[1]), int(wait[3])
    rec("sample", "coll_wait_cpu", "nproxy-run, per process", "nproxy", "", "waiting on the device",
        1, "%.6g" % (cpu / wall / procs), "-")
    rec("note", "coll_wait_cpu",
        "CPU seconds of every process of the job over the timed wall time, per process, one run; no "
        "baseline (Open MPI has no device to wait for). Targets: <= 0.05 core per process (aim), "
        "<= 0.25 core for the job (must).")
else:
    rec("note", "coll_wait_cpu", "not measured in this run: %s" % " ".join(wait))
