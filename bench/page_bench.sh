#!/usr/bin/env bash
# Whole pages, ocrt beside Tesseract 5: pages/s, peak RSS and word accuracy on the same pages and
# the same cores. Prints markdown for bench/results/pages.md on stdout (progress on stderr).
#
#   bench/page_bench.sh --pages DIR --det FILE [--weights FILE] [--threads N] [--limit N]
#                       [--skip N] [--rounds R] [--bin DIR] [--out DIR] [--ppocr PYTHON]
#
# DIR holds pages with their truth: NAME.png (or .jpg, .tif: one page an image) beside NAME.json
# (ocrt-synth --pages), NAME.hocr or NAME.xml (ALTO, PAGE XML); --limit of them in name order are
# read, after the first --skip (e.g. the pages a detector's training chose its best model on). Each round runs, one after the other:
#   ocrt       one process over all the pages: ocrt-infer --page --det-weights DET --weights W
#              --threads N --format hocr --output-dir ...
#   Tesseract  one process a page, N at a time (xargs -P N), OMP_THREAD_LIMIT=1:
#              tesseract IMG OUT -l eng hocr
#   PP-OCRv6   with --ppocr PYTHON (the python of bench/peers.sh's venv, which has pip's rapidocr):
#              one process over all the pages, PYTHON bench/ppocr.py pages LIST --threads N --out DIR
#              (PP-OCRv6 small detector and recogniser on ONNX Runtime, hOCR out)
# Rounds alternate (ocrt, Tesseract[, PP-OCRv6], ocrt, ...); pages/s is the pages over the wall
# time of each side's whole run (start-up and model loading included), median of the rounds;
# peak RSS from /usr/bin/time (ocrt: its one process; Tesseract: the largest of its processes).
# Both sides' hOCR files are scored by the same code, bench_page_score (infer/page_eval.h: words
# matched by position, missed, extra, CER of the reading-order text); ocrt's totals are checked
# against `ocrt-infer --eval` on the same pages. Tesseract (Debian's tesseract-ocr and
# tesseract-ocr-eng) is a benchmark-only dependency, installed here with apt-get when missing.
# The detector file is copied into the work folder first, so that a model being rewritten by a
# training run cannot change between rounds.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=build
PAGES=""
DET=""
WEIGHTS=weights/crnn-en.safetensors
THREADS=2
LIMIT=24
SKIP=0
ROUNDS=2
OUT=/tmp/ocrt-page-bench
PPOCR=""
DECODE=""

usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; cat <<EOF

  --pages DIR      pages with truth (required)
  --det FILE       detector model file, arch dbnet (required)
  --weights FILE   recogniser model file ($WEIGHTS)
  --threads N      ocrt-infer --threads N, and N Tesseract processes at a time ($THREADS)
  --limit N        read N pages of DIR ($LIMIT)
  --skip N         after skipping the first N in name order ($SKIP)
  --rounds R       timed runs of each engine, alternating; medians quoted ($ROUNDS)
  --bin DIR        folder with ocrt-infer and bench_page_score ($BIN)
  --out DIR        work folder, emptied first ($OUT)
  --ppocr PYTHON   also PP-OCRv6 small through bench/ppocr.py with this python (bench/peers.sh's venv)
  --decode "FLAGS" extra ocrt-infer flags for decoding, e.g. "--decoder greedy" (default: none,
                   ocrt-infer's own: --decoder auto)
EOF
}
while (($#)); do
  [[ $1 == -h || $1 == --help ]] && { usage; exit 0; }
  (($# >= 2)) || { echo "page_bench.sh: $1 needs a value (--help lists the options)" >&2; exit 2; }
  case $1 in
    --pages) PAGES=$2 ;; --det) DET=$2 ;; --weights) WEIGHTS=$2 ;; --threads) THREADS=$2 ;;
    --limit) LIMIT=$2 ;; --skip) SKIP=$2 ;; --rounds) ROUNDS=$2 ;; --bin) BIN=$2 ;; --out) OUT=$2 ;;
    --ppocr) PPOCR=$2 ;; --decode) DECODE=$2 ;;
    *) echo "page_bench.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift 2
