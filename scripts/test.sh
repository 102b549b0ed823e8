#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine: install, build, run ctest.
#   scripts/test.sh              Release build in build/, every test (cuda tests skip without a GPU)
#   scripts/test.sh --sanitize   Debug build with AddressSanitizer + UBSan in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs="$(nproc 2>/dev/null || echo 2)"
if [ "${1:-}" = "--sanitize" ]; then
  shift
  OCRT_BUILD_TYPE=Debug scripts/build.sh build-asan -DOCRT_SANITIZE=ON -DOCRT_BUILD_BENCH=OFF
  cd build-asan
else
  scripts/build.sh build
  cd build
fi
ctest --output-on-failure -j "$jobs" "$@"
