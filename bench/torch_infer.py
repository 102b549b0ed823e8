#!/usr/bin/env python3
"""The PyTorch side of bench/infer_cpu.sh: line recognition on the CPU with the reference CRNN
module of tools/reference/crnn.py, loading the same safetensors file ocrt-infer reads, and
working the way ocrt's predictor does, so that the two can be compared line for line.

    /usr/bin/python3 bench/torch_infer.py --weights FILE --labels LABELS [--out TEXTS]
        [--arch crnn|crnn-s] [--charset FILE] [--batch 32] [--threads 2] [--workers 1] [--unpacked] [--json FILE]
        [--device cpu|cuda:N] [--amp off|bf16] [--compile]
    /usr/bin/python3 bench/torch_infer.py --write-untrained FILE --arch crnn-s --charset-out FILE [--seed 1]
    /usr/bin/python3 bench/torch_infer.py --score TEXTS --labels LABELS [--json FILE]

Recognising (the first form), as infer/predictor.cpp does:
  - every image of the label file (path<TAB>text, paths relative to the file) is read with PIL,
    made 8-bit gray, and resized to height 32 keeping the aspect ratio with runtime/image.cpp's
    exact rule (width = round(w * 32 / h); a box filter when shrinking, bilinear at sample
    centres when enlarging; rounded to the nearest level);
  - the lines are sorted by width and cut into batches of --batch; each batch is padded with
    white (255) to its widest line rounded up to a multiple of 4, plus 28 white columns (ocrt's
    kRightMargin), and normalised to p / 127.5 - 1;
  - the module runs under torch.inference_mode() with each line's padded width as `lengths`,
    so its LSTM runs on packed sequences and stops at the line's own last frame, as ocrt's does
    (--unpacked runs the LSTM over the padding instead: faster, not the same computation);
  - greedy CTC decoding: per-frame argmax up to the line's frame count, repeats merged, blanks
    dropped.
The time reported covers the same work as ocrt-infer's "lines/s" (reading and resizing the
images, batching, the forward passes, decoding), not importing torch or loading the weights;
PIL and the resizing run on one thread here unless --workers N asks for N (a thread pool: PIL's
decoding and numpy's products release the GIL), where ocrt spreads them over its threads (on a
CPU they take a few percent of the run; beside a GPU they are most of it: give both sides the
machine's cores, as scripts/gpu-bench.sh does). Peak RSS is getrusage's ru_maxrss of this process.

A model file may be ocrt's self-contained kind (its metadata gives arch, config and charset) or
weights only (then --arch and --charset are needed, as for ocrt-infer). --write-untrained
writes a weights-only file with the reference module's random initial weights (and the 95
printable ASCII characters as a charset file), for timing an architecture that has no trained
weights. --score computes CER and line accuracy of any recogniser's output (one text a line,
in label-file order; Tesseract's, ocrt-infer's --format text, this script's --out) against the
label file: edit distance in Unicode code points over all lines / characters of the truth,
as ocrt-infer --eval counts it.

Threads: OMP_NUM_THREADS and MKL/OpenBLAS thread variables are set before torch is imported,
and torch.set_num_threads(N).
"""
import argparse
import json
import os
import resource
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RIGHT_MARGIN = 28  # infer/predictor.h kRightMargin
HEIGHT = 32


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


# ---------------------------------------------------------------- label files and scoring

def read_labels(path):
    """[(image path, truth)] from a label file, paths made relative to the file's folder."""
    base = os.path.dirname(os.path.abspath(path))
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line:
                continue
            if "\t" not in line:
                sys.exit(f"{path} line {n}: no tab between path and text")
            p, text = line.split("\t", 1)
            out.append((p if os.path.isabs(p) else os.path.join(base, p), text))
    return out


