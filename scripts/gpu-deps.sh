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
rm -rf "$dest/debs" "$dest/usr/share/doc" "$dest/usr/share/man" "$dest"/usr/lib/x86_64-linux-gnu/libstb* "$dest/usr/include/eigen3/unsupported"
echo "gpu-deps: unpacked into $dest ($(du -sh "$dest" | cut -f1))"

# Fonts and the word list for training on a GPU machine (scripts/gpu-train.sh): training fonts
# (DejaVu, Liberation, FreeFont) and held-out validation fonts (URW base35 text faces) in
# separate folders, so the validation CER is measured on designs the model never saw.
fonts=.gpu-fonts
rm -rf "$fonts" && mkdir -p "$fonts/train" "$fonts/val"
cp /usr/share/fonts/truetype/dejavu/*.ttf /usr/share/fonts/truetype/liberation/*.ttf \
   /usr/share/fonts/truetype/freefont/*.ttf "$fonts/train/"
for f in /usr/share/fonts/opentype/urw-base35/*.otf; do
  case "$(basename "$f")" in D050000L*|StandardSymbolsPS*|Z003*) ;; *) cp "$f" "$fonts/val/" ;; esac
done
cp -L /usr/share/dict/words "$fonts/words"
echo "gpu-deps: fonts in $fonts ($(ls "$fonts/train" | wc -l) training, $(ls "$fonts/val" | wc -l) validation, $(du -sh "$fonts" | cut -f1))"
