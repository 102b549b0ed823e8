"""Model files as PyTorch users write them, for tests/models/test_torch_files.cpp (issue 20).

Writes tests/fixtures/torch_files/: small CRNN and SVTR-lite weights saved the ways PyTorch users
save them, the reference logits torch computes from those weights, and manifest.json, which says
what each file is:

    crnn_format_pt.safetensors      safetensors.torch.save_file(state_dict, metadata={"format": "pt"})
                                    (the Hugging Face convention)
    crnn_no_metadata.safetensors    save_file(state_dict): no __metadata__ at all
    crnn_foreign.safetensors        save_file with some other exporter's metadata block
    svtr_no_count.safetensors       an SVTR-lite state_dict without num_batches_tracked (many
                                    exporters drop it), with {"format": "pt"}
    crnn_converted.safetensors      a .pth training checkpoint ({"epoch", "model_state_dict" with
                                    DataParallel's "module." prefix, "optimizer_state_dict"})
                                    converted by tools/convert_torch.py into an ocrt model file
    svtr_converted.safetensors      a .pth {"state_dict": ... without num_batches_tracked}, a
                                    reduced SVTR-lite converted with --config
    crnn_chars.txt, svtr_chars.txt  the charsets (ocrt's charset-file format)
    reference.safetensors           per model: the input x (float32), widths, the logits torch
                                    computes in float64 from the stored float32 weights, and the
                                    sum of absolute terms of each logit's last product (for the
                                    float32 error bound, below)

It also checks the reverse direction: every ocrt model file here (the converted fixtures) and
every shipped one (weights/*.safetensors) loads into the reference module (crnn.py,
svtr_lite.py) with load_state_dict(strict=True), and a converted file's logits equal the
original module's.

The float32 bound. A float32 forward differs from the float64 one by rounding. Counting every
rounding along the longest chain of operations from the input to a logit (each product's
length, plus a few operations for each norm, activation and LSTM step), n of them, and assuming
no layer amplifies a relative error (ReLU, max-pooling, sigmoid and tanh do not; the fixture's
norms have scales near 1), a logit is within gamma_n * sum|terms of its last product| of the
exact value, gamma_n = n u / (1 - n u), u = 2^-24 (tests/tolerance.h; the test adds its safety
factor 2). manifest.json records n as "chain_length"; this script asserts that torch's own
float32 logits meet the bound before writing anything.

The files are written with the safetensors package when it is installed (what users have;
`pip install safetensors` in a virtual environment made with --system-site-packages, so that
Debian's torch is seen), else with a writer of the same layout (metadata first, tensors sorted
by dtype size then name). manifest.json names the writer used. Running the script twice gives
the same bytes, except for crnn_foreign.safetensors with the package, which orders a metadata
block of several entries as its hash map does.

    /usr/bin/python3 tools/reference/torch_files.py       # or a venv's python with safetensors
"""

import copy
import json
import os
import struct
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import convert_torch  # noqa: E402
from crnn import CRNN  # noqa: E402
from golden import read_safetensors, write_safetensors  # noqa: E402
from svtr_lite import SVTRLite  # noqa: E402

OUT = os.path.join(ROOT, "tests", "fixtures", "torch_files")

CRNN_SIZES = dict(channels=[4, 6, 8, 8, 10, 10, 12], hidden=7)
CRNN_CHARS = list("0123456789")
SVTR_SIZES = dict(dims=[8, 12, 16], depths=[1, 2, 1], heads=[2, 3, 4],
                  mixer=["local", "local", "global", "global"], window=[7, 11], mlp_ratio=4, out_dim=10,
                  dropout=0.1)
SVTR_CHARS = list("abcdef")
COUNT = 37  # num_batches_tracked of every BatchNorm in the saved state_dicts

U = 2.0 ** -24
BN_OPS, ACT_OPS, LN_EXTRA = 5, 8, 6  # roundings charged for a BatchNorm, an activation, a LayerNorm beyond its sums


def gamma(n):
    return n * U / (1 - n * U)


# ---------------------------------------------------------------- writing as users do

try:
    import safetensors
    from safetensors.torch import save_file as _st_save_file
    WRITER = f"safetensors {safetensors.__version__} (safetensors.torch.save_file)"
