#!/usr/bin/env python3
"""Sum the kernel times of an Nsight Compute CSV (scripts/gpu-profile.sh: `ncu --csv --page raw
--metrics gpu__time_duration.sum`) by kernel, largest first.

    tools/ncu_summary.py FILE.csv [--top N] [--steps S] [--group]

--steps divides the sums by the number of steps profiled (the table's "ms/step" column);
--group folds template arguments and cuBLAS/CUTLASS tile names into one row per kind of kernel.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict

SCALE_TO_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
               "second": 1e3, "s": 1e3}


def short_name(name, group):
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\(.*$", "", name)  # the parameter list
    if group:
        # cuBLASLt's nvjet kernels name their types in three letters after the architecture,
        # operands, accumulation, result: nvjet_sm90_tss is bf16 operands (t) with float32
        # accumulation and result (ocrt's bf16 convolutions), tst PyTorch AMP's bf16 -> bf16.
        jet = re.match(r"nvjet_(?:sm\d+_)?([a-z])[a-z]{2}_", name)
        if jet:
            kind = {"t": "bf16", "h": "fp16", "s": "fp32/tf32"}.get(jet.group(1), jet.group(1))
            return f"GEMM ({kind}, cuBLAS/CUTLASS)"
        if re.search(r"gemm|cutlass|sm90_|sm80_|ampere_|cublas", name, re.I):
            kind = "bf16" if re.search(r"bf16", name) else ("h" if re.search(r"_h\d|f16", name) else "fp32/tf32")
            return f"GEMM ({kind}, cuBLAS/CUTLASS)"
        name = re.sub(r"ocrt::(<unnamed>|\(anonymous namespace\))::", "", name)
        name = re.sub(r"<.*>", "", name)
    return name


def main():
    p = argparse.ArgumentParser()
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--steps", type=float, default=1.0)
    p.add_argument("--group", action="store_true")
    a = p.parse_args()
    rows = list(csv.reader(open(a.csv, errors="replace")))
    header_at = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    header = rows[header_at]
    units = rows[header_at + 1]
    k_name = header.index("Kernel Name")
    k_time = header.index("gpu__time_duration.sum")
    scale = SCALE_TO_MS.get(units[k_time].strip(), None)
    if scale is None:
        sys.exit(f"unknown unit {units[k_time]!r}")
    total = defaultdict(float)
    count = defaultdict(int)
    for r in rows[header_at + 2:]:
        if len(r) <= max(k_name, k_time) or not r[0].isdigit():
            continue
        key = short_name(r[k_name], a.group)
        total[key] += float(r[k_time].replace(",", "")) * scale
        count[key] += 1
    grand = sum(total.values())
    print(f"{sum(count.values())} kernels, {grand:.2f} ms in all, {grand / a.steps:.2f} ms/step over {a.steps:g} steps")
    print(f"{'ms/step':>9} {'share':>6} {'calls/step':>10}  kernel")
    for key, t in sorted(total.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"{t / a.steps:9.3f} {100 * t / grand:5.1f}% {count[key] / a.steps:10.1f}  {key[:110]}")


if __name__ == "__main__":
    main()