done
say() { echo "page_bench.sh: $*" >&2; }
die() { say "$*"; exit 1; }

[[ -n $PAGES && -d $PAGES ]] || die "--pages: give a folder of pages with truth"
[[ -n $DET && -f $DET ]] || die "--det: give the detector's model file"
[[ -f $WEIGHTS ]] || die "--weights: $WEIGHTS does not exist"
for b in ocrt-infer bench_page_score; do
  [[ -x $BIN/$b ]] || die "$BIN/$b is missing (cmake --build $BIN --target $b)"
done
[[ $LIMIT =~ ^[1-9][0-9]*$ && $THREADS =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ && $SKIP =~ ^[0-9]+$ ]] ||
  die "--limit, --threads and --rounds take positive integers, --skip a count"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (apt-get install time)"
if [[ -n $PPOCR ]]; then
  "$PPOCR" -c 'import rapidocr' 2>/dev/null || die "--ppocr: $PPOCR cannot import rapidocr (bench/peers.sh installs it)"
fi

# ---- the peer, a benchmark-only dependency
if ! command -v tesseract >/dev/null || ! tesseract --list-langs 2>/dev/null | grep -qx eng; then
  say "installing tesseract-ocr tesseract-ocr-eng (benchmark only)"
  SUDO=""
  if ((EUID != 0)); then
    command -v sudo >/dev/null || die "need root or sudo to install tesseract-ocr tesseract-ocr-eng"
    SUDO=sudo
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng >&2 ||
    { $SUDO apt-get update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng >&2; }
fi

# ---- the work folder, the pages and a frozen copy of the detector
if [[ -d $OUT && -n $(ls -A "$OUT") && ! -e $OUT/.page-bench-out ]]; then
  die "--out: $OUT is not empty and not an earlier page_bench.sh folder; give a new one"
fi
rm -rf "$OUT"
mkdir -p "$OUT"
touch "$OUT/.page-bench-out"
OUT=$(cd "$OUT" && pwd)
cp "$DET" "$OUT/det.safetensors"
PAGES_ABS=$(cd "$PAGES" && pwd)
: > "$OUT/pages.txt"
: > "$OUT/truths.txt"
SKIP0=$SKIP
SKIPPED=0
while IFS= read -r img; do
  base=${img%.*}
  truth=""
  for t in "$base.json" "$base.hocr" "$base.xml"; do [[ -f $t ]] && { truth=$t; break; }; done
  [[ -n $truth ]] || continue
  ((SKIP == 0)) || { SKIP=$((SKIP - 1)); SKIPPED=$((SKIPPED + 1)); continue; }
  echo "$img" >> "$OUT/pages.txt"
  echo "$truth" >> "$OUT/truths.txt"
  (($(wc -l < "$OUT/pages.txt") < LIMIT)) || break
done < <(find "$PAGES_ABS" -maxdepth 1 -type f \( -name '*.png' -o -name '*.jpg' -o -name '*.jpeg' -o -name '*.tif' -o -name '*.tiff' \) | sort)
N=$(wc -l < "$OUT/pages.txt")
((N)) || die "--pages: $PAGES has no image with a truth file beside it (NAME.json, .hocr or .xml)"
[[ $(sed 's#.*/##; s#\.[^.]*$##' "$OUT/pages.txt" | sort | uniq -d) == "" ]] || die "--pages: two images share a name"

# ---- the engines
now() { date +%s.%N; }
run_ocrt() {  # DIR: hOCR files into DIR/ocrt, the summary in DIR/ocrt.log, time -v in DIR/ocrt.time
  local d=$1 rc=0
  mkdir -p "$d/ocrt"
  # shellcheck disable=SC2086  # DECODE is a list of flags
  /usr/bin/time -v -o "$d/ocrt.time" "$BIN/ocrt-infer" --page --det-weights "$OUT/det.safetensors" --weights "$WEIGHTS" \
      --threads "$THREADS" $DECODE --format hocr --output-dir "$d/ocrt" --list "$OUT/pages.txt" 2> "$d/ocrt.log" || rc=$?
  ((rc <= 1)) || { cat "$d/ocrt.log" >&2; die "ocrt-infer failed (status $rc)"; }
  ((rc == 0)) || say "ocrt-infer: some pages failed (status 1; $d/ocrt.log)"
}
run_tesseract() {  # DIR: DIR/tess/NAME.hocr, NAME.log, NAME.time (peak RSS KB, seconds)
  local d=$1/tess
  mkdir -p "$d"
  # shellcheck disable=SC2016  # the inner shell expands $1, $2 and $n
  xargs -P "$THREADS" -I{} sh -c \
    'n=$(basename "$1"); n=${n%.*}; OMP_THREAD_LIMIT=1 /usr/bin/time -f "%M %e" -o "$2/$n.time" tesseract "$1" "$2/$n" -l eng hocr 2> "$2/$n.log"' \
    sh {} "$d" < "$OUT/pages.txt" || say "tesseract: some pages failed (see $d/*.log)"
}

