#!/usr/bin/env bash
# The lent GPU machines have the CUDA toolkit, CMake and a compiler but no Debian packages and
# no network. This script, run on a machine that has both (a developer's), unpacks the
# header-only build dependencies (Eigen, stb, Catch2) from Debian's packages into .gpu-deps/
# (git-ignored), which travels with the working tree to the GPU machine, where
# scripts/gpu-check.sh points CMake at it.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu-deps
rm -rf "$dest" && mkdir -p "$dest/debs"
(cd "$dest/debs" && apt-get download libeigen3-dev libstb-dev catch2 >/dev/null)
for f in "$dest"/debs/*.deb; do dpkg-deb -x "$f" "$dest"; done
rm -rf "$dest/debs" "$dest/usr/share/doc" "$dest/usr/share/man"
echo "gpu-deps: unpacked into $dest ($(du -sh "$dest" | cut -f1))"
