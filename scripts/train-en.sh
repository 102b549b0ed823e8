#!/usr/bin/env bash
# The recipe of the shipped English models: synthetic lines of real prose (60%), structured
# items (dates, prices, addresses: 20%) and mixed words and symbols (20%), rendered from the
# fonts of train/fonts/en-train.txt at glyph heights 16-80 px, through the scan simulation
# (train/scan.h), validated on other font designs (train/fonts/en-val.txt) with the same
# degradation. docs/data.md describes the data; weights/README.md the runs behind each model.
#
#   scripts/train-en.sh OUT [ocrt-train flags...]      e.g.
#   scripts/train-en.sh runs/crnn-en --arch crnn --device cuda:0 --steps 20000 --max-minutes 9
#   scripts/train-en.sh runs/crnn-en --arch crnn --device cuda:0 --steps 20000 --resume
#
# Where the render workers cannot keep a fast GPU fed (the summary's ms_per_step.data is large
# against the step), add `--render-cache DIR --synth-epoch 200000`: the lines are rendered
# once (about 7.4 KB each on disk, 1.5 GB for 200,000) and every epoch reads them with fresh
# augmentation (docs/data.md, "Render once"); its 1,000,000-line epoch would take 7.4 GB.
# Flags after OUT override the recipe's (the last one given wins). The run resumes exactly
# with --resume (same OUT, same flags): a long training can be spread over several calls and
# machines that carry OUT along. OCRT_TRAIN names the binary (default build/ocrt-train);
# OCRT_FONTS_EN the folder from scripts/fonts-en.sh (default .fonts-en, made when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/train-en.sh OUT [ocrt-train flags...]}"
shift
bin="${OCRT_TRAIN:-build/ocrt-train}"
data="${OCRT_FONTS_EN:-.fonts-en}"
if [ ! -d "$data/train" ]; then
  scripts/install-deps.sh --train
  scripts/fonts-en.sh "$data"
fi
[ -x "$bin" ] || { echo "train-en: $bin missing (scripts/build.sh builds it)" >&2; exit 1; }
exec "$bin" --train synth --val synth \
  --fonts "$data/train" --val-fonts "$data/val" --words "$data/words" --prose "$data/prose.txt" \
  --scan scan --synth-chars 2:48 --synth-height 16:80 --synth-epoch 1000000 \
  --arch crnn --batch 128 --lr 1e-3 --warmup 300 --schedule cosine --steps 20000 --seed 1 \
  --val-size 1024 --eval-every 500 --save-every 500 --log-every 100 --keep 2 \
  --workers "$(nproc)" --out "$out" "$@"
