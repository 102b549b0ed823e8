// Instruction-set detection (cpu_isa.h). The CPU says what it implements (cpuid); the operating
// system says which register state it saves across context switches (XCR0, read with xgetbv):
// an instruction set is usable only when both agree. On Linux the AMX tile data (8 KiB per
// thread) is not granted by default: a process asks for it once with arch_prctl.
#include "runtime/cpu_isa.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "runtime/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OCRT_X86_CPUID 1
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace ocrt {

namespace {

struct Features {
  bool avx2 = false, fma = false, avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512bf16 = false, avx512vnni = false, amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool os_avx = false, os_avx512 = false, os_amx = false;  // XCR0 bits
  bool amx_granted = false;                                 // Linux: tile data permitted
  bool split_avx512_fma = false;                            // cpu_avx512_fma_is_split()
};

#if defined(OCRT_X86_CPUID)
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

// Asks Linux for the AMX tile data state; true when granted (or already granted).
bool request_amx() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

Features detect() {
  Features f;
#if defined(OCRT_X86_CPUID)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.fma = c & (1u << 12);
  const unsigned family = ((a >> 8) & 0xf) == 0xf ? 0xf + ((a >> 20) & 0xff) : (a >> 8) & 0xf;
  unsigned vendor[3];
  __cpuid(0, b, vendor[0], vendor[2], vendor[1]);  // the vendor string is in EBX, EDX, ECX
  const bool amd = std::memcmp(vendor, "AuthenticAMD", 12) == 0;
  f.split_avx512_fma = amd && family == 0x19;  // Zen 3 (no AVX-512) and Zen 4; Zen 5 is 1Ah
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (osxsave && avx) {
    const uint64_t xcr0 = xgetbv0();
    f.os_avx = (xcr0 & 0x6) == 0x6;                   // SSE and AVX state
    f.os_avx512 = f.os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, upper ZMM0-15, ZMM16-31
    f.os_amx = (xcr0 & 0x60000) == 0x60000;           // XTILECFG and XTILEDATA
  }
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = b & (1u << 5);
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
    f.amx_bf16 = d & (1u << 22);
    f.amx_tile = d & (1u << 24);
    f.amx_int8 = d & (1u << 25);
    const unsigned subleaves = a;
    if (subleaves >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      f.avx512bf16 = a & (1u << 5);
    }
  }
  if (f.amx_tile && f.amx_bf16 && f.os_amx) f.amx_granted = request_amx();
#endif
  return f;
}

const Features& features() {
  static const Features f = detect();
  return f;
}

CpuIsa best_of(const Features& f) {
  if (!(f.os_avx && f.avx2 && f.fma)) return CpuIsa::generic;
  if (!(f.os_avx512 && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl)) return CpuIsa::avx2;
  if (!f.avx512bf16) return CpuIsa::avx512;
  if (!(f.amx_tile && f.amx_bf16 && f.amx_granted)) return CpuIsa::avx512bf16;
  return CpuIsa::amx;
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::generic: return "generic";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx512bf16: return "avx512bf16";
    case CpuIsa::amx: return "amx";
  }
  return "?";
}

CpuIsa parse_cpu_isa(const std::string& name) {
  for (CpuIsa isa : {CpuIsa::generic, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512bf16, CpuIsa::amx})
    if (name == cpu_isa_name(isa)) return isa;
  throw Error("unknown CPU instruction-set path '" + name + "' (expected generic, avx2, avx512, avx512bf16 or amx)");
}

CpuIsa best_cpu_isa() {
  static const CpuIsa best = best_of(features());
  return best;
}

bool cpu_avx512_fma_is_split() { return features().split_avx512_fma; }

bool cpu_has_avx512_vnni() {
  const Features& f = features();
  return cpu_isa() >= CpuIsa::avx512 && f.avx512vnni && f.os_avx512;
}

bool cpu_has_amx_int8() { return cpu_isa() == CpuIsa::amx && features().amx_int8; }

bool cpu_isa_supported(CpuIsa isa) { return (int)isa <= (int)best_cpu_isa(); }

CpuIsa cpu_isa() {
  // Decided once; a bad OCRT_CPU_ISA is reported at every call, so that no caller goes on with
  // a path the machine cannot run.
  static const struct Choice {
    CpuIsa isa = CpuIsa::generic;
    std::string error;
  } choice = [] {
    Choice c;
    const char* env = std::getenv("OCRT_CPU_ISA");
    if (!env || !*env) {
      c.isa = best_cpu_isa();
      return c;
    }
    try {
      c.isa = parse_cpu_isa(env);
    } catch (const Error& e) {
      c.error = std::string("OCRT_CPU_ISA: ") + e.what();
      return c;
    }
    if (!cpu_isa_supported(c.isa))
      c.error = std::string("OCRT_CPU_ISA=") + env + ": this CPU (or its operating system) cannot run the " + env +
                " path; the best it runs is " + cpu_isa_name(best_cpu_isa());
    return c;
  }();
  if (!choice.error.empty()) throw Error(choice.error);
  return choice.isa;
}

std::string cpu_description() {
  std::string model = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
      break;
    }
  }
  const Features& f = features();
  std::string flags;
  auto add = [&](bool on, const char* name) {
    if (on) flags += std::string(flags.empty() ? "" : " ") + name;
  };
  add(f.avx2 && f.os_avx, "avx2");
  add(f.fma && f.os_avx, "fma");
  add(f.avx512f && f.os_avx512, "avx512f");
  add(f.avx512bw && f.os_avx512, "avx512bw");
  add(f.avx512vnni && f.os_avx512, "avx512_vnni");
  add(f.avx512bf16 && f.os_avx512, "avx512_bf16");
  add(f.amx_tile && f.os_amx, "amx_tile");
  add(f.amx_bf16 && f.os_amx, "amx_bf16");
  add(f.amx_int8 && f.os_amx, "amx_int8");
  return model + ": " + (flags.empty() ? "no AVX2" : flags);
}

}  // namespace ocrt
