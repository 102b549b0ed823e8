#!/usr/bin/env bash
# On a lent GPU machine: build ocrt-train with CUDA and run the English recipe
# (scripts/train-en.sh) on cuda:0 with the fonts and prose that scripts/gpu-deps.sh packed
# (.gpu-pack/, carried with the tree). Checkpoints go to RUNDIR (they stay on the machine
# only while it is held); the log, the metrics and the best model, split into 15 MB parts (a
# lent machine hands back at most 16 MiB a file), go to OUTDIR.
#   scripts/gpu-train.sh OUTDIR RUNDIR [ocrt-train flags...]
#   e.g. scripts/gpu-train.sh $OUT gpu-run/crnn --init weights/crnn-en.safetensors --max-minutes 8
# Reassemble the model with: cat OUTDIR/best.safetensors.part-* > best.safetensors
set -uo pipefail
cd "$(dirname "$0")/.."
out="$1"; run="$2"; shift 2
mkdir -p "$out"
scripts/gpu-unpack.sh
extra=()
[ -d .gpu-deps/usr ] && extra+=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps/usr" -DOCRT_MPI=OFF)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOCRT_CUDA=ON -DOCRT_CUDA_ARCHS="${OCRT_CUDA_ARCHS:-90}" \
  -DOCRT_BUILD_TESTS=OFF -DOCRT_BUILD_BENCH=OFF "${extra[@]}" > "$out/configure.log" 2>&1 \
  || { echo "configure failed"; tail -20 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" --target ocrt-train > "$out/build.log" 2>&1 \
  || { echo "build failed"; grep -m 20 error "$out/build.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null; } | tee "$out/device.txt"
OCRT_TRAIN=build-gpu/ocrt-train scripts/train-en.sh "$run" --device cuda:0 "$@" 2> "$out/train.log" | tee "$out/summary.json"
status=${PIPESTATUS[0]}
cp "$run/metrics.jsonl" "$out/" 2>/dev/null
[ -f "$run/best.safetensors" ] && split -b 15M -d "$run/best.safetensors" "$out/best.safetensors.part-"
grep -v "^note" "$out/train.log" | tail -25
exit $status