run_ppocr() {  # DIR: DIR/ppocr/NAME.hocr, the log in DIR/ppocr.log, time -v in DIR/ppocr.time
  local d=$1
  mkdir -p "$d/ppocr"
  /usr/bin/time -v -o "$d/ppocr.time" "$PPOCR" bench/ppocr.py pages "$OUT/pages.txt" --threads "$THREADS" \
      --out "$d/ppocr" 2> "$d/ppocr.log" || die "bench/ppocr.py failed ($d/ppocr.log)"
}

for r in $(seq "$ROUNDS"); do   # alternate ocrt, tesseract (, PP-OCRv6)
  d=$OUT/round$r
  mkdir -p "$d"
  echo "ocrt round $r: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  say "round $r/$ROUNDS: ocrt-infer on $N pages, $THREADS threads (load $(cut -d' ' -f1 /proc/loadavg))"
  t0=$(now); run_ocrt "$d"; t1=$(now)
  echo "$t0 $t1" | awk '{print $2 - $1}' > "$d/ocrt.seconds"
  echo "tesseract round $r: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  say "round $r/$ROUNDS: tesseract on $N pages, $THREADS processes (load $(cut -d' ' -f1 /proc/loadavg))"
  t0=$(now); run_tesseract "$d"; t1=$(now)
  echo "$t0 $t1" | awk '{print $2 - $1}' > "$d/tesseract.seconds"
  if [[ -n $PPOCR ]]; then
    echo "ppocr round $r: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
    say "round $r/$ROUNDS: PP-OCRv6 on $N pages, $THREADS threads (load $(cut -d' ' -f1 /proc/loadavg))"
    t0=$(now); run_ppocr "$d"; t1=$(now)
    echo "$t0 $t1" | awk '{print $2 - $1}' > "$d/ppocr.seconds"
  fi
done

# ---- scoring: the same scorer for both
pairs() {  # DIR -> OUTPUT<TAB>TRUTH lines
  paste <(sed 's#.*/##; s#\.[^.]*$##' "$OUT/pages.txt" | sed "s#^#$1/#; s#\$#.hocr#") "$OUT/truths.txt"
}
pairs "$OUT/round1/ocrt" > "$OUT/pairs-ocrt.tsv"
pairs "$OUT/round1/tess" > "$OUT/pairs-tesseract.tsv"
"$BIN/bench_page_score" --name ocrt --pairs "$OUT/pairs-ocrt.tsv" --json "$OUT/score-ocrt.json" > "$OUT/score-ocrt.md"
"$BIN/bench_page_score" --name "Tesseract" --pairs "$OUT/pairs-tesseract.tsv" --json "$OUT/score-tesseract.json" \
    > "$OUT/score-tesseract.md"
if [[ -n $PPOCR ]]; then
  pairs "$OUT/round1/ppocr" > "$OUT/pairs-ppocr.tsv"
  "$BIN/bench_page_score" --name "PP-OCRv6" --pairs "$OUT/pairs-ppocr.tsv" --json "$OUT/score-ppocr.json" \
      > "$OUT/score-ppocr.md"
