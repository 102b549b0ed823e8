#!/usr/bin/env bash
# One lent-GPU call in the order DEVELOPERS.md asks for, inside a deadline: scripts/gpu-check.sh
# --tests-only (build, every `cuda` test, ocrt-infer on the sample lines), then whole pages on
# the GPU (detector + recogniser: the sample page read on cuda:0 and on the CPU must agree, and
# pages/s over freshly rendered 300 dpi pages), then training on cuda:0 for whatever time is
# left (--max-minutes, so the last checkpoint is saved). Logs and the training run's files go
# to $OUT (at most 8 files come back: the logs are bundled, models split into 15 MB parts).
#
#   scripts/gpu-session.sh SECONDS [--train crnn|crnn-s|dbnet|none] [--init FILE] [--quick] [--profile]
#
# SECONDS is the whole budget of the call. --train picks what trains in the time left:
#   crnn   the shipped recogniser's recipe (scripts/train-en.sh) in gpu-run/crnn, resuming
#          there when a checkpoint is present (a second call on the same warm machine goes on
#          exactly), else starting from --init (default weights/crnn-en.safetensors)
#   crnn-s the same recipe for the small preset in gpu-run/crnn-s, from --init when given,
#          else from scratch (resuming there as crnn does)
#   dbnet  the page detector on 800 freshly rendered pages (from --init when given)
# --quick skips the checks and the pages (a second call on a machine already checked; on a fresh
# machine, without build-gpu, the checks run anyway: they build it).
# --profile times every kernel of a few crnn training steps in bf16, ocrt's and PyTorch AMP's,
# with Nsight Compute, before the training (scripts/gpu-profile.sh; the CSVs come back in the logs).
# OCRT_CRNN_FLAGS adds ocrt-train flags to the crnn run (e.g. "--lr 3e-4 --steps 7000").
set -uo pipefail
cd "$(dirname "$0")/.."
budget="${1:?usage: scripts/gpu-session.sh SECONDS [--train crnn|crnn-s|dbnet|none] [--init FILE] [--quick]}"
shift
train=dbnet init="" quick=0 profile=0
while [ $# -gt 0 ]; do
  case "$1" in
    --train) train="$2"; shift 2 ;;
    --init) init="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --profile) profile=1; shift ;;
    *) init="$1"; shift ;;  # the older form: SECONDS DET_INIT
  esac
done
out_default=gpu-session-out
. scripts/gpu-call.sh  # start, left, out, log, jobs, the logs bundled at exit, libtiff
# --quick presumes a machine this session already checked; a fresh one (the last one went back
# when idle) has no build-gpu yet, and the checks are also what configures and builds it.
if [ $quick -eq 1 ] && [ ! -f build-gpu/CMakeCache.txt ]; then
  log "--quick, but no build-gpu here (a fresh machine): running the checks, which build it"
  quick=0
fi

if [ $quick -eq 0 ]; then
  scripts/gpu-check.sh --tests-only "$out/logs/check" > "$out/logs/check.txt" 2>&1
  log "gpu-check --tests-only: rc $? ($(tail -1 "$out/logs/check.txt"))"
fi
cmake --build build-gpu -j "$jobs" --target ocrt-synth ocrt-train ocrt-infer > "$out/logs/build-more.log" 2>&1 ||
  { log "FAIL: building ocrt-synth/ocrt-train/ocrt-infer"; exit 1; }

# Pages to read (and, for dbnet, to train on), rendered on every core (they are not in the tree).
export OCRT_FONT_DIRS="$PWD/.fonts-en/train"
synth() { build-gpu/ocrt-synth --pages --degrade scan --prose .fonts-en/prose.txt --words .fonts-en/words "$@"; }
render_pid=""
if [ "$train" = dbnet ]; then
  (synth --count 800 --dpi 120:220 --fonts .fonts-en/train --seed 303 --out det-pages/train > "$out/logs/synth-train.log" 2>&1
   synth --count 32 --dpi 120:220 --fonts .fonts-en/val --seed 404 --out det-pages/val > "$out/logs/synth-val.log" 2>&1) &
  render_pid=$!
fi

