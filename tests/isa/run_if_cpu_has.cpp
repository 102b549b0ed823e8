// ocrt_run_if_cpu_has ISA PROGRAM [ARGS...]: runs PROGRAM when this CPU has the instruction set
// ISA (avx2 = AVX2 + FMA, avx512 = AVX-512F), and otherwise exits with 77, which ctest reports as
// skipped. Built for any x86-64 CPU, it starts the per-instruction-set test programs of
// tests/CMakeLists.txt (ocrt_tests_gemm_<isa>), which would die of an illegal instruction on a
// CPU without their instruction set.
#include <unistd.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: ocrt_run_if_cpu_has avx2|avx512 PROGRAM [ARGS...]\n");
    return 2;
  }
  __builtin_cpu_init();
  const char* isa = argv[1];
  bool has = false;
  if (std::strcmp(isa, "avx2") == 0) {
    has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  } else if (std::strcmp(isa, "avx512") == 0) {
    has = __builtin_cpu_supports("avx512f");
  } else {
    std::fprintf(stderr, "ocrt_run_if_cpu_has: unknown instruction set '%s' (avx2 or avx512)\n", isa);
    return 2;
  }
  if (!has) {
    std::printf("this CPU does not run %s: %s is skipped\n", isa, argv[2]);
    return 77;
  }
  std::fflush(stdout);
  execv(argv[2], argv + 2);
  std::perror("ocrt_run_if_cpu_has: exec");
  return 2;
}
