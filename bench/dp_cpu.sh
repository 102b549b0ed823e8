#!/usr/bin/env bash
# Data-parallel scaling on the CPU: the same training run (global batch, data, seed, steps) as
# one process with 1 thread, as `mpirun -np 2` with 1 thread per rank, and, for reference, as
# one process with 2 threads. Prints one line per run: replicas, threads, samples/s (from
# ocrt-train's summary, first two steps excluded), peak RSS of rank 0. The MPI run is made
# twice: gradient buckets summed after the backward pass (the CPU default) and during it
# (--overlap on), which shows what overlapping costs or saves.
#
#   bench/dp_cpu.sh [BUILD_DIR] [REPEATS]     (defaults: build 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
repeats=${2:-3}
out=$(mktemp -d /tmp/ocrt-dp-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--train synth --arch "${ARCH:-crnn-s}" --batch 32 --steps "${STEPS:-12}" --no-augment --bucket-window 0
        --optimizer sgd --momentum 0.9 --lr 0.01 --schedule constant --seed 3 --workers 1
        --log-every 1000 --save-every 100000 --synth-chars 8:20)
summary() {
  grep '^{"steps"' | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
print("%.1f samples/s, peak RSS %.0f MiB" % (d["samples_per_sec"], d["peak_rss_mb"]))'
}
for r in $(seq "$repeats"); do
  echo "round $r: 1 process x 1 thread:    $("$build/ocrt-train" "${common[@]}" --threads 1 --out "$out/a$r" 2>/dev/null | summary)"
  echo "round $r: mpirun -np 2 x 1 thread: $(mpirun -np 2 --bind-to core "$build/ocrt-train" "${common[@]}" --threads 1 --out "$out/b$r" 2>/dev/null | summary)"
  echo "round $r: the same, --overlap on:  $(mpirun -np 2 --bind-to core "$build/ocrt-train" "${common[@]}" --threads 1 --overlap on --out "$out/d$r" 2>/dev/null | summary)"
  echo "round $r: 1 process x 2 threads:   $("$build/ocrt-train" "${common[@]}" --threads 2 --out "$out/c$r" 2>/dev/null | summary)"
done
