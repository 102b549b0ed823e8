#!/usr/bin/env bash
# The CPU GEMM kernels keep their running sums in registers: no multiply-add instruction in a
# kernel function takes an operand from the stack.
#
#   tests/runtime/kernel_spills.sh LIBRARY BUILD_TYPE
#
# LIBRARY is libocrt_runtime.a. Its members gemm_*.o and int8_gemm.o are disassembled (objdump),
# and in every function whose name says it is a kernel (micro_kernel, rows_kernel, the int8
# kernel_* functions, and the run<...> loops that inline the micro-kernel; reference code aside)
# an FMA, vdpbf16ps, vpdpbusd, vpmaddwd or vpmaddubsw with a (%rsp) or (%rbp) operand means the
# compiler ran out of registers and keeps a tile's sums in memory: every step of k then reads and
# writes memory, at about half the kernel's rate. That happened once without any test failing,
# because the results stay right: the avx2 float32 kernel ran at half speed from 9ac2607 to the
# twenty-sixth session (docs/ops/gemm.md, "Edges"). This test makes it fail.
#
# Exit 77 (skipped) where it cannot say: no objdump, or a build that is not optimised (Debug
# and sanitizer builds keep everything on the stack).
set -euo pipefail
lib=$1
build_type=${2:-}
case "$build_type" in
  Release|RelWithDebInfo|MinSizeRel) ;;
  *) echo "kernel_spills: build type '$build_type' is not optimised; nothing to check"; exit 77 ;;
esac
command -v objdump >/dev/null || { echo "kernel_spills: objdump is missing"; exit 77; }
[[ -f $lib ]] || { echo "kernel_spills: $lib is missing" >&2; exit 2; }

out=$(objdump -d --no-show-raw-insn -C "$lib" | awk '
  /^In archive|file format/ {
    member = $0
    sub(/:.*$/, "", member); sub(/^.*[\/ ]/, "", member)
    wanted = (member ~ /^gemm_.*\.o$/ || member ~ /^int8_gemm.*\.o$/)
    if (wanted) seen[member] = 1
    next
  }
  /^[0-9a-f]+ <.*>:$/ {
    fn = $0
    kernel = wanted && fn !~ /reference/ && (fn ~ /micro_kernel|rows_kernel|half_panel|kernel_(vnni|avx2)|::run</)
    if (kernel) kernels++
    next
  }
  kernel && /(vfn?m(add|sub)[0-9]+[ps][sd]|vdpbf16ps|vpdpbusds?|vpdpwssds?|vpmaddwd|vpmaddubsw)[^(]*\(%r[sb]p\)/ {
    count[member ": " fn]++
  }
  END {
    n = 0
    for (m in seen) n++
    printf "checked %d kernel functions in %d object files\n", kernels, n
    for (f in count) printf "SPILL %d multiply-adds read the stack in %s\n", count[f], f
  }
')
echo "$out"
if ! grep -q "^checked [1-9][0-9]* kernel functions" <<<"$out"; then
  echo "kernel_spills: found no kernel functions in $lib: the names or the members changed" >&2
  exit 1
fi
if grep -q "^SPILL" <<<"$out"; then
  echo "kernel_spills: a GEMM kernel keeps its sums on the stack (see tests/runtime/kernel_spills.sh)" >&2
  exit 1
fi
