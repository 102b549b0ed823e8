#!/usr/bin/env bash
# The lent GPU machines have the CUDA toolkit, CMake and a compiler but no Debian packages and
# no network, and a call carries at most 64 MiB of working tree. This script, run on a machine
# that has both (a developer's), packs what they lack into .gpu-pack/ (git-ignored, carried
# with the tree), compressed:
#   .gpu-pack/deps.tar.xz      the header-only build dependencies (Eigen, stb, Catch2) from
#                              Debian's packages, unpacked there into .gpu-deps/
#   .gpu-pack/fonts-en.tar.xz  the English training and validation fonts, prose and word list
#                              (scripts/fonts-en.sh), unpacked there into .fonts-en/; training
#                              fonts over 450 KB are subset to Latin (whole, they and the tree
#                              come to more than the 64 MiB a call carries)
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
# Fonts over 450 KB (their size is in scripts other than Latin) travel subset to Latin-1 and
# the punctuation block, without hinting (stb_truetype renders no hints): a subset replaces the
# original only where it renders 3 test lines to the same pixels (ocrt-synth), else the
# original goes. Subsetting needs pyftsubset (Debian's fonttools) and a built ocrt-synth;
# without them the big fonts stay behind, listed in .gpu-pack/fonts-left-out.txt.
synth="${OCRT_SYNTH:-build/ocrt-synth}"
rm -rf .gpu-fonts && mkdir -p .gpu-fonts && cp -r .fonts-en .gpu-fonts/
: > .gpu-pack/fonts-left-out.txt
big=$(find .fonts-en/train -type f -size +450k -printf '%P\n' | sort)
if [ -n "$big" ] && ! command -v pyftsubset >/dev/null; then apt-get install -y -q fonttools >/dev/null 2>&1 || true; fi
tmp=$(mktemp -d)
render() {  # render FONT DIR: 3 lines of prose in FONT
  "$synth" --out "$2" --count 3 --max-chars 48 --fonts "$1" --prose .fonts-en/prose.txt --seed 5 >/dev/null 2>&1
}
for f in $big; do
  src=.fonts-en/train/$f
  if command -v pyftsubset >/dev/null && [ -x "$synth" ] &&
     pyftsubset "$src" --unicodes="U+0020-007E,U+00A0-00FF,U+2010-2027" --layout-features='*' --no-hinting \
       --legacy-kern --output-file="$tmp/$f" 2>/dev/null; then
    same=1
    rm -rf "$tmp/whole" "$tmp/subset"
    render "$src" "$tmp/whole" && render "$tmp/$f" "$tmp/subset" || same=0
    for i in 000000 000001 000002; do cmp -s "$tmp/whole/$i.png" "$tmp/subset/$i.png" || same=0; done
    if [ $same -eq 1 ]; then cp "$tmp/$f" ".gpu-fonts/$src"; continue; fi
    echo "gpu-deps: $f renders differently when subset: packed whole"
    [ "$(stat -c %s "$src")" -le 1000000 ] && continue
  fi
  echo "$f" >> .gpu-pack/fonts-left-out.txt
  rm -f ".gpu-fonts/$src"
done
rm -rf "$tmp"
tar cJf .gpu-pack/fonts-en.tar.xz -C .gpu-fonts .fonts-en
rm -rf .gpu-fonts
echo "gpu-deps: $(wc -l < .gpu-pack/fonts-left-out.txt) training fonts left out (.gpu-pack/fonts-left-out.txt)"
echo "gpu-deps: $(du -sh .gpu-pack | cut -f1) in .gpu-pack/ (carry it: run(carry=[\".gpu-pack\"]))"
