#!/usr/bin/env bash
# Accuracy on realistic lines, ocrt beside Tesseract 5: CER and line accuracy per degradation,
# per font and overall, and lines/s of both on the same thread count; then the same on the real
# sample lines of samples/lines/. Prints markdown for bench/results/accuracy.md on stdout
# (progress on stderr). bench/README.md ("Accuracy against Tesseract") says how it works.
#
#   bench/accuracy.sh [--bin DIR] [--weights FILE] [--lines N] [--degrade "clean scan"]
#                     [--threads N] [--rounds R] [--seed S] [--height LO:HI] [--out DIR]
#                     [--render-only 1]
#
# The lines: the first N of bench/data/val-texts.txt (prose from /usr/share/common-licenses/,
# never used for training; bench/val_texts.py), dealt round-robin to the validation fonts (the
# URW base35 text faces, which ocrt never trains on) and rendered by ocrt-synth once per font
# (so the folder names the font) and per degradation preset (ocrt-synth --degrade NAME; "clean"
# or "none" renders without one). Tesseract (Debian's tesseract-ocr, --psm 7 -l eng) is a
# benchmark-only dependency, installed here with apt-get when missing, never by the product.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=build
WEIGHTS=weights/crnn-en.safetensors
LINES=1000
DEGRADE="clean scan"
THREADS=$(nproc)
ROUNDS=1
SEED=20261124
HEIGHT=22:40
OUT=/tmp/ocrt-accuracy
DECODE=""
RENDER_ONLY=0
FONT_DIR=/usr/share/fonts/opentype/urw-base35
TEXTS=bench/data/val-texts.txt
PPOCR=""

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; cat <<EOF

  --bin DIR        folder with ocrt-infer and ocrt-synth ($BIN)
  --weights FILE   model file read by ocrt-infer ($WEIGHTS)
  --decode "FLAGS" extra ocrt-infer flags for decoding, e.g. "--decoder beam --lm weights/lm-en.clm"
                   (default: none: ocrt-infer's own, --decoder auto; "--decoder greedy" for greedy)
  --lines N        lines of $TEXTS rendered per degradation ($LINES; at most its line count)
  --degrade LIST   degradation presets, space-separated ("$DEGRADE")
  --threads N      ocrt-infer --threads N, and N Tesseract processes with OMP_THREAD_LIMIT=1 (nproc: $THREADS)
  --rounds R       timed runs of each engine, alternating; medians quoted ($ROUNDS)
  --seed S         rendering seed; font k uses S + k ($SEED)
  --height LO:HI   glyph height in pixels, ocrt-synth --height ($HEIGHT)
  --out DIR        work folder, emptied first ($OUT)
  --render-only 1  render the lines (OUT/list.txt) and stop: no engine runs (bench/precision_cer.sh)
  --ppocr PYTHON   also PP-OCRv6 small's recogniser (bench/ppocr.py lines) with this python
                   (bench/peers.sh's venv, which has pip's rapidocr), timed like the others
EOF
}
while (($#)); do
  [[ $1 == -h || $1 == --help ]] && { usage; exit 0; }
  (($# >= 2)) || { echo "accuracy.sh: $1 needs a value (--help lists the options)" >&2; exit 2; }
  case $1 in
    --bin) BIN=$2 ;; --weights) WEIGHTS=$2 ;; --lines) LINES=$2 ;; --degrade) DEGRADE=$2 ;;
    --threads) THREADS=$2 ;; --rounds) ROUNDS=$2 ;; --seed) SEED=$2 ;; --height) HEIGHT=$2 ;;
    --out) OUT=$2 ;; --decode) DECODE=$2 ;; --ppocr) PPOCR=$2 ;; --render-only) RENDER_ONLY=$2 ;;
    *) echo "accuracy.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift 2
done
say() { echo "accuracy.sh: $*" >&2; }
die() { say "$*"; exit 2; }
for b in ocrt-infer ocrt-synth; do
  [[ -x $BIN/$b ]] || die "$BIN/$b is missing (cmake --build $BIN --target $b)"
done
[[ -f $WEIGHTS ]] || die "--weights: $WEIGHTS does not exist"
[[ $LINES =~ ^[1-9][0-9]*$ && $THREADS =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ ]] ||
  die "--lines, --threads and --rounds take positive integers"
