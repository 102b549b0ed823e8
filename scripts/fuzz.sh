#!/usr/bin/env bash
# Fuzzes every parser that reads a user's file (fuzz/, docs/reliability.md) with libFuzzer.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     each target SECONDS (default 60), one at a time
#
# Installs clang (19 or later) and its libFuzzer runtime when missing, builds the fuzz binaries into
# build-fuzz/ (clang, ASan + UBSan, coverage), runs each target on a copy of its corpus, merges
# the inputs that found new coverage back into fuzz/corpus/<target>/ (minimised, at most
# OCRT_FUZZ_MAX_NEW files a target beside the seed_* files), and prints per target the
# executions, the coverage (libFuzzer's cov and ft) and the crashes. A crash, hang or huge
# allocation is copied into the corpus as crash-*/timeout-*/oom-*, so that `ctest -L fuzz`
# fails on it until the parser is fixed, and replays it for ever after.
#
# Environment: OCRT_FUZZ_JOBS (build jobs, default nproc), OCRT_FUZZ_MAX_NEW (default 60),
# OCRT_FUZZ_ARGS (more libFuzzer flags), OCRT_FUZZ_NICE (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2;; esac
build=build-fuzz
max_new="${OCRT_FUZZ_MAX_NEW:-60}"
nice_level="${OCRT_FUZZ_NICE:-10}"

# ---------------------------------------------------------------- clang + libFuzzer
# clang 19 or later: ocrt is C++20 and captures structured bindings in lambdas, which clang 14
# (Debian 12's default clang) refuses, and clang 16 refuses under -fopenmp. Debian 12 has clang-19.
scripts/install-deps.sh
CXX_FUZZ=""
have_fuzzer() {
  for cxx in clang++-21 clang++-20 clang++-19 clang++; do
    command -v "$cxx" >/dev/null || continue
    major=$("$cxx" -dumpversion | cut -d. -f1)
    [ "$major" -ge 19 ] || continue
    echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
      "$cxx" -x c++ -fsanitize=fuzzer,address,undefined - -o /dev/null 2>/dev/null || continue
    CXX_FUZZ="$(command -v "$cxx")"
    return 0
  done
  return 1
}
if ! have_fuzzer; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "fuzz.sh: installing clang 19 and its libFuzzer and OpenMP runtimes (clang-19 libclang-rt-19-dev libomp-19-dev)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-19 libclang-rt-19-dev \
    libomp-19-dev
  have_fuzzer || { echo "fuzz.sh: no clang++ >= 19 whose -fsanitize=fuzzer links" >&2; exit 1; }
fi
CC_FUZZ="${CXX_FUZZ/clang++/clang}"
echo "fuzz.sh: $("$CXX_FUZZ" --version | head -1)"

# ---------------------------------------------------------------- build
all_targets=$(sed -n 's/^set(OCRT_FUZZ_TARGETS \(.*\))$/\1/p' fuzz/CMakeLists.txt)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && read -r -a targets <<< "$all_targets"
for t in "${targets[@]}"; do
  [[ " $all_targets " == *" $t "* ]] || { echo "fuzz.sh: no target '$t' (targets: $all_targets)" >&2; exit 2; }
done
nice -n "$nice_level" cmake -S . -B "$build" -DCMAKE_C_COMPILER="$CC_FUZZ" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DOCRT_FUZZ=ON -DOCRT_CUDA=OFF -DOCRT_MPI=OFF -DOCRT_NATIVE=OFF \
  -DOCRT_BUILD_BENCH=OFF >/dev/null
binaries=()
for t in "${targets[@]}"; do binaries+=("fuzz-$t"); done
nice -n "$nice_level" cmake --build "$build" -j "${OCRT_FUZZ_JOBS:-$(nproc)}" --target "${binaries[@]}"

