#!/usr/bin/env python3
"""The PyTorch side of bench/bench_ops.cpp: the same cases (CRNN and SVTR-lite operator shapes,
batch 32), the same rules (forward + backward with every input requiring grad, a fixed random
upstream gradient, 2 warm-ups, R >= 5 timed repetitions, median and min-max in ms).

    /usr/bin/python3 bench/torch_ops.py [--threads N] [--reps R] [--only SUBSTRING] [--json FILE]
    /usr/bin/python3 bench/torch_ops.py --compare OCRT.json[,...] TORCH.json[,...]

--compare prints a markdown table, ocrt against PyTorch, from the JSON files both wrote; with
several files per side (alternating runs) it takes the median of the runs' medians.
Threads: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS are set before torch is imported, and
torch.set_num_threads(N).
"""
import argparse
import json
import os
import statistics
import time


def cases(torch, F, forward_only=False):
    def param(*shape, scale=0.1):
        return ((torch.rand(*shape) * 2 - 1) * scale).requires_grad_()

    def fwd_bwd(forward):
        if forward_only:
            def run_forward():
                with torch.no_grad():
                    forward()
            return run_forward
        with torch.no_grad():
            g = torch.rand_like(forward()) * 2 - 1
        return lambda: forward().backward(g)

    def conv(N, C, H, W, Cout, k, pad, bias):
        def make():
            x, w = param(N, C, H, W, scale=1.0), param(Cout, C, k, k)
            b = param(Cout) if bias else None
            return fwd_bwd(lambda: F.conv2d(x, w, b, padding=pad))
        return f"{N}x{C}x{H}x{W}->{Cout}", make

    def pool(N, C, H, W, stride, pad):
        def make():
            x = param(N, C, H, W, scale=1.0)
            return fwd_bwd(lambda: F.max_pool2d(x, (2, 2), stride, pad))
        return f"{N}x{C}x{H}x{W}", make

    def bn(N, C, H, W):
        def make():
            x, w, b = param(N, C, H, W, scale=1.0), param(C), param(C)
            rm, rv = torch.zeros(C), torch.ones(C)
            return fwd_bwd(lambda: F.batch_norm(x, rm, rv, w, b, training=True))
        return f"{N}x{C}x{H}x{W}", make

    def lstm(T, N, I, H):
        def make():
            m = torch.nn.LSTM(I, H, num_layers=2, bidirectional=True)
            x = param(T, N, I, scale=1.0)
            return fwd_bwd(lambda: m(x)[0])
        return f"T{T} N{N} {I}->{H}", make

    def ctc(T, lo, hi, fused):
        def make():
            N, C = 32, 96
            z = param(T, N, C, scale=3.0)
            lengths = torch.randint(lo, hi + 1, (N,))
            targets = torch.randint(1, C, (int(lengths.sum()),))
            il = torch.full((N,), T, dtype=torch.long)
            # PyTorch has no fused path: both variants are log_softmax + ctc_loss (the "fused"
            # ocrt case is compared against the same PyTorch work).
            return lambda: F.ctc_loss(z.log_softmax(2), targets, il, lengths).backward()
        return f"T{T} N32 C96", make

    def ln(N, L, E):
        def make():
            x, w, b = param(N, L, E, scale=1.0), param(E), param(E)
            return fwd_bwd(lambda: F.layer_norm(x, (E,), w, b))
        return f"{N}x{L}x{E}", make

    def mha(Hg, Wg, E, h, local):
        L = Hg * Wg

        def make():
            x = param(L, 32, E, scale=1.0)
            w_in, b_in, w_out, b_out = param(3 * E, E), param(3 * E), param(E, E), param(E)
            mask = None
            if local:
                idx = torch.arange(L)
                i, j = idx // Wg, idx % Wg
                mask = ((i[:, None] - i[None, :]).abs() > 3) | ((j[:, None] - j[None, :]).abs() > 5)
            return fwd_bwd(lambda: F.multi_head_attention_forward(
                x, x, x, E, h, w_in, b_in, None, None, False, 0.0, w_out, b_out, training=True,
                need_weights=False, attn_mask=mask)[0])
        return f"L{L} N32 E{E} h{h}", make

    return [
        ("crnn.conv0", *conv(32, 1, 32, 128, 64, 3, 1, True)),
        ("crnn.conv3", *conv(32, 64, 16, 64, 128, 3, 1, True)),
        ("crnn.conv6", *conv(32, 128, 8, 32, 256, 3, 1, False)),
        ("crnn.conv9", *conv(32, 256, 8, 32, 256, 3, 1, True)),
        ("crnn.conv12", *conv(32, 256, 4, 33, 512, 3, 1, False)),
        ("crnn.conv15", *conv(32, 512, 4, 33, 512, 3, 1, True)),
        ("crnn.conv18", *conv(32, 512, 2, 34, 512, 2, 0, False)),
        ("crnn.pool2", *pool(32, 64, 32, 128, (2, 2), (0, 0))),
        ("crnn.pool11", *pool(32, 256, 8, 32, (2, 1), (0, 1))),
        ("crnn.bn7", *bn(32, 256, 8, 32)),
        ("crnn.bn13", *bn(32, 512, 4, 33)),
        ("crnn.bn19", *bn(32, 512, 1, 33)),
        ("crnn.lstm", *lstm(33, 32, 512, 256)),
        ("crnn-s.lstm", *lstm(33, 32, 256, 128)),
        ("ctc.crnn.fused", *ctc(33, 5, 20, True)),
        ("ctc.crnn.logsoftmax", *ctc(33, 5, 20, False)),
        ("ctc.long.fused", *ctc(400, 80, 120, True)),
        ("ctc.long.logsoftmax", *ctc(400, 80, 120, False)),
        ("svtr.ln1", *ln(32, 256, 64)),
        ("svtr.ln2", *ln(32, 128, 128)),
        ("svtr.ln3", *ln(32, 64, 256)),
        ("svtr.mha1.local", *mha(8, 32, 64, 2, True)),
        ("svtr.mha2.global", *mha(4, 32, 128, 4, False)),
        ("svtr.mha3.global", *mha(2, 32, 256, 8, False)),
    ]