def edit_distance(a, b):
    """Levenshtein distance between two strings, in code points."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def score(texts, truths):
    distance = sum(edit_distance(t, g) for t, g in zip(texts, truths))
    chars = sum(len(g) for g in truths)
    exact = sum(t == g for t, g in zip(texts, truths))
    return {"lines": len(truths), "cer": distance / max(1, chars), "line_accuracy": exact / max(1, len(truths)),
            "distance": distance, "truth_chars": chars}


# ---------------------------------------------------------------- model files

def read_model_file(path):
    """(state_dict of torch tensors, metadata dict) from a safetensors file."""
    import numpy as np
    import torch

    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n:]
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    state = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        a = np.frombuffer(data[b:end], dtype=np.dtype(kinds[e["dtype"]]).newbyteorder("<"))
        state[name] = torch.from_numpy(a.copy()).reshape(e["shape"])
    return state, meta


def printable_ascii():
    return [chr(c) for c in range(32, 127)]


def write_safetensors(path, tensors):
    """Weights only (no ocrt metadata), float32 and int64, in the given order."""
    header, chunks, offset = {}, [], 0
    for name, t in tensors:
        t = t.detach().contiguous()
        kind = {"torch.float32": "F32", "torch.int64": "I64"}[str(t.dtype)]
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": kind, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for c in chunks:
            f.write(c)
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------- preprocessing (runtime/image.cpp)

def resample_matrix(in_len, out_len):
    """(out_len, in_len) weights: the box filter over the covered source interval when
    shrinking, bilinear at the output sample's centre (clamped) when enlarging."""
    import numpy as np

    m = np.zeros((out_len, in_len))
    scale = in_len / out_len
    for o in range(out_len):
        if scale >= 1:
            a, b = o * scale, min(float(in_len), (o + 1) * scale)
            i = int(a)
            while i < int(np.ceil(b)):
                m[o, i] = min(b, i + 1.0) - max(a, float(i))
                i += 1
            m[o] /= m[o].sum()
        else:
            pos = min(max((o + 0.5) * scale - 0.5, 0.0), float(in_len - 1))
            i0 = int(pos)
            i1 = min(i0 + 1, in_len - 1)
            f = pos - i0
            m[o, i0] += 1 - f
            m[o, i1] += f
    return m


