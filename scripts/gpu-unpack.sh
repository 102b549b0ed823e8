#!/usr/bin/env bash
# On a lent GPU machine: unpacks .gpu-pack/ (made by scripts/gpu-deps.sh) into .gpu-deps/ and
# .fonts-en/ unless they are there already. Does nothing where there is no pack.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .gpu-pack/deps.tar.xz ] && [ ! -d .gpu-deps/usr ] && tar xJf .gpu-pack/deps.tar.xz
[ -f .gpu-pack/fonts-en.tar.xz ] && [ ! -d .fonts-en/train ] && tar xJf .gpu-pack/fonts-en.tar.xz
exit 0