(( LINES <= $(grep -c . "$TEXTS") )) || die "--lines: $TEXTS has only $(grep -c . "$TEXTS") lines"
if [[ -n $PPOCR ]]; then
  "$PPOCR" -c 'import rapidocr' 2>/dev/null || die "--ppocr: $PPOCR cannot import rapidocr (bench/peers.sh installs it)"
fi

# ---- the peer, a benchmark-only dependency
if [[ $RENDER_ONLY != 1 ]] && { ! command -v tesseract >/dev/null || ! tesseract --list-langs 2>/dev/null | grep -qx eng; }; then
  say "installing tesseract-ocr tesseract-ocr-eng (benchmark only)"
  SUDO=; (( EUID == 0 )) || SUDO=sudo
  $SUDO apt-get install -y tesseract-ocr tesseract-ocr-eng >&2 ||
    { $SUDO apt-get update >&2 && $SUDO apt-get install -y tesseract-ocr tesseract-ocr-eng >&2; }
fi

# ---- the validation fonts: URW base35 text faces (not the symbol D050000L and
# StandardSymbolsPS, nor the script face Z003)
FONTS=()
for f in "$FONT_DIR"/*.otf; do
  case $(basename "$f") in D050000L*|StandardSymbolsPS*|Z003*) ;; *) FONTS+=("$f") ;; esac
done
((${#FONTS[@]})) || die "no fonts in $FONT_DIR (apt-get install fonts-urw-base35)"
HAS_DEGRADE=0
"$BIN/ocrt-synth" --help | grep -q -- '--degrade' && HAS_DEGRADE=1
for D in $DEGRADE; do
  [[ $D == clean || $D == none ]] || ((HAS_DEGRADE)) ||
    die "--degrade $D: $BIN/ocrt-synth has no --degrade option yet (use clean)"
done

# ---- render: OUT/render/<degradation>/<font>/NNN.png + .gt.txt
if [[ -d $OUT && -n $(ls -A "$OUT") && ! -e $OUT/.accuracy-out ]]; then
  die "--out: $OUT is not empty and not an earlier accuracy.sh folder; give a new one"
fi
rm -rf "$OUT"
mkdir -p "$OUT/texts" "$OUT/render"
touch "$OUT/.accuracy-out"
OUT=$(cd "$OUT" && pwd)
head -n "$LINES" "$TEXTS" > "$OUT/texts/all.txt"
NF=${#FONTS[@]}
for k in "${!FONTS[@]}"; do   # line i goes to font i mod NF
  awk -v F="$NF" -v k="$k" '(NR - 1) % F == k' "$OUT/texts/all.txt" > "$OUT/texts/$k.txt"
done
for D in $DEGRADE; do
  extra=()
  case $D in
    clean|none) ;;
    *) extra=(--degrade "$D") ;;
  esac
  say "rendering $LINES lines in $NF fonts, degradation '$D'"
  for k in "${!FONTS[@]}"; do
    n=$(grep -c . "$OUT/texts/$k.txt" || true)
    ((n)) || continue
    name=$(basename "${FONTS[$k]}" .otf)
    "$BIN/ocrt-synth" --texts "$OUT/texts/$k.txt" --count "$n" --fonts "${FONTS[$k]}" --seed $((SEED + k)) \
        --height "$HEIGHT" "${extra[@]}" --out "$OUT/render/$D/$name" > /dev/null
  done
done
find "$OUT/render" -name '*.png' | sort > "$OUT/list.txt"
find "$PWD/samples/lines" -name '*.png' | sort > "$OUT/samples-list.txt"
N=$(wc -l < "$OUT/list.txt")
if [[ $RENDER_ONLY == 1 ]]; then say "rendered $N lines: $OUT/list.txt"; exit 0; fi

# ---- the engines; each writes path<TAB>text
run_ocrt() {  # LIST TSV LOG
  local rc=0
  # shellcheck disable=SC2086  # DECODE is a list of flags
  "$BIN/ocrt-infer" --weights "$WEIGHTS" --threads "$THREADS" --format tsv $DECODE --list "$1" > "$2" 2> "$3" || rc=$?
  ((rc <= 1)) || { cat "$3" >&2; die "ocrt-infer failed (status $rc)"; }
}
run_tesseract() {  # LIST TSV DIR: THREADS processes, one OpenMP thread each, each over a list file
  local dir=$3
  mkdir -p "$dir"
  split -n "r/$THREADS" -d -a 4 "$1" "$dir/chunk."
  find "$dir" -name 'chunk.????' -size +0 | sort | xargs -P "$THREADS" -I{} sh -c \
    'OMP_THREAD_LIMIT=1 tesseract "$1" stdout --psm 7 -l eng > "$1.out" 2> "$1.log"' sh {}
  # a list file gives one page per image, pages separated by form feeds
  python3 - "$2" "$dir"/chunk.???? <<'EOF'
import sys
with open(sys.argv[1], "w", encoding="utf-8") as out:
    for chunk in sys.argv[2:]:
        paths = open(chunk).read().split("\n")[:-1]
        if not paths:  # more processes than images
            continue
        pages = open(chunk + ".out", encoding="utf-8", errors="replace").read().split("\f")
        if len(pages) == len(paths) + 1 and not pages[-1].strip():
            pages.pop()  # a form feed after the last page too
        if len(pages) != len(paths):
            sys.exit(f"tesseract gave {len(pages)} pages for the {len(paths)} images of {chunk} (see {chunk}.log)")
        for p, t in zip(paths, pages):
            t = " ".join(t.split())  # one line: --psm 7 may still break one
            out.write(f"{p}\t{t}\n")
EOF
}
run_ppocr() {  # LIST TSV LOG: one process, THREADS ONNX Runtime threads
  "$PPOCR" bench/ppocr.py lines "$1" --threads "$THREADS" > "$2" 2> "$3" || { cat "$3" >&2; die "bench/ppocr.py failed"; }
}
now() { date +%s.%N; }

for r in $(seq "$ROUNDS"); do   # alternate ocrt, tesseract (, PP-OCRv6)
  d=$OUT/round$r
  mkdir -p "$d"
  echo "ocrt round $r: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  say "round $r/$ROUNDS: ocrt-infer on $N lines, $THREADS threads (load $(cut -d' ' -f1 /proc/loadavg))"
  t0=$(now); run_ocrt "$OUT/list.txt" "$d/ocrt.tsv" "$d/ocrt.log"; t1=$(now)
  echo "$t0 $t1" | awk '{print $2 - $1}' > "$d/ocrt.seconds"
  echo "tesseract round $r: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  say "round $r/$ROUNDS: tesseract on $N lines, $THREADS processes (load $(cut -d' ' -f1 /proc/loadavg))"
  t0=$(now); run_tesseract "$OUT/list.txt" "$d/tesseract.tsv" "$d/tess"; t1=$(now)
  echo "$t0 $t1" | awk '{print $2 - $1}' > "$d/tesseract.seconds"
  if [[ -n $PPOCR ]]; then
    echo "ppocr round $r: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
    say "round $r/$ROUNDS: PP-OCRv6 on $N lines, $THREADS threads (load $(cut -d' ' -f1 /proc/loadavg))"
    t0=$(now); run_ppocr "$OUT/list.txt" "$d/ppocr.tsv" "$d/ppocr.log"; t1=$(now)
    echo "$t0 $t1" | awk '{print $2 - $1}' > "$d/ppocr.seconds"
  fi
done
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
OCRT_S=$(cat "$OUT"/round*/ocrt.seconds | median)
TESS_S=$(cat "$OUT"/round*/tesseract.seconds | median)
spread() { sort -g "$@" | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.1f-%.1f", lo, hi}'; }
OWN=$(sed -n 's/.* \([0-9.]*\) lines\/s.*/\1/p' "$OUT"/round*/ocrt.log | median)
for e in ocrt tesseract; do   # the readings must not change between rounds
  for r in $(seq 2 "$ROUNDS"); do
    cmp -s "$OUT/round1/$e.tsv" "$OUT/round$r/$e.tsv" || say "warning: $e read differently in round $r"
  done
done

say "samples/lines/: both engines"
run_ocrt "$OUT/samples-list.txt" "$OUT/samples-ocrt.tsv" "$OUT/samples-ocrt.log"
run_tesseract "$OUT/samples-list.txt" "$OUT/samples-tesseract.tsv" "$OUT/samples-tess"
PP_ENGINE=() PP_SECONDS=() PP_SAMPLES=()
if [[ -n $PPOCR ]]; then
  run_ppocr "$OUT/samples-list.txt" "$OUT/samples-ppocr.tsv" "$OUT/samples-ppocr.log"
  PP_ENGINE=(--engine "pp-ocrv6=$OUT/round1/ppocr.tsv")
  PP_SECONDS=(--seconds "pp-ocrv6=$(cat "$OUT"/round*/ppocr.seconds | median)")
  PP_SAMPLES=(--engine "pp-ocrv6=$OUT/samples-ppocr.tsv")
fi

# ---- the report
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo ", whose working tree had uncommitted changes" || true)
CPU=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
FLAGS=$(grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_tile' /proc/cpuinfo | sort -u | paste -sd' ')
TESS_V=$(tesseract --version 2>&1 | head -1)
DEGR_ARGS=$DEGRADE
cat <<EOF
Measured $(date -u +'%Y-%m-%d %H:%M UTC') on $CPU ($(nproc) CPUs; $FLAGS), run from commit $COMMIT$DIRTY, with the binaries in \`$BIN\`.

\`\`\`
bench/accuracy.sh --bin $BIN --weights $WEIGHTS --lines $LINES --degrade "$DEGR_ARGS" --threads $THREADS --rounds $ROUNDS --seed $SEED --height $HEIGHT ${DECODE:+--decode "$DECODE"}
\`\`\`

- Lines: the first $LINES of \`$TEXTS\` in each of the $NF validation fonts (line i in font i mod $NF),
  glyphs $HEIGHT px, for each degradation: $DEGRADE ($N images in all).
- ocrt: \`ocrt-infer --weights $WEIGHTS --threads $THREADS --format tsv${DECODE:+ $DECODE}\` (batch 32, $( [ -n "$DECODE" ] && echo "decoding: $DECODE" || echo "ocrt-infer's default decoding, --decoder auto")),
  weights sha256 $(sha256sum "$WEIGHTS" | cut -c1-12).
- Tesseract: $TESS_V, \`--psm 7 -l eng\`, $THREADS processes (\`xargs -P $THREADS\`) with
  \`OMP_THREAD_LIMIT=1\`, each over a list file of 1/$THREADS of the images (dealt round-robin).
- lines/s: all $N lines over the wall time of the whole run (process start, model loading, reading
  the PNG files, recognition), median of $ROUNDS round(s), ocrt and Tesseract alternating
  (wall s: ocrt $(spread "$OUT"/round*/ocrt.seconds), Tesseract $(spread "$OUT"/round*/tesseract.seconds)).
  ocrt-infer's own count (recognition only, without start-up): $OWN lines/s. 1-minute load average before
  each run (the machine's other work): ocrt $(awk '/^ocrt/ {print $4}' "$OUT/load.txt" | paste -sd' '), Tesseract $(awk '/^tesseract/ {print $4}' "$OUT/load.txt" | paste -sd' ').
EOF
if [[ -n $PPOCR ]]; then
  cat <<EOF
- PP-OCRv6 small (pp-ocrv6): $("$PPOCR" bench/ppocr.py version 2>/dev/null),
  its recogniser alone on each line image (\`bench/ppocr.py lines LIST --threads $THREADS\`: no detector, no
  orientation classifier), one process; wall s $(spread "$OUT"/round*/ppocr.seconds), timed like the others.
EOF
fi
echo
python3 bench/score_lines.py --truth "$OUT/render" --levels degradation,font --title "Validation lines ($N)" \
    --engine ocrt="$OUT/round1/ocrt.tsv" --engine tesseract="$OUT/round1/tesseract.tsv" "${PP_ENGINE[@]}" \
    --seconds ocrt="$OCRT_S" --seconds tesseract="$TESS_S" "${PP_SECONDS[@]}" --worst 5
python3 bench/score_lines.py --truth samples/lines --title "samples/lines/ (real sample lines)" \
    --engine ocrt="$OUT/samples-ocrt.tsv" --engine tesseract="$OUT/samples-tesseract.tsv" "${PP_SAMPLES[@]}" --worst 12
