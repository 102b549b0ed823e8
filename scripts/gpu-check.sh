#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build with CUDA for that GPU, run every `cuda` test and the
# GPU benchmarks, and write the logs to $OUT (or the folder given as the first argument).
# Must finish well inside 10 minutes. Records nothing by itself: copy what it shows into
# docs/gpu-status.md.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-check-out}}"
mkdir -p "$out"
log() { echo "$@" | tee -a "$out/summary.txt"; }

log "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$out/summary.txt"
archs="${OCRT_CUDA_ARCHS:-90}"
jobs="$(nproc 2>/dev/null || echo 4)"

# Dependencies: the GPU machine may lack the Debian packages; install only what is missing.
scripts/install-deps.sh > "$out/install.log" 2>&1 || log "install-deps failed (see install.log)"

if ! cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOCRT_CUDA=ON -DOCRT_CUDA_ARCHS="$archs" \
      > "$out/configure.log" 2>&1; then
  log "FAIL: configure (see configure.log)"; tail -20 "$out/configure.log"; exit 1
fi
if ! cmake --build build-gpu -j "$jobs" > "$out/build.log" 2>&1; then
  log "FAIL: build (see build.log)"; grep -m 20 -E "error" "$out/build.log"; exit 1
fi
log "build: ok (CUDA archs $archs)"

status=0
(cd build-gpu && ctest -L cuda --output-on-failure --timeout 300) > "$out/ctest-cuda.log" 2>&1 || status=1
tail -5 "$out/ctest-cuda.log" | tee -a "$out/summary.txt"

# GPU benchmarks: every bench program that accepts --device runs on cuda:0.
for b in build-gpu/bench_*; do
  [ -x "$b" ] || continue
  if "$b" --help 2>&1 | grep -q -- "--device"; then
    name=$(basename "$b")
    timeout 180 "$b" --device cuda:0 > "$out/$name.log" 2>&1 || { log "bench $name failed"; status=1; }
    log "bench $name: see $name.log"
  fi
done
log "gpu-check: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
