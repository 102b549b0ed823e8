// The CPU thread count: the one place that owns it.
//
// ocrt's CPU kernels parallelise with OpenMP, and Eigen's matrix products parallelise with
// OpenMP too but keep a thread count of their own (Eigen::setNbThreads). set_num_threads sets
// both, so that every CPU op of the process agrees on how many threads it may use. Call it once
// at start-up, from the main thread, before ops run (the binaries take a --threads flag; the
// tests and benchmarks do the same).
//
// Without a call, OpenMP's own default applies: OMP_NUM_THREADS when set, else one thread per
// hardware thread. default_num_threads() reports that number.
//
// Notes on how OpenMP treats the count: it is a per-thread setting inherited by threads that
// a thread creates, so a std::thread started *before* set_num_threads keeps the old value for
// its own OpenMP regions (Eigen's count, in contrast, is process-wide). Kernels that are already
// inside a parallel region run their inner work on one thread (nested parallelism is off).
#pragma once

namespace ocrt {

// Sets the number of threads CPU ops use (OpenMP and Eigen). n must be >= 1.
void set_num_threads(int n);

// The number of threads a CPU op started from this thread may use.
int num_threads();

// OMP_NUM_THREADS when it is set to a positive integer (its first entry, if it is a list),
// else the number of processors this process may run on (at least 1).
int default_num_threads();

}  // namespace ocrt
