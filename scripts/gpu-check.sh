#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build with CUDA for that GPU, run every `cuda` test and the
# GPU benchmarks, and write the logs to $OUT (or the folder given as the first argument).
# Must finish well inside 10 minutes. Records nothing by itself: copy what it shows into
# docs/gpu-status.md.
set -uo pipefail
cd "$(dirname "$0")/.."
#   scripts/gpu-check.sh [--tests-only] [OUTDIR]
tests_only=0
if [ "${1:-}" = "--tests-only" ]; then tests_only=1; shift; fi
out="${1:-${OUT:-gpu-check-out}}"
mkdir -p "$out"
log() { echo "$@" | tee -a "$out/summary.txt"; }
# The lent machines hand back at most 8 files: every log also goes into one archive at the end.
bundle() { (cd "$out" && tar czf gpu-check-logs.tar.gz --exclude=gpu-check-logs.tar.gz ./* 2>/dev/null); }
trap bundle EXIT

log "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$out/summary.txt"
archs="${OCRT_CUDA_ARCHS:-90}"
jobs="$(nproc 2>/dev/null || echo 4)"

# Dependencies: a GPU machine with Debian's packages (or apt access) installs what is missing;
# the lent machines have neither, and get the header-only ones packed by scripts/gpu-deps.sh
# (.gpu-pack/, carried with the working tree) and unpacked by scripts/gpu-unpack.sh.
scripts/gpu-unpack.sh
extra=()
if [ -d .gpu-deps/usr ]; then
  extra+=(-DCMAKE_PREFIX_PATH="$PWD/.gpu-deps/usr" -DOCRT_MPI=OFF)
  # libtiff and the libraries it needs: for the linker (it reads LD_LIBRARY_PATH for a shared
  # library's own needs) and for every program run below.
  export LD_LIBRARY_PATH="$PWD/.gpu-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  log "deps: using .gpu-deps/"
else
  scripts/install-deps.sh > "$out/install.log" 2>&1 || log "install-deps failed (see install.log)"
fi
# Fonts for the tests that render lines (the CPU-vs-CUDA training test): the machine's own, or
# the training fonts that scripts/gpu-deps.sh packed (unpacked into .fonts-en/).
if [ -d .fonts-en/train ] && [ -z "${OCRT_FONT_DIRS:-}" ]; then
  export OCRT_FONT_DIRS="$PWD/.fonts-en/train"
  log "fonts: OCRT_FONT_DIRS=.fonts-en/train"
fi

if ! cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOCRT_CUDA=ON -DOCRT_CUDA_ARCHS="$archs" "${extra[@]}" \
      > "$out/configure.log" 2>&1; then
  log "FAIL: configure (see configure.log)"; tail -20 "$out/configure.log"; exit 1
fi
# Only what runs here: the CUDA tests and the GPU benchmark (the CPU suite is CI's job).
if ! cmake --build build-gpu -j "$jobs" --target ocrt_tests_cuda bench_gpu_ops bench_train bench_allreduce bench_data ocrt-infer \
      > "$out/build.log" 2>&1; then
  log "FAIL: build (see build.log)"; grep -m 20 -E "error" "$out/build.log"; exit 1
fi
log "build: ok (CUDA archs $archs)"

status=0
(cd build-gpu && ctest -L cuda --output-on-failure --timeout 300 -j 8) > "$out/ctest-cuda.log" 2>&1 || status=1
tail -5 "$out/ctest-cuda.log" | tee -a "$out/summary.txt"

# The shipped model on the GPU, alone and beside the CPU (one worker per device), on the sample
# lines: both must read them, and with the same text.
if [ -f weights/crnn-en.safetensors ]; then
  build-gpu/ocrt-infer --device cuda:0 --format tsv samples/lines > "$out/infer-cuda.tsv" 2> "$out/infer-cuda.log" \
    || { log "FAIL: ocrt-infer --device cuda:0 (see infer-cuda.log)"; status=1; }
  build-gpu/ocrt-infer --devices cuda:0,cpu --batch 4 --format tsv samples/lines > "$out/infer-multi.tsv" \
    2> "$out/infer-multi.log" || { log "FAIL: ocrt-infer --devices cuda:0,cpu (see infer-multi.log)"; status=1; }
  # The float32 file on the CPU too (a CPU alone would take the int8 file by default).
  build-gpu/ocrt-infer --device cpu --weights weights/crnn-en.safetensors --format tsv samples/lines \
    > "$out/infer-cpu.tsv" 2> /dev/null
  if cmp -s <(cut -f1,2 "$out/infer-cuda.tsv") <(cut -f1,2 "$out/infer-cpu.tsv") &&
     cmp -s <(cut -f1,2 "$out/infer-multi.tsv") <(cut -f1,2 "$out/infer-cpu.tsv"); then
    log "ocrt-infer: cuda:0, cuda:0+cpu and cpu read the samples identically; $(tail -1 "$out/infer-multi.log")"
  else
    log "FAIL: ocrt-infer text differs between cuda:0, cuda:0+cpu and cpu (see infer-*.tsv)"; status=1
  fi
fi

if [ $tests_only -eq 1 ]; then
  log "gpu-check (tests only): $([ $status -eq 0 ] && echo PASS || echo FAIL)"
  exit $status
fi

# GPU benchmarks: every bench program whose --help offers "--device cuda" runs on cuda:0.
for b in build-gpu/bench_*; do
  [ -x "$b" ] || continue
  if "$b" --help 2>&1 | grep -q -- "--device cuda"; then
    name=$(basename "$b")
    timeout 180 "$b" --device cuda:0 > "$out/$name.log" 2>&1 || { log "bench $name failed"; status=1; }
    log "bench $name: see $name.log"
  fi
done
# Whole CRNN training steps (forward, CTC, backward, clipping, AdamW) at batch 256, and one
# gradient sync through NCCL over the visible GPUs (one GPU: a one-rank communicator).
timeout 240 build-gpu/bench_train --device cuda:0 --arch both --batch 256 --width 100 --steps 20 --warmup 3 \
  --phases --json "$out/bench_train_gpu.json" > "$out/bench_train_gpu.log" 2>&1 || { log "bench_train failed"; status=1; }
log "bench bench_train --device cuda:0 --batch 256: see bench_train_gpu.log"
timeout 120 build-gpu/bench_allreduce --comm nccl --arch crnn > "$out/bench_allreduce.log" 2>&1 \
  || { log "bench_allreduce (nccl) failed"; status=1; }
log "bench bench_allreduce --comm nccl: $(tail -1 "$out/bench_allreduce.log")"
# The data pipeline alone on this machine's cores (the English recipe; needs .fonts-en/): what a
# training run here can be fed, beside the step-only rate above.
if [ -d .fonts-en/train ]; then
  timeout 120 build-gpu/bench_data --workers "$jobs" --batches 40 > "$out/bench_data.log" 2>&1 \
    || log "bench_data failed (see bench_data.log)"
  log "bench $(tail -1 "$out/bench_data.log")"
fi
# Their PyTorch peer, where this machine's python3 has torch (a failure is logged, not counted:
# it says nothing about ocrt).
if python3 -c "import torch" > /dev/null 2>&1; then
  timeout 180 python3 bench/torch_gpu_ops.py --device cuda:0 > "$out/torch_gpu_ops.log" 2>&1 \
    || log "bench torch_gpu_ops.py failed (see torch_gpu_ops.log)"
  log "bench torch_gpu_ops.py: see torch_gpu_ops.log"
  timeout 240 python3 bench/torch_train.py --device cuda:0 --arch both --batch 256 --width 100 --steps 20 \
    --warmup 3 --phases --json "$out/torch_train_gpu.json" > "$out/torch_train_gpu.log" 2>&1 \
    && python3 bench/torch_train.py --compare "$out/bench_train_gpu.json" "$out/torch_train_gpu.json" \
       > "$out/train_gpu_compare.log" 2>&1
  log "bench torch_train.py --device cuda:0: see torch_train_gpu.log, train_gpu_compare.log"
  # What PyTorch users run: AMP bf16 with TF32 (eager), and the same through torch.compile.
  timeout 240 python3 bench/torch_train.py --device cuda:0 --arch both --batch 256 --width 100 --steps 20 \
    --warmup 3 --amp bf16 --tf32 --json "$out/torch_train_amp.json" > "$out/torch_train_amp.log" 2>&1 \
    || log "bench torch_train.py --amp bf16 failed (see torch_train_amp.log)"
  timeout 300 python3 bench/torch_train.py --device cuda:0 --arch both --batch 256 --width 100 --steps 20 \
    --warmup 5 --amp bf16 --tf32 --compile --json "$out/torch_train_ampc.json" > "$out/torch_train_ampc.log" 2>&1 \
    || log "bench torch_train.py --amp bf16 --compile failed (see torch_train_ampc.log)"
  log "bench torch_train.py --amp bf16 [--compile]: see torch_train_amp.log, torch_train_ampc.log"
else
  log "bench torch_gpu_ops.py: skipped (python3 cannot import torch)"
fi
log "gpu-check: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
