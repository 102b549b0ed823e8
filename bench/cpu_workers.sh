#!/usr/bin/env bash
# ocrt-infer with one CPU worker on both threads against two workers of one thread each
# (--cpu-workers 1|2), bf16 and int8 on the same lines: every two-worker run sits between two
# one-worker runs, so that a machine whose speed drifts (bench/results/cpu-bf16.md) shows as a
# difference between the neighbours rather than as a gain. One line a round and precision.
#
#   bench/cpu_workers.sh LIST [ROUNDS [BUILD_DIR]]       (LIST: image paths, one a line;
#                                                          defaults 5 rounds, build)
set -euo pipefail
cd "$(dirname "$0")/.."
LIST=${1:?usage: bench/cpu_workers.sh LIST [ROUNDS [BUILD_DIR]]}
ROUNDS=${2:-5}
BUILD=${3:-build}
rate() {  # rate WEIGHTS WORKERS [PRECISION ARGS]: lines/s from ocrt-infer's summary
  local w=$1 n=$2
  shift 2
  "$BUILD/ocrt-infer" --weights "$w" "$@" --cpu-workers "$n" --threads 2 --batch 32 --decoder greedy \
      --list "$LIST" 2>&1 >/dev/null | grep -o '[0-9.]* lines/s' | head -1 | cut -d' ' -f1
}
for r in $(seq "$ROUNDS"); do
  for p in bf16 int8; do
    if [[ $p == int8 ]]; then set -- weights/crnn-en-int8.safetensors; else set -- weights/crnn-en.safetensors --precision bf16; fi
    a=$(rate "$1" 1 "${@:2}"); b=$(rate "$1" 2 "${@:2}"); c=$(rate "$1" 1 "${@:2}")
    echo "round $r $p: one $a, two $b, one $c lines/s; two against the neighbours' mean $(python3 -c "print(f'{$b / (($a + $c) / 2):.2f}x')")"
  done
done
