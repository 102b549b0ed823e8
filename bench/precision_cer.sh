#!/usr/bin/env bash
# The validation CER of a recogniser in each precision the CPU runs, written into its model files'
# training record ("precision_cer"), which `ocrt-infer --precision auto` reads (infer/predictor.h,
# precision_validated: a precision is taken where its CER is within 0.05 points of fp32's).
#
#   bench/precision_cer.sh [--bin DIR] [--threads N] [--out DIR] [--write 1] FLOAT [INT8]
#
# The lines: bench/accuracy.sh's 3000 validation lines (--lines 1000 --degrade "clean scan
# binarized": prose from bench/data/val-texts.txt in the 32 URW text faces, which ocrt never
# trains on), rendered once into OUT. Each file is read with greedy decoding (the model's own
# errors, no language model) by `ocrt-infer --eval`: FLOAT in fp32, and in bf16 where the CPU has
# bf16 instructions (avx512bf16 or amx path); INT8 (an ocrt-quantize file of FLOAT) in int8 where
# the CPU has an int8 kernel. Prints the CERs; with --write 1 it also puts
# {"fp32": ..., "bf16": ..., "lines": ..., "decoder": "greedy", "measured_on": ...} into FLOAT's
# record and {"fp32": ..., "int8": ...} into INT8's (the tensors' bytes are kept as they are;
# the file is replaced atomically).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build
THREADS=$(nproc)
OUT=/tmp/ocrt-precision-cer
WRITE=0
ARGS=()
while (($#)); do
  case $1 in
    --bin) BIN=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --write) WRITE=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "precision_cer.sh: unknown option $1" >&2; exit 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
((${#ARGS[@]} >= 1 && ${#ARGS[@]} <= 2)) || { echo "usage: bench/precision_cer.sh [options] FLOAT [INT8]" >&2; exit 2; }
FLOAT=${ARGS[0]}
INT8=${ARGS[1]:-}
[[ -f $FLOAT ]] || { echo "precision_cer.sh: $FLOAT is missing" >&2; exit 2; }
[[ -z $INT8 || -f $INT8 ]] || { echo "precision_cer.sh: $INT8 is missing" >&2; exit 2; }

if [[ ! -s $OUT/list.txt ]]; then
  bench/accuracy.sh --bin "$BIN" --lines 1000 --degrade "clean scan binarized" --out "$OUT" --render-only 1
fi
mapfile -t DIRS < <(find "$OUT/render" -mindepth 2 -maxdepth 2 -type d | sort)  # a .gt.txt folder per degradation and font
LINES="bench/accuracy.sh --lines 1000 --degrade 'clean scan binarized' (3000 lines)"

# cer FILE [ocrt-infer flags]: the CER as a fraction, from --eval's "CER x% (E edits / C characters)"
cer() {
  local file=$1 out
  shift
  out=$("$BIN/ocrt-infer" --weights "$file" --threads "$THREADS" --decoder greedy --eval --worst 0 --line "$@" \
        "${DIRS[@]}")
  grep -E '^(CER|line accuracy)' <<< "$out" | sed "s|^|  $(basename "$file") $*: |" >&2
  sed -n 's/^CER *[0-9.]*% (\([0-9]*\) edits \/ \([0-9]*\) characters).*/\1 \2/p' <<< "$out" |
    awk '{ printf "%.6f\n", $1 / $2 }'
}
FLAGS=$(grep -o -w -E 'avx512_bf16|amx_bf16|avx512_vnni|amx_int8|avx2' /proc/cpuinfo | sort -u | paste -sd' ')
PATH_NAME=$(OCRT_CPU_ISA= "$BIN/ocrt-infer" --weights "$FLOAT" --threads 1 --precision fp32 --decoder greedy \
  samples/lines 2>&1 >/dev/null | sed -n 's/.*cpu path \([a-z0-9]*\).*/\1/p' | tail -1)
declare -A CER
CER[fp32]=$(cer "$FLOAT" --precision fp32)
if [[ $PATH_NAME == avx512bf16 || $PATH_NAME == amx ]]; then CER[bf16]=$(cer "$FLOAT" --precision bf16); fi
if [[ -n $INT8 ]]; then CER[int8]=$(cer "$INT8"); fi
for p in fp32 bf16 int8; do [[ -n ${CER[$p]:-} ]] && echo "$p CER ${CER[$p]} ($FLOAT${INT8:+, $INT8})"; done
((WRITE)) || exit 0

# record FILE JSON: FILE's training record gains "precision_cer": JSON; nothing else changes.
record() {
  python3 - "$1" "$2" <<'EOF'
import json, os, struct, sys
path, cer = sys.argv[1], json.loads(sys.argv[2])
blob = open(path, "rb").read()
n = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8:8 + n])
meta = header.setdefault("__metadata__", {})
training = json.loads(meta.get("training", "{}"))
training["precision_cer"] = cer
meta["training"] = json.dumps(training, separators=(",", ":"))
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)  # the tensors' data stays 8-byte aligned
tmp = path + ".tmp"
with open(tmp, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + blob[8 + n:])
os.replace(tmp, path)
print(f"precision_cer.sh: wrote {json.dumps(cer)} into {path}", file=sys.stderr)
EOF
}
COMMON="\"lines\": \"$LINES\", \"decoder\": \"greedy\", \"measured_on\": \"$PATH_NAME path ($FLAGS)\""
FLOAT_JSON="{\"fp32\": ${CER[fp32]}${CER[bf16]:+, \"bf16\": ${CER[bf16]}}, $COMMON}"
record "$FLOAT" "$FLOAT_JSON"
if [[ -n $INT8 ]]; then record "$INT8" "{\"fp32\": ${CER[fp32]}, \"int8\": ${CER[int8]}, $COMMON}"; fi
