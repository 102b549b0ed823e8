// What the benchmarks time with: a steady clock, the time of a callable, the median of runs and
// the process's peak resident memory. One definition for every bench_*.cpp (each had its own).
#pragma once
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace ocrt::bench {

// Seconds on the steady clock (for differences only).
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds that `times` calls of f take together.
inline double seconds_of(const std::function<void()>& f, int times = 1) {
  const double t0 = now_seconds();
  for (int i = 0; i < times; ++i) f();
  return now_seconds() - t0;
}

// The median of the values (the mean of the middle two for an even count; 0 for none).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The process's peak resident memory so far, MiB (getrusage's ru_maxrss, KiB on Linux).
inline double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

}  // namespace ocrt::bench
