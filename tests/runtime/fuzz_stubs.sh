#!/usr/bin/env bash
# The fuzz build's stand-ins cover every kernel function it leaves out.
#
#   tests/runtime/fuzz_stubs.sh SOURCE_DIR
#
# The fuzz build (fuzz/CMakeLists.txt) compiles with clang, which cannot build the GEMM kernel
# files (runtime/cpu/gemm_avx*.cpp, gemm_amx.cpp: `#pragma GCC target`), so it leaves them out
# and links fuzz/gemm_kernels_stub.cpp instead. A function that runtime/cpu/gemm_kernels.h
# declares and those files define needs a stand-in there, or scripts/fuzz.sh stops linking:
# eight AMX functions added over three sessions went without one, and nothing failed until the
# fuzzers were next run (twenty-seventh session). This test needs no clang: every name declared
# in gemm_kernels.h that appears in a left-out file must appear in the stand-ins.
set -euo pipefail
src=$1
header=$src/runtime/cpu/gemm_kernels.h
stubs=$src/fuzz/gemm_kernels_stub.cpp
left_out=$(ls "$src"/runtime/cpu/gemm_avx*.cpp "$src"/runtime/cpu/gemm_amx.cpp)
# Function declarations of the header: a return type, a name, an opening parenthesis.
names=$(grep -oE '^[A-Za-z_][A-Za-z0-9_:<>, ]*[ *&][a-z_][a-z0-9_]*\(' "$header" | grep -oE '[a-z_][a-z0-9_]*\($' |
  tr -d '(' | sort -u)
[ -n "$names" ] || { echo "fuzz_stubs: no function declarations found in $header" >&2; exit 1; }
missing=0 checked=0
for n in $names; do
  # shellcheck disable=SC2086
  grep -qE "\\b$n\\(" $left_out || continue
  checked=$((checked + 1))
  if ! grep -qE "\\b$n\\(" "$stubs"; then
    echo "fuzz_stubs: $n (declared in runtime/cpu/gemm_kernels.h, defined in a file the fuzz build leaves out) has no stand-in in fuzz/gemm_kernels_stub.cpp" >&2
    missing=$((missing + 1))
  fi
done
echo "fuzz_stubs: $checked kernel functions, $missing without a stand-in"
# Any other source that picks its instruction set by `#pragma GCC target` breaks the fuzz
# build the same way (clang ignores the pragma, then refuses the intrinsics): ops/cpu/attention.cpp
# did so for four sessions (fortieth session). Such code takes OCRT_TARGET_AVX2 and its kin
# (runtime/cpu_isa.h), function attributes that both compilers honour.
pragma=0
while IFS= read -r f; do
  if printf '%s\n' $left_out | grep -qxF "$f"; then continue; fi
  echo "fuzz_stubs: $f uses '#pragma GCC target', which the clang fuzz build ignores; mark its functions OCRT_TARGET_AVX2 (runtime/cpu_isa.h) instead" >&2
  pragma=$((pragma + 1))
done < <(grep -rlE '^[[:space:]]*#[[:space:]]*pragma[[:space:]]+GCC[[:space:]]+target' "$src"/runtime "$src"/ops "$src"/models \
           "$src"/infer "$src"/train "$src"/capi --include='*.cpp' --include='*.h' --include='*.inc' | sort)
echo "fuzz_stubs: $pragma other files with '#pragma GCC target'"
[ "$missing" -eq 0 ] && [ "$pragma" -eq 0 ]