if [ $quick -eq 0 ]; then
  synth --count 16 --dpi 300:300 --fonts .fonts-en/val --seed 77 --out pages300 > "$out/logs/synth300.log" 2>&1
  log "rendered $(ls pages300/*.png 2>/dev/null | wc -l) pages at 300 dpi"
  # The shipped page reader on the GPU: the sample page must read as on the CPU; then pages/s.
  if [ -f samples/pages/article.png ]; then
    build-gpu/ocrt-infer --page --device cuda:0 --format text samples/pages/article.png > "$out/logs/page-cuda.txt" 2> "$out/logs/page-cuda.log"
    rc_gpu=$?
    # The float32 files on the CPU too (a CPU alone would take the int8 detector and recogniser).
    build-gpu/ocrt-infer --page --device cpu --weights weights/crnn-en.safetensors --det-weights weights/det-en.safetensors \
      --format text samples/pages/article.png > "$out/logs/page-cpu.txt" 2> /dev/null
    if [ $rc_gpu -eq 0 ] && cmp -s "$out/logs/page-cuda.txt" "$out/logs/page-cpu.txt"; then
      log "page: cuda:0 and cpu read samples/pages/article.png identically ($(wc -l < "$out/logs/page-cuda.txt") lines)"
    else
      log "FAIL: page on cuda:0 (rc $rc_gpu) differs from cpu (see page-cuda.txt, page-cpu.txt)"
    fi
  fi
  for run in 1 2; do
    t0=$(date +%s.%N)
    build-gpu/ocrt-infer --page --device cuda:0 --eval pages300 > "$out/logs/pages300-cuda-$run.txt" 2>&1
    rc=$?; t1=$(date +%s.%N)
    log "pages300 on cuda:0 (run $run): rc $rc, $(ls pages300/*.png | wc -l) pages in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s; $(grep -m1 -iE 'words' "$out/logs/pages300-cuda-$run.txt"); $(grep -m1 -iE "pages' time" "$out/logs/pages300-cuda-$run.txt")"
  done
  if [ "$train" = none ]; then
    t0=$(date +%s.%N)
    build-gpu/ocrt-infer --page --device cpu --eval pages300 > "$out/logs/pages300-cpu.txt" 2>&1; rc=$?
    t1=$(date +%s.%N)
    log "pages300 on cpu ($jobs threads): rc $rc, $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s; $(grep -m1 -iE 'words' "$out/logs/pages300-cpu.txt")"
  fi
fi

if [ $profile -eq 1 ]; then
  scripts/gpu-profile.sh "$out/logs/profile" bf16 > "$out/logs/profile.txt" 2>&1
  log "gpu-profile: rc $?; $(tr '\n' ';' < "$out/logs/profile.txt")"
fi

# Training on the GPU for the time left, keeping 40 s for the end.
[ -n "$render_pid" ] && wait $render_pid
minutes=$(awk "BEGIN{printf \"%.2f\", ($(left) - 40) / 60}")
if [ "$train" = none ]; then
  log "no training asked for"
elif ! awk "BEGIN{exit !($minutes > 0.5)}"; then
  log "no time left for $train training"
elif [ "$train" = crnn ] || [ "$train" = crnn-s ]; then
  # The recipe of scripts/train-en.sh, continued: a new stage from the shipped weights (or
  # --init; crnn-s starts from scratch without one), or exactly where the last call on this
  # machine stopped (--resume-if-present).
  run="gpu-run/$train" from=()
  if [ "$train" = crnn ]; then from=(--init "${init:-weights/crnn-en.safetensors}")
  elif [ -n "$init" ]; then from=(--init "$init"); fi
  log "$train training on cuda:0 for $minutes minutes ($run; from ${from[1]:-scratch} unless a checkpoint is there)"
  # shellcheck disable=SC2086
  OCRT_TRAIN=build-gpu/ocrt-train scripts/train-en.sh "$run" --device cuda:0 --arch "$train" \
    "${from[@]}" --resume-if-present --max-minutes "$minutes" \
    ${OCRT_CRNN_FLAGS:-} > "$out/logs/$train-summary.json" 2> "$out/logs/$train-train.log"
  log "$train training: rc $?; $(grep -E '^step' "$out/logs/$train-train.log" | tail -1)"
  cp "$run/metrics.jsonl" "$out/$train-metrics.jsonl" 2>/dev/null
  [ -f "$run/best.safetensors" ] && split -b 15M -d "$run/best.safetensors" "$out/$train-best.safetensors.part-"
else
  log "rendered $(ls det-pages/train/*.png 2>/dev/null | wc -l) training and $(ls det-pages/val/*.png 2>/dev/null | wc -l) validation pages"
  extra=()
  [ -n "$init" ] && extra+=(--init "$init")
  log "dbnet training on cuda:0 for $minutes minutes ${init:+from $init}"
  build-gpu/ocrt-train --arch dbnet --device cuda:0 --train det-pages/train --val det-pages/val --val-pages 16 \
    --crop 320 --batch 32 --workers $((jobs - 2)) --steps 3000 --lr 1e-3 --warmup 50 --schedule cosine --seed 3 \
    --eval-every 200 --save-every 200 --log-every 20 --max-minutes "$minutes" --out det-run "${extra[@]}" \
    > "$out/logs/det-train.log" 2>&1
  log "dbnet training: rc $?; $(grep -E '^step' "$out/logs/det-train.log" | tail -1)"
  cp det-run/best.safetensors "$out/det-best.safetensors" 2>/dev/null
  cp det-run/metrics.jsonl "$out/det-metrics.jsonl" 2>/dev/null
  last=$(ls det-run/ckpt-*.safetensors 2>/dev/null | tail -1)
  [ -n "$last" ] && cp "$last" "$out/det-last.safetensors"
fi
log "done"
