// The CPU thread count (see threading.h): OpenMP's and Eigen's, kept equal.
#include "runtime/threading.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <string>

#include "runtime/error.h"

namespace ocrt {

void set_num_threads(int n) {
  OCRT_CHECK(n >= 1, "set_num_threads: the thread count must be >= 1, got ", n);
  omp_set_num_threads(n);
  // Eigen's GEMM asks nbThreads() how many threads to start; without this it would read
  // omp_get_max_threads() of whichever thread calls it, which is the same number here but not
  // in threads that were started before this call.
  Eigen::setNbThreads(n);
}

int num_threads() { return omp_get_max_threads(); }

void limit_this_thread(int n) {
  OCRT_CHECK(n >= 1, "limit_this_thread: the thread count must be >= 1, got ", n);
  omp_set_num_threads(std::min(n, omp_get_max_threads()));
}

LentThreads::LentThreads(int extra) : extra_(std::max(0, extra)) {
  if (extra_ == 0) return;
  saved_ = omp_get_max_threads();
  omp_set_num_threads(saved_ + extra_);
}

LentThreads::~LentThreads() {
  if (extra_ > 0) omp_set_num_threads(saved_);
}

int default_num_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    // OMP_NUM_THREADS may be a list ("4,2" for nested levels): the first entry is ours.
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && v >= 1 && (*end == '\0' || *end == ',')) return (int)v;
  }
  // omp_get_num_procs counts the processors this process may run on (it honours the CPU
  // affinity mask, e.g. taskset or a container's cpuset), unlike hardware_concurrency.
  int procs = omp_get_num_procs();
  return procs >= 1 ? procs : 1;
}

}  // namespace ocrt
