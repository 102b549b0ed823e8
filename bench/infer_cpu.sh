#!/usr/bin/env bash
# Line recognition on the CPU, 2 threads: ocrt-infer (crnn with the shipped weights, crnn-s
# with untrained weights), the PyTorch reference module (bench/torch_infer.py, the same
# weights, the same preprocessing and batching) and Tesseract 5 (--psm 7, one process over a
# list of all lines), on the same held-out synthetic lines; lines/s, peak RSS and CER of each.
# Results: bench/results/infer-cpu.md.
#
#   bench/infer_cpu.sh [BUILD_DIR [OUT_DIR]]        (defaults: build-infer, /tmp/ocrt-infer-cpu)
#   LINES=500 ROUNDS=3 SEED=20261123 TESS_ROUNDS=3 bench/infer_cpu.sh ...
#
# Needs: BUILD_DIR/ocrt-infer and ocrt-synth (a Release build), /usr/bin/python3 with Debian's
# python3-torch, numpy and PIL, tesseract-ocr + tesseract-ocr-eng, the URW base35 fonts
# (fonts-urw-base35) and /usr/share/dict/words. The lines are rendered once (kept in OUT_DIR and
# reused when they are there) with the fonts the shipped model was *not* trained on: the URW
# base35 text faces, as weights/README.md's held-out set and samples/ (a different seed).
# Each round runs every program once, one after the other (ocrt, torch, ocrt, torch, tesseract
# on 2 OpenMP threads, then on 1),
# and the load average is logged before each program; the table gives medians over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-infer}
OUT=${2:-/tmp/ocrt-infer-cpu}
LINES=${LINES:-500}
ROUNDS=${ROUNDS:-3}
TESS_ROUNDS=${TESS_ROUNDS:-$ROUNDS}
SEED=${SEED:-20261123}
THREADS=2
BATCH=32
PY=/usr/bin/python3
export OMP_NUM_THREADS=$THREADS
unset OPENBLAS_CORETYPE || true

need() { [[ -x $1 ]] || { echo "infer_cpu.sh: $1 is missing (cmake --build $BUILD --target $(basename "$1"))" >&2; exit 2; }; }
need "$BUILD/ocrt-infer"
command -v tesseract >/dev/null || { echo "infer_cpu.sh: tesseract is missing (apt-get install -y tesseract-ocr tesseract-ocr-eng)" >&2; exit 2; }
mkdir -p "$OUT"

