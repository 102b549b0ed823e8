#!/usr/bin/env bash
# Pages per second on a lent GPU with page lanes (ocrt-infer --page-jobs; infer/page_lanes.h):
# scripts/gpu-check.sh --tests-only (build, every `cuda` test), then COUNT freshly rendered
# 300 dpi pages (seed 77, the validation fonts) read on cuda:0 with 1, 2, 4 and 8 lanes and
# once with the prefix beam on every line (its logits come to the host under the GPU's turn)
# and once in bf16,
# each with ocrt-infer --eval (words right must not depend on the lanes). Logs to $OUT.
#
#   scripts/gpu-pages.sh SECONDS [COUNT]      (COUNT: 32 pages)
set -uo pipefail
cd "$(dirname "$0")/.."
budget="${1:?usage: scripts/gpu-pages.sh SECONDS [COUNT]}"
count="${2:-32}"
out_default=gpu-pages-out
. scripts/gpu-call.sh  # start, left, out, log, jobs, the logs bundled at exit, libtiff

scripts/gpu-check.sh --tests-only "$out/logs/check" > "$out/logs/check.txt" 2>&1
log "gpu-check --tests-only: rc $? ($(tail -1 "$out/logs/check.txt"))"
cmake --build build-gpu -j "$jobs" --target ocrt-synth ocrt-infer > "$out/logs/build-more.log" 2>&1 ||
  { log "FAIL: building ocrt-synth/ocrt-infer"; exit 1; }
export OCRT_FONT_DIRS="$PWD/.fonts-en/train"
build-gpu/ocrt-synth --pages --degrade scan --prose .fonts-en/prose.txt --words .fonts-en/words --count "$count" \
  --dpi 300:300 --fonts .fonts-en/val --seed 77 --out pages300 > "$out/logs/synth300.log" 2>&1
log "rendered $(ls pages300/*.png 2>/dev/null | wc -l) pages at 300 dpi"
read_pages() {  # TAG ARGS...: one timed ocrt-infer run over the pages
  local tag="$1"; shift
  [ "$(left)" -gt 25 ] || { log "$tag: no time left"; return; }
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout $(($(left) - 10)) build-gpu/ocrt-infer --page --device cuda:0 --eval "$@" pages300 > "$out/logs/pages-$tag.txt" 2>&1
  rc=$?; t1=$(date +%s.%N)
  log "$tag: rc $rc, $(ls pages300/*.png | wc -l) pages in $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s end to end; $(grep -m1 -iE 'words' "$out/logs/pages-$tag.txt"); $(grep -m1 -E 's a page' "$out/logs/pages-$tag.txt"); $(grep -m1 -iE "pages' time" "$out/logs/pages-$tag.txt")"
}
read_pages jobs1 --page-jobs 1
read_pages jobs4 --page-jobs 4
read_pages jobs8 --page-jobs 8
read_pages jobs2 --page-jobs 2
read_pages beam4 --page-jobs 4 --decoder beam
read_pages bf16x4 --page-jobs 4 --precision bf16
log "done"
