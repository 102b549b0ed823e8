#!/usr/bin/env bash
# Where a GPU training step's time goes, kernel by kernel, for ocrt and for PyTorch on the same
# GPU: Nsight Compute (ncu, on the lent machines' image) times every kernel of a few training
# steps of bench_train (ocrt) and bench/torch_train.py (PyTorch, where python3 has torch with
# CUDA), crnn at batch 256, in the precisions given. ncu runs kernels one at a time, so the sums
# are kernel time, not step time (no overlap, no launch gaps): tools/ncu_summary.py groups them.
# Needs build-gpu/ (scripts/gpu-check.sh builds it). Writes OUTDIR/ncu-*.csv.
#
#   scripts/gpu-profile.sh OUTDIR [PRECISION...]     (default: bf16 fp32)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-profile.sh OUTDIR [PRECISION...]}"
shift
precisions=("$@")
[ ${#precisions[@]} -eq 0 ] && precisions=(bf16 fp32)
mkdir -p "$out"
# libtiff and the libraries it needs where the machine has none (scripts/gpu-deps.sh's pack).
[ -d .gpu-deps/usr ] && export LD_LIBRARY_PATH="$PWD/.gpu-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
if [ -z "$ncu_bin" ]; then echo "gpu-profile: no ncu on this machine"; exit 1; fi
cmake --build build-gpu -j "$(nproc)" --target bench_train > "$out/build.log" 2>&1 ||
  { echo "gpu-profile: building bench_train failed"; exit 1; }
# Clocks and caches as they are (METHOD.md: leave the clocks alone), one metric: each kernel's time.
ncu=("$ncu_bin" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw)
steps=(--batch 256 --width 100 --steps 2 --warmup 1)
for p in "${precisions[@]}"; do
  timeout 90 "${ncu[@]}" build-gpu/bench_train --device cuda:0 --arch crnn "${steps[@]}" --precision "$p" \
    > "$out/ncu-ocrt-crnn-$p.csv" 2> "$out/ncu-ocrt-crnn-$p.log"
  echo "gpu-profile: ocrt crnn $p: rc $? ($(grep -c '"' "$out/ncu-ocrt-crnn-$p.csv") rows)"
done
# OCRT_PROFILE_TORCH=0 leaves PyTorch's side out (a second look at ocrt's own kernels).
if [ "${OCRT_PROFILE_TORCH:-1}" != 0 ] && python3 -c "import torch; assert torch.cuda.is_available()" > /dev/null 2>&1; then
  for p in "${precisions[@]}"; do
    mode=(); [ "$p" = bf16 ] && mode=(--amp bf16); [ "$p" = tf32 ] && mode=(--tf32)
    timeout 90 "${ncu[@]}" python3 bench/torch_train.py --device cuda:0 --arch crnn "${steps[@]}" "${mode[@]}" \
      > "$out/ncu-torch-crnn-$p.csv" 2> "$out/ncu-torch-crnn-$p.log"
    echo "gpu-profile: torch crnn $p: rc $? ($(grep -c '"' "$out/ncu-torch-crnn-$p.csv") rows)"
  done
fi