# ---- the lines: held-out fonts, sample-like lengths and heights (samples/: 28-51 characters,
# glyphs 26-34 px), a fixed seed
if [[ ! -s $OUT/lines/labels.txt ]]; then
  need "$BUILD/ocrt-synth"
  rm -rf "$OUT/fonts" "$OUT/lines"
  mkdir -p "$OUT/fonts"
  for f in /usr/share/fonts/opentype/urw-base35/*.otf; do
    case "$(basename "$f")" in D050000L*|StandardSymbolsPS*|Z003*) ;; *) cp "$f" "$OUT/fonts/" ;; esac
  done
  "$BUILD/ocrt-synth" --out "$OUT/lines" --count "$LINES" --fonts "$OUT/fonts" --seed "$SEED" \
      --min-chars 20 --max-chars 50 --height 26:34
fi
LABELS=$OUT/lines/labels.txt
N=$(grep -c . "$LABELS")
cut -f1 "$LABELS" | sed "s|^|$OUT/lines/|" > "$OUT/list.txt"   # label order, for ocrt and tesseract

# ---- crnn-s has no trained weights: the reference module's random initial weights, weights only
[[ -s $OUT/crnn-s-untrained.safetensors ]] ||
  $PY bench/torch_infer.py --write-untrained "$OUT/crnn-s-untrained.safetensors" --arch crnn-s \
      --charset-out "$OUT/charset.txt"

# ---- one program, timed: wall seconds and peak RSS (KiB) by GNU time, the load average before
run() {  # run NAME ROUND COMMAND... (stdout: one text a line, in label order)
  local name=$1 round=$2
  shift 2
  local dir=$OUT/round$round
  mkdir -p "$dir"
  echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/load.txt"
  echo "== round $round: $name (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  /usr/bin/time -f "%e %M" -o "$dir/$name.time" "$@" > "$dir/$name.out" 2> "$dir/$name.log" ||
    { echo "infer_cpu.sh: $name failed, see $dir/$name.log" >&2; exit 1; }
}
tesseract_texts() {  # pages are separated by form feeds; one text line each with --psm 7
  $PY -c 'import sys; t = open(sys.argv[1], encoding="utf-8", errors="replace").read().split("\f")
print("\n".join(" ".join(p.split("\n")).strip() for p in t))' "$1"
}

for r in $(seq "$ROUNDS"); do
  run ocrt-crnn "$r" "$BUILD/ocrt-infer" --weights weights/crnn-en.safetensors --threads $THREADS --batch $BATCH \
      --decoder greedy --list "$OUT/list.txt"
  run torch-crnn "$r" $PY bench/torch_infer.py --weights weights/crnn-en.safetensors --labels "$LABELS" \
      --threads $THREADS --batch $BATCH --out /dev/stdout --json "$OUT/round$r/torch-crnn.json"
  run ocrt-crnn-s "$r" "$BUILD/ocrt-infer" --weights "$OUT/crnn-s-untrained.safetensors" --arch crnn-s \
      --charset "$OUT/charset.txt" --threads $THREADS --batch $BATCH --decoder greedy --list "$OUT/list.txt"
  run torch-crnn-s "$r" $PY bench/torch_infer.py --weights "$OUT/crnn-s-untrained.safetensors" --arch crnn-s \
      --charset "$OUT/charset.txt" --labels "$LABELS" --threads $THREADS --batch $BATCH --out /dev/stdout \
      --json "$OUT/round$r/torch-crnn-s.json"
  if (( r <= TESS_ROUNDS )); then
    # Tesseract's OpenMP parts on 2 threads, and on 1 (which is faster here: its own advice for
    # throughput is OMP_THREAD_LIMIT=1)
    for t in 2 1; do
      run tesseract-t$t-raw "$r" env OMP_THREAD_LIMIT=$t tesseract "$OUT/list.txt" stdout --psm 7 -l eng
      tesseract_texts "$OUT/round$r/tesseract-t$t-raw.out" > "$OUT/round$r/tesseract-t$t.out"
      for e in time log; do cp "$OUT/round$r/tesseract-t$t-raw.$e" "$OUT/round$r/tesseract-t$t.$e"; done
    done
  fi
done

# ---- the table: medians over the rounds
$PY - "$OUT" "$LABELS" "$N" <<'EOF'
import glob, json, os, re, statistics, subprocess, sys
out, labels, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, "bench")
from torch_infer import read_labels, score
truths = [t for _, t in read_labels(labels)]
rows = []
for name in ["ocrt-crnn", "torch-crnn", "ocrt-crnn-s", "torch-crnn-s", "tesseract-t2", "tesseract-t1"]:
    runs = []
    for d in sorted(glob.glob(os.path.join(out, "round*"))):
        if not os.path.exists(os.path.join(d, name + ".time")):
            continue
        wall, rss_kib = open(os.path.join(d, name + ".time")).read().split()[-2:]
        texts = open(os.path.join(d, name + ".out"), encoding="utf-8", errors="replace").read().split("\n")[:n]
        log = open(os.path.join(d, name + ".log")).read()
        own = None  # the program's own lines/s over its recognition work (not start-up)
        m = re.search(r"lines \(\d+ failed\) in [\d.]+ s, ([\d.]+) lines/s", log) or re.search(r"([\d.]+) lines/s", log)
        if m and not name.startswith("tesseract"):
            own = float(m.group(1))
        runs.append({"wall": float(wall), "rss": int(rss_kib) / 1024, "own": own, "score": score(texts, truths)})
    if not runs:
        continue
    med = lambda k: statistics.median(r[k] for r in runs)
    walls = [n / r["wall"] for r in runs]
    owns = [r["own"] for r in runs if r["own"] is not None]
    rows.append((name, len(runs), statistics.median(owns) if owns else None, (min(owns), max(owns)) if owns else None,
                 statistics.median(walls), med("rss"), runs[0]["score"]["cer"], runs[0]["score"]["line_accuracy"],
                 len({json.dumps(r["score"]) for r in runs}) == 1))
print(f"{n} lines, medians over the rounds")
print("| program | runs | lines/s (own count; min-max) | lines/s (whole process) | peak RSS MiB | CER | line accuracy |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name, k, own, spread, wall, rss, cer, acc, same in rows:
    o = f"{own:.2f} ({spread[0]:.2f}-{spread[1]:.2f})" if own else "-"
    flag = "" if same else " (differs between runs!)"
    print(f"| {name} | {k} | {o} | {wall:.2f} | {rss:.0f} | {100 * cer:.2f}%{flag} | {100 * acc:.1f}% |")
json.dump(rows, open(os.path.join(out, "summary.json"), "w"), indent=1)
EOF
