#!/usr/bin/env bash
# On a GPU machine: build ocrt-train with CUDA and train a model on synthetic lines, writing the
# log, metrics and the best model to OUTDIR. The fonts and word list come from .gpu-fonts/
# (scripts/gpu-deps.sh), as on the lent machines there are no Debian packages.
#   scripts/gpu-train.sh OUTDIR [ocrt-train flags...]
# e.g. scripts/gpu-train.sh $OUT --arch crnn --steps 8000 --batch 256
set -uo pipefail
cd "$(dirname "$0")/.."
out="$1"; shift
mkdir -p "$out"
extra=()
[ -d .gpu-deps/usr ] && extra+=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps/usr" -DOCRT_MPI=OFF)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOCRT_CUDA=ON -DOCRT_CUDA_ARCHS="${OCRT_CUDA_ARCHS:-90}" \
  "${extra[@]}" > "$out/configure.log" 2>&1 || { echo "configure failed"; tail -20 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" --target ocrt-train > "$out/build.log" 2>&1 \
  || { echo "build failed"; grep -m 20 error "$out/build.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
git rev-parse --short HEAD 2>/dev/null | tee -a "$out/device.txt"
fonts=.gpu-fonts
build-gpu/ocrt-train --device cuda:0 --train synth --val synth --fonts "$fonts/train" --val-fonts "$fonts/val" \
  --words "$fonts/words" --workers "$(nproc)" --out "$out/run" "$@" 2> "$out/train.log" | tee "$out/summary.json"
status=${PIPESTATUS[0]}
tail -30 "$out/train.log"
exit $status
