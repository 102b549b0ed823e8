// Catch2's main for the CPU tests. When OCRT_CPU_ISA forces an instruction-set path this CPU
// cannot run (tests/CMakeLists.txt runs the kernel tests once per path), the program exits with
// 77 before any test, which ctest reports as skipped, as it does the cuda tests without a GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"

int main(int argc, char** argv) {
  if (const char* forced = std::getenv("OCRT_CPU_ISA"); forced && *forced) {
    try {
      std::printf("instruction-set path: %s (%s)\n", ocrt::cpu_isa_name(ocrt::cpu_isa()),
                  ocrt::cpu_description().c_str());
    } catch (const ocrt::Error& e) {
      std::printf("skipped: %s\n", e.what());
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}
