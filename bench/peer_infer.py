#!/usr/bin/env python3
"""The inference peers of docs/benchmarking.md: ONNX Runtime, OpenVINO and a current PyTorch
from pip, reading the same lines end to end as ocrt-infer and bench/torch_infer.py, with the
same weights. Run it with the peers' python (bench/peers.sh makes it):

    PY=$(bench/peers.sh --python)
    $PY bench/peer_infer.py --weights FILE --labels LABELS
        --engine ort|openvino|openvino-f32|torch|torch-bf16 [--threads 2] [--batch 32]
        [--out TEXTS] [--json FILE] [--cache DIR] [--arch A --charset FILE] [--unpacked]
        [--ov-shapes dynamic|static]
    $PY bench/peer_infer.py --weights FILE --engine E --latency IMAGE [--reps 200] [--warmup 20]
    $PY bench/peer_infer.py --weights FILE --export [--cache DIR]     (print the ONNX file's path)

The model: the reference module of tools/reference/crnn.py (crnn or crnn-s), its weights loaded
strictly from an ocrt model file (metadata gives arch, config and charset) or a weights-only
file (--arch and --charset). For ort and openvino it is exported once with torch.onnx.export
(TorchScript exporter, opset 17; input "image" N x 1 x 32 x W float with N and W dynamic, output
"logits" T x N x classes) into --cache (default ~/.cache/ocrt-peers-onnx), named by the weights'
SHA-256; the export runs in a child process and checks the graph against the module with ONNX
Runtime on a batch of two widths, so the measuring process of ort and openvino never imports
torch and its peak RSS is the engine's own.

The lines: what bench/torch_infer.py does, with its own functions (imported, not copied): PIL
decode, 8-bit gray, ocrt's resize to height 32, batches of --batch sorted by width, white
padding to a multiple of 4 plus the right margin of 28, p / 127.5 - 1, the model, greedy CTC
decoding up to each line's own frame count. The time covers that work (reading the images to
decoding), not start-up, loading the model, ONNX Runtime's session creation or OpenVINO's
compile_model ("load_seconds" in the JSON).

The engines, each on --threads threads:
  ort           onnxruntime's CPUExecutionProvider, float32, intra-op threads = --threads,
                inter-op 1, sequential execution, all graph optimisations (its default)
  openvino      OpenVINO's CPU plugin as it comes: its default INFERENCE_PRECISION_HINT for this
                CPU (read back from the compiled model and reported: bf16 where it thinks bf16
                pays, f32 elsewhere), INFERENCE_NUM_THREADS = --threads
  openvino-f32  the same with INFERENCE_PRECISION_HINT f32: float32 figures
  torch         the reference module in eager PyTorch under inference_mode, packed LSTM (as
                torch_infer.py); --unpacked runs the LSTM over the padding as the ONNX graph does
  torch-bf16    the same under torch.autocast("cpu", dtype=torch.bfloat16)
OpenVINO gets one model with dynamic batch and width, compiled once (--ov-shapes dynamic, the
default). --ov-shapes static reshapes the model to each batch's N x W and compiles it again:
batches of sorted lines each have a width of their own, so that is one compile_model per batch,
paid inside the timed work. On 40 lines in 5 batches of 8 it gave the same texts, about 9
lines/s against 9.5-13.5 and 500 MiB peak RSS against 290 (2026-11-25, a 2-vCPU AMD EPYC of
family 25 model 17, i.e. Zen 4, with other work on it), so dynamic it is.

Packed and unpacked LSTM. The reference module packs the sequences so that each line's LSTM
stops at its own last frame, as ocrt's does; an ONNX graph cannot hold packed sequences, so ort
and openvino run the LSTM over the batch's white padding too, as `torch --unpacked` does: the
backward direction reaches the text with a state it built in the padding, which matters most
near the end of lines much narrower than their batch. Measured with the shipped crnn-en
(2026-11-25): the 12 lines of samples/lines differ in 1 line (its next-to-last word, "texct"
packed, "text" unpacked; CER 1.05% packed, 0.84% unpacked), 40 held-out lines of
bench/peers_cpu.sh in 1 line (its last character, "c" packed and right, "C" unpacked; CER
0.80% against 0.87%).
ort's and openvino-f32's texts equal `torch --unpacked`'s there, and the ONNX graph's logits
equal the module's within 1e-6 (relative); openvino in bf16 happened to match the packed texts.
So the peers' CER may differ from ocrt's and torch's by a line or so in a few hundred: a
property of the ONNX graph, not of the runtimes.

Printed on stdout: one JSON object (engine, versions, the precision that ran, lines, seconds,
lines/s, CER and line accuracy as torch_infer.py --score counts them, peak RSS from getrusage);
a one-line summary goes to stderr. --out writes the texts one a line in label order.
"""
import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_infer as ti  # noqa: E402  (standard library at import time; torch only inside)

