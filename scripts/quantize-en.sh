#!/usr/bin/env bash
# The shipped int8 model files (docs/int8.md, weights/README.md): ocrt-quantize on calibration
# inputs that ocrt-synth renders from the training fonts (scripts/fonts-en.sh's .fonts-en/train)
# with the scan simulation, seed 777 (never the validation fonts or texts, nor the real pages
# of bench/real_pages.sh):
#   a recogniser: 300 lines of 10 to 50 characters of words, numbers and symbols (ocrt-synth's
#     default text), glyphs 20-40 px;
#   a text detector (--det): 32 pages of every layout at 120 to 300 dpi, the training prose and
#     words (the detector trained on seeds 101 and 503).
#
#   scripts/quantize-en.sh [FLOAT [OUT]]
#   scripts/quantize-en.sh         # weights/crnn-s-en.safetensors -> weights/crnn-s-en-int8.safetensors
#   scripts/quantize-en.sh weights/crnn-en.safetensors weights/crnn-en-int8.safetensors  # the default recogniser's
#   scripts/quantize-en.sh --det   # weights/det-en.safetensors -> weights/det-en-int8.safetensors
#
# OCRT_BIN names the folder with ocrt-synth and ocrt-quantize (default build);
# OCRT_FONTS_EN the fonts folder (default .fonts-en, made when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
det=0
if [[ ${1:-} == --det ]]; then det=1; shift; fi
if ((det)); then in="${1:-weights/det-en.safetensors}"; else in="${1:-weights/crnn-s-en.safetensors}"; fi
out="${2:-${in%.safetensors}-int8.safetensors}"
bin="${OCRT_BIN:-build}"
data="${OCRT_FONTS_EN:-.fonts-en}"
for b in ocrt-synth ocrt-quantize; do
  [ -x "$bin/$b" ] || { echo "quantize-en: $bin/$b missing (scripts/build.sh builds it)" >&2; exit 1; }
done
if [ ! -d "$data/train" ]; then
  scripts/install-deps.sh --train
  scripts/fonts-en.sh "$data"
fi
calib=$(mktemp -d)
trap 'rm -rf "$calib"' EXIT
if ((det)); then
  "$bin/ocrt-synth" --pages --count 32 --out "$calib/pages" --dpi 120:300 --degrade scan --fonts "$data/train" \
    --prose "$data/prose.txt" --words "$data/words" --seed 777 >&2
  "$bin/ocrt-quantize" --weights "$in" --out "$out" "$calib/pages" >&2
else
  "$bin/ocrt-synth" --out "$calib/lines" --count 300 --fonts "$data/train" --seed 777 --degrade scan \
    --min-chars 10 --max-chars 50 --height 20:40 >&2
  "$bin/ocrt-quantize" --weights "$in" --out "$out" "$calib/lines/labels.txt" >&2
fi
echo "quantize-en: $out ($(du -k "$out" | cut -f1) KB) from $in" >&2
