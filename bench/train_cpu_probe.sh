#!/usr/bin/env bash
# crnn training steps on the CPU (2 threads, batch 32 of 32 x 128 lines): ocrt in fp32 and bf16
# (build/bench_train) and PyTorch's autocast bf16 (bench/torch_train.py with the peers' PyTorch,
# bench/peers.sh), round after round, each run preceded by a wait of up to 20 s for the AMX
# tiles' fast state and followed by a sample of it (bench/amx_state.sh). Some machines switch
# between that state and a quarter of it for seconds to minutes (bench/results/cpu-bf16.md),
# which every AMX program follows; the state around each run says which runs compare.
#
#   bench/train_cpu_probe.sh [ROUNDS [BUILD_DIR]]        (defaults: 4, build)
#
# Prints one line a round: each program's `arch ms/step min - max samples/s peak MiB` row and
# [fast % before/after].
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-4}
BUILD=${2:-build}
PY=$(bench/peers.sh --python)
source bench/amx_state.sh
for r in $(seq "$ROUNDS"); do
  line="round $r"
  for p in fp32 bf16 torch; do
    before=$(wait_fast 20)
    if [[ $p == torch ]]; then
      row=$(OMP_NUM_THREADS=2 "$PY" bench/torch_train.py --arch crnn --batch 32 --threads 2 --steps 10 --warmup 3 \
            --amp bf16 2>&1 | grep "^crnn " | head -1)
    else
      row=$("$BUILD/bench_train" --arch crnn --batch 32 --threads 2 --steps 10 --warmup 3 --precision "$p" 2>&1 |
            grep "^crnn " | head -1)
    fi
    line="$line | $p [$before/$(probe_state)] $row"
  done
  echo "$line"
done
