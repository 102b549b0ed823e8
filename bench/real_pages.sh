#!/usr/bin/env bash
# Real pages, ocrt beside Tesseract 5: the 29 English document pages of scribeocr/ocr-benchmark
# (https://github.com/scribeocr/ocr-benchmark, a benchmark for Tesseract.js and Scribe.js) with
# their hand-corrected word-level hOCR truth: charts, court depositions and filings, a booking
# form, multi-column reports and papers, tables, a receipt, a slide. They are real documents
# (scans, faxes, photocopies and PDF pages rendered to images), not renders of ocrt's.
#
#   bench/real_pages.sh [--src DIR] [--work DIR] [--layout-only] [page_bench.sh options...]
#
# The pages are not in this repository: the repository states no licence for its images, so
# they are read from a clone (--src DIR, or cloned into the work folder at the commit below).
# The script lays them out as bench/page_bench.sh wants them, NAME.png beside its truth
# NAME.hocr, in two sets judged by eye: `scans` (12 pages with scanning's noise, blur,
# photocopy or fax marks, binarisation, skew) and `digital` (17 PDF pages rendered to images).
# With --layout-only it stops there (the folders for `ocrt-infer --page --eval` or
# build/bench_orientation). Then it runs bench/page_bench.sh on each set (the detector and recogniser ocrt-infer takes by
# default on a CPU with an int8 kernel, weights/det-en-int8.safetensors and
# weights/crnn-en-int8.safetensors, unless --det or --weights is given; other options go to
# page_bench.sh as they are) and prints both
# markdown reports, the scans first. multicol_10 has no truth and is left out.
#
# Caveats of the truth (the upstream readme's and ours): the order of its lines was not
# reviewed, so the CER of the reading-order text is only a rough guide on tables, charts and
# forms; word accuracy (words matched by position) is the figure to quote. form_01 has a few
# handwritten marks that the truth leaves out.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=https://github.com/scribeocr/ocr-benchmark
COMMIT=818efa700e6811bb056efd353b3e1f6fd383de2c
SCANS="chart_01 chart_02 deposition_01 deposition_02 filing_01 form_01 multicol_05 table_04 table_05 table_08 table_09 table_10"
SRC="" WORK=/tmp/ocrt-real-pages LAYOUT_ONLY=0
pass=()
while (($#)); do
  case $1 in
    --src) SRC=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --layout-only) LAYOUT_ONLY=1; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pass+=("$1"); shift ;;
  esac
done
say() { echo "real_pages.sh: $*" >&2; }

mkdir -p "$WORK"
if [[ -z $SRC ]]; then
  SRC=$WORK/ocr-benchmark
  if [[ ! -d $SRC/.git ]]; then
    say "cloning $REPO"
    git clone --quiet "$REPO" "$SRC"
  fi
  git -C "$SRC" checkout --quiet "$COMMIT"
fi
[[ -d $SRC/img && -d $SRC/ground_truth ]] || { say "$SRC has no img/ and ground_truth/ (a clone of $REPO?)"; exit 1; }

rm -rf "$WORK/scans" "$WORK/digital"
mkdir -p "$WORK/scans" "$WORK/digital"
n=0
for img in "$SRC"/img/*; do
  [[ -f $img ]] || continue
  file=$(basename "$img")
  name=${file%.*}
  truth=$SRC/ground_truth/$name.truth.hocr
  [[ -f $truth ]] || truth=$SRC/ground_truth/$name.hocr
  [[ -f $truth ]] || { say "$name: no truth, left out"; continue; }
  set_dir=digital
  [[ " $SCANS " == *" $name "* ]] && set_dir=scans
  cp "$img" "$WORK/$set_dir/$file"
  cp "$truth" "$WORK/$set_dir/$name.hocr"
  n=$((n + 1))
done
((n > 0)) || { say "no page with a truth file in $SRC/img"; exit 1; }
say "$n pages: $(ls "$WORK"/scans/*.hocr | wc -l) scans, $(ls "$WORK"/digital/*.hocr | wc -l) digital"
((LAYOUT_ONLY)) && exit 0

has_det=0 has_weights=0
for a in "${pass[@]}"; do
  [[ $a == --det ]] && has_det=1
  [[ $a == --weights ]] && has_weights=1
done
((has_det)) || pass+=(--det weights/det-en-int8.safetensors)
((has_weights)) || pass+=(--weights weights/crnn-en-int8.safetensors)
for set_dir in scans digital; do
  echo "### scribeocr/ocr-benchmark at ${COMMIT:0:7}: $set_dir"
  echo
  bench/page_bench.sh --pages "$WORK/$set_dir" --limit 1000 --out "$WORK/run-$set_dir" "${pass[@]}"
  echo
done
