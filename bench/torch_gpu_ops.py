#!/usr/bin/env python3
"""The PyTorch side of bench/bench_gpu_ops.cpp: the same cases on the same GPU (CRNN and SVTR-lite
operator shapes on 32 x 100 lines, batch 256, and a whole CRNN step), the same rules, the same
table.

    python3 bench/torch_gpu_ops.py --device cuda:0 [--batch B] [--reps R] [--case-seconds S]
                                   [--only SUBSTRING] [--json FILE] [--gemm N] [--copy-mib M]
                                   [--cudnn-benchmark]
    python3 bench/torch_gpu_ops.py --compare OCRT.json[,...] TORCH.json[,...]

Each case is timed as "fwd" (under torch.no_grad) and "fwd+bwd" (forward, then backward from a
fixed random upstream gradient; the leaves' .grad is set to None before each repetition). Every
repetition is bracketed by torch.cuda.synchronize and read from time.perf_counter; 3 warm-ups,
then R repetitions (fewer when a case would exceed --case-seconds); the median is reported.
GFLOP/s and GB/s are counted exactly as bench_gpu_ops.cpp counts them, and set against this
run's own ceilings: a --gemm^3 float32 matmul (cuBLAS, TF32 off) and a --copy-mib MiB clone()
(bytes read + written).

What differs from ocrt, by design of the two libraries: PyTorch runs convolutions and the LSTM
through cuDNN (ocrt: its own kernels + cuBLAS); attention with need_weights=False goes to
scaled_dot_product_attention (fused kernels where they apply); PyTorch has no fused
CTC-from-logits, so both CTC cases (and the CRNN step) run log_softmax + ctc_loss (native CUDA
kernel: targets are int64 on the GPU, which keeps cuDNN's CTC out). TF32 is off for matmul and
cuDNN; cudnn.benchmark is off unless --cudnn-benchmark (ocrt does no autotuning).

--compare prints a markdown table, ocrt against PyTorch, from the JSON files both wrote; with
several files per side (alternating runs) it takes the median of the runs' medians.
"""
import argparse
import json
import os
import statistics
import sys
import time

WARMUP = 3
CLASSES = 97  # blank + the 96-character charset
FRAMES = 26   # T = W/4 + 1 for W = 100

# The convolutions of CRNN's `cnn` (docs/models.md) at their input shapes for a 32 x 100 line:
# (name, Cin, H, W, Cout, k, pad, bias).
CRNN_CONVS = [
    ("crnn.conv0", 1, 32, 100, 64, 3, 1, True),
    ("crnn.conv3", 64, 16, 50, 128, 3, 1, True),
    ("crnn.conv6", 128, 8, 25, 256, 3, 1, False),
    ("crnn.conv9", 256, 8, 25, 256, 3, 1, True),
    ("crnn.conv12", 256, 4, 26, 512, 3, 1, False),
    ("crnn.conv15", 512, 4, 26, 512, 3, 1, True),
    ("crnn.conv18", 512, 2, 27, 512, 2, 0, False),
]


def conv_macs(N, cin, h, w, cout, k, pad):
    ho, wo = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    return N * cout * ho * wo * cin * k * k


def lstm_macs(T, N, I, H, layers):
    return sum(2 * T * N * 4 * H * ((I if l == 0 else 2 * H) + H) for l in range(layers))


def dims(*d):
    return "x".join(str(v) for v in d)


class Prepared:
    """A case's timed steps and the work of one run (FLOPs, or bytes when memory_bound)."""

    def __init__(self, fwd, train, fwd_work=0.0, train_work=0.0, memory_bound=False):
        self.fwd, self.train = fwd, train
        self.fwd_work, self.train_work, self.memory_bound = fwd_work, train_work, memory_bound


