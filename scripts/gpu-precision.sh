#!/usr/bin/env bash
# One lent-GPU call that measures the GPU precisions of runtime/precision.h (fp32, tf32, bf16)
# inside a deadline, writing logs to $OUT:
#   1. scripts/gpu-check.sh --tests-only: the build, every `cuda` test (the precisions' error
#      bounds among them: tests/cuda/test_precision.cpp) and ocrt-infer on the sample lines;
#   2. training steps: bench_train --device cuda:0 for crnn and crnn-s at batch 256 in each
#      precision (the step only; the data costs nothing there);
#   3. inference: ocrt-infer --device cuda:0 on the sample lines in each precision (the texts
#      side by side) and on 2400 lines (samples/lines x 200) for lines/s;
#   4. the same training in fp32 and in bf16 (scripts/train-en.sh's recipe for crnn-s from
#      scratch, one seed, one data order), an equal share of the time left each, so that the
#      two validation curves can be set side by side (their metrics.jsonl come back).
#
#   scripts/gpu-precision.sh SECONDS
set -uo pipefail
cd "$(dirname "$0")/.."
budget="${1:?usage: scripts/gpu-precision.sh SECONDS}"
out_default=gpu-precision-out
. scripts/gpu-call.sh

scripts/gpu-check.sh --tests-only "$out/logs/check" > "$out/logs/check.txt" 2>&1
log "gpu-check --tests-only: rc $? ($(tail -1 "$out/logs/check.txt"))"
grep -E "cuda precision" "$out/logs/check/ctest-cuda.log" | tee -a "$out/logs/session.txt"
cmake --build build-gpu -j "$jobs" --target ocrt-train bench_train > "$out/logs/build-more.log" 2>&1 ||
  { log "FAIL: building ocrt-train/bench_train"; exit 1; }

for arch in crnn crnn-s; do
  for p in fp32 tf32 bf16; do
    timeout 60 build-gpu/bench_train --device cuda:0 --arch $arch --batch 256 --width 100 --steps 20 --warmup 3 \
      --precision $p --phases > "$out/logs/bench-train-$arch-$p.log" 2>&1
    log "bench_train $arch $p: rc $?; $(grep -E "^$arch " "$out/logs/bench-train-$arch-$p.log")"
  done
done

# PyTorch's side where this machine's python3 has torch: float32, TF32 and AMP bf16 (cuDNN).
if python3 -c "import torch; assert torch.cuda.is_available()" > /dev/null 2>&1; then
  for mode in "" "--tf32" "--amp bf16"; do
    name=$(echo "fp32 $mode" | awk '{print $NF}' | tr -d -)
    timeout 120 python3 bench/torch_train.py --device cuda:0 --arch both --batch 256 --width 100 --steps 20 --warmup 3 \
      $mode > "$out/logs/torch-train-$name.log" 2>&1
    log "torch_train $mode: rc $?; $(grep -E '^crnn' "$out/logs/torch-train-$name.log" | tr '\n' ';')"
  done
else
  log "no PyTorch with CUDA on this machine: no PyTorch side"
fi

list="$out/logs/lines2400.txt"
: > "$list"
for i in $(seq 200); do ls samples/lines/*.png >> "$list"; done
for p in fp32 tf32 bf16; do
  build-gpu/ocrt-infer --device cuda:0 --precision $p --decoder greedy --format text samples/lines/*.png > "$out/logs/samples-$p.txt" \
    2> "$out/logs/samples-$p.log"
  log "samples/lines $p: rc $?; $(cmp -s "$out/logs/samples-fp32.txt" "$out/logs/samples-$p.txt" && echo same text as fp32 || echo TEXT DIFFERS from fp32)"
  for run in 1 2; do
    t0=$(date +%s.%N)
    build-gpu/ocrt-infer --device cuda:0 --precision $p --batch 256 --decoder greedy --list "$list" > /dev/null 2> "$out/logs/lines2400-$p-$run.log"
    rc=$?; t1=$(date +%s.%N)
    log "2400 lines $p (run $run): rc $rc, $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s end to end; $(grep -m1 -oE '[0-9]+ lines \([0-9]+ failed\) in [0-9.]+ s, [0-9.]+ lines/s' "$out/logs/lines2400-$p-$run.log")"
  done
done

# The two trainings: an equal share of what is left, keeping 30 s for the end.
export OCRT_FONT_DIRS="$PWD/.fonts-en/train"
minutes=$(awk "BEGIN{printf \"%.2f\", ($(left) - 30) / 2 / 60 - 0.15}")
if awk "BEGIN{exit !($minutes > 0.4)}"; then
  for p in fp32 bf16; do
    log "crnn-s from scratch in $p for $minutes minutes"
    OCRT_TRAIN=build-gpu/ocrt-train scripts/train-en.sh "gpu-run/prec-$p" --device cuda:0 --arch crnn-s \
      --precision $p --steps 8000 --seed 21 --val-size 512 --eval-every 250 --save-every 100000 --log-every 50 \
      --max-minutes "$minutes" > "$out/logs/train-$p-summary.json" 2> "$out/logs/train-$p.log"
    log "crnn-s $p: rc $?; $(grep -E '^step' "$out/logs/train-$p.log" | tail -1); $(grep -E '^eval' "$out/logs/train-$p.log" | tail -1)"
    cp "gpu-run/prec-$p/metrics.jsonl" "$out/logs/train-$p-metrics.jsonl" 2>/dev/null
  done
else
  log "no time left for the training curves ($minutes minutes each)"
fi
log "done"
