#!/usr/bin/env bash
# Configures and builds ocrt into a build folder (default: build/, Release). Extra arguments go
# to cmake's configure step, e.g. scripts/build.sh build-cpu -DOCRT_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift || true
jobs="$(nproc 2>/dev/null || echo 2)"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${OCRT_BUILD_TYPE:-Release}" "$@"
cmake --build "$dir" -j "$jobs"
