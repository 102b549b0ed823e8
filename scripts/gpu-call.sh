# What every lent-GPU call script starts with (sourced, not run: scripts/gpu-session.sh,
# scripts/gpu-precision.sh). Before sourcing, set `budget` (the call's seconds) and
# `out_default` (the logs' folder when $OUT is not set). Defines start, left (seconds of the
# budget left), out (with out/logs made), log (a timed line to the screen and
# out/logs/session.txt), jobs (the machine's cores), bundles out/logs into out/logs.tar.gz when
# the script exits (a lent machine hands back at most 8 files), and puts the libtiff of
# .gpu-deps/ (scripts/gpu-deps.sh, unpacked by scripts/gpu-unpack.sh) on LD_LIBRARY_PATH where
# the machine has none.
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
out="${OUT:-$out_default}"
mkdir -p "$out/logs"
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$out/logs/session.txt"; }
bundle() { (cd "$out" && tar czf logs.tar.gz logs 2>/dev/null); }
trap bundle EXIT
jobs="$(nproc 2>/dev/null || echo 4)"
[ -d .gpu-deps/usr ] || scripts/gpu-unpack.sh
[ -d .gpu-deps/usr ] && export LD_LIBRARY_PATH="$PWD/.gpu-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
