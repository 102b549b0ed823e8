#!/usr/bin/env bash
# Line recognition on the CPU, 2 threads, ocrt-infer against the runtimes a user deploys a CRNN
# with instead: ONNX Runtime and OpenVINO (its default precision and float32), and a current
# PyTorch from pip, all on the shipped weights (weights/crnn-en.safetensors, or WEIGHTS=FILE: the
# fast model, weights/crnn-s-en.safetensors, or any crnn / crnn-s file) and the same
# held-out synthetic lines as bench/infer_cpu.sh; lines/s, CER and peak RSS of each.
#
#   bench/peers_cpu.sh [BUILD_DIR [OUT_DIR]]         (defaults: build-infer, /tmp/ocrt-peers-cpu)
#   LINES=300 ROUNDS=3 SEED=20261123 WEIGHTS=weights/crnn-en.safetensors bench/peers_cpu.sh ...
#
# Needs: BUILD_DIR/ocrt-infer and ocrt-synth (a Release build; a CPU-only one, OCRT_CUDA=OFF, for
# peak RSS figures: a CUDA build loads cuBLAS at start-up), the peers' environment (bench/peers.sh;
# made on first use, some GB), the URW base35 fonts (fonts-urw-base35) and /usr/share/dict/words
# for ocrt-synth, GNU time. The lines are rendered once with ocrt-synth as
# infer_cpu.sh renders them (the fonts the shipped model never saw, 20-50 characters, glyphs
# 26-34 px) and reused while LINES and SEED stay the same. The peers' ONNX model is exported
# before the first round. Each round runs every program once, in the same order: ocrt-infer
# --precision fp32, ocrt-infer --precision bf16 (where its --help offers bf16 and the CPU has
# AVX512_BF16 or AMX), ONNX Runtime, OpenVINO as it comes, OpenVINO forced to f32, PyTorch;
# the load average is logged before each. ocrt-infer decodes greedily (--decoder greedy), as the
# peers do. The table gives medians over the rounds. It is
# printed, not written into bench/results/: record figures from a quiet machine by hand.
#
# PROBE=1 (and WAIT_FAST=S) samples the AMX tiles' state around each run (bench/amx_state.sh).
#
# INT8=1 adds ocrt-infer on an int8 model file (docs/int8.md) made from WEIGHTS by ocrt-quantize
# with 300 calibration lines that ocrt-synth renders in the training fonts (train/fonts/
# en-train.txt, seed 777: other fonts and texts than the measured lines); INT8=FILE uses FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-infer}
OUT=${2:-/tmp/ocrt-peers-cpu}
LINES=${LINES:-300}
ROUNDS=${ROUNDS:-3}
SEED=${SEED:-20261123}
THREADS=2
BATCH=32
WEIGHTS=${WEIGHTS:-weights/crnn-en.safetensors}
export OMP_NUM_THREADS=$THREADS
unset OPENBLAS_CORETYPE || true

need() {
  [[ -x $1 ]] || { echo "peers_cpu.sh: $1 is missing (cmake --build $BUILD --target $(basename "$1"))" >&2; exit 2; }
}
need "$BUILD/ocrt-infer"
[[ -x /usr/bin/time ]] || { echo "peers_cpu.sh: GNU time is missing (apt-get install -y time)" >&2; exit 2; }
PY=$(bench/peers.sh --python)
mkdir -p "$OUT"

