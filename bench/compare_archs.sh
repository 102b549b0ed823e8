#!/usr/bin/env bash
# Issue 6's comparison: crnn, crnn-s and svtr-lite trained on the same synthetic data for the
# same wall-clock budget on the same device, then scored on lines rendered with fonts none of
# them trained on (the URW base35 text faces; training uses DejaVu, Liberation and FreeFont,
# as weights/README.md) and on samples/lines, with inference speed on the held-out lines.
#
#   bench/compare_archs.sh [MINUTES] [DEVICE] [THREADS]      (defaults: 7 cpu 2)
#
# With PARALLEL=1 the three trainings run at the same time (THREADS each) instead of one after
# the other: on a CPU shared with other work, whatever else runs then slows all three alike, so
# the budget stays the same for each. Their samples/s are then shares of the machine, not a
# throughput figure (bench_train measures that). Scoring runs afterwards, one model at a time.
#
# Everything else is fixed: batch 32, AdamW lr 1e-3 with a constant schedule (a time budget has
# no known step count for a cosine), augmentation on, seed 1, 256 validation lines.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-7}
device=${2:-cpu}
threads=${3:-2}
build=${BUILD:-build}
work=${WORK:-/tmp/ocrt-compare}
words=/usr/share/dict/words
if [ -d .gpu-fonts/train ]; then
  # A lent GPU machine without Debian's fonts: the folders scripts/gpu-deps.sh made (same split).
  fonts_train=.gpu-fonts/train fonts_val=.gpu-fonts/val words=.gpu-fonts/words
else
  fonts_train="$work/fonts/train" fonts_val="$work/fonts/val"
  mkdir -p "$fonts_train" "$fonts_val"
  cp /usr/share/fonts/truetype/dejavu/*.ttf /usr/share/fonts/truetype/liberation/*.ttf \
     /usr/share/fonts/truetype/freefont/*.ttf "$fonts_train/"
  for f in /usr/share/fonts/opentype/urw-base35/*.otf; do
    case "$(basename "$f")" in D050000L*|StandardSymbolsPS*|Z003*) ;; *) cp "$f" "$fonts_val/" ;; esac
  done
fi
# The held-out lines for inference speed and CER outside training (a different seed from the
# trainer's validation lines).
[ -f "$work/heldout/labels.txt" ] || "$build/ocrt-synth" --out "$work/heldout" --count 512 --fonts "$fonts_val" --words "$words" \
    --seed 77 --min-chars 2 --max-chars 24 > /dev/null
archs="crnn crnn-s svtr-lite"
train() {
  local arch=$1 out="$work/$1"
  rm -rf "$out"
  echo "== $arch: training for $minutes minutes on $device ($threads threads)"
  "$build/ocrt-train" --arch "$arch" --device "$device" --threads "$threads" --workers 2 \
      --train synth --val synth --fonts "$fonts_train" --val-fonts "$fonts_val" --words "$words" \
      --val-size 256 --synth-chars 2:24 --batch 32 --steps 1000000 --max-minutes "$minutes" \
      --lr 1e-3 --schedule constant --seed 1 --eval-every 1000000 --save-every 1000000 --log-every 50 \
      --out "$out" 2> "$out.train.log" > "$out.summary.json"
  cat "$out.summary.json"
  grep "^eval" "$out.train.log" | tail -1
}
score() {
  local arch=$1 out="$work/$1"
  echo "== $arch: ocrt-infer on the held-out lines and on samples/lines"
  # --eval prints CER and line accuracy on stdout, the speed summary on stderr.
  "$build/ocrt-infer" --weights "$out/best.safetensors" --device "$device" --threads "$threads" --batch 32 \
      --decoder greedy --eval --worst 0 "$work/heldout/labels.txt" > "$out.heldout.txt" 2> "$out.heldout.log" || true
  head -3 "$out.heldout.txt"; tail -1 "$out.heldout.log"
  "$build/ocrt-infer" --weights "$out/best.safetensors" --device "$device" --threads "$threads" \
      --decoder greedy --eval --worst 0 samples/lines > "$out.samples.txt" 2> /dev/null || true
  head -3 "$out.samples.txt"
}
if [ "${PARALLEL:-0}" = 1 ]; then
  for arch in $archs; do train "$arch" > "$work/$arch.out" 2>&1 & done
  wait
  for arch in $archs; do cat "$work/$arch.out"; done
  for arch in $archs; do score "$arch"; done
else
  for arch in $archs; do train "$arch"; score "$arch"; done
fi