def cases(torch, F, dev, N):
    def rand(*shape, lo=-1.0, hi=1.0):
        return torch.rand(*shape, device=dev) * (hi - lo) + lo

    def inp(*shape, grad=True):
        return rand(*shape).requires_grad_(grad)

    def weight(*shape, fan_in):
        b = fan_in ** -0.5
        return rand(*shape, lo=-b, hi=b).requires_grad_()

    def fwd_and_train(forward, leaves):
        with torch.no_grad():
            dy = torch.rand_like(forward()) * 2 - 1

        def fwd():
            with torch.no_grad():
                forward()

        def train():
            for t in leaves:
                t.grad = None
            forward().backward(dy)
        return fwd, train

    def conv(name, cin, h, w, cout, k, pad, bias):
        def make():
            first = cin == 1  # the image needs no gradient: conv0's backward is dW only
            x = inp(N, cin, h, w, grad=not first)
            wt = weight(cout, cin, k, k, fan_in=cin * k * k)
            b = weight(cout, fan_in=cin * k * k) if bias else None
            leaves = [wt] + ([] if first else [x]) + ([b] if bias else [])
            flops = 2 * conv_macs(N, cin, h, w, cout, k, pad)
            return Prepared(*fwd_and_train(lambda: F.conv2d(x, wt, b, padding=pad), leaves),
                            flops, flops * (2 if first else 3))
        return name, f"{dims(N, cin, h, w)}->{cout} k{k}", make

    def pool(name, C, H, W, stride, pad):
        def make():
            x = inp(N, C, H, W)
            ho, wo = (H + 2 * pad[0] - 2) // stride[0] + 1, (W + 2 * pad[1] - 2) // stride[1] + 1
            in_b, out_b = 4.0 * N * C * H * W, 4.0 * N * C * ho * wo
            return Prepared(*fwd_and_train(lambda: F.max_pool2d(x, (2, 2), stride, pad), [x]),
                            in_b + out_b, 2 * (in_b + out_b), True)
        return name, f"{dims(N, C, H, W)} s{stride[0]},{stride[1]}", make

    def bn(name, C, H, W):
        def make():
            x, w, b = inp(N, C, H, W), weight(C, fan_in=1), weight(C, fan_in=1)
            rm, rv = rand(C, lo=-0.1, hi=0.1), rand(C, lo=0.5, hi=1.5)
            nb = 4.0 * N * C * H * W
            return Prepared(*fwd_and_train(lambda: F.batch_norm(x, rm, rv, w, b, training=True), [x, w, b]),
                            2 * nb, 5 * nb, True)
        return name, dims(N, C, H, W), make

    def lstm(name, T, I, H):
        def make():
            m = torch.nn.LSTM(I, H, num_layers=2, bidirectional=True).to(dev)
            x = inp(T, N, I)
            flops = 2 * lstm_macs(T, N, I, H, 2)
            return Prepared(*fwd_and_train(lambda: m(x)[0], list(m.parameters()) + [x]), flops, 3 * flops)
        return name, f"T{T} N{N} {I}->{H} 2L bi", make

    def linear(name, M, K, Nout):
        def make():
            x, w, b = inp(M, K), weight(Nout, K, fan_in=K), weight(Nout, fan_in=K)
            flops = 2.0 * M * K * Nout
            return Prepared(*fwd_and_train(lambda: F.linear(x, w, b), [x, w, b]), flops, 3 * flops)
        return name, f"{dims(M, K)}->{Nout}", make

    def gelu(name, M, D):
        def make():
            x = inp(M, D)
            nb = 4.0 * M * D
            return Prepared(*fwd_and_train(lambda: F.gelu(x), [x]), 2 * nb, 5 * nb, True)
        return name, dims(M, D), make

    def layer_norm(name, M, D):
        def make():
            x, w, b = inp(M, D), weight(D, fan_in=1), weight(D, fan_in=1)
            nb = 4.0 * M * D
            return Prepared(*fwd_and_train(lambda: F.layer_norm(x, (D,), w, b), [x, w, b]), 2 * nb, 5 * nb, True)
        return name, dims(M, D), make

    def ctc_targets(T):
        lengths = torch.randint(5, 16, (N,))  # about 10 on average, as ocrt's
        targets = torch.randint(1, CLASSES, (int(lengths.sum()),), device=dev)  # int64 on the GPU
        return targets, torch.full((N,), T, dtype=torch.long), lengths

    def ctc(name, T):
        def make():
            z = rand(T, N, CLASSES, lo=-3.0, hi=3.0).requires_grad_()
            targets, il, tl = ctc_targets(T)

            def loss():
                return F.ctc_loss(z.log_softmax(2), targets, il, tl)

            def fwd():
                with torch.no_grad():
                    loss()

            def train():
                z.grad = None
                loss().backward()
            nb = 4.0 * T * N * CLASSES
            return Prepared(fwd, train, nb, 2 * nb, True)
        return name, f"T{T} N{N} C{CLASSES} S~10", make

    def mha(name, Hg, Wg, E, h, local):
        L = Hg * Wg

        def make():
            x = inp(L, N, E)
            w_in, b_in = weight(3 * E, E, fan_in=E), weight(3 * E, fan_in=E)
            w_out, b_out = weight(E, E, fan_in=E), weight(E, fan_in=E)
            mask = None
            if local:  # SVTR's 7 x 11 window: True = may not attend (ocrt's local_attention_mask)
                idx = torch.arange(L, device=dev)
                i, j = idx // Wg, idx % Wg
                mask = ((i[:, None] - i[None, :]).abs() > 3) | ((j[:, None] - j[None, :]).abs() > 5)

            def forward():
                return F.multi_head_attention_forward(
                    x, x, x, E, h, w_in, b_in, None, None, False, 0.0, w_out, b_out, training=True,
                    need_weights=False, attn_mask=mask)[0]
            flops = 2.0 * L * N * 4 * E * E + 4.0 * N * L * L * E
            return Prepared(*fwd_and_train(forward, [x, w_in, b_in, w_out, b_out]), flops, 3 * flops)
        return name, f"L{L}({dims(Hg, Wg)}) N{N} E{E} h{h}", make

    def crnn():
        def make():
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "reference"))
            from crnn import CRNN  # the reference module of docs/models.md

            model = CRNN(CLASSES).to(dev)  # the `crnn` preset's defaults
            x = rand(N, 1, 32, 100)
            targets, il, tl = ctc_targets(FRAMES)

            def fwd():
                model.eval()
                with torch.no_grad():
                    model(x)

            def train():
                model.train()
                model.zero_grad(set_to_none=True)
                F.ctc_loss(model(x).log_softmax(2), targets, il, tl).backward()
            macs = lstm_macs(FRAMES, N, 512, 256, 2) + FRAMES * N * 512 * CLASSES
            macs += sum(conv_macs(N, *c[1:7]) for c in CRNN_CONVS)
            first = conv_macs(N, *CRNN_CONVS[0][1:7])
            return Prepared(fwd, train, 2 * macs, 6 * macs - 2 * first)
        return "crnn.model", f"{dims(N, 1, 32, 100)} C{CLASSES}", make

    out = [conv(*c) for c in CRNN_CONVS]
    out += [
        pool("crnn.pool2", 64, 32, 100, (2, 2), (0, 0)),
        pool("crnn.pool5", 128, 16, 50, (2, 2), (0, 0)),
        pool("crnn.pool11", 256, 8, 25, (2, 1), (0, 1)),
        pool("crnn.pool17", 512, 4, 26, (2, 1), (0, 1)),
        bn("crnn.bn7", 256, 8, 25),
        bn("crnn.bn13", 512, 4, 26),
        bn("crnn.bn19", 512, 1, 26),
        lstm("crnn.lstm", FRAMES, 512, 256),
        linear("crnn.fc", FRAMES * N, 512, CLASSES),
        ctc("crnn.ctc.fused", FRAMES),       # PyTorch has no fused form: same work as the next
        ctc("crnn.ctc.logsoftmax", FRAMES),
        crnn(),
        layer_norm("svtr.ln1", N * 200, 64),
        layer_norm("svtr.ln2", N * 100, 128),
        layer_norm("svtr.ln3", N * 50, 256),
        mha("svtr.mha1.local", 8, 25, 64, 2, True),
        mha("svtr.mha1.global", 8, 25, 64, 2, False),
        mha("svtr.mha2.global", 4, 25, 128, 4, False),
        mha("svtr.mha3.global", 2, 25, 256, 8, False),
        linear("svtr.mlp1.fc1", N * 200, 64, 256),
        gelu("svtr.mlp1.gelu", N * 200, 256),
        linear("svtr.mlp1.fc2", N * 200, 256, 64),
        linear("svtr.mlp3.fc1", N * 50, 256, 1024),
        linear("svtr.mlp3.fc2", N * 50, 1024, 256),
    ]
    return out


