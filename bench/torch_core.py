#!/usr/bin/env python3
"""The PyTorch side of bench/bench_core.cpp: the same measurements, the same rules, the same table.

    python3 bench/torch_core.py [--threads N] [--reps R] [--only matmul|elementwise] [--json FILE]

Square float32 GEMM at 256/512/1024/2048 (GFLOP/s, 2 n^3 FLOP per product) and elementwise ops on
16M floats (GB/s: add moves 3 * 4 n bytes, relu and copy 2 * 4 n). Each measurement: 2 warm-up runs, then R
(>= 5) timed repetitions of about 0.1 s each; the median rate and the min-max spread are reported.

    python3 bench/torch_core.py --compare OCRT.json[,OCRT2.json...] TORCH.json[,TORCH2.json...]

prints a markdown table of ocrt against PyTorch from the JSON files the two programs wrote. With
several files per side (alternating runs), the median is taken over the runs' medians and the
spread is the lowest min to the highest max.

Threads: torch.set_num_threads(N) sets ATen's OpenMP pool; the BLAS (Debian's torch calls the
system libblas.so.3, which is OpenBLAS here) keeps a thread pool of its own, so OPENBLAS_NUM_THREADS
and OMP_NUM_THREADS are set to N as well, before torch is imported.
"""
import argparse
import json
import os
import statistics
import sys
import time


def measure(name, size, unit, work, reps, f):
    t0 = time.perf_counter()
    f()
    f()
    warm = (time.perf_counter() - t0) / 2
    inner = max(1, int(0.1 / max(warm, 1e-9)))
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            f()
        rates.append(work * inner / (time.perf_counter() - t0) / 1e9)
    return {"name": name, "size": size, "unit": unit, "median": statistics.median(rates),
            "min": min(rates), "max": max(rates), "reps": reps, "inner": inner}


def print_table(impl, threads, results):
    print(f"{impl}, {threads} thread{'' if threads == 1 else 's'}")
    print(f"{'op':<16} {'size':<6} {'median':>10} {'min - max':>21}  unit")
    for r in results:
        print(f"{r['name']:<16} {r['size']:<6} {r['median']:10.1f} {r['min']:10.1f} - {r['max']:8.1f}  {r['unit']}")


def run(args):
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    results = []
    with torch.no_grad():
        if args.only != "elementwise":
            for n in (256, 512, 1024, 2048):
                a = torch.rand(n, n) * 2 - 1
                b = torch.rand(n, n) * 2 - 1
                results.append(measure("matmul_f32", str(n), "GFLOP/s", 2.0 * n ** 3, args.reps,
                                       lambda: torch.matmul(a, b)))
        if args.only != "matmul":
            n = 1 << 24
            x = torch.rand(n) * 2 - 1
            y = torch.rand(n) * 2 - 1
            z = torch.empty(n)
            results.append(measure("add_f32", "16M", "GB/s", 3.0 * 4 * n, args.reps, lambda: torch.add(x, y)))
            results.append(measure("add_inplace_f32", "16M", "GB/s", 3.0 * 4 * n, args.reps, lambda: x.add_(y)))
            results.append(measure("relu_f32", "16M", "GB/s", 2.0 * 4 * n, args.reps, lambda: torch.relu(x)))
            results.append(measure("copy_f32", "16M", "GB/s", 2.0 * 4 * n, args.reps, lambda: z.copy_(x)))
    print_table(f"torch {torch.__version__}", args.threads, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"impl": "torch " + torch.__version__, "threads": args.threads, "results": results}, f, indent=1)


def merge(paths):
    """name/size -> (median of medians, min, max, unit) over several runs of one program."""
    runs = [json.load(open(p)) for p in paths.split(",")]
    out = {}
    for r in runs[0]["results"]:
        key = (r["name"], r["size"])
        same = [x for run in runs for x in run["results"] if (x["name"], x["size"]) == key]
        out[key] = (statistics.median(x["median"] for x in same), min(x["min"] for x in same),
                    max(x["max"] for x in same), r["unit"])
    return runs[0], out


def compare(ocrt_paths, torch_paths):
    o_run, o = merge(ocrt_paths)
    t_run, t = merge(torch_paths)
    n_o, n_t = len(ocrt_paths.split(",")), len(torch_paths.split(","))
    print(f"ocrt: {n_o} run(s); {t_run['impl']}: {n_t} run(s); {o_run['threads']} threads each")
    print()
    print("| op | size | unit | ocrt median (min–max) | torch median (min–max) | ocrt / torch |")
    print("| --- | --- | --- | --- | --- | --- |")
    for key, (om, omin, omax, unit) in o.items():
        if key not in t:
            continue
        tm, tmin, tmax, _ = t[key]
        print(f"| {key[0]} | {key[1]} | {unit} | {om:.1f} ({omin:.1f}–{omax:.1f}) | "
              f"{tm:.1f} ({tmin:.1f}–{tmax:.1f}) | {om / tm:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--only", choices=("matmul", "elementwise"))
    p.add_argument("--json")
    p.add_argument("--compare", nargs=2, metavar=("OCRT_JSONS", "TORCH_JSONS"))
    args = p.parse_args()
    if args.compare:
        compare(*args.compare)
        return
    if args.threads < 1 or args.reps < 5:
        sys.exit("torch_core.py: --threads must be >= 1 and --reps >= 5")
    run(args)


if __name__ == "__main__":
    main()
