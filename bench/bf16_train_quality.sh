#!/usr/bin/env bash
# bf16 training quality on the CPU (issue 27): crnn-s trained for a fixed number of steps in
# float32 and in bf16 (ocrt-train --precision), three seeds each, the same data and schedule;
# the validation CER of every run, so that the bf16 runs can be held against the float32 runs'
# seed-to-seed spread. Results: bench/results/cpu-bf16.md.
#
#   bench/bf16_train_quality.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, /tmp/ocrt-bf16-quality)
#   STEPS=1500 SEEDS="1 2 3" THREADS=2 bench/bf16_train_quality.sh
#
# Data: synthetic lines rendered on the fly from the TrueType fonts under /usr/share/fonts/truetype
# (DejaVu, FreeFont, Liberation; TRAIN_FONTS overrides) and /usr/share/dict/words, validation on
# 512 synthetic lines in the URW base35 text faces (fonts-urw-base35), which never train (ocrt-train's
# default --fonts would include them). Runs alternate precision (fp32 seed 1, bf16 seed 1,
# fp32 seed 2, ...) so that a change in machine load hits both alike.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-/tmp/ocrt-bf16-quality}
STEPS=${STEPS:-1500}
SEEDS=${SEEDS:-1 2 3}
THREADS=${THREADS:-2}
TRAIN_FONTS=${TRAIN_FONTS:-/usr/share/fonts/truetype}
[[ -x $BUILD/ocrt-train ]] || { echo "bf16_train_quality.sh: $BUILD/ocrt-train is missing" >&2; exit 2; }
mkdir -p "$OUT/val-fonts"
for f in /usr/share/fonts/opentype/urw-base35/*.otf; do
  case "$(basename "$f")" in D050000L*|StandardSymbolsPS*|Z003*) ;; *) cp -n "$f" "$OUT/val-fonts/" ;; esac
done
for seed in $SEEDS; do
  for precision in fp32 bf16; do
    run=$OUT/$precision-seed$seed
    if [[ -s $run/summary.json ]]; then continue; fi
    rm -rf "$run"
    "$BUILD/ocrt-train" --arch crnn-s --train synth --fonts "$TRAIN_FONTS" --val synth --val-fonts "$OUT/val-fonts" --steps "$STEPS" \
        --batch 32 --threads "$THREADS" --seed "$seed" --precision "$precision" --eval-every "$STEPS" \
        --save-every "$STEPS" --log-every 100 --out "$run" > "$run.summary.tmp" 2> "$run.log"
    mv "$run.summary.tmp" "$run/summary.json"
    echo "$precision seed $seed: $(cat "$run/summary.json")"
  done
done
echo "| precision | seed | val CER | samples/s | final train loss |"
echo "| --- | --- | --- | --- | --- |"
for precision in fp32 bf16; do
  for seed in $SEEDS; do
    python3 - "$OUT/$precision-seed$seed/summary.json" "$precision" "$seed" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {100 * j['best_val_cer']:.2f}% | {j['samples_per_sec']:.1f} | {j['final_train_loss']:.3f} |")
PY
  done
done