# ---- the lines: as infer_cpu.sh renders them (held-out fonts, sample-like lengths and heights)
STAMP="lines=$LINES seed=$SEED"
if [[ ! -s $OUT/lines/labels.txt || "$(cat "$OUT/lines.stamp" 2>/dev/null)" != "$STAMP" ]]; then
  need "$BUILD/ocrt-synth"
  rm -rf "$OUT/fonts" "$OUT/lines" "$OUT/lines.stamp"
  mkdir -p "$OUT/fonts"
  for f in /usr/share/fonts/opentype/urw-base35/*.otf; do
    case "$(basename "$f")" in D050000L*|StandardSymbolsPS*|Z003*) ;; *) cp "$f" "$OUT/fonts/" ;; esac
  done
  "$BUILD/ocrt-synth" --out "$OUT/lines" --count "$LINES" --fonts "$OUT/fonts" --seed "$SEED" \
      --min-chars 20 --max-chars 50 --height 26:34 >&2
  echo "$STAMP" > "$OUT/lines.stamp"
fi
LABELS=$OUT/lines/labels.txt
N=$(grep -c . "$LABELS")
cut -f1 "$LABELS" | sed "s|^|$OUT/lines/|" > "$OUT/list.txt"   # label order

# ---- which programs: ocrt's bf16 only where it would run bf16 instructions (elsewhere it is
# the fp32 path under another name)
FLAGS=$(grep -o -w -E 'avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ' || true)
HELP=$("$BUILD/ocrt-infer" --help 2>&1 || true)
PROGRAMS=(ocrt-fp32)
if [[ $(grep -o -- "--precision [^ ]*" <<< "$HELP") == *bf16* && -n $FLAGS ]]; then
  PROGRAMS+=(ocrt-bf16)
else
  echo "peers_cpu.sh: no ocrt-infer --precision bf16 run (its help: $(grep -o -- '--precision [^ ]*' <<< "$HELP" ||
    echo 'no --precision'); CPU flags: ${FLAGS:-neither avx512_bf16 nor amx})" >&2
fi
INT8=${INT8:-}
if [[ $INT8 == 1 ]]; then
  need "$BUILD/ocrt-quantize"
  need "$BUILD/ocrt-synth"
  rm -rf "$OUT/calib" "$OUT/calib-fonts"
  mkdir -p "$OUT/calib-fonts"
  grep -v '^#' train/fonts/en-train.txt | grep . | while read -r f; do
    [[ $f == /* ]] || f=/usr/share/fonts/$f
    if [[ -f $f ]]; then ln -sf "$f" "$OUT/calib-fonts/"; fi
  done
  "$BUILD/ocrt-synth" --out "$OUT/calib" --count 300 --fonts "$OUT/calib-fonts" --seed 777 --degrade scan \
      --min-chars 10 --max-chars 50 --height 20:40 >&2
  INT8=$OUT/$(basename "$WEIGHTS" .safetensors)-int8.safetensors
  "$BUILD/ocrt-quantize" --weights "$WEIGHTS" --out "$INT8" --threads $THREADS "$OUT/calib/labels.txt" >&2
fi
[[ -z $INT8 ]] || PROGRAMS+=(ocrt-int8)
PROGRAMS+=(ort openvino openvino-f32 torch)

"$PY" bench/peer_infer.py --weights "$WEIGHTS" --export > "$OUT/onnx-path.txt"

# ---- the AMX tiles' state (PROBE=1, on a CPU with AMX; bench/amx_state.sh): the share of fast
# samples before and after each run; WAIT_FAST=S waits up to S seconds for the fast state first.
PROBE=${PROBE:-}
WAIT_FAST=${WAIT_FAST:-0}
[[ -z $PROBE ]] || need "$BUILD/bench_gemm"
source bench/amx_state.sh

# ---- one program, timed: wall seconds and peak RSS (KiB) by GNU time, the load average before
run() {  # run NAME ROUND COMMAND... (stdout: the texts, one a line in label order)
  local name=$1 round=$2
  shift 2
  local dir=$OUT/round$round
  mkdir -p "$dir"
  local before=- after=-
  [[ -z $PROBE ]] || before=$(wait_fast "$WAIT_FAST")
  echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/load.txt"
  echo "== round $round: $name (load $(cut -d' ' -f1 /proc/loadavg); tiles fast $before%)" >&2
  /usr/bin/time -f "%e %M" -o "$dir/$name.time" "$@" > "$dir/$name.out" 2> "$dir/$name.log" ||
    { echo "peers_cpu.sh: $name failed, see $dir/$name.log" >&2; exit 1; }
  [[ -z $PROBE ]] || after=$(probe_state)
  echo "$name $before $after" >> "$dir/probe.txt"
}

rm -rf "$OUT"/round*   # a previous run's rounds would join the medians
for r in $(seq "$ROUNDS"); do
  for p in "${PROGRAMS[@]}"; do
    case $p in
      ocrt-int8)
        run "$p" "$r" "$BUILD/ocrt-infer" --weights "$INT8" --threads $THREADS --batch $BATCH \
            --decoder greedy --list "$OUT/list.txt" ;;
      ocrt-*)
        run "$p" "$r" "$BUILD/ocrt-infer" --weights "$WEIGHTS" --threads $THREADS --batch $BATCH \
            --precision "${p#ocrt-}" --decoder greedy --list "$OUT/list.txt" ;;
      *)
        # the texts go to a file of their own: stdout is peer_infer.py's JSON
        run "$p" "$r" "$PY" bench/peer_infer.py --weights "$WEIGHTS" --labels "$LABELS" --engine "$p" \
            --threads $THREADS --batch $BATCH --out "$OUT/round$r/$p.texts" ;;
    esac
  done
done

# ---- the table: medians over the rounds
"$PY" - "$OUT" "$LABELS" "$N" "$BUILD/ocrt-infer" "$WEIGHTS" "${PROGRAMS[@]}" <<'EOF'
import json, os, platform, re, statistics, subprocess, sys
out, labels, n, ocrt, weights = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
programs = sys.argv[6:]
sys.path.insert(0, "bench")
from torch_infer import read_labels, score
truths = [t for _, t in read_labels(labels)]
rounds = sorted((d for d in os.listdir(out) if re.fullmatch(r"round\d+", d)), key=lambda d: int(d[5:]))

def cpu():
    info = {}
    for l in open("/proc/cpuinfo"):
        k, _, v = l.partition(":")
        info.setdefault(k.strip(), v.strip())
    # a virtual machine may call it just "AMD EPYC": family and model tell the generation
    model = f"{info.get('model name', '?')} (family {info.get('cpu family', '?')}, model {info.get('model', '?')})"
    flags = set(info.get("flags", "").split())
    have = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16") if f in flags]
    lack = [f for f in ("avx512_bf16", "amx_tile", "amx_bf16") if f not in flags]
    return f"{model}, {os.cpu_count()} logical CPUs; flags: {' '.join(have) or '-'}" + \
        (f"; without {' '.join(lack)}" if lack else "")

rows, versions = [], {}
for name in programs:
    runs = []
    for d in rounds:
        base = os.path.join(out, d, name)
        if not os.path.exists(base + ".time"):
            continue
        wall, rss_kib = open(base + ".time").read().split()[-2:]
        log = open(base + ".log", encoding="utf-8", errors="replace").read()
        load = next((l.split()[1] for l in open(os.path.join(out, d, "load.txt")) if l.split()[0] == name), "?")
        probe_file = os.path.join(out, d, "probe.txt")
        probe = next((f"{l.split()[1]}/{l.split()[2]}" for l in open(probe_file) if l.split()[0] == name), "-/-") \
            if os.path.exists(probe_file) else "-/-"
        if name.startswith("ocrt"):
            texts = open(base + ".out", encoding="utf-8", errors="replace").read().split("\n")[:n]
            m = re.search(r"lines \(\d+ failed\) in [\d.]+ s, ([\d.]+) lines/s; cpu path (\S+), (\w+)", log)
            own, precision = (float(m.group(1)), f"{m.group(3)} ({m.group(2)} path)") if m else (None, "?")
        else:
            texts = open(base + ".texts", encoding="utf-8", errors="replace").read().split("\n")[:n]
            j = json.loads(open(base + ".out").read().strip().splitlines()[-1])
            own, precision = j["lines_per_second"], j["precision"]
            versions.update({k: v for k, v in j["versions"].items() if k in ("onnxruntime", "openvino", "torch")})
        runs.append({"wall": float(wall), "rss": int(rss_kib) / 1024, "own": own, "load": load, "probe": probe,
                     "precision": precision, "score": score(texts, truths)})
    if not runs:
        continue
    owns = [r["own"] for r in runs if r["own"] is not None]
    rows.append({"name": name, "runs": len(runs), "precision": runs[-1]["precision"],
                 "own": statistics.median(owns) if owns else None, "spread": (min(owns), max(owns)) if owns else None,
                 "wall": statistics.median(n / r["wall"] for r in runs),
                 "rss": statistics.median(r["rss"] for r in runs),
                 "cer": runs[0]["score"]["cer"], "acc": runs[0]["score"]["line_accuracy"],
                 "same": len({json.dumps(r["score"]) for r in runs}) == 1, "loads": [r["load"] for r in runs],
                 "probes": [r["probe"] for r in runs], "owns": owns})

commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
print(f"{n} lines, 2 threads, batch 32, {len(rounds)} rounds, medians; {weights}")
print(f"CPU: {cpu()}")
print(f"ocrt {commit} ({ocrt}); " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
      + f"; python {platform.python_version()}")
print()
probed = any(p != "-/-" for r in rows for p in r["probes"])
print("| program | precision | runs | lines/s (own count; min-max) | lines/s (whole process) | peak RSS MiB "
      "| CER | line accuracy | load avg before |" + (" tiles fast % before/after each run |" if probed else ""))
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if probed else ""))
for r in rows:
    o = f"{r['own']:.2f} ({r['spread'][0]:.2f}-{r['spread'][1]:.2f})" if r["own"] else "-"
    flag = "" if r["same"] else " (differs between runs!)"
    print(f"| {r['name']} | {r['precision']} | {r['runs']} | {o} | {r['wall']:.2f} | {r['rss']:.0f} "
          f"| {100 * r['cer']:.2f}%{flag} | {100 * r['acc']:.1f}% | {' '.join(r['loads'])} |"
          + (f" {' '.join(r['probes'])} |" if probed else ""))
if probed:  # each run's own count with the state around it, to pick the runs made in one state
    print()
    for r in rows:
        print(f"{r['name']}: " + ", ".join(f"{o:.1f} ({p})" for o, p in zip(r["owns"], r["probes"])))
json.dump(rows, open(os.path.join(out, "summary.json"), "w"), indent=1)
EOF
