#!/usr/bin/env bash
# The main job, from a fresh Debian machine: install what is needed, build, and run the demo.
# (Until the recognisers land, the demo trains a tiny network with ocrt's autograd.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
./build/ocrt-demo "$@"
