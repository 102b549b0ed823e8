// Which instruction-set path the CPU kernels take, chosen at run time.
//
// One build of ocrt carries its CPU kernels compiled for several instruction sets (runtime/cpu/gemm.h
// lists them), whatever -march the build used. At start-up the best path this CPU and its
// operating system can run is chosen, from cpuid and the register state the OS saves (XCR0):
//
//   generic      no AVX2 (or not x86-64): Eigen does the matrix products
//   avx2         AVX2 + FMA, 8-wide float32 (Zen 2/3, Haswell and later)
//   avx512       AVX-512 F/BW/DQ/VL, 16-wide float32 (Skylake-X, Zen 4/5)
//   avx512bf16   avx512 + AVX512_BF16: vdpbf16ps, two bf16 products per float32 lane (Zen 4/5,
//                Cooper Lake, Sapphire Rapids)
//   amx          avx512bf16 + AMX-TILE/AMX-BF16: 16 x 16 tile products (Sapphire Rapids and
//                later); on Linux the process must also be granted the tile state
//                (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)), which choosing it does
//
// Each path includes the ones above it. The environment variable OCRT_CPU_ISA names a path to
// force (for comparisons and tests); naming one the CPU lacks is an error, never a crash later.
#pragma once

#include <string>

// Kernels outside the per-path GEMM files are compiled for their instruction set inside their
// own functions, in any x86-64 build (GCC and clang honour the attribute), and called only where
// cpu_isa() has that path: OCRT_TARGET_ATTRS says the attributes exist, OCRT_TARGET_AVX2 marks an
// AVX2 + FMA function (the int8 kernels, the LSTM cell's activations, the direct convolution).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OCRT_TARGET_ATTRS 1
#define OCRT_TARGET_AVX2 __attribute__((target("avx2,fma")))
// An AVX-512 function (16 float lanes: the LSTM cell's activations on the avx512 paths and above).
#define OCRT_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
#endif

namespace ocrt {

enum class CpuIsa { generic = 0, avx2 = 1, avx512 = 2, avx512bf16 = 3, amx = 4 };

// "generic", "avx2", "avx512", "avx512bf16", "amx".
const char* cpu_isa_name(CpuIsa isa);

// The path named `name`; throws on any other name.
CpuIsa parse_cpu_isa(const std::string& name);

// The best path this CPU and OS can run (detected once). AMX counts only when the OS granted the
// tile state.
CpuIsa best_cpu_isa();

// Whether this machine can run `isa` (every path up to best_cpu_isa()).
bool cpu_isa_supported(CpuIsa isa);

// The path the kernels take: OCRT_CPU_ISA when set, else best_cpu_isa(). Decided at the first
// call; throws (at every call) when OCRT_CPU_ISA is not a path name or names one this machine
// cannot run.
CpuIsa cpu_isa();

// Whether the CPU executes a 512-bit FMA as two 256-bit halves (AMD Zen 4, family 19h): its
// float32 peak is then the same with AVX2 as with AVX-512, and ocrt's AVX2 float32 kernel, with
// a tile shaped for 16 registers of 8 lanes, runs faster than the AVX-512 one (bench/results/
// cpu-bf16.md: 3-40% on CRNN's products). The bf16 kernel gains from vdpbf16ps all the same.
bool cpu_avx512_fma_is_split();

// Whether the int8 kernels may use AVX512_VNNI (vpdpbusd): the CPU has it and the chosen path
// (cpu_isa()) is avx512 or above. Every CPU of the avx512bf16 and amx paths has it; of the plain
// avx512 path, Cascade Lake and later do, Skylake-X does not.
bool cpu_has_avx512_vnni();

// Whether the int8 kernels may use AMX-INT8 tiles (tdpbusd): the chosen path is amx and the CPU
// has AMX-INT8 (every AMX CPU so far does; the amx path itself asks only for AMX-BF16).
bool cpu_has_amx_int8();

// The CPU's model name and the instruction-set extensions ocrt cares about, for summaries and
// benchmark records (e.g. "AMD EPYC 9B45: avx2 fma avx512f avx512bw avx512_bf16").
std::string cpu_description();

}  // namespace ocrt
