#!/usr/bin/env python3
"""ocrt-export's ONNX graphs against ONNX Runtime: the ctest test `onnx_round_trip` (label onnx).

For crnn (the shipped weights/crnn-en.safetensors), crnn-s (random weights, a weights-only file
exported with --arch and --charset) and svtr-lite (random weights, an ocrt model file), each
as a plain graph and as one with the "widths" input (--widths-input):

  1. ocrt-export writes the graph, and with --check-input/--check-output ocrt's own logits for
     a few batches: three lines each at widths 40, 128 and 333 px (333 padded with white to 336,
     as ocrt-infer pads), and a batch mixing those three widths, padded to the widest (plus
     CRNN's 28 white columns of right margin, as ocrt-infer adds); with the widths graph the
     mixed batch carries each line's width;
  2. onnx.checker.check_model(full_check=True) accepts the file; it imports only the default
     ai.onnx domain at opset >= 17 and every node is of that domain; the input and output are
     named and shaped as docs/formats.md says; metadata_props hold the model's arch, charset and
     the ocrt version;
  3. ONNX Runtime (CPU) computes logits of the same shape as ocrt's, within 1e-4 (max abs) of
     them, for every batch.

The random models come from the helper ocrt_onnx_models (tests/onnx/make_models.cpp). The lines
are random dark strokes on white, in the model's input scale (p / 127.5 - 1).

ONNX Runtime, onnx and numpy come from pip, in a virtual environment this script makes
(--venv, default the build folder's onnx-venv; OCRT_ONNX_VENV overrides it, e.g. a shared one
under ~/.cache) and reuses on later runs. When no virtual environment can be made or pip cannot
install the packages (no network), the script says why and exits with 77, which ctest reports
as skipped (SKIP_RETURN_CODE). Every later failure is a failure (exit 1).

    python3 tests/onnx/check_onnx.py --export build/ocrt-export --models-tool build/tests/ocrt_onnx_models \\
        --source . --work build/tests/onnx --venv build/onnx-venv
"""

import argparse
import json
import os
import struct
import subprocess
import sys

SKIP = 77
PACKAGES = ["onnx", "onnxruntime", "numpy"]
TOLERANCE = 1e-4
WIDTHS = (40, 128, 333)
LINES = 3  # per batch
CRNN_MARGIN = 28  # CRNN's right context (27 columns) rounded up to 4: what ocrt-infer pads a batch with


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


# ---------------------------------------------------------------- the virtual environment

def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def has_packages(python):
    probe = "import onnx, onnxruntime, numpy"
    return os.path.exists(python) and subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def ensure_venv(venv):
    """The venv's python, with the packages installed; skips (77) when that cannot be done."""
    python = venv_python(venv)
    if has_packages(python):
        return python
    print(f"making a virtual environment for ONNX Runtime in {venv}")
    r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
    if r.returncode != 0:
        skip(f"cannot make a virtual environment with {sys.executable} -m venv: {r.stderr.strip()[-300:]}")
    r = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--retries", "1",
                        "--timeout", "30", *PACKAGES], capture_output=True, text=True)
    if r.returncode != 0 or not has_packages(python):
        skip(f"pip could not install {' '.join(PACKAGES)} (no network or no index?): {r.stderr.strip()[-400:]}")
    return python


# ---------------------------------------------------------------- safetensors (the subset used here)

