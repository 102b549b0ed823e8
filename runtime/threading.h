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
// Notes on how OpenMP treats the count: it is a per-thread setting, and a std::thread does not
// inherit it: the regions a std::thread starts get OpenMP's default team (OMP_NUM_THREADS, else
// one thread per processor), whenever the thread was started (libgomp; tested in
// tests/runtime/test_threading.cpp). Eigen's count, in contrast, is process-wide. Kernels that
// are already inside a parallel region run their inner work on one thread (nested parallelism
// is off).
#pragma once

namespace ocrt {

// Sets the number of threads CPU ops use (OpenMP and Eigen). n must be >= 1.
void set_num_threads(int n);

// The number of threads a CPU op started from this thread may use.
int num_threads();

// OpenMP regions that the calling thread starts use at most n threads from now on; other
// threads and Eigen's process-wide count are left as they are. For worker threads that each
// make their own share of the work (a std::thread is no OpenMP thread: a parallel region it
// starts gets a whole team, nested in nothing, so 14 workers would start 14 teams).
void limit_this_thread(int n);

// While it lives, OpenMP regions that the calling thread starts may use `extra` more threads
// than before: threads that another part of the program lends while it has nothing to run
// (ocrt-infer's page lanes with no page left lend theirs to the lanes still reading). extra <= 0
// changes nothing. The caller's own setting comes back when it goes out of scope.
class LentThreads {
 public:
  explicit LentThreads(int extra);
  ~LentThreads();
  LentThreads(const LentThreads&) = delete;
  LentThreads& operator=(const LentThreads&) = delete;
  int extra() const { return extra_; }

 private:
  int extra_ = 0, saved_ = 0;
};

// OMP_NUM_THREADS when it is set to a positive integer (its first entry, if it is a list),
// else the number of processors this process may run on (at least 1).
int default_num_threads();

}  // namespace ocrt