OPSET = 17
MARGINS = {"crnn": ti.RIGHT_MARGIN, "crnn-s": ti.RIGHT_MARGIN}  # infer/predictor.h kRightMargin
ENGINES = ["ort", "openvino", "openvino-f32", "torch", "torch-bf16"]


def set_thread_env(threads):
    # before numpy, torch, onnxruntime or openvino starts a thread pool
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)


# ---------------------------------------------------------------- the model

def build_module(weights, arch, charset_file):
    """(eval-mode reference CRNN with the file's weights loaded strictly, arch, charset)."""
    sys.path.insert(0, os.path.join(HERE, "..", "tools", "reference"))
    from crnn import CRNN, PRESETS

    state, meta = ti.read_model_file(weights)
    if "config" in meta:
        file_arch = meta.get("arch")
        if arch and arch != file_arch:
            sys.exit(f"{weights} holds a '{file_arch}' model, but '{arch}' was asked for")
        arch = file_arch
        config = json.loads(meta["config"])
        charset = json.loads(meta["charset"])
        channels, hidden = tuple(config["channels"]), config["hidden"]
    else:
        if not (arch and charset_file):
            sys.exit(f"{weights} holds weights only: give --arch and --charset")
        with open(charset_file, encoding="utf-8") as f:
            charset = [line.rstrip("\n") for line in f if line.rstrip("\n") != ""]
        channels, hidden = PRESETS[arch]["channels"], PRESETS[arch]["hidden"]
    if arch not in MARGINS:
        sys.exit(f"{weights}: architecture '{arch}' is not one peer_infer.py exports (crnn, crnn-s)")
    model = CRNN(len(charset) + 1, channels, hidden)
    model.load_state_dict(state, strict=True)
    model.eval()
    return model, arch, charset