def write_safetensors(path, tensors):
    import numpy as np
    header, blobs, offset = {}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}[a.dtype]
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path, tensors=True):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read() if tensors else b""
    meta = header.pop("__metadata__", {})
    if not tensors:
        return {}, meta
    import numpy as np
    out = {}
    for name, h in header.items():
        dtype = {"F32": "<f4", "I64": "<i8"}[h["dtype"]]
        begin, end = h["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(h["shape"])
    return out, meta


# ---------------------------------------------------------------- inputs

def line(rng, width):
    """One 32 x width line in the model's input scale: white (1.0) with dark vertical strokes of
    random height and ink, about one column in three inked."""
    import numpy as np
    x = np.ones((32, width), np.float32)
    for col in range(width):
        if rng.random() < 0.35:
            top = int(rng.integers(4, 14))
            bottom = int(rng.integers(18, 29))
            x[top:bottom, col] = rng.uniform(-1.0, 0.4)
    return x


def padded(lines, width):
    """Lines side by side in a batch (N, 1, 32, width), each padded on the right with white."""
    import numpy as np
    x = np.ones((len(lines), 1, 32, width), np.float32)
    for n, ln in enumerate(lines):
        x[n, 0, :, :ln.shape[1]] = ln
    return x


def round4(w):
    return (w + 3) // 4 * 4


def batches(arch, with_widths, seed):
    """[(name, x, widths or None)]: three lines at each width, then one batch mixing the widths."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for w in WIDTHS:
        out.append((f"w{w}", padded([line(rng, w) for _ in range(LINES)], round4(w)), None))
    mixed = [line(rng, w) for w in WIDTHS]
    widest = round4(max(WIDTHS)) + (CRNN_MARGIN if arch.startswith("crnn") else 0)
    widths = np.array([round4(w) for w in WIDTHS], np.int64) if with_widths else None
    out.append(("mixed", padded(mixed, widest), widths))
    return out


# ---------------------------------------------------------------- the checks

def check_model_file(path, arch, charset, widths_input):
    """The checker, the opset and domains, the interface and the metadata. Returns the problems."""
    import onnx
    problems = []
    model = onnx.load(path)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # noqa: BLE001 - the checker raises several types
        problems.append(f"onnx.checker.check_model(full_check=True) refused it: {e}")
    opsets = {o.domain: o.version for o in model.opset_import}
    if set(opsets) - {"", "ai.onnx"} or max(opsets.values(), default=0) < 17:
        problems.append(f"imports opsets {opsets}; expected only ai.onnx, version >= 17")
    foreign = sorted({n.op_type + "@" + n.domain for n in model.graph.node if n.domain not in ("", "ai.onnx")})
    if foreign:
        problems.append(f"nodes of other domains: {foreign}")

    def dims(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    inputs = {i.name: (i.type.tensor_type.elem_type, dims(i)) for i in model.graph.input}
    expected = {"image": (onnx.TensorProto.FLOAT, ["N", 1, 32, "W"])}
    if widths_input:
        expected["widths"] = (onnx.TensorProto.INT64, ["N"])
    if inputs != expected:
        problems.append(f"inputs {inputs}, expected {expected}")
    outputs = {o.name: (o.type.tensor_type.elem_type, dims(o)) for o in model.graph.output}
    expected = {"logits": (onnx.TensorProto.FLOAT, ["T", "N", len(charset) + 1])}
    if outputs != expected:
        problems.append(f"outputs {outputs}, expected {expected}")
    meta = {p.key: p.value for p in model.metadata_props}
    if meta.get("arch") != arch:
        problems.append(f"metadata arch {meta.get('arch')!r}, expected {arch!r}")
    if json.loads(meta.get("charset", "null")) != charset:
        problems.append("metadata charset differs from the model's")
    if not meta.get("ocrt_version") or model.producer_name != "ocrt":
        problems.append(f"no ocrt version in the metadata / producer ({meta.get('ocrt_version')!r}, "
                        f"{model.producer_name!r})")
    if meta.get("widths_input") != ("true" if widths_input else "false"):
        problems.append(f"metadata widths_input {meta.get('widths_input')!r}")
    ops = sorted({n.op_type for n in model.graph.node})
    return problems, ops, os.path.getsize(path)


def frames(arch, width):
    return width // 4 + 1 if arch.startswith("crnn") else width // 4


def run(args):
    import numpy as np
    import onnxruntime as ort

    os.makedirs(args.work, exist_ok=True)
    models_dir = os.path.join(args.work, "models")
    subprocess.run([args.models_tool, models_dir], check=True)
    with open(os.path.join(models_dir, "chars.txt"), encoding="utf-8") as f:
        random_chars = [ln.rstrip("\n") for ln in f if ln.rstrip("\n")]
    shipped = os.path.join(args.source, "weights", "crnn-en.safetensors")
    _, meta = read_safetensors(shipped, tensors=False)
    models = [
        ("crnn", shipped, [], json.loads(meta["charset"])),
        ("crnn-s", os.path.join(models_dir, "crnn-s-weights.safetensors"),
         ["--arch", "crnn-s", "--charset", os.path.join(models_dir, "chars.txt")], random_chars),
        ("svtr-lite", os.path.join(models_dir, "svtr-lite.safetensors"), [], random_chars),
    ]

    failures, rows = [], []
    for seed, (arch, weights, extra, charset) in enumerate(models):
        for with_widths in (False, True):
            graph = "image+widths" if with_widths else "image"
            tag = f"{arch}{'-widths' if with_widths else ''}"
            onnx_path = os.path.join(args.work, tag + ".onnx")
            check_in = os.path.join(args.work, tag + ".input.safetensors")
            check_out = os.path.join(args.work, tag + ".ocrt.safetensors")
            todo = batches(arch, with_widths, seed)
            tensors = []
            for name, x, widths in todo:
                tensors.append((name, x))
                if widths is not None:
                    tensors.append((name + ".widths", widths))
            write_safetensors(check_in, tensors)
            cmd = [args.export, "--onnx", onnx_path, "--weights", weights, *extra, "--check-input", check_in,
                   "--check-output", check_out] + (["--widths-input"] if with_widths else [])
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{tag}: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
                continue
            problems, ops, size = check_model_file(onnx_path, arch, charset, with_widths)
            failures += [f"{tag}: {p}" for p in problems]
            print(f"{tag}: {size / 1e6:.1f} MB, ops: {', '.join(ops)}")
            reference, _ = read_safetensors(check_out)
            session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
            for name, x, widths in todo:
                feed = {"image": x}
                if with_widths:
                    feed["widths"] = widths if widths is not None else np.full(x.shape[0], x.shape[3], np.int64)
                got = session.run(["logits"], feed)[0]
                want = reference[name]
                expected_shape = (frames(arch, x.shape[3]), x.shape[0], len(charset) + 1)
                if got.shape != want.shape or want.shape != expected_shape:
                    failures.append(f"{tag} {name}: ORT logits {got.shape}, ocrt's {want.shape}, expected "
                                    f"{expected_shape}")
                    continue
                diff = float(np.abs(got.astype(np.float64) - want).max())
                scale = float(np.abs(want).max())
                if not np.isfinite(got).all() or not diff <= TOLERANCE:
                    failures.append(f"{tag} {name}: max |ORT - ocrt| = {diff:.3g} > {TOLERANCE} (logits up to "
                                    f"{scale:.3g})")
                rows.append((arch, graph, name, "x".join(map(str, x.shape)), "x".join(map(str, got.shape)), diff,
                             scale))

    print(f"\n{'arch':10} {'graph':13} {'batch':6} {'input':12} {'logits':10} {'max |ORT - ocrt|':>17} "
          f"{'max |logit|':>11}")
    for arch, graph, name, shape_in, shape_out, diff, scale in rows:
        print(f"{arch:10} {graph:13} {name:6} {shape_in:12} {shape_out:10} {diff:17.2e} {scale:11.3g}")
    print(f"onnxruntime {ort.__version__}, tolerance {TOLERANCE}")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"all {len(rows)} comparisons within {TOLERANCE}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--export", required=True, help="the ocrt-export binary")
    p.add_argument("--models-tool", required=True, help="the ocrt_onnx_models helper binary")
    p.add_argument("--source", required=True, help="the source tree (for weights/crnn-en.safetensors)")
    p.add_argument("--work", required=True, help="a folder for the files this test writes")
    p.add_argument("--venv", required=True, help="where to make (or find) the virtual environment")
    p.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if not args.in_venv:
        python = ensure_venv(os.environ.get("OCRT_ONNX_VENV") or args.venv)
        sys.stdout.flush()
        os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:], "--in-venv"])
    sys.exit(run(args))


if __name__ == "__main__":
    main()