# ---------------------------------------------------------------- fuzz
# Scratch files (targets that read paths) go to memory when it can.
scratch="$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/ocrt-fuzz.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
summary="$build/fuzz-summary.txt"
{
  echo "# scripts/fuzz.sh $seconds ${targets[*]}   ($(date -u +%Y-%m-%dT%H:%MZ), $("$CXX_FUZZ" --version | head -1))"
  printf '%-12s %8s %12s %7s %7s %8s %8s\n' target seconds executions cov ft corpus crashes
} > "$summary"
# Stack traces with function names and lines.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in "$(dirname "$CXX_FUZZ")/llvm-symbolizer${CXX_FUZZ##*clang++}" "$(command -v llvm-symbolizer || true)"; do
    if [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH="$s"; break; fi
  done
fi
status=0
for t in "${targets[@]}"; do
  exe="$build/fuzz/fuzz-$t"
  corpus="fuzz/corpus/$t"
  work="$scratch/$t"
  mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp" "$corpus"
  cp "$corpus"/. "$work/corpus"/ -r
  echo "== $t: ${seconds}s on $(ls "$corpus" | wc -l) corpus files"
  # -timeout: one input may take 10 s; -malloc_limit_mb: no single allocation over 1 GiB;
  # -rss_limit_mb: 2.5 GiB in all. One thread for OpenMP: one core per fuzzer.
  set +e
  TMPDIR="$work/tmp" OMP_NUM_THREADS=1 nice -n "$nice_level" "$exe" "$work/corpus" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" ${OCRT_FUZZ_ARGS:-} > "$work/log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
  # Minimise: libFuzzer's merge into an empty folder keeps a smallest set of inputs that covers
  # everything the corpus and this run's finds cover (named by SHA-1). The corpus then holds the
  # seeds (seed_*), every input that once crashed (crash-*, oom-*, timeout-*, leak-*), and the
  # files of that set that are neither, smallest first, at most OCRT_FUZZ_MAX_NEW of them.
  merged="$work/merged"
  mkdir -p "$merged"
  TMPDIR="$work/tmp" OMP_NUM_THREADS=1 nice -n "$nice_level" "$exe" -merge=1 "$merged" "$corpus" "$work/corpus" \
    -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=1024 > "$work/merge.log" 2>&1 || true
  before=$(ls "$corpus" | wc -l)
  if [ -n "$(ls "$merged")" ]; then
    kept=" "
    for f in "$corpus"/*; do
      name=$(basename "$f")
      case "$name" in
        seed_*|crash-*|oom-*|timeout-*|leak-*) kept+="$(sha1sum < "$f" | cut -d' ' -f1) " ;;
        *) rm -f "$f" ;;
      esac
    done
    n=0
    while read -r f; do
      name=$(basename "$f")
      [[ "$kept" == *" $name "* ]] && continue
      [ "$n" -ge "$max_new" ] && break
      cp "$f" "$corpus/$name"
      n=$((n + 1))
    done < <(find "$merged" -type f -printf '%s %p\n' | sort -n | cut -d' ' -f2-)
  fi
  added=$(( $(ls "$corpus" | wc -l) - before ))
  crashes=0
  for a in "$work/artifacts"/*; do
    [ -e "$a" ] || continue
    crashes=$((crashes + 1))
    cp "$a" "$corpus/$(basename "$a")"
    echo "   !! $t: $(basename "$a") copied into $corpus (ctest -L fuzz fails on it until it is fixed)"
  done
  if [ "$crashes" -gt 0 ] || { [ "$rc" -ne 0 ] && [ -z "$execs" ]; }; then
    status=1
    grep -m1 -A12 -E 'ERROR: |runtime error|fuzz: broken' "$work/log" | sed 's/^/   /' || tail -20 "$work/log"
  fi
  echo "   executions ${execs:-?}, cov ${cov:-?}, ft ${ft:-?}, corpus $before -> $(ls "$corpus" | wc -l) files, $crashes crashes"
  printf '%-12s %8s %12s %7s %7s %8s %8s\n' "$t" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
    "$(ls "$corpus" | wc -l)" "$crashes" >> "$summary"
  cp "$work/log" "$build/fuzz-$t.log"
done
echo
cat "$summary"
echo "(logs: $build/fuzz-<target>.log; corpora: fuzz/corpus/)"
exit $status
