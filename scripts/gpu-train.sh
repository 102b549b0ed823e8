#!/usr/bin/env bash
# On a GPU machine: build ocrt-train with CUDA and train on synthetic lines rendered with the
# fonts in .gpu-fonts/ (scripts/gpu-deps.sh: the lent machines have no Debian packages), with
# held-out validation fonts. Checkpoints go to RUNDIR (kept on the machine while it stays warm,
# so a second call with --resume continues); the log, metrics and the best model (split into
# 15 MB parts, the most a lent machine hands back per file) go to OUTDIR.
#   scripts/gpu-train.sh OUTDIR RUNDIR [ocrt-train flags...]
#   e.g. scripts/gpu-train.sh $OUT gpu-run/crnn --arch crnn --batch 128 --steps 6000 --max-minutes 7
# Reassemble the model with: cat OUTDIR/best.safetensors.part-* > best.safetensors
set -uo pipefail
cd "$(dirname "$0")/.."
out="$1"; run="$2"; shift 2
mkdir -p "$out"
extra=()
[ -d .gpu-deps/usr ] && extra+=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps/usr" -DOCRT_MPI=OFF)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOCRT_CUDA=ON -DOCRT_CUDA_ARCHS="${OCRT_CUDA_ARCHS:-90}" \
  "${extra[@]}" > "$out/configure.log" 2>&1 || { echo "configure failed"; tail -20 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" --target ocrt-train > "$out/build.log" 2>&1 \
  || { echo "build failed"; grep -m 20 error "$out/build.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git rev-parse --short HEAD; } | tee "$out/device.txt"
fonts=.gpu-fonts
build-gpu/ocrt-train --device cuda:0 --train synth --val synth --fonts "$fonts/train" --val-fonts "$fonts/val" \
  --words "$fonts/words" --workers "$(nproc)" --out "$run" "$@" 2> "$out/train.log" | tee "$out/summary.json"
status=${PIPESTATUS[0]}
cp "$run/metrics.jsonl" "$out/" 2>/dev/null
[ -f "$run/best.safetensors" ] && split -b 15M -d "$run/best.safetensors" "$out/best.safetensors.part-"
grep -v "^note" "$out/train.log" | tail -25
exit $status