def first_line(e):
    text = f"{type(e).__name__}: {e}"
    return text.splitlines()[0] if text else type(e).__name__


class Runner:
    def __init__(self, torch, dev, reps, budget_s):
        self.torch, self.dev, self.reps, self.budget_s = torch, dev, reps, budget_s
        self.copy_gbs = 0.0
        self.sgemm_gflops = 0.0

    def seconds_of(self, step):
        sync = self.torch.cuda.synchronize
        sync(self.dev)
        t0 = time.perf_counter()
        step()
        sync(self.dev)
        return time.perf_counter() - t0

    def measure(self, name, shape, mode, step, work, memory_bound):
        torch = self.torch
        r = {"name": name, "shape": shape, "mode": mode}
        try:
            torch.cuda.reset_peak_memory_stats(self.dev)
            last = 0.0
            for _ in range(WARMUP):
                last = self.seconds_of(step)
            reps = self.reps
            if last * reps > self.budget_s:
                reps = max(3, int(self.budget_s / max(last, 1e-9)))
            ms = sorted(1e3 * self.seconds_of(step) for _ in range(reps))
        except Exception as e:  # an op PyTorch refuses, or out of memory: report and go on
            r.update(status="n/a", reason=first_line(e))
            try:
                torch.cuda.synchronize(self.dev)
            except Exception as e2:
                r["reason"] += "; then: " + first_line(e2)
            return r
        median = statistics.median(ms)
        rate = work / (median * 1e-3) / 1e9
        top = self.copy_gbs if memory_bound else self.sgemm_gflops
        r.update(status="ok", median=median, min=ms[0], max=ms[-1], reps=len(ms),
                 rate=rate, rate_unit="GB/s" if memory_bound else "GFLOP/s",
                 fraction_of_ceiling=rate / top if top > 0 else None,
                 peak_MiB=torch.cuda.max_memory_allocated(self.dev) / 2**20)
        r["bytes" if memory_bound else "flops"] = work
        return r