def onnx_paths(args):
    h = hashlib.sha256()
    with open(args.weights, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if args.charset:  # a weights-only file's charset is part of the model
        with open(args.charset, "rb") as f:
            h.update(f.read())
    stem = os.path.join(os.path.expanduser(args.cache), f"{h.hexdigest()[:16]}-opset{OPSET}")
    return stem + ".onnx", stem + ".json"


def export(args):
    """Child process: export the module to ONNX and check the graph against it."""
    import numpy as np
    import onnxruntime as ort
    import torch

    onnx_path, info_path = onnx_paths(args)
    model, arch, charset = build_module(args.weights, args.arch, args.charset)
    os.makedirs(os.path.dirname(onnx_path), exist_ok=True)
    tmp = onnx_path + f".{os.getpid()}.tmp"
    # The TorchScript exporter (dynamo=False): opset 17, with the batch and width dims made
    # dynamic from one example; the packed path of the module is not taken (no lengths).
    example = torch.full((2, 1, ti.HEIGHT, 160), 1.0)
    with warnings.catch_warnings():
        # that this exporter is the old one, and that an LSTM exported at batch 2 may fail at
        # other batch sizes: the check below runs batches of 3 and 1
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*batch_size other than 1.*")
        torch.onnx.export(model, (example,), tmp, dynamo=False, opset_version=OPSET, input_names=["image"],
                          output_names=["logits"], dynamic_axes={"image": {0: "batch", 3: "width"},
                                                                 "logits": {0: "frames", 1: "batch"}})
    # two batch sizes and widths other than the example's, against the module without lengths
    sess = ort.InferenceSession(tmp, providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(7)
    worst = 0.0
    for n, w in ((3, 96), (1, 244)):
        x = torch.rand(n, 1, ti.HEIGHT, w, generator=gen) * 2 - 1
        with torch.inference_mode():
            want = model(x).numpy()
        got = sess.run(None, {"image": x.numpy()})[0]
        if got.shape != want.shape:
            sys.exit(f"peer_infer.py: the exported graph gives {got.shape} for {tuple(x.shape)}, "
                     f"the module {want.shape}")
        worst = max(worst, float(np.abs(got - want).max() / max(1e-6, np.abs(want).max())))
    if worst > 1e-4:
        sys.exit(f"peer_infer.py: the exported graph differs from the module by {worst:.2e} (relative)")
    os.replace(tmp, onnx_path)
    info = {"arch": arch, "charset": charset, "opset": OPSET, "weights": os.path.abspath(args.weights),
            "torch": torch.__version__, "onnxruntime_check_max_rel_diff": worst}
    with open(info_path, "w", encoding="utf-8") as f:
        json.dump(info, f, ensure_ascii=False, indent=1)
    print(f"peer_infer.py: exported {args.weights} ({arch}) to {onnx_path}; ONNX Runtime against the module: "
          f"max relative difference {worst:.1e}", file=sys.stderr)


def exported_model(args):
    onnx_path, info_path = onnx_paths(args)
    if not (os.path.exists(onnx_path) and os.path.exists(info_path)):
        cmd = [sys.executable, os.path.abspath(__file__), "--export", "--weights", args.weights, "--cache", args.cache]
        if args.arch:
            cmd += ["--arch", args.arch]
        if args.charset:
            cmd += ["--charset", args.charset]
        if subprocess.run(cmd).returncode != 0:  # the child has said why
            sys.exit(1)
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    if args.arch and args.arch != info["arch"]:
        sys.exit(f"{args.weights} holds a '{info['arch']}' model, but '{args.arch}' was asked for")
    return onnx_path, info


# ---------------------------------------------------------------- the engines
# Each returns (forward(x float32 N x 1 x 32 x W, widths) -> logits T x N x C as numpy,
# precision that runs, versions).

def engine_ort(args, onnx_path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])

    def forward(x, widths):
        return sess.run(None, {"image": x})[0]
    return forward, "fp32", {"onnxruntime": ort.__version__}


def engine_openvino(args, onnx_path):
    import openvino as ov

    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": args.threads}
    if args.engine == "openvino-f32":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    model = core.read_model(onnx_path)

    def compiled_info(compiled):
        return (compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
                {k: str(compiled.get_property(k)) for k in ("INFERENCE_NUM_THREADS", "NUM_STREAMS", "PERFORMANCE_HINT",
                                                            "EXECUTION_MODE_HINT")})

    versions = {"openvino": ov.get_version(), "openvino_cpu": core.get_property("CPU", "FULL_DEVICE_NAME"),
                "ov_shapes": args.ov_shapes}
    if args.ov_shapes == "dynamic":
        compiled = core.compile_model(model, "CPU", config)
        precision, props = compiled_info(compiled)
        request = compiled.create_infer_request()

        def forward(x, widths):
            request.infer({0: x})
            return request.get_output_tensor(0).data.copy()
    else:
        # compile for the first shape now, so that the precision can be reported like the
        # dynamic model's; each new N x W afterwards compiles its own
        requests = {}

        def request_for(shape):
            if shape not in requests:
                model.reshape({0: list(shape)})
                requests[shape] = core.compile_model(model, "CPU", config).create_infer_request()
            return requests[shape]
        probe = model.clone()
        probe.reshape({0: [1, 1, ti.HEIGHT, 64]})
        precision, props = compiled_info(core.compile_model(probe, "CPU", config))

        def forward(x, widths):
            request = request_for(x.shape)
            request.infer({0: x})
            return request.get_output_tensor(0).data.copy()
    versions["openvino_config"] = props
    return forward, {"bf16": "bf16", "f32": "fp32", "f16": "fp16"}.get(precision, precision), versions


def engine_torch(args):
    import torch

    torch.set_num_threads(args.threads)
    model, arch, charset = build_module(args.weights, args.arch, args.charset)
    bf16 = args.engine == "torch-bf16"

    def forward(x, widths):
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            xt = torch.from_numpy(x)
            logits = model(xt) if args.unpacked else model(xt, torch.tensor(widths, dtype=torch.long))
        return logits.float().numpy()
    precision = ("bf16 autocast" if bf16 else "fp32") + (", unpacked LSTM" if args.unpacked else ", packed LSTM")
    versions = {"torch": torch.__version__, "onednn": torch.backends.mkldnn.is_available(),
                "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    return forward, precision, versions, arch, charset


# ---------------------------------------------------------------- recognising

def start_engine(args):
    """The engine of --engine, ready: (forward, precision, versions, arch, charset, info, load_seconds)."""
    set_thread_env(args.threads)
    t_load = time.perf_counter()
    if args.engine.startswith("torch"):
        forward, precision, versions, arch, charset = engine_torch(args)
        info = {}
    else:
        onnx_path, info = exported_model(args)
        arch, charset = info["arch"], info["charset"]
        t_load = time.perf_counter()  # the export is a one-off, not the engine's loading
        if args.engine == "ort":
            forward, precision, versions = engine_ort(args, onnx_path)
        else:
            forward, precision, versions = engine_openvino(args, onnx_path)
    return forward, precision, versions, arch, charset, info, time.perf_counter() - t_load


def greedy(best_row, frames, charset):
    out, prev = [], 0
    for c in best_row[:frames]:
        if c != 0 and c != prev:
            out.append(charset[c - 1])
        prev = c
    return "".join(out)


def latency(args):
    """--latency IMAGE: one line, batch 1, --reps timed calls after --warmup; each call goes from
    the line's 8-bit pixels in memory (decoded and resized once, before timing) to its text:
    pad, normalise, the model, greedy decoding. The same work as bench/bench_latency.cpp."""
    import numpy as np
    forward, precision, versions, arch, charset, info, load_seconds = start_engine(args)
    image = ti.load_line(args.latency)
    margin = MARGINS[arch]
    padded = max(4, (image.shape[1] + 3) // 4 * 4)
    times, text = [], ""
    for i in range(args.warmup + args.reps):
        t0 = time.perf_counter()
        x = np.full((1, 1, ti.HEIGHT, padded + margin), 255, dtype=np.uint8)
        x[0, 0, :, :image.shape[1]] = image
        logits = forward(x.astype(np.float32) / np.float32(127.5) - np.float32(1.0), [padded])
        text = greedy(logits.argmax(2).T[0], padded // 4 + 1, charset)
        if i >= args.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    s = sorted(times)

    def pct(q):  # nearest rank, as bench_latency.cpp
        return s[max(0, math.ceil(q * len(s)) - 1)]
    result = {"engine": args.engine, "precision": precision, "image": args.latency, "width": int(image.shape[1]),
              "height": int(image.shape[0]), "weights": args.weights, "threads": args.threads, "reps": args.reps,
              "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99), "mean_ms": sum(times) / len(times),
              "min_ms": s[0], "text": text, "versions": versions, "load_seconds": load_seconds}
    print(json.dumps(result))


def recognise(args):
    forward, precision, versions, arch, charset, info, load_seconds = start_engine(args)
    import numpy as np
    margin = MARGINS[arch]

    lines = ti.read_labels(args.labels)
    texts = [""] * len(lines)
    t0 = time.perf_counter()
    images = [ti.load_line(p) for p, _ in lines]
    padded = [max(4, (im.shape[1] + 3) // 4 * 4) for im in images]
    order = sorted(range(len(lines)), key=lambda i: padded[i])  # stable, as torch_infer.py's
    forward_seconds = 0.0
    for start in range(0, len(order), args.batch):
        idx = order[start:start + args.batch]
        width = max(padded[i] for i in idx) + margin
        x = np.full((len(idx), 1, ti.HEIGHT, width), 255, dtype=np.uint8)
        for k, i in enumerate(idx):
            x[k, 0, :, :images[i].shape[1]] = images[i]
        # float32 throughout, as torch_infer.py's x.float() / 127.5 - 1.0
        batch = x.astype(np.float32) / np.float32(127.5) - np.float32(1.0)
        f0 = time.perf_counter()
        logits = forward(batch, [padded[i] for i in idx])  # (T, N, C)
        best = logits.argmax(2).T  # (N, T)
        forward_seconds += time.perf_counter() - f0
        for k, i in enumerate(idx):
            texts[i] = greedy(best[k], padded[i] // 4 + 1, charset)
    seconds = time.perf_counter() - t0

    s = ti.score(texts, [t for _, t in lines])
    versions.update({"python": platform.python_version(), "numpy": np.__version__})
    if info:
        versions["exported_with_torch"] = info["torch"]
    result = {"engine": args.engine, "weights": args.weights, "arch": arch, "precision": precision,
              "threads": args.threads, "batch": args.batch, "versions": versions, "lines": len(lines),
              "seconds": seconds, "lines_per_second": len(lines) / seconds, "forward_seconds": forward_seconds,
              "load_seconds": load_seconds, "cer": s["cer"], "line_accuracy": s["line_accuracy"],
              "distance": s["distance"], "truth_chars": s["truth_chars"], "peak_rss_mib": ti.peak_rss_mib()}
    print(f"peer_infer {args.engine} ({precision}): {len(lines)} lines in {seconds:.2f} s, "
          f"{result['lines_per_second']:.1f} lines/s (forward {forward_seconds:.2f} s); CER {100 * s['cer']:.2f}%; "
          f"peak RSS {result['peak_rss_mib']:.0f} MiB", file=sys.stderr)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in texts)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--labels")
    ap.add_argument("--engine", choices=ENGINES)
    ap.add_argument("--arch", choices=sorted(MARGINS))
    ap.add_argument("--charset")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--unpacked", action="store_true", help="torch engines: the LSTM over the padding, as ONNX")
    ap.add_argument("--ov-shapes", default="dynamic", choices=["dynamic", "static"],
                    help="openvino engines: one dynamic model, or a reshape + compile per batch shape")
    ap.add_argument("--cache", default=os.path.join("~", ".cache", "ocrt-peers-onnx"),
                    help="where the exported ONNX models are kept")
    ap.add_argument("--out", help="the texts, one a line in label order")
    ap.add_argument("--json", help="the JSON object, also written to this file")
    ap.add_argument("--export", action="store_true", help="export to --cache unless it is there, and stop")
    ap.add_argument("--latency", metavar="IMAGE", help="time one line at batch 1 instead of reading --labels")
    ap.add_argument("--reps", type=int, default=200, help="--latency: timed calls (200)")
    ap.add_argument("--warmup", type=int, default=20, help="--latency: calls before timing (20)")
    args = ap.parse_args()
    if args.batch < 1 or args.threads < 1:
        ap.error("--batch and --threads must be at least 1")
    if args.export:
        set_thread_env(args.threads)
        if not all(os.path.exists(p) for p in onnx_paths(args)):
            export(args)
        print(onnx_paths(args)[0])
    elif args.latency and args.engine:
        if args.reps < 1 or args.warmup < 0:
            ap.error("--reps must be at least 1 and --warmup at least 0")
        latency(args)
    elif not (args.labels and args.engine):
        ap.error("give --labels (or --latency IMAGE) and --engine")
    else:
        recognise(args)


if __name__ == "__main__":
    main()