except ImportError:
    _st_save_file = None
    WRITER = "tools/reference/torch_files.py's fallback writer (safetensors package not installed)"

_ST = {torch.float32: ("F32", "f", 4), torch.int64: ("I64", "q", 8)}


def save_file(tensors, path, metadata=None):
    """safetensors.torch.save_file, or a writer of the same layout when the package is absent."""
    if _st_save_file is not None:
        _st_save_file(tensors, path, metadata=metadata)
        os.chmod(path, 0o644)  # it creates the file private to its owner
        return
    header = {} if metadata is None else {"__metadata__": metadata}
    names = sorted(tensors, key=lambda n: (-_ST[tensors[n].dtype][2], n))
    blobs, offset = [], 0
    for n in names:
        t = tensors[n].contiguous()
        dtype, fmt, _ = _ST[t.dtype]
        values = t.reshape(-1).tolist()
        data = struct.pack(f"<{len(values)}{fmt}", *values)
        header[n] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ---------------------------------------------------------------- the models

def randomise_norms(model, gen):
    """BatchNorm statistics and affine parameters away from their defaults, so that loading
    them (or not) shows in the logits; every count set to COUNT."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(0.75 + 0.5 * torch.rand(n, generator=gen))
                m.bias.copy_(0.1 * torch.randn(n, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
                m.running_var.copy_(0.75 + 0.5 * torch.rand(n, generator=gen))
                m.num_batches_tracked.fill_(COUNT)
            elif isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(0.75 + 0.5 * torch.rand(m.weight.shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))


def crnn_chain(T):
    c, h = CRNN_SIZES["channels"], CRNN_SIZES["hidden"]
    convs = [(1, 3, 1), (c[0], 3, 1), (c[1], 3, 0), (c[2], 3, 1), (c[3], 3, 0), (c[4], 3, 1), (c[5], 2, 0)]
    n = sum(cin * k * k + bias for cin, k, bias in convs) + 3 * BN_OPS
    # An LSTM step: the gate products (input + recurrent + 2 biases), the gate activations, the
    # cell update and h = o tanh(c); the recurrence chains the steps of each layer.
    n += T * (c[6] + h + 2 + 3 * ACT_OPS) + T * (2 * h + h + 2 + 3 * ACT_OPS)
    return n + 2 * h + 1


def svtr_chain(Wt):
    d, depths, heads, r = SVTR_SIZES["dims"], SVTR_SIZES["depths"], SVTR_SIZES["heads"], SVTR_SIZES["mlp_ratio"]
    n = 9 + BN_OPS + ACT_OPS + 9 * (d[0] // 2) + BN_OPS + ACT_OPS + 1  # stem, positions
    rows = 8
    for s in range(3):
        if s > 0:
            n += 9 * d[s - 1] + 1 + 2 * d[s] + LN_EXTRA
            rows //= 2
        C, L = d[s], rows * Wt
        block = (2 * C + LN_EXTRA) + (C + 1) + (C // heads[s] + 1) + (L + ACT_OPS) + L + (C + 1) + 1
        block += (2 * C + LN_EXTRA) + (C + 1) + ACT_OPS + (r * C + 1) + 1
        n += depths[s] * block
    return n + (2 * d[2] + LN_EXTRA) + 2 + d[2] + ACT_OPS + SVTR_SIZES["out_dim"] + 1


def reference(model, last, x, widths, chain):
    """float64 logits of model's (float32) weights, the abs sums of `last`'s products, and the
    check that torch's float32 logits are within the bound."""
    m64 = copy.deepcopy(model).double().eval()
    seen = {}
    def keep_input(module, inputs, output):
        seen["in"] = inputs[0]  # (returns None: the output stays as it is)

    hook = getattr(m64, last).register_forward_hook(keep_input)
    with torch.no_grad():
        logits64 = m64(x.double(), widths)
        hook.remove()
        lin = getattr(m64, last)
        abs_sum = seen["in"].abs() @ lin.weight.abs().t() + (lin.bias.abs() if lin.bias is not None else 0)
        logits32 = model.eval()(x, widths)
    err = (logits32.double() - logits64).abs()
    bound = gamma(chain) * abs_sum
    worst = float((err / bound).max())
    assert worst <= 1.0, f"torch's own float32 logits break the bound (error / bound up to {worst:.3g})"
    print(f"  float32 error of torch: max {float(err.max()):.3g}, at most {worst:.3f} of the bound "
          f"(chain length {chain})")
    return logits64, abs_sum