fi
for r in $(seq 2 "$ROUNDS"); do   # the readings must not change between rounds
  diff -rq "$OUT/round1/ocrt" "$OUT/round$r/ocrt" > /dev/null || say "warning: ocrt read differently in round $r"
  for f in "$OUT"/round1/tess/*.hocr; do
    cmp -s "$f" "$OUT/round$r/tess/$(basename "$f")" || { say "warning: tesseract read differently in round $r"; break; }
  done
done

say "cross-check: ocrt-infer --eval on the same pages (not timed)"
# shellcheck disable=SC2086
"$BIN/ocrt-infer" --page --det-weights "$OUT/det.safetensors" --weights "$WEIGHTS" --threads "$THREADS" $DECODE \
    --eval --format jsonl --list "$OUT/pages.txt" > "$OUT/eval.jsonl" 2> "$OUT/eval.log" || true
CROSS=$(python3 - "$OUT/eval.jsonl" "$OUT/score-ocrt.json" <<'EOF'
import json, sys
summary = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{") and "page_summary" in line:
        summary = json.loads(line)["page_summary"]
mine = json.load(open(sys.argv[2]))["score"]
if summary is None:
    print("ocrt-infer --eval gave no page summary (see eval.log): not checked")
    sys.exit()
keys = ["truth_words", "right", "wrong", "missed", "extra", "distance", "truth_chars"]
diff = [k for k in keys if summary.get(k) != mine.get(k)]
if diff:
    print("within a few words of ocrt-infer --eval's totals (" +
          ", ".join(f"{k} {mine.get(k)} from hOCR, {summary.get(k)} from --eval" for k in diff) +
          "; hOCR holds boxes in whole pixels rounded outwards, --eval scores the unrounded boxes, so a word"
          " that touches another by under a pixel can be matched in one and not in the other: a difference"
          " of a few words is that, a larger one is a fault)")
else:
    print("the same as ocrt-infer --eval's totals (" + ", ".join(f"{k} {mine[k]}" for k in keys) + ")")
EOF
)
say "cross-check: $CROSS"

# ---- the report
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=""
if git status --porcelain --untracked-files=no 2>/dev/null | grep -q .; then DIRTY=", whose working tree had uncommitted changes"; fi
CPU=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
FAMILY=$(lscpu | sed -n 's/^CPU family: *//p' | head -1)
MODEL=$(lscpu | sed -n 's/^Model: *//p' | head -1)
FLAGS=$(grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_tile' /proc/cpuinfo | sort -u | paste -sd' ')
TESS_V=$(tesseract --version 2>&1 | head -1)
TESS_DATA=$(dpkg-query -W -f='${Version}' tesseract-ocr-eng 2>/dev/null || echo "?")
DET_INFO=$(python3 - "$OUT/det.safetensors" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n)).get("__metadata__", {})
t = json.loads(meta.get("training", "{}") or "{}")
parts = [f"arch {meta.get('arch', '?')}"]
if "steps" in t: parts.append(f"trained {t['steps']} steps")
if "data" in t: parts.append("on " + ", ".join(t["data"]))
if "val_cer" in t: parts.append(f"validation F-measure {1 - t['val_cer']:.3f} (its metadata's val_cer is 1 - F)")
if "quantization" in t: parts.append(f"int8 ({t['quantization'].get('calibration_pages', '?')} calibration pages)")
print("; ".join(parts))
EOF
)
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
spread() { sort -g "$@" | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.1f-%.1f", lo, hi}'; }
OCRT_S=$(cat "$OUT"/round*/ocrt.seconds | median)
TESS_S=$(cat "$OUT"/round*/tesseract.seconds | median)
OCRT_RSS=$(for r in "$OUT"/round*; do sed -n 's/.*Maximum resident set size (kbytes): //p' "$r/ocrt.time"; done | sort -g | tail -1)
PP_S="" PP_RSS="" PP_LINE=""
if [[ -n $PPOCR ]]; then
  PP_S=$(cat "$OUT"/round*/ppocr.seconds | median)
  PP_RSS=$(for r in "$OUT"/round*; do sed -n 's/.*Maximum resident set size (kbytes): //p' "$r/ppocr.time"; done | sort -g | tail -1)
  PP_V=$("$PPOCR" bench/ppocr.py version 2>/dev/null || echo "rapidocr ?")
  PP_LINE="- PP-OCRv6 small: $PP_V, \`$PPOCR bench/ppocr.py pages PAGES --threads $THREADS --out DIR\` (its detector and recogniser, no orientation classifier, word boxes; one process; wall s $(spread "$OUT"/round*/ppocr.seconds))."
fi
TESS_RSS=$(cat "$OUT"/round*/tess/*.time 2>/dev/null | awk 'NF == 2 && $1 ~ /^[0-9]+$/ {print $1}' | sort -g | tail -1)
TESS_RSS_MED=$(cat "$OUT"/round*/tess/*.time 2>/dev/null | awk 'NF == 2 && $1 ~ /^[0-9]+$/ {print $1}' | median)
TESS_PAGE_S=$(cat "$OUT"/round*/tess/*.time 2>/dev/null | awk 'NF == 2 && $1 ~ /^[0-9]+$/ {print $2}' | median)
OCRT_OWN=$(sed -n 's/.* \([0-9.]*\) s a page.*/\1/p' "$OUT"/round*/ocrt.log | median)
TESS_FAILED=$(while read -r p; do n=$(basename "$p"); [[ -s $OUT/round1/tess/${n%.*}.hocr ]] || echo "$n"; done < "$OUT/pages.txt" | paste -sd' ')
DPI_NOTE=$(grep -h -o 'Estimating resolution as [0-9]*' "$OUT"/round1/tess/*.log 2>/dev/null | awk '{print $4}' | sort -g |
  awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) printf "%d pages: the images carry no resolution, Tesseract estimated %d-%d dpi", NR, lo, hi}')

cat <<EOF
Measured $(date -u +'%Y-%m-%d %H:%M UTC') on $CPU (family $FAMILY, model $MODEL; $(nproc) CPUs; $FLAGS), run from commit $COMMIT$DIRTY, with the binaries in \`$BIN\`; 1-minute load average before each run: $(awk '{sub(":", "", $3); printf "%s%s %s %s", (NR > 1 ? ", " : ""), $1, $3, $4}' "$OUT/load.txt").

\`\`\`
bench/page_bench.sh --pages $PAGES --det $DET --weights $WEIGHTS --threads $THREADS --limit $LIMIT --skip $SKIP0 --rounds $ROUNDS --bin $BIN${DECODE:+ --decode \"$DECODE\"}
\`\`\`

- Pages: $N of \`$PAGES\` with a truth file beside them, in name order after the first $SKIPPED ($(sed -n '1s#.*/##p' "$OUT/pages.txt") to $(sed -n '$s#.*/##p' "$OUT/pages.txt")).
- ocrt: \`ocrt-infer --page --det-weights DET --weights $WEIGHTS --threads $THREADS${DECODE:+ $DECODE} --format hocr --output-dir DIR --list PAGES\`,
  one process; detector $DET (sha256 $(sha256sum "$OUT/det.safetensors" | cut -c1-12); $DET_INFO),
  recogniser sha256 $(sha256sum "$WEIGHTS" | cut -c1-12). Its own summary: $OCRT_OWN s a page (median).
- Tesseract: $TESS_V (eng traineddata: Debian tesseract-ocr-eng $TESS_DATA), \`OMP_THREAD_LIMIT=1 tesseract IMG OUT -l eng hocr\`,
  one process a page, $THREADS at a time (\`xargs -P $THREADS\`); a process took $TESS_PAGE_S s (median)${DPI_NOTE:+; $DPI_NOTE}.
- pages/s: $N pages over the wall time of each side's whole run, median of $ROUNDS round(s), alternating
  (wall s: ocrt $(spread "$OUT"/round*/ocrt.seconds), Tesseract $(spread "$OUT"/round*/tesseract.seconds)).
  Peak RSS: ocrt's process; Tesseract's largest process (median process: $(awk -v k="$TESS_RSS_MED" 'BEGIN {printf "%.0f", k / 1024}') MiB).
- Score: both sides' hOCR files (round 1) read by \`bench_page_score\` (infer/page_eval.h, the code of
  \`ocrt-infer --eval\`): words matched by position, right when equal without punctuation (ASCII and typographic);
  CER of the reading-order text. "folded": typographic quotes, dashes and ligatures mapped to
  ASCII in the output first (Tesseract prints straight quotes as curly ones). ocrt's totals are
  $CROSS.
EOF
[[ -z $TESS_FAILED ]] || echo "- Tesseract wrote no hOCR for: $TESS_FAILED (scored as pages with no words)."
[[ -z $PP_LINE ]] || echo "$PP_LINE"
echo
python3 - "$OUT/score-ocrt.json" "$OUT/score-tesseract.json" "$N" "$OCRT_S" "$TESS_S" "$OCRT_RSS" "$TESS_RSS" \
    "${PPOCR:+$OUT/score-ppocr.json}" "$PP_S" "$PP_RSS" <<'EOF'
import json, sys
o, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
n = int(sys.argv[3])
secs = {"ocrt": float(sys.argv[4]), "tess": float(sys.argv[5])}
rss = {"ocrt": int(sys.argv[6] or 0), "tess": int(sys.argv[7] or 0)}
pp = json.load(open(sys.argv[8])) if len(sys.argv) > 8 and sys.argv[8] else None
if pp:
    secs["pp"], rss["pp"] = float(sys.argv[9]), int(sys.argv[10] or 0)
def row(name, key, j):
    s, f = j["score"], j["folded"]
    return (f"| {name} | {n / secs[key]:.3f} | {secs[key]:.1f} | {rss[key] / 1024:.0f} | {100 * s['word_accuracy']:.2f}% "
            f"| {100 * f['word_accuracy']:.2f}% | {s['missed']} | {s['extra']} | {100 * s['cer']:.2f}% | {100 * f['cer']:.2f}% |")
print(f"| engine | pages/s | wall s | peak RSS MiB | word accuracy | folded | missed | extra | CER | CER folded |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
print(row("ocrt", "ocrt", o))
print(row("Tesseract", "tess", t))
if pp:
    print(row("PP-OCRv6 small", "pp", pp))
print(f"\nTruth: {o['score']['truth_words']} words, {o['score']['truth_chars']} characters.\n")
print("By layout (word accuracy folded, missed, extra, CER folded):\n")
ppc = " PP-OCRv6 word acc. |" if pp else ""
print("| layout | pages | words | ocrt word acc. | Tesseract word acc. |" + ppc +
      " ocrt missed / extra | Tesseract missed / extra | ocrt CER | Tesseract CER |")
print("| --- | --- | --- | --- | --- |" + (" --- |" if pp else "") + " --- | --- | --- | --- |")
for layout in sorted(set(o["layouts"]) | set(t["layouts"])):
    a, b = o["layouts"].get(layout), t["layouts"].get(layout)
    if not a or not b:
        continue
    fa, fb = a["folded"], b["folded"]
    c = pp["layouts"].get(layout) if pp else None
    ppv = f" {100 * c['folded']['word_accuracy']:.2f}% |" if c else (" |" if pp else "")
    print(f"| {layout} | {a['pages']} | {fa['truth_words']} | {100 * fa['word_accuracy']:.2f}% | {100 * fb['word_accuracy']:.2f}% |{ppv}"
          f" {fa['missed']} / {fa['extra']} | {fb['missed']} / {fb['extra']} | {100 * fa['cer']:.2f}% | {100 * fb['cer']:.2f}% |")
print("\nPer page (folded):\n")
print("| page | layout | words | ocrt word acc. | Tesseract word acc. |" + ppc + " ocrt CER | Tesseract CER |")
print("| --- | --- | --- | --- | --- |" + (" --- |" if pp else "") + " --- | --- |")
pcs = pp["pages_scored"] if pp else [None] * len(o["pages_scored"])
for pa, pb, pc in zip(o["pages_scored"], t["pages_scored"], pcs):
    name = pa["truth"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
    fa, fb = pa["folded"], pb["folded"]
    mark = lambda p: " (failed)" if "error" in p else ""
    ppv = f" {100 * pc['folded']['word_accuracy']:.1f}%{mark(pc)} |" if pc else ""
    print(f"| {name} | {pa['layout']} | {fa['truth_words']} | {100 * fa['word_accuracy']:.1f}%{mark(pa)} "
          f"| {100 * fb['word_accuracy']:.1f}%{mark(pb)} |{ppv} {100 * fa['cer']:.1f}% | {100 * fb['cer']:.1f}% |")
EOF
