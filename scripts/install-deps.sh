#!/usr/bin/env bash
# Installs the Debian packages ocrt builds and tests with. Skips apt entirely when all of them
# are already there; uses sudo only when not running as root.
set -euo pipefail

# python3-venv: the ONNX round trip (ctest -L onnx) makes a virtual environment for ONNX Runtime.
packages=(build-essential cmake pkg-config libeigen3-dev libstb-dev libtiff-dev catch2 libopenmpi-dev openmpi-bin
          fonts-dejavu-core fonts-liberation fonts-freefont-ttf fonts-urw-base35 wamerican python3-venv)

# --train: also what the English models train on (scripts/fonts-en.sh, scripts/train-en.sh):
# the font families of train/fonts/en-train.txt and en-val.txt, and prose (fortunes).
if [ "${1:-}" = "--train" ]; then
  packages+=(fonts-dejavu-extra fonts-croscore fonts-crosextra-carlito fonts-crosextra-caladea fonts-sil-charis
             fonts-paratype fonts-open-sans fonts-lato fonts-linuxlibertine fonts-stix fonts-ebgaramond
             fonts-oldstandard fonts-hack fonts-inconsolata fonts-noto-mono fonts-courier-prime fonts-cantarell
             fonts-quattrocento fonts-lmodern fonts-beteckna fonts-comfortaa fonts-sil-andika fonts-league-spartan
             fonts-quicksand fonts-cabin fonts-jura fonts-oxygen fonts-roboto-unhinted fonts-roboto-slab
             fonts-goudybookletter fonts-junction fortunes fortunes-min)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