def load_line(path):
    """The line as a (32, w) uint8 array, as ocrt's load_gray_image + resize_to_height."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as im:
        if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
            im = im.convert("RGBA")
            white = Image.new("RGBA", im.size, (255, 255, 255, 255))
            im = Image.alpha_composite(white, im)
        gray = np.asarray(im.convert("L"), dtype=np.float64)
    h, w = gray.shape
    if h == HEIGHT:
        return gray.astype(np.uint8)
    out_w = max(1, int(np.floor(w * HEIGHT / h + 0.5)))
    resized = resample_matrix(h, HEIGHT) @ gray @ resample_matrix(w, out_w).T
    return np.clip(np.floor(resized + 0.5), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------- recognising

def recognise(args):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np
    import torch

    sys.path.insert(0, os.path.join(HERE, "..", "tools", "reference"))
    from crnn import CRNN, PRESETS

    torch.set_num_threads(args.threads)
    t_load = time.perf_counter()
    state, meta = read_model_file(args.weights)
    if "config" in meta:
        config = json.loads(meta["config"])
        charset = json.loads(meta["charset"])
        if args.arch and args.arch != meta.get("arch"):
            sys.exit(f"{args.weights} holds a '{meta.get('arch')}' model, but '{args.arch}' was asked for")
        channels, hidden = tuple(config["channels"]), config["hidden"]
    else:
        if not (args.arch and args.charset):
            sys.exit(f"{args.weights} holds weights only: give --arch and --charset")
        with open(args.charset, encoding="utf-8") as f:
            charset = [line.rstrip("\n") for line in f if line.rstrip("\n") != ""]
        channels, hidden = PRESETS[args.arch]["channels"], PRESETS[args.arch]["hidden"]
    model = CRNN(len(charset) + 1, channels, hidden)
    model.load_state_dict(state)
    model.eval()
    dev = torch.device(args.device)
    model = model.to(dev)
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"--compile needs PyTorch 2 (this is {torch.__version__})")
    forward_model = torch.compile(model) if args.compile else model
    amp = args.amp == "bf16"  # autocast: bf16 convolutions, matmuls and LSTM GEMMs
    load_seconds = time.perf_counter() - t_load

    lines = read_labels(args.labels)
    texts = [""] * len(lines)
    t0 = time.perf_counter()
    if args.workers > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(args.workers) as pool:
            images = list(pool.map(load_line, [p for p, _ in lines]))
    else:
        images = [load_line(p) for p, _ in lines]
    padded = [max(4, (im.shape[1] + 3) // 4 * 4) for im in images]
    order = sorted(range(len(lines)), key=lambda i: padded[i])  # stable: ties keep input order
    forward_seconds = 0.0
    with torch.inference_mode():
        for start in range(0, len(order), args.batch):
            idx = order[start:start + args.batch]
            width = max(padded[i] for i in idx) + RIGHT_MARGIN
            x = np.full((len(idx), 1, HEIGHT, width), 255, dtype=np.uint8)
            for k, i in enumerate(idx):
                x[k, 0, :, :images[i].shape[1]] = images[i]
            batch = (torch.from_numpy(x).to(dev).float() / 127.5 - 1.0)
            widths = torch.tensor([padded[i] for i in idx], dtype=torch.long)
            f0 = time.perf_counter()
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
                logits = forward_model(batch) if args.unpacked else forward_model(batch, widths)  # (T, N, C)
            best = logits.float().argmax(2).t().cpu().numpy()  # (N, T); the copy waits for the device
            forward_seconds += time.perf_counter() - f0
            for k, i in enumerate(idx):
                frames = padded[i] // 4 + 1
                out, prev = [], 0
                for c in best[k, :frames]:
                    if c != 0 and c != prev:
                        out.append(charset[c - 1])
                    prev = c
                texts[i] = "".join(out)
    seconds = time.perf_counter() - t0

    result = {"program": "torch", "weights": args.weights, "batch": args.batch, "threads": args.threads,
              "workers": args.workers,
              "device": args.device, "amp": args.amp, "compile": args.compile,
              "packed": not args.unpacked, "torch": torch.__version__, "lines": len(lines), "seconds": seconds,
              "lines_per_second": len(lines) / seconds, "forward_seconds": forward_seconds,
              "load_seconds": load_seconds, "peak_rss_mib": peak_rss_mib()}
    result.update({"score": score(texts, [t for _, t in lines])})
    print(f"torch_infer: {len(lines)} lines in {seconds:.2f} s, {result['lines_per_second']:.1f} lines/s "
          f"(forward {forward_seconds:.2f} s); CER {100 * result['score']['cer']:.2f}%; "
          f"peak RSS {result['peak_rss_mib']:.0f} MiB", file=sys.stderr)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in texts)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


def write_untrained(args):
    import torch

    sys.path.insert(0, os.path.join(HERE, "..", "tools", "reference"))
    from crnn import CRNN, PRESETS

    if args.arch not in PRESETS or not args.charset_out:
        sys.exit("--write-untrained needs --arch crnn|crnn-s and --charset-out FILE")
    torch.manual_seed(args.seed)
    chars = printable_ascii()
    model = CRNN(len(chars) + 1, **PRESETS[args.arch])
    write_safetensors(args.write_untrained, list(model.state_dict().items()))
    with open(args.charset_out, "w", encoding="utf-8") as f:
        f.writelines(c + "\n" for c in chars)
    print(f"wrote an untrained {args.arch} to {args.write_untrained} and its charset to {args.charset_out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights")
    ap.add_argument("--labels")
    ap.add_argument("--arch", choices=["crnn", "crnn-s"])
    ap.add_argument("--charset")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1, help="threads that read and resize the images (1)")
    ap.add_argument("--unpacked", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--json")
    ap.add_argument("--device", default="cpu", help="cpu or cuda:N")
    ap.add_argument("--amp", default="off", choices=["off", "bf16"], help="bf16: the forward pass under torch.autocast")
    ap.add_argument("--compile", action="store_true", help="run the model through torch.compile (PyTorch 2)")
    ap.add_argument("--write-untrained")
    ap.add_argument("--charset-out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--score")
    args = ap.parse_args()
    if args.write_untrained:
        write_untrained(args)
    elif args.score:
        if not args.labels:
            sys.exit("--score needs --labels")
        truths = [t for _, t in read_labels(args.labels)]
        with open(args.score, encoding="utf-8", errors="replace") as f:
            texts = [line.rstrip("\n") for line in f]
        if len(texts) != len(truths):
            sys.exit(f"{args.score} has {len(texts)} lines, {args.labels} {len(truths)}")
        s = score(texts, truths)
        print(json.dumps(s))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(s, f, indent=1)
    else:
        if not (args.weights and args.labels):
            sys.exit("give --weights and --labels (see --help)")
        recognise(args)


if __name__ == "__main__":
    main()
