#!/usr/bin/env python3
"""Per-kernel GPU time from an Nsight Compute CSV (--csv --print-units base, metric
gpu__time_duration.sum): `ncu_summary.py FILE.csv PASSES` prints, in launch order of the first
pass, each kernel's name (shortened) and its time per pass in microseconds, and the total.
tools/gpu_check.sh BENCH=ncu runs bench_gops under ncu for this (bench_gops --runs 2 does 4
passes: each run times the pass on the resident input and again with the upload)."""
import csv
import re
import sys


def short(name):
    name = re.sub(r"\(.*", "", name)  # drop the argument list
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"scenelab::cuda::(\(anonymous namespace\)::)?", "", name)
    return name[:90]


def main():
    path, passes = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
    order, total = [], {}
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # the CSV rows (ncu prints its log lines too)
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        k = short(row["Kernel Name"])
        if k not in total:
            order.append(k)
            total[k] = [0.0, 0]
        total[k][0] += float(row["Metric Value"].replace(",", "")) * 1e-3  # ns -> us
        total[k][1] += 1
    if not order:
        print("no kernels in", path)
        return
    s = 0.0
    for k in order:
        us, n = total[k]
        print(f"{us / passes:9.1f} us  x{n / passes:g}  {k}")
        s += us / passes
    print(f"{s:9.1f} us  total of one pass")


if __name__ == "__main__":
    main()
