#!/usr/bin/env bash
# The main job, from a fresh Debian machine: install what is needed, build, and recognise the
# sample lines in samples/lines/ with the shipped model (weights/crnn-en.safetensors), printing
# what it read and, against the .gt.txt files beside the images, the CER; then read the sample
# page samples/pages/article.png (the shipped detector weights/det-en.safetensors finds its
# lines) and score it against its truth, samples/pages/article.json.
#   scripts/demo.sh [more ocrt-infer flags, e.g. --device cuda:0 or --format jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
echo "== ocrt-infer on samples/lines (what it read, then the score)"
# The default decoding: greedy, and the lines in doubt through the beam with the shipped language
# model weights/lm-en.clm (docs/cli.md, --decoder); --decoder greedy is the fastest.
./build/ocrt-infer --weights weights/crnn-en.safetensors --format tsv samples/lines "$@"
echo "== the score against the .gt.txt files"
./build/ocrt-infer --weights weights/crnn-en.safetensors --eval samples/lines "$@"
echo "== ocrt-infer on the sample page samples/pages/article.png (its text in reading order)"
./build/ocrt-infer --weights weights/crnn-en.safetensors --page --format text samples/pages/article.png "$@"
echo "== the page's score against samples/pages/article.json (words matched by position)"
./build/ocrt-infer --weights weights/crnn-en.safetensors --page --eval samples/pages/article.png "$@"
