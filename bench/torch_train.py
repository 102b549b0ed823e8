#!/usr/bin/env python3
"""The PyTorch side of bench/bench_train.cpp: CRNN training steps on the CPU with the reference
module of tools/reference/crnn.py (the same layers and state_dict names as ocrt's CRNN).

    /usr/bin/python3 bench/torch_train.py [--arch crnn|crnn-s|both] [--batch 32] [--width 128]
        [--threads 2] [--steps 20] [--warmup 3] [--seed 1] [--phases] [--packed] [--json FILE]
        [--amp off|bf16] [--device cpu|cuda:N] [--compile] [--tf32]
    /usr/bin/python3 bench/torch_train.py --compare OCRT.json[,...] TORCH.json[,...]

Any python with torch runs it: Debian's (PyTorch 1.13, the older results) or the peers' current
PyTorch from pip, `$(bench/peers.sh --python) bench/torch_train.py ...`, which docs/benchmarking.md
asks of new CPU training figures. The JSON's "impl" names the torch that ran.

One step: forward in train mode, F.ctc_loss on log_softmax (blank 0, reduction mean,
zero_infinity), backward, clip_grad_norm_(5), torch.optim.AdamW (lr 1e-3, weight decay 1e-4,
its default implementation), zero_grad(set_to_none=True) (ocrt's zero_grad drops the gradients
too). One random batch (images uniform in [-1, 1], targets of T/3 +- 2 labels in [1, 95]) is
drawn once and reused. The forward runs without `lengths` (the LSTM on the padded tensor, its
fastest path; every line has the full width anyway); --packed passes the widths, which makes the
reference module pack the sequences as it does for batches of mixed widths.

Median step time over --steps timed steps after --warmup, samples/s from it, peak RSS from
getrusage at the end; with --arch both each preset runs in its own process (this script run
again), so each peak RSS is its own. --compare prints the markdown table of
bench/results/train-cpu.md from the JSON files both programs wrote (medians over the runs).
Threads: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS are set before torch is imported, and
torch.set_num_threads(N).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def run_arch(args):
    rss_start = peak_rss_mib()  # before torch is imported
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(HERE, "..", "tools", "reference"))
    from crnn import CRNN, PRESETS
    from svtr_lite import PRESETS as SVTR_PRESETS, SVTRLite

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rss_import = peak_rss_mib()
    dev = torch.device(args.device)
    if args.arch == "svtr-lite":
        model = SVTRLite(96, **SVTR_PRESETS[args.arch]).to(dev)  # blank + 95 characters
    else:
        model = CRNN(96, **PRESETS[args.arch]).to(dev)
    model.train()
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-4)
    if args.tf32 and dev.type == "cuda":  # what cuDNN does for convolutions by default; matmuls too
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"--compile needs PyTorch 2 (this is {torch.__version__})")
    forward_model = torch.compile(model) if args.compile else model
    # Automatic mixed precision as PyTorch users run it: the forward pass under autocast (bf16
    # matmuls and convolutions: tensor cores on a GPU, oneDNN's AVX512_BF16/AMX kernels on a
    # CPU; float32 master weights and optimizer state), the loss in float32. bf16 needs no
    # gradient scaler.
    amp = args.amp == "bf16"

    N, W = args.batch, args.width
    T = W // 4 if args.arch == "svtr-lite" else W // 4 + 1
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.rand(N, 1, 32, W, generator=gen) * 2 - 1
    widths = torch.full((N,), W, dtype=torch.long)
    mid = max(3, T // 3)
    target_lengths = torch.randint(mid - 2, mid + 3, (N,), generator=gen)
    targets = torch.randint(1, 96, (int(target_lengths.sum()),), generator=gen)
    input_lengths = torch.full((N,), T, dtype=torch.long)
    x, targets = x.to(dev), targets.to(dev)

    def sync():  # GPU work is asynchronous: wait for it before reading the clock
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    timed = []
    loss_v = 0.0
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
            logits = forward_model(x, widths) if args.packed else forward_model(x)
        sync()
        t1 = time.perf_counter()
        loss = F.ctc_loss(logits.float().log_softmax(2), targets, input_lengths, target_lengths, blank=0,
                          reduction="mean", zero_infinity=True)
        loss_v = loss.item()
        t2 = time.perf_counter()
        loss.backward()
        sync()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 5.0)
        sync()
        t4 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        t5 = time.perf_counter()
        if i >= args.warmup:
            timed.append({"forward": t1 - t0, "loss": t2 - t1, "backward": t3 - t2, "clip": t4 - t3,
                          "optim": t5 - t4})

    ms = [1e3 * sum(p.values()) for p in timed]
    step_ms = statistics.median(ms)
    return {"arch": args.arch, "params": sum(p.numel() for p in params), "ms_median": step_ms,
            "ms_min": min(ms), "ms_max": max(ms), "samples_per_s": 1e3 * N / step_ms,
            "peak_rss_mib": peak_rss_mib(), "rss_before_model_mib": rss_import, "rss_before_torch_mib": rss_start,
            "steps": args.steps, "warmup": args.warmup, "last_loss": loss_v, "packed": args.packed,
            "device": args.device, "amp": args.amp, "compile": args.compile, "tf32": args.tf32,
            "phases_ms": {k: statistics.median(1e3 * p[k] for p in timed) for k in timed[0]}}, torch.__version__


def print_result(r, phases):
    print(f"{r['arch']:<7} {r['ms_median']:9.1f} {r['ms_min']:10.1f} - {r['ms_max']:7.1f} "
          f"{r['samples_per_s']:10.2f} {r['peak_rss_mib']:10.0f}", flush=True)
    if phases:
        p = r["phases_ms"]
        print(f"        median ms per phase: forward {p['forward']:.1f}, loss {p['loss']:.1f}, "
              f"backward {p['backward']:.1f}, clip {p['clip']:.1f}, adamw+zero_grad {p['optim']:.1f}", flush=True)


def run(args):
    if not args.quiet:
        print(f"torch, {args.threads} threads, batch {args.batch}, 32x{args.width} lines, "
              f"{args.warmup} warm-up + {args.steps} timed steps{' (packed)' if args.packed else ''}"
              f"{', AMP bf16' if args.amp == 'bf16' else ''}{', torch.compile' if args.compile else ''}"
              f"{', TF32' if args.tf32 else ''}")
        print(f"{'arch':<7} {'ms/step':>9} {'min - max':>20} {'samples/s':>10} {'peak MiB':>10}")
    results, version = [], None
    if args.arch == "both":
        for arch in ("crnn", "crnn-s"):  # one process per preset: its own peak RSS
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "r.json")
                cmd = [sys.executable, os.path.abspath(__file__), "--arch", arch, "--batch", str(args.batch),
                       "--width", str(args.width), "--threads", str(args.threads), "--steps", str(args.steps),
                       "--warmup", str(args.warmup), "--seed", str(args.seed), "--json", out, "--quiet",
                       "--device", args.device]
                if args.packed:
                    cmd.append("--packed")
                cmd += ["--amp", args.amp] + (["--compile"] if args.compile else []) + (["--tf32"] if args.tf32 else [])
                subprocess.run(cmd, check=True)
                with open(out) as f:
                    j = json.load(f)
            version = j["impl"]
            results.append(j["results"][0])
            print_result(results[-1], args.phases)
    else:
        r, v = run_arch(args)
        version = f"torch {v}"
        results.append(r)
        if not args.quiet:
            print_result(r, args.phases)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"impl": version, "threads": args.threads, "batch": args.batch, "width": args.width,
                       "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "results": results}, f, indent=1)


def merge(paths):
    by_arch = {}
    for p in paths.split(","):
        with open(p) as f:
            for r in json.load(f)["results"]:
                by_arch.setdefault(r["arch"], []).append(r)
    med = statistics.median
    return {a: {"ms": med(r["ms_median"] for r in rs), "min": min(r["ms_min"] for r in rs),
                "max": max(r["ms_max"] for r in rs), "sps": med(r["samples_per_s"] for r in rs),
                "rss": med(r["peak_rss_mib"] for r in rs), "rss_lo": min(r["peak_rss_mib"] for r in rs),
                "rss_hi": max(r["peak_rss_mib"] for r in rs), "runs": len(rs),
                "phases": {k: med(r["phases_ms"][k] for r in rs) for k in rs[0]["phases_ms"]}}
            for a, rs in by_arch.items()}


def compare(ocrt_paths, torch_paths):
    a, b = merge(ocrt_paths), merge(torch_paths)
    print("| arch | ocrt ms/step (min-max) | ocrt samples/s | ocrt peak RSS MiB | torch ms/step (min-max) | "
          "torch samples/s | torch peak RSS MiB | samples/s ocrt / torch | RSS ocrt / torch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for arch, r in a.items():
        if arch not in b:
            continue
        t = b[arch]
        print(f"| {arch} | {r['ms']:.0f} ({r['min']:.0f}-{r['max']:.0f}) | {r['sps']:.2f} | {r['rss']:.0f} | "
              f"{t['ms']:.0f} ({t['min']:.0f}-{t['max']:.0f}) | {t['sps']:.2f} | {t['rss']:.0f} | "
              f"{r['sps'] / t['sps']:.2f} | {r['rss'] / t['rss']:.2f} |")
    print()
    print("| arch | phase | ocrt ms | torch ms | torch / ocrt |")
    print("| --- | --- | --- | --- | --- |")
    for arch, r in a.items():
        if arch not in b:
            continue
        for k, v in r["phases"].items():
            t = b[arch]["phases"].get(k)
            if t is not None:
                print(f"| {arch} | {k} | {v:.1f} | {t:.1f} | {t / v:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", default="both", choices=["crnn", "crnn-s", "svtr-lite", "both"])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--phases", action="store_true", help="print the median time of each phase of a step")
    p.add_argument("--packed", action="store_true", help="pass the widths: packed sequences in the LSTM")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (the GPU comparison at batch 256)")
    p.add_argument("--amp", default="off", choices=["off", "bf16"],
                   help="bf16: the forward pass under torch.autocast (AMP), the loss in float32")
    p.add_argument("--compile", action="store_true", help="run the model through torch.compile (PyTorch 2)")
    p.add_argument("--tf32", action="store_true", help="on a GPU: TF32 tensor-core math in matmuls and cuDNN")
    p.add_argument("--json")
    p.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--compare", nargs=2, metavar=("OCRT_JSONS", "TORCH_JSONS"))
    args = p.parse_args()
    if args.compare:
        compare(*args.compare)
        return
    if args.width < 4 or args.width % 4 or args.batch < 1 or args.steps < 1 or args.warmup < 0 or args.threads < 1:
        p.error("need --width a positive multiple of 4, --batch >= 1, --steps >= 1, --warmup >= 0, --threads >= 1")
    run(args)


if __name__ == "__main__":
    main()
