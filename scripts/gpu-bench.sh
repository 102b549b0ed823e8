#!/usr/bin/env bash
# Issue 18's side-by-side figures in one lent-GPU call, logs to $OUT (docs/gpu-status.md):
#   1. training steps at batch 256: bench_train --precision bf16 against PyTorch AMP bf16
#      eager and with torch.compile (bench/torch_train.py --amp bf16 [--compile]), for crnn,
#      crnn-s and svtr-lite, alternating, ROUNDS rounds;
#   2. inference end to end on LINES lines (samples/lines repeated): ocrt-infer in fp32 and bf16
#      against bench/torch_infer.py with AMP eager, both sides given every core of
#      the machine for reading and preparing the images (torch_infer's --workers and --threads,
#      ocrt-infer's --threads), the same batch; each side's own count and the whole process.
# Needs build-gpu/ (a call after scripts/gpu-check.sh or gpu-session.sh on the same warm
# machine; else it runs gpu-check.sh --tests-only first) and python3 with torch for PyTorch's side.
#
#   scripts/gpu-bench.sh SECONDS [--only train|infer]
#   DEVICE=cpu BUILD=build ROUNDS=1 STEPS=2 LINES=24 BATCH=8 scripts/gpu-bench.sh 300   (a dry run on the CPU)
set -uo pipefail
cd "$(dirname "$0")/.."
budget="${1:?usage: scripts/gpu-bench.sh SECONDS [--only train|infer]}"
shift
only=""
case "${1:-}" in
  --only) only="${2:?--only train or infer}"; [ "$only" = train ] || [ "$only" = infer ] ||
    { echo "gpu-bench.sh: --only train or infer, not '$only'" >&2; exit 2; } ;;
  "") ;;
  *) echo "gpu-bench.sh: unknown argument '$1'" >&2; exit 2 ;;
esac
out_default=gpu-bench-out
. scripts/gpu-call.sh  # start, left, out, log, jobs, the logs bundled at exit, libtiff

device="${DEVICE:-cuda:0}" build="${BUILD:-build-gpu}" rounds="${ROUNDS:-2}" steps="${STEPS:-20}"
lines="${LINES:-2400}" batch="${BATCH:-256}"
if [ ! -x "$build/bench_train" ] || [ ! -x "$build/ocrt-infer" ]; then
  if [ "$build" = build-gpu ] && [ ! -d build-gpu ]; then
    scripts/gpu-check.sh --tests-only "$out/logs/check" > "$out/logs/check.txt" 2>&1
    log "gpu-check --tests-only: rc $? ($(tail -1 "$out/logs/check.txt"))"
  fi
  cmake --build "$build" -j "$jobs" --target bench_train ocrt-infer > "$out/logs/build.log" 2>&1 ||
    { log "FAIL: building bench_train and ocrt-infer in $build"; exit 1; }
fi
torch_ok=0
python3 -c "import torch" > /dev/null 2>&1 && torch_ok=1
[ $torch_ok -eq 1 ] || log "no torch in python3: PyTorch's side is left out"

# 1. Training steps.
step_args=(--device "$device" --batch "$batch" --width 100 --steps "$steps" --warmup 5)
train_rounds=$rounds infer_rounds=$rounds
[ "$only" = infer ] && train_rounds=0
[ "$only" = train ] && infer_rounds=0
for round in $(seq "$train_rounds"); do
  for arch in crnn crnn-s svtr-lite; do
    [ "$(left)" -gt 60 ] || { log "training steps: no time left"; break 2; }
    timeout 90 "$build/bench_train" --arch "$arch" "${step_args[@]}" --precision bf16 > "$out/logs/train-ocrt-$arch-$round.log" 2>&1
    log "round $round $arch ocrt bf16: rc $?; $(grep -E "^$arch " "$out/logs/train-ocrt-$arch-$round.log")"
    [ $torch_ok -eq 1 ] || continue
    for mode in eager compile; do
      extra=(); [ $mode = compile ] && extra=(--compile)
      timeout 240 python3 bench/torch_train.py --arch "$arch" "${step_args[@]}" --amp bf16 "${extra[@]}" \
        > "$out/logs/train-torch-$arch-$mode-$round.log" 2>&1
      log "round $round $arch torch AMP $mode: rc $?; $(grep -E "^$arch " "$out/logs/train-torch-$arch-$mode-$round.log")"
    done
  done
done

# 2. Inference end to end: the sample lines repeated to LINES, with their labels.
mkdir -p lines-bench
: > lines-bench/labels.tsv
i=0
[ "$infer_rounds" -gt 0 ] || i=$lines  # nothing to read
while [ $i -lt "$lines" ]; do
  while IFS=$'\t' read -r png text && [ $i -lt "$lines" ]; do
    cp "samples/lines/$png" "lines-bench/$i-$png"
    printf '%s\t%s\n' "$i-$png" "$text" >> lines-bench/labels.tsv
    i=$((i + 1))
  done < samples/lines/labels.txt
done
cut -f1 lines-bench/labels.tsv | sed 's|^|lines-bench/|' > lines-bench/list.txt
for round in $(seq "$infer_rounds"); do
  for p in fp32 bf16; do
    [ "$(left)" -gt 30 ] || { log "inference: no time left"; break 2; }
    /usr/bin/time -f "whole process %e s, peak RSS %M KB" timeout 120 "$build/ocrt-infer" --device "$device" --batch "$batch" \
      --threads "$jobs" --precision "$p" --decoder greedy --list lines-bench/list.txt > "$out/logs/infer-ocrt-$p-$round.txt" \
      2> "$out/logs/infer-ocrt-$p-$round.log"
    log "round $round ocrt-infer $p: rc $?; $(grep -m1 -o 'in [0-9.]* s, [0-9.]* lines/s' "$out/logs/infer-ocrt-$p-$round.log"); $(tail -1 "$out/logs/infer-ocrt-$p-$round.log")"
  done
  [ $torch_ok -eq 1 ] || continue
  # AMP eager only: issue 18 compares inference with it, and torch.compile would compile again
  # for every batch width (its time counted in torch_infer's own figure: no warm-up there).
  [ "$(left)" -gt 30 ] || { log "inference: no time left"; break; }
  /usr/bin/time -f "whole process %e s, peak RSS %M KB" timeout 240 python3 bench/torch_infer.py \
    --weights weights/crnn-en.safetensors --labels lines-bench/labels.tsv --batch "$batch" --threads "$jobs" \
    --workers "$jobs" --device "$device" --amp bf16 > "$out/logs/infer-torch-$round.log" 2>&1
  log "round $round torch_infer AMP eager: rc $?; $(grep -m1 'torch_infer:' "$out/logs/infer-torch-$round.log"); $(tail -1 "$out/logs/infer-torch-$round.log")"
done
log "done"