def rate_str(r):
    return f"{r['rate']:.1f} {r['rate_unit']}"


def fraction_str(r):
    f = r.get("fraction_of_ceiling")
    if f is None:
        return "-"
    return f"{100 * f:.1f}% {'copy' if r['rate_unit'] == 'GB/s' else 'sgemm'}"


def print_row(r):
    if r["status"] != "ok":
        print(f"{r['name']:<20} {r['shape']:<34} {r['mode']:<8} n/a ({r['reason']})", flush=True)
    else:
        print(f"{r['name']:<20} {r['shape']:<34} {r['mode']:<8} {r['median']:9.3f} ms "
              f"({r['min']:.3f}-{r['max']:.3f}, {r['reps']} reps) {rate_str(r):>18} {fraction_str(r):>16}  "
              f"peak {r['peak_MiB']:.0f} MiB", flush=True)


def run(args):
    import torch
    import torch.nn.functional as F

    if not args.device.startswith("cuda:"):
        sys.exit(f"torch_gpu_ops: expected --device cuda:N, got '{args.device}'")
    if not torch.cuda.is_available():
        sys.exit("torch_gpu_ops: this PyTorch sees no CUDA GPU")
    dev = torch.device(args.device)
    if dev.index is None or dev.index >= torch.cuda.device_count():
        sys.exit(f"torch_gpu_ops: {args.device} does not exist ({torch.cuda.device_count()} GPUs visible)")
    torch.cuda.set_device(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    torch.manual_seed(1)
    name = torch.cuda.get_device_name(dev)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    N = args.batch
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {cudnn} for conv and LSTM; "
          f"cudnn.benchmark {args.cudnn_benchmark}; TF32 off) on {name} ({args.device}), batch {N}: "
          f"median of up to {args.reps} repetitions after {WARMUP} warm-ups, ms")

    runner = Runner(torch, dev, args.reps, args.case_seconds)
    rows = []
    # ---- this GPU's own ceilings
    try:
        n = args.copy_mib * 2**20 // 4
        src = torch.rand(n, device=dev) * 2 - 1
        r = runner.measure("ceiling.copy", f"{args.copy_mib} MiB clone", "copy", lambda: src.clone(), 2.0 * 4 * n, True)
        del src
    except Exception as e:
        r = {"name": "ceiling.copy", "shape": "", "mode": "copy", "status": "n/a", "reason": first_line(e)}
    if r["status"] == "ok":
        runner.copy_gbs, r["fraction_of_ceiling"] = r["rate"], 1.0
    print_row(r)
    rows.append(r)
    try:
        g = args.gemm
        a, b = torch.rand(g, g, device=dev) * 2 - 1, torch.rand(g, g, device=dev) * 2 - 1
        r = runner.measure("ceiling.sgemm", f"{dims(g, g, g)} f32", "matmul", lambda: torch.matmul(a, b),
                           2.0 * g ** 3, False)
        del a, b
    except Exception as e:
        r = {"name": "ceiling.sgemm", "shape": "", "mode": "matmul", "status": "n/a", "reason": first_line(e)}
    if r["status"] == "ok":
        runner.sgemm_gflops, r["fraction_of_ceiling"] = r["rate"], 1.0
    print_row(r)
    rows.append(r)
    torch.cuda.empty_cache()

    # ---- the cases
    for cname, shape, make in cases(torch, F, dev, N):
        if args.only and args.only not in cname:
            continue
        try:
            p = make()
        except Exception as e:
            for mode in ("fwd", "fwd+bwd"):
                r = {"name": cname, "shape": shape, "mode": mode, "status": "n/a", "reason": first_line(e)}
                print_row(r)
                rows.append(r)
            continue
        for mode, step, work in (("fwd", p.fwd, p.fwd_work), ("fwd+bwd", p.train, p.train_work)):
            r = runner.measure(cname, shape, mode, step, work, p.memory_bound)
            print_row(r)
            rows.append(r)
        del p

    peak = max((r.get("peak_MiB", 0.0) for r in rows), default=0.0)
    print(f"\nGPU memory (caching allocator): peak allocated {peak:.0f} MiB (largest single row), "
          f"now allocated {torch.cuda.memory_allocated(dev) / 2**20:.0f} MiB, "
          f"reserved {torch.cuda.memory_reserved(dev) / 2**20:.0f} MiB")
    copy_s = f"{runner.copy_gbs:.1f} GB/s" if runner.copy_gbs > 0 else "n/a"
    gemm_s = f"{runner.sgemm_gflops:.1f} GFLOP/s" if runner.sgemm_gflops > 0 else "n/a"
    print(f"\ntorch {torch.__version__}, {name}, batch {N}. Ceilings: copy {copy_s}, SGEMM (TF32 off) {gemm_s}.\n")
    print("| case | shape | mode | median ms | rate | of ceiling |\n| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r["status"] == "ok":
            print(f"| {r['name']} | {r['shape']} | {r['mode']} | {r['median']:.3f} | {rate_str(r)} | {fraction_str(r)} |")
        else:
            why = r["reason"] if len(r["reason"]) <= 70 else r["reason"][:67] + "..."
            print(f"| {r['name']} | {r['shape']} | {r['mode']} | n/a ({why}) | | |")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"impl": f"torch {torch.__version__}", "device": name, "batch": N, "unit": "ms",
                       "cudnn": cudnn, "cudnn_benchmark": args.cudnn_benchmark,
                       "ceilings": {"copy_GBps": runner.copy_gbs or None, "sgemm_GFLOPs": runner.sgemm_gflops or None},
                       "peak_MiB": peak, "results": rows}, f, indent=1)


