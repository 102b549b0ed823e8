#!/usr/bin/env bash
# The recipe of the shipped page detector (weights/det-en.safetensors, docs/pages.md): 1000
# synthetic pages of every layout rendered once (ocrt-synth --pages, on every core) from the
# training fonts of train/fonts/en-train.txt and English prose, at 120-220 dpi through the scan
# simulation, and 48 validation pages in the other font designs of train/fonts/en-val.txt; then
# ocrt-train --arch dbnet on 320 x 320 crops of those pages scaled to 800-1600 pixels, a fresh
# scale and crop at every step. weights/README.md records the runs behind the shipped model.
#
#   scripts/train-det.sh OUT [ocrt-train flags...]      e.g.
#   scripts/train-det.sh runs/det-en --threads 2 --max-minutes 60
#   scripts/train-det.sh runs/det-en --device cuda:0 --batch 32 --resume
#
# Flags after OUT override the recipe's (the last one given wins); the run resumes exactly with
# --resume (same OUT, same flags). OCRT_PAGES names the folder of rendered pages (default
# runs/det-pages; train/ and val/ inside, made when missing). OCRT_TRAIN and OCRT_SYNTH name
# the binaries (build/ocrt-train, build/ocrt-synth); OCRT_FONTS_EN the folder from
# scripts/fonts-en.sh (default .fonts-en, made when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/train-det.sh OUT [ocrt-train flags...]}"
shift
bin="${OCRT_TRAIN:-build/ocrt-train}"
synth="${OCRT_SYNTH:-build/ocrt-synth}"
data="${OCRT_FONTS_EN:-.fonts-en}"
pages="${OCRT_PAGES:-runs/det-pages}"
if [ ! -d "$data/train" ]; then
  scripts/install-deps.sh --train
  scripts/fonts-en.sh "$data"
fi
for b in "$bin" "$synth"; do
  [ -x "$b" ] || { echo "train-det: $b missing (scripts/build.sh builds it)" >&2; exit 1; }
done
render() {  # folder, count, fonts, seed
  [ -f "$1/$(printf '%06d' $(($2 - 1))).json" ] && return 0
  "$synth" --pages --count "$2" --out "$1" --dpi 120:220 --degrade scan --fonts "$3" \
    --prose "$data/prose.txt" --words "$data/words" --seed "$4"
}
render "$pages/train" 1000 "$data/train" 101
render "$pages/val" 48 "$data/val" 202
exec "$bin" --arch dbnet --train "$pages/train" --val "$pages/val" --val-pages 16 \
  --crop 320 --batch 8 --steps 1800 --lr 2e-3 --warmup 100 --schedule cosine --seed 1 \
  --eval-every 200 --save-every 100 --log-every 10 --out "$out" "$@"