def run(args):
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    results = []
    what = "forward (no-grad)" if args.forward else "forward + backward"
    print(f"torch {torch.__version__}, {args.threads} threads: {what}, ms")
    print(f"{'case':<22} {'size':<26} {'median':>9} {'min - max':>21}")
    for name, size, make in cases(torch, F, args.forward):
        if args.only and args.only not in name:
            continue
        step = make()
        step()
        step()
        ms = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            step()
            ms.append(1e3 * (time.perf_counter() - t0))
        r = {"name": name, "size": size, "median": statistics.median(ms), "min": min(ms), "max": max(ms),
             "reps": args.reps}
        results.append(r)
        print(f"{name:<22} {size:<26} {r['median']:9.2f} {r['min']:10.2f} - {r['max']:8.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"impl": f"torch {torch.__version__}", "threads": args.threads,
                       "forward_only": args.forward, "unit": "ms",
                       "results": results}, f, indent=1)


def merge(paths):
    by_name = {}
    for p in paths.split(","):
        with open(p) as f:
            for r in json.load(f)["results"]:
                by_name.setdefault(r["name"], []).append(r)
    return {n: {"median": statistics.median(r["median"] for r in rs), "min": min(r["min"] for r in rs),
                "max": max(r["max"] for r in rs), "size": rs[0]["size"], "runs": len(rs)} for n, rs in by_name.items()}


def compare(ocrt_paths, torch_paths):
    a, b = merge(ocrt_paths), merge(torch_paths)
    print("| case | shape | ocrt ms (min-max) | torch ms (min-max) | torch / ocrt |")
    print("| --- | --- | --- | --- | --- |")
    for name, r in a.items():
        if name not in b:
            continue
        t = b[name]
        print(f"| {name} | {r['size']} | {r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f}) | "
              f"{t['median']:.2f} ({t['min']:.2f}-{t['max']:.2f}) | {t['median'] / r['median']:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--only")
    p.add_argument("--json")
    p.add_argument("--forward", action="store_true", help="time the forward pass alone, under no-grad")
    p.add_argument("--compare", nargs=2, metavar=("OCRT_JSONS", "TORCH_JSONS"))
    args = p.parse_args()
    if args.compare:
        compare(*args.compare)
    else:
        args.reps = max(5, args.reps)
        run(args)


if __name__ == "__main__":
    main()
