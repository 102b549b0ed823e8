#!/usr/bin/env bash
# Single-line latency on the CPU: one 32 x 400 line at batch 1, ocrt (the Predictor, through
# bench_latency) against ONNX Runtime and OpenVINO (bench/peer_infer.py --latency) on the same
# pixels, the same weights and the same threads; p50, p90 and p99 milliseconds of each call from
# the line's pixels in memory to its text.
#
#   bench/latency.sh [BUILD_DIR]                      (default: build)
#   WEIGHTS=weights/crnn-s-en.safetensors ROUNDS=3 REPS=200 THREADS=2 bench/latency.sh ...
#
# Needs BUILD_DIR/bench_latency (-DOCRT_BUILD_BENCH=ON) and the peers' environment
# (bench/peers.sh). The line is samples/lines/000005.png ("It was the best of times, it was the
# worst of times", 509 x 40) resized to exactly 400 x 32 with PIL's bilinear filter, written
# once to /tmp. Each round runs ocrt, then ONNX Runtime, then OpenVINO as it comes (its default
# precision for this CPU), each in its own process after its warm-up calls; the table gives each
# engine's median over the rounds of every figure. Printed, not written into bench/results/.
# INT8=FILE adds ocrt on that int8 model file (ocrt-quantize; docs/int8.md) after ocrt in each
# round; BF16=1 adds ocrt with --precision bf16 (CPUs with AVX512-BF16 or AMX).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
WEIGHTS=${WEIGHTS:-weights/crnn-en.safetensors}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-200}
THREADS=${THREADS:-2}
export OMP_NUM_THREADS=$THREADS
[[ -x $BUILD/bench_latency ]] || { echo "latency.sh: $BUILD/bench_latency is missing (cmake -DOCRT_BUILD_BENCH=ON, then build bench_latency)" >&2; exit 2; }
PY=$(bench/peers.sh --python)
LINE=/tmp/ocrt-latency-line-400x32.png
"$PY" -c "
from PIL import Image
Image.open('samples/lines/000005.png').convert('L').resize((400, 32), Image.BILINEAR).save('$LINE')"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for r in $(seq "$ROUNDS"); do
  echo "round $r: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$BUILD/bench_latency" "$LINE" --weights "$WEIGHTS" --threads "$THREADS" --reps "$REPS" > "$OUT/ocrt.$r.json"
  if [[ -n ${BF16:-} ]]; then
    "$BUILD/bench_latency" "$LINE" --weights "$WEIGHTS" --threads "$THREADS" --reps "$REPS" --precision bf16 \
        > "$OUT/ocrt-bf16.$r.json"
  fi
  if [[ -n ${INT8:-} ]]; then
    "$BUILD/bench_latency" "$LINE" --weights "$INT8" --threads "$THREADS" --reps "$REPS" > "$OUT/ocrt-int8.$r.json"
  fi
  for e in ort openvino; do
    "$PY" bench/peer_infer.py --weights "$WEIGHTS" --engine $e --threads "$THREADS" --latency "$LINE" \
        --reps "$REPS" > "$OUT/$e.$r.json"
  done
done
"$PY" - "$OUT" "$ROUNDS" "${INT8:-}" "${BF16:-}" <<'EOF'
import json, statistics, sys
out, rounds, int8, bf16 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
print("| engine | precision | p50 ms | p90 ms | p99 ms | mean ms | text |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for e in ("ocrt",) + (("ocrt-bf16",) if bf16 else ()) + (("ocrt-int8",) if int8 else ()) + ("ort", "openvino"):
    runs = [json.load(open(f"{out}/{e}.{r}.json")) for r in range(1, rounds + 1)]
    med = {k: statistics.median(run[k] for run in runs) for k in ("p50_ms", "p90_ms", "p99_ms", "mean_ms")}
    v = runs[0].get("versions", {})
    name = {"ocrt": "ocrt (Predictor)", "ocrt-bf16": "ocrt (Predictor)", "ocrt-int8": "ocrt (Predictor), int8 file",
            "ort": "ONNX Runtime " + v.get("onnxruntime", ""),
            "openvino": "OpenVINO " + v.get("openvino", "")}[e]
    print(f"| {name} | {runs[0].get('precision', 'fp32')} | {med['p50_ms']:.2f} | {med['p90_ms']:.2f} | "
          f"{med['p99_ms']:.2f} | {med['mean_ms']:.2f} | {runs[0]['text']} |")
EOF
