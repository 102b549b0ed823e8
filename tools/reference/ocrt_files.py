"""Model files written by ocrt load into the PyTorch reference modules and compute ocrt's logits.

The reverse of tests/models/test_torch_files.cpp: for each architecture, an ocrt model file
(written by ocrt's C++ writer, nn::save_model_file) is loaded into its reference module
(crnn.py's CRNN, svtr_lite.py's SVTRLite) with load_state_dict(strict=True), and the module's
float32 eval-mode logits are compared with the logits ocrt computes from the same file
(ocrt-export --check-output, exact convolutions) on lines of widths 40, 128 and 333 px (333
padded to 336) and a batch mixing them with each line's width: max |torch - ocrt| <= 1e-4.
The files: weights/crnn-en.safetensors (crnn, shipped) and the random crnn-s and svtr-lite presets
that the test helper ocrt_onnx_models writes (tests/onnx/make_models.cpp: BatchNorm and
LayerNorm statistics and attention biases away from their defaults).

torch_files.py checks the same loading for the files convert_torch.py writes and for every
shipped model; this script adds the archs no shipped model has, written by ocrt itself, and the
logits. It needs torch (Debian's python3-torch) and a build; ctest runs it as
`reference_loads_ocrt_files` (label torch) with OCRT_TORCH_PYTHON (/usr/bin/python3), and it
exits with 77 (skipped) when that Python has no torch.

    /usr/bin/python3 tools/reference/ocrt_files.py --build build
"""

import argparse
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIPPED: this Python has no torch (use Debian's python3-torch: /usr/bin/python3)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

from golden import read_safetensors, write_safetensors  # noqa: E402
from torch_files import load_ocrt_into_reference  # noqa: E402

TOLERANCE = 1e-4
WIDTHS = (40, 128, 333)


def lines(gen, n, width):
    """n lines 32 x width in the input scale: white with dark strokes in about a third of the columns."""
    x = torch.ones(n, 1, 32, width)
    ink = torch.rand(n, 1, 1, width, generator=gen) < 0.35
    level = torch.rand(n, 1, 1, width, generator=gen) * 1.4 - 1.0
    rows = torch.zeros(1, 1, 32, 1, dtype=torch.bool)
    rows[:, :, 6:26] = True
    return torch.where(ink & rows, level.expand(n, 1, 32, width), x)


def round4(w):
    return (w + 3) // 4 * 4


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", required=True, help="a build folder with ocrt-export and tests/ocrt_onnx_models")
    args = p.parse_args()
    export = os.path.join(args.build, "ocrt-export")
    helper = os.path.join(args.build, "tests", "ocrt_onnx_models")
    failures = []
    with tempfile.TemporaryDirectory(prefix="ocrt-files-") as tmp:
        subprocess.run([helper, tmp], check=True)
        files = [os.path.join(ROOT, "weights", "crnn-en.safetensors"), os.path.join(tmp, "crnn-s.safetensors"),
                 os.path.join(tmp, "svtr-lite.safetensors")]
        for k, path in enumerate(files):
            module = load_ocrt_into_reference(path)  # strict=True; asserts on any mismatch
            crnn = type(module).__name__ == "CRNN"
            gen = torch.Generator().manual_seed(100 + k)
            batches = [(f"w{w}", lines(gen, 3, round4(w)), None) for w in WIDTHS]
            widest = round4(max(WIDTHS)) + (28 if crnn else 0)  # CRNN gets ocrt-infer's right margin
            mixed = torch.ones(3, 1, 32, widest)
            for n, w in enumerate(WIDTHS):
                mixed[n, :, :, :round4(w)] = lines(gen, 1, round4(w))[0]
            batches.append(("mixed", mixed, torch.tensor([round4(w) for w in WIDTHS])))
            tensors = []
            for name, x, widths in batches:
                tensors.append((name, x))
                if widths is not None:
                    tensors.append((name + ".widths", widths))
            check_in, check_out = os.path.join(tmp, f"in{k}.safetensors"), os.path.join(tmp, f"out{k}.safetensors")
            write_safetensors(check_in, tensors, {"generator": "tools/reference/ocrt_files.py"})
            subprocess.run([export, "--onnx", os.path.join(tmp, "unused.onnx"), "--weights", path, "--check-input",
                            check_in, "--check-output", check_out], check=True, capture_output=True)
            ocrt_logits, _ = read_safetensors(check_out)
            name_of_file = os.path.relpath(path, ROOT) if path.startswith(ROOT) else os.path.basename(path)
            print(f"{name_of_file}: loads into {type(module).__name__} with strict=True")
            with torch.no_grad():
                for name, x, widths in batches:
                    got = module(x, widths)
                    want = ocrt_logits[name]
                    diff = float((got.double() - want.double()).abs().max()) if got.shape == want.shape else float("inf")
                    print(f"  {name:6} {tuple(x.shape)} -> {tuple(got.shape)}: max |torch - ocrt| = {diff:.2e} "
                          f"(logits up to {float(want.abs().max()):.3g})")
                    if not diff <= TOLERANCE:
                        failures.append(f"{name_of_file} {name}: max |torch - ocrt| = {diff:.3g} "
                                        f"(shapes {tuple(got.shape)} and {tuple(want.shape)})")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"all within {TOLERANCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
