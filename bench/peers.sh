#!/usr/bin/env bash
# The benchmark peers of docs/benchmarking.md in a Python virtual environment of their own: a
# current PyTorch from pip (CPU build), ONNX Runtime and OpenVINO, with onnx, numpy, pillow and
# safetensors, and rapidocr (PP-OCRv6 small, its ONNX models inside the wheel: bench/ppocr.py).
# They are for benchmarks only: nothing in the product or its tests imports them.
#
#   bench/peers.sh              make the environment (or check that it is complete), print versions
#   bench/peers.sh --python     the same quietly, then print the environment's python on stdout
#
#   OCRT_PEERS_VENV      where the environment lives (default ~/.cache/ocrt-peers-venv)
#   OCRT_PEERS_BASE      the python that makes it (default python3 on PATH; needs its venv module)
#   OCRT_PEERS_UPGRADE=1 upgrade the packages of an existing environment to the newest releases
#
# Run again, it does nothing when every package imports. PyTorch comes from its CPU wheel index
# when that index can be reached: the PyPI wheel for Linux x86_64 is the CUDA build and pulls
# some gigabytes of NVIDIA libraries that a CPU benchmark never loads. Where only PyPI can be
# reached, the PyPI wheel it is; its CPU code is the same.
set -euo pipefail
VENV=${OCRT_PEERS_VENV:-$HOME/.cache/ocrt-peers-venv}
BASE=${OCRT_PEERS_BASE:-python3}
CPU_INDEX=https://download.pytorch.org/whl/cpu
PY=$VENV/bin/python
# bench/peer_infer.py exports with torch.onnx's TorchScript exporter, which needs no onnxscript
PACKAGES=(onnxruntime openvino onnx numpy pillow safetensors rapidocr)
IMPORTS="import torch, onnxruntime, openvino, onnx, numpy, PIL, safetensors, rapidocr"

quiet=0
case "${1:-}" in
  --python) quiet=1 ;;
  "") ;;
  *) echo "usage: bench/peers.sh [--python]" >&2; exit 2 ;;
esac
say() { echo "peers.sh: $*" >&2; }

complete() { [[ -x $PY ]] && "$PY" -c "$IMPORTS" >/dev/null 2>&1; }

if ! complete || [[ ${OCRT_PEERS_UPGRADE:-0} == 1 ]]; then
  if [[ ! -x $PY ]]; then
    say "making $VENV with $($BASE --version 2>&1) ($(command -v "$BASE"))"
    mkdir -p "$(dirname "$VENV")"
    "$BASE" -m venv "$VENV"
  fi
  upgrade=()
  [[ ${OCRT_PEERS_UPGRADE:-0} == 1 ]] && upgrade=(--upgrade)
  # pip's own output goes to stderr so that --python's stdout stays one line
  "$PY" -m pip install --quiet "${upgrade[@]}" --upgrade pip >&2
  if curl -fsS -m 20 -o /dev/null "$CPU_INDEX/torch/" 2>/dev/null; then
    say "torch from the CPU wheel index"
    "$PY" -m pip install "${upgrade[@]}" --index-url "$CPU_INDEX" torch >&2
  else
    say "the CPU wheel index cannot be reached: torch from PyPI (the CUDA build and its NVIDIA libraries)"
    "$PY" -m pip install "${upgrade[@]}" torch >&2
  fi
  "$PY" -m pip install "${upgrade[@]}" "${PACKAGES[@]}" >&2
  complete || { say "$VENV is still incomplete: $PY -c '$IMPORTS' fails"; exit 1; }
fi

if (( quiet )); then
  echo "$PY"
  exit 0
fi
"$PY" - <<'EOF'
import platform, sys
import numpy, onnx, onnxruntime, openvino, PIL, safetensors, torch
print(f"python {platform.python_version()} ({sys.executable})")
print(f"torch {torch.__version__} (CUDA build: {torch.version.cuda or 'no'}; "
      f"oneDNN {torch.backends.mkldnn.is_available()}, MKL {torch.backends.mkl.is_available()})")
print(f"onnxruntime {onnxruntime.__version__} (providers: {', '.join(onnxruntime.get_available_providers())})")
print(f"openvino {openvino.get_version()}")
print(f"onnx {onnx.__version__}, numpy {numpy.__version__}, pillow {PIL.__version__}, "
      f"safetensors {safetensors.__version__}")
import importlib.metadata
print(f"rapidocr {importlib.metadata.version('rapidocr')} (PP-OCRv6 small, bench/ppocr.py)")
EOF