def merge(paths):
    """(name, mode) -> the median of the runs' medians, over comma-separated JSON files."""
    by_key = {}
    for p in paths.split(","):
        with open(p) as f:
            for r in json.load(f)["results"]:
                by_key.setdefault((r["name"], r["mode"]), []).append(r)
    out = {}
    for key, rs in by_key.items():
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            out[key] = {"shape": rs[0]["shape"], "median": None, "reason": rs[0].get("reason", "")}
            continue
        fr = [r["fraction_of_ceiling"] for r in ok if r.get("fraction_of_ceiling") is not None]
        out[key] = {"shape": ok[0]["shape"], "median": statistics.median(r["median"] for r in ok),
                    "min": min(r["min"] for r in ok), "max": max(r["max"] for r in ok),
                    "fraction": statistics.median(fr) if fr else None}
    return out


def compare(ocrt_paths, torch_paths):
    a, b = merge(ocrt_paths), merge(torch_paths)

    def cell(r):
        if r is None:
            return "-"
        if r["median"] is None:
            return "n/a"
        f = "" if r["fraction"] is None else f", {100 * r['fraction']:.0f}%"
        return f"{r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f}{f})"

    print("| case | shape | mode | ocrt ms (min-max, % ceiling) | torch ms (min-max, % ceiling) | torch / ocrt |")
    print("| --- | --- | --- | --- | --- | --- |")
    for key, r in a.items():
        t = b.get(key)
        ratio = "-"
        if t is not None and r["median"] and t["median"]:
            ratio = f"{t['median'] / r['median']:.2f}"
        print(f"| {key[0]} | {r['shape']} | {key[1]} | {cell(r)} | {cell(t)} | {ratio} |")


