#!/usr/bin/env bash
# The lent GPU machines have the CUDA toolkit, CMake and a compiler but no Debian packages and
# no network, and a call carries at most 64 MiB of working tree. This script, run on a machine
# that has both (a developer's), packs what they lack into .gpu-pack/ (git-ignored, carried
# with the tree), compressed:
#   .gpu-pack/deps.tar.xz      the header-only build dependencies (Eigen, stb, Catch2) from
#                              Debian's packages, unpacked there into .gpu-deps/
#   .gpu-pack/fonts-en.tar.xz  the English training and validation fonts, prose and word list
#                              (scripts/fonts-en.sh), unpacked there into .fonts-en/; training
#                              fonts over 450 KB stay behind (29 of 118 on 2026-11-26): with
#                              them the tree and the pack come to more than a call carries
# scripts/gpu-unpack.sh unpacks both on the GPU machine; gpu-check.sh and gpu-train.sh call it.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu-deps .gpu-pack && mkdir -p .gpu-deps/debs .gpu-pack
# libtiff (runtime/tiff.h) is a shared library: its headers and the libraries it needs that an
# Ubuntu image may lack (zlib, liblzma and libzstd are everywhere, and newer there: not packed).
# gpu-check.sh puts .gpu-deps' library folder on LD_LIBRARY_PATH, which the linker also reads.
(cd .gpu-deps/debs && apt-get download libeigen3-dev libstb-dev catch2 libtiff-dev libtiff6 libdeflate0 libjbig0 \
  libjpeg62-turbo liblerc4 libwebp7 >/dev/null 2>&1)
for f in .gpu-deps/debs/*.deb; do dpkg-deb -x "$f" .gpu-deps; done
lib=.gpu-deps/usr/lib/x86_64-linux-gnu
rm -rf .gpu-deps/debs .gpu-deps/usr/share/doc .gpu-deps/usr/share/man $lib/libstb* $lib/*.a $lib/libtiffxx.so \
  .gpu-deps/usr/include/eigen3/unsupported
tar cJf .gpu-pack/deps.tar.xz .gpu-deps
scripts/fonts-en.sh .fonts-en  # always afresh: the font lists may have changed
find .fonts-en/train -type f -size +450k -printf '%P\n' > .gpu-pack/fonts-left-out.txt
tar cJf .gpu-pack/fonts-en.tar.xz --exclude-from=<(sed 's|^|.fonts-en/train/|' .gpu-pack/fonts-left-out.txt) .fonts-en
echo "gpu-deps: $(wc -l < .gpu-pack/fonts-left-out.txt) training fonts over 450 KB left out (.gpu-pack/fonts-left-out.txt)"
echo "gpu-deps: $(du -sh .gpu-pack | cut -f1) in .gpu-pack/ (carry it: run(carry=[\".gpu-pack\"]))"
