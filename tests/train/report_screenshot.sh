#!/usr/bin/env bash
# The training report as a person sees it (ctest: report_in_chromium, label `report`): a short
# ocrt-train run on samples/lines writes RUN/report.html and RUN/worst/, ocrt-report writes the
# page again, and tests/train/report_screenshot.py looks at it in headless Chromium, light and
# dark (every chart drawn, nothing overflowing, the line images shown; its docstring has the
# checks).
#
#   report_screenshot.sh OCRT_TRAIN OCRT_REPORT SOURCE_DIR WORK_DIR
#
# Chromium is Debian's `chromium` package. When it is missing, this script installs it with
# apt-get (as root, or through sudo when sudo needs no password): it is too large (about 300 MB
# installed) for scripts/install-deps.sh to give every build. When it cannot be installed or
# does not start, or python3 is missing, the test exits with 77, which ctest reports as
# skipped; any other failure fails it.
set -euo pipefail
train="$1" report="$2" src="$3" work="$4"

skip() {
  echo "SKIPPED: $*"
  exit 77
}

find_browser() {
  local c
  for c in chromium chromium-browser; do
    if command -v "$c" >/dev/null; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

command -v python3 >/dev/null || skip "python3 is not installed"
rm -rf "$work"
mkdir -p "$work"

if ! browser="$(find_browser)"; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo="sudo -n"
    else
      skip "chromium is not installed, and installing it needs root or password-less sudo"
    fi
  fi
  echo "installing Debian's chromium (apt-get; output in $work/apt.log)"
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium \
      >"$work/apt.log" 2>&1; then
    # The package lists may be missing or stale (a fresh container).
    $sudo apt-get update -qq >>"$work/apt.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium \
      >>"$work/apt.log" 2>&1 || { tail -5 "$work/apt.log"; skip "chromium could not be installed"; }
  fi
  browser="$(find_browser)" || skip "chromium was installed but is not on PATH"
fi

# Does it start at all? (A container may forbid what it needs; that is no fault of the report.)
if ! timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-breakpad --user-data-dir="$work/chromium-profile" --dump-dom 'data:text/html,<p id="started">yes</p>' \
    2>"$work/chromium-start.log" | grep -q 'id="started"'; then
  tail -5 "$work/chromium-start.log"
  skip "$browser does not start headless"
fi
echo "browser: $("$browser" --version 2>/dev/null | head -1)"

# A run that evaluates twice, logs ten times and keeps the worst of its 12 validation lines.
if ! "$train" --train "$src/samples/lines" --val "$src/samples/lines" --arch crnn-s --steps 20 --batch 4 \
    --eval-every 10 --log-every 2 --threads 1 --workers 1 --out "$work/run" >"$work/train.log" 2>&1; then
  tail -20 "$work/train.log"
  echo "FAILED: ocrt-train"
  exit 1
fi
for f in report.html worst/index.json metrics.jsonl; do
  [ -f "$work/run/$f" ] || { echo "FAILED: ocrt-train wrote no $f"; exit 1; }
done
"$report" "$work/run" --out "$work/report.html"
python3 "$src/tests/train/report_screenshot.py" --browser "$browser" --work "$work" \
  "$work/report.html" "$work/run/report.html"