def main():
    p = argparse.ArgumentParser(description="PyTorch GPU timings of the OCR operators at CRNN and SVTR-lite "
                                            "shapes (the peer of bench_gpu_ops; see the file's docstring)")
    p.add_argument("--device", help="the GPU, cuda:N (required unless --compare)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--reps", type=int, default=20, help="timed repetitions after 3 warm-ups (>= 3)")
    p.add_argument("--case-seconds", type=float, default=3.0,
                   help="fewer repetitions when a case would take longer than this")
    p.add_argument("--only", help="only the cases whose name contains this (the ceilings always run)")
    p.add_argument("--json", help="also write the results as JSON")
    p.add_argument("--gemm", type=int, default=8192, help="N of the N^3 float32 matmul ceiling")
    p.add_argument("--copy-mib", type=int, default=1024, help="MiB cloned for the bandwidth ceiling")
    p.add_argument("--cudnn-benchmark", action="store_true", help="let cuDNN autotune (off by default)")
    p.add_argument("--compare", nargs=2, metavar=("OCRT_JSONS", "TORCH_JSONS"))
    args = p.parse_args()
    if args.compare:
        compare(*args.compare)
        return
    if not args.device:
        p.error("--device cuda:N is required")
    if args.batch < 1 or args.gemm < 1 or args.copy_mib < 1 or args.case_seconds <= 0:
        p.error("--batch, --gemm, --copy-mib and --case-seconds must be positive")
    args.reps = max(3, args.reps)
    run(args)


if __name__ == "__main__":
    main()