# ---------------------------------------------------------------- the reverse direction

def load_ocrt_into_reference(path):
    """An ocrt model file into its reference module with strict=True; returns the module."""
    tensors, meta = read_safetensors(path)
    assert meta.get("format") == "ocrt-model-1", f"{path}: not an ocrt model file"
    arch, config = meta["arch"], json.loads(meta["config"])
    classes = config["num_classes"]
    assert classes == len(json.loads(meta["charset"])) + 1, f"{path}: classes and charset disagree"
    if arch in ("crnn", "crnn-s"):
        assert config.get("batch_norm", True), f"{path}: the reference CRNN has no variant without BatchNorm"
        module = CRNN(classes, tuple(config["channels"]), config["hidden"])
    elif arch == "svtr-lite":
        module = SVTRLite(classes, **{k: (tuple(v) if isinstance(v, list) else v)
                                      for k, v in config.items() if k != "num_classes"})
    else:
        raise AssertionError(f"{path}: unknown arch {arch}")
    module.load_state_dict(tensors, strict=True)
    return module.eval()


# ---------------------------------------------------------------- main

def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"generator": "tools/reference/torch_files.py", "torch": torch.__version__, "writer": WRITER,
                "models": {}, "files": []}
    refs = []

    def add_file(name, model, form, metadata, count, self_contained):
        manifest["files"].append({"file": name, "model": model, "form": form, "metadata": metadata or {},
                                  "num_batches_tracked": count, "self_contained": self_contained})

    # ---- CRNN
    torch.manual_seed(2024)
    gen = torch.Generator().manual_seed(2024)
    crnn = CRNN(len(CRNN_CHARS) + 1, tuple(CRNN_SIZES["channels"]), CRNN_SIZES["hidden"])
    randomise_norms(crnn, gen)
    crnn.eval()
    x = torch.rand(2, 1, 32, 40, generator=gen) * 2 - 1
    x[1, :, :, 28:] = 1.0
    widths = torch.tensor([40, 28])
    chain = crnn_chain(40 // 4 + 1)
    print("crnn:")
    logits64, abs_sum = reference(crnn, "fc", x, widths, chain)
    refs += [("crnn.x", x), ("crnn.widths", widths), ("crnn.logits", logits64), ("crnn.abs_sum", abs_sum)]
    config = dict(CRNN_SIZES, num_classes=len(CRNN_CHARS) + 1)
    manifest["models"]["crnn"] = {"arch": "crnn", "config": config, "charset": "crnn_chars.txt",
                                  "chain_length": chain}
    sd = {k: v.detach().clone().contiguous() for k, v in crnn.state_dict().items()}

    save_file(sd, os.path.join(OUT, "crnn_format_pt.safetensors"), metadata={"format": "pt"})
    add_file("crnn_format_pt.safetensors", "crnn", "save_file(state_dict, metadata={'format': 'pt'})",
             {"format": "pt"}, COUNT, False)
    save_file(sd, os.path.join(OUT, "crnn_no_metadata.safetensors"))
    add_file("crnn_no_metadata.safetensors", "crnn", "save_file(state_dict), no metadata", None, COUNT, False)
    foreign = {"producer": "a-training-framework 2.1", "description": "CRNN for digits\nline two",
               "epoch": "12", "format": "pytorch"}
    save_file(sd, os.path.join(OUT, "crnn_foreign.safetensors"), metadata=foreign)
    add_file("crnn_foreign.safetensors", "crnn", "save_file with another exporter's metadata", foreign, COUNT, False)

    with tempfile.TemporaryDirectory() as tmp:
        # A training checkpoint as a DataParallel run saves it.
        opt = torch.optim.SGD(crnn.parameters(), lr=0.1, momentum=0.9)
        pth = os.path.join(tmp, "crnn_epoch3.pth")
        torch.save({"epoch": 3, "model_state_dict": {"module." + k: v for k, v in sd.items()},
                    "optimizer_state_dict": opt.state_dict(), "best_cer": 0.25}, pth)
        charset_path = os.path.join(OUT, "crnn_chars.txt")
        with open(charset_path, "w", encoding="utf-8") as f:
            f.write("".join(c + "\n" for c in CRNN_CHARS))
        out = os.path.join(OUT, "crnn_converted.safetensors")
        convert_torch.convert(pth, out, "crnn", charset_path, quiet=True)
        add_file("crnn_converted.safetensors", "crnn", "a .pth checkpoint dict converted by tools/convert_torch.py",
                 None, COUNT, True)
        back = load_ocrt_into_reference(out)
        with torch.no_grad():
            assert torch.equal(back(x, widths), crnn(x, widths)), "the converted CRNN computes other logits"

    # ---- SVTR-lite
    torch.manual_seed(2025)
    gen = torch.Generator().manual_seed(2025)
    svtr = SVTRLite(len(SVTR_CHARS) + 1, **{k: (tuple(v) if isinstance(v, list) else v) for k, v in SVTR_SIZES.items()})
    randomise_norms(svtr, gen)
    svtr.eval()
    x = torch.rand(2, 1, 32, 64, generator=gen) * 2 - 1
    x[1, :, :, 24:] = 1.0
    widths = torch.tensor([64, 24])
    chain = svtr_chain(64 // 4)
    print("svtr-lite:")
    logits64, abs_sum = reference(svtr, "head", x, widths, chain)
    refs += [("svtr.x", x), ("svtr.widths", widths), ("svtr.logits", logits64), ("svtr.abs_sum", abs_sum)]
    config = dict(SVTR_SIZES, num_classes=len(SVTR_CHARS) + 1)
    manifest["models"]["svtr"] = {"arch": "svtr-lite", "config": config, "charset": "svtr_chars.txt",
                                  "chain_length": chain}
    sd = {k: v.detach().clone().contiguous() for k, v in svtr.state_dict().items()
          if not k.endswith("num_batches_tracked")}
    save_file(sd, os.path.join(OUT, "svtr_no_count.safetensors"), metadata={"format": "pt"})
    add_file("svtr_no_count.safetensors", "svtr", "state_dict without num_batches_tracked, metadata {'format': 'pt'}",
             {"format": "pt"}, 0, False)
    with tempfile.TemporaryDirectory() as tmp:
        pth = os.path.join(tmp, "svtr.pth")
        torch.save({"state_dict": sd, "step": 100}, pth)
        charset_path = os.path.join(OUT, "svtr_chars.txt")
        with open(charset_path, "w", encoding="utf-8") as f:
            f.write("".join(c + "\n" for c in SVTR_CHARS))
        unseen = {k: SVTR_SIZES[k] for k in convert_torch.SVTR_UNSEEN}
        out = os.path.join(OUT, "svtr_converted.safetensors")
        convert_torch.convert(pth, out, "svtr-lite", charset_path, json.dumps(unseen), quiet=True)
        add_file("svtr_converted.safetensors", "svtr", "a .pth {'state_dict': ...} without num_batches_tracked, "
                 "converted by tools/convert_torch.py with --config", None, 0, True)
        back = load_ocrt_into_reference(out)
        with torch.no_grad():
            assert torch.equal(back(x, widths), svtr(x, widths)), "the converted SVTR-lite computes other logits"

    write_safetensors(os.path.join(OUT, "reference.safetensors"), refs,
                      {"generator": "tools/reference/torch_files.py", "torch": torch.__version__})
    with open(os.path.join(OUT, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    for e in manifest["files"]:
        print(f"wrote {e['file']} ({os.path.getsize(os.path.join(OUT, e['file']))} bytes): {e['form']}")

    # ---- the reverse direction for the shipped models
    wdir = os.path.join(ROOT, "weights")
    for name in sorted(os.listdir(wdir)):
        if name.endswith(".safetensors"):
            load_ocrt_into_reference(os.path.join(wdir, name))
            print(f"weights/{name} loads into its reference module with strict=True")


if __name__ == "__main__":
    main()
