// The CPU allocator (runtime/cpu_allocator.h): reuse of large blocks, exact statistics, serving
// from a larger cached block, trimming, and the cache's bound.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "runtime/cpu_allocator.h"
#include "runtime/tensor.h"

using namespace ocrt;

TEST_CASE("the CPU allocator reuses large blocks and keeps exact statistics", "[allocator]") {
  cpu_empty_cache();
  CpuMemoryStats s0 = cpu_memory_stats();
  REQUIRE(s0.cached == 0);
  void* first;
  {
    Tensor big = Tensor::empty({1 << 20});  // 4 MiB
    first = big.raw_data();
    REQUIRE(reinterpret_cast<uintptr_t>(first) % kCpuAlignment == 0);
    REQUIRE(cpu_memory_stats().allocated == s0.allocated + (4u << 20));
    REQUIRE(cpu_memory_stats().peak >= s0.allocated + (4u << 20));
  }
  REQUIRE(cpu_memory_stats().allocated == s0.allocated);
  REQUIRE(cpu_memory_stats().cached >= (4u << 20));
  {
    // A slightly smaller request falls in the same size class and gets the same block.
    Tensor again = Tensor::empty({(1 << 20) - 1000});
    REQUIRE(again.raw_data() == first);
  }
  cpu_empty_cache();
  REQUIRE(cpu_memory_stats().cached == 0);
  cpu_set_cache_limit(0);  // caching off: nothing is kept
  { Tensor t = Tensor::empty({1 << 20}); }
  REQUIRE(cpu_memory_stats().cached == 0);
  cpu_set_cache_limit(size_t(2) << 30);
}

TEST_CASE("the CPU allocator serves a request from a larger cached block, up to twice its size",
          "[allocator]") {
  cpu_empty_cache();
  void* six;
  { Tensor t = Tensor::empty({6 << 18}); six = t.raw_data(); }  // a 6 MiB block, then cached
  {
    Tensor t = Tensor::empty({4 << 18});  // 4 MiB: served by the 6 MiB block
    CHECK(t.raw_data() == six);
    CHECK(cpu_memory_stats().cached == 0);
  }
  CHECK(cpu_memory_stats().cached == (6u << 20));  // returned at its real size
  {
    Tensor t = Tensor::empty({(3 << 18) - 100});  // just under 3 MiB: more than twice smaller
    CHECK(t.raw_data() != six);
  }
  // Lines of shrinking widths, one batch alive at a time: each reuses the last one's block
  // while it is within twice the size (40 sizes 9% apart, 16 MiB down to 0.5 MiB: about 20
  // size classes, a block for every halving; all of them fit in the cache's 64 MiB).
  cpu_empty_cache();
  std::set<void*> blocks;
  double floats = 1 << 22;  // 16 MiB
  for (int i = 0; i < 40; ++i, floats /= 1.09) {
    Tensor t = Tensor::empty({(int64_t)floats});
    blocks.insert(t.raw_data());
  }
  CHECK(blocks.size() <= 7);
  cpu_empty_cache();
}

TEST_CASE("with trimming on, the CPU allocator gives cached blocks back before live and cached bytes pass the working set",
          "[allocator]") {
  // Ever-wider batches, one alive at a time, 16 to ~460 MiB (never touched, so cheap): no
  // cached block fits the next one, and keeping them would make RSS twice the working set.
  cpu_empty_cache();
  cpu_set_cache_trim(true);
  double floats = 1 << 22;  // 16 MiB
  for (int i = 0; i < 40; ++i, floats *= 1.09) {
    Tensor t = Tensor::empty({(int64_t)floats});
    const CpuMemoryStats s = cpu_memory_stats();
    INFO("step " << i << ": held " << s.held << ", cached " << s.cached << ", peak held " << s.peak_held);
    CHECK(s.held + s.cached <= std::max<size_t>(size_t(64) << 20, s.peak_held));
  }
  cpu_set_cache_trim(false);
  cpu_empty_cache();
}

TEST_CASE("the CPU allocator's cache stays within the largest working set seen", "[allocator]") {
  // Batches of ever-new widths: blocks from 2 to ~60 MiB in about 20 size classes, one alive at
  // a time (~250 MiB in all). Keeping one of each would be RSS for nothing; the cache keeps at
  // most max(64 MiB, the peak of live bytes). (The peak starts again here: the test before
  // reached 460 MiB, a bound that all of this test's blocks would fit under.)
  cpu_empty_cache();
  cpu_reset_peak();
  double floats = 1 << 19;  // 2 MiB
  for (int i = 0; i < 40; ++i, floats *= 1.09) {
    Tensor t = Tensor::empty({(int64_t)floats});
    t.fill_(1.0);
  }
  const CpuMemoryStats s = cpu_memory_stats();
  CHECK(s.cached > 0);
  CHECK(s.cached <= std::max<size_t>(size_t(64) << 20, s.peak_held));
  cpu_empty_cache();
}

TEST_CASE("the CPU allocator's cache keeps every block a repeated working set holds, at the blocks' sizes",
          "[allocator]") {
  // A training step in miniature: 12 tensors of 6.5 MiB alive at once, then all freed, three
  // times. Each takes a 7 MiB block (four size classes per power of two), so the step holds 84
  // MiB of blocks for 78 MiB of tensors; a bound counted in requested bytes (78 MiB) would give
  // one block back to the kernel every step and map it afresh in the next.
  cpu_empty_cache();
  cpu_reset_peak();
  const size_t before = cpu_memory_stats().held;
  const int64_t floats = (13 << 20) / 8;  // 6.5 MiB
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> live;
    for (int i = 0; i < 12; ++i) live.push_back(Tensor::empty({floats}));
    const CpuMemoryStats s = cpu_memory_stats();
    CHECK(s.held - before == 12 * (size_t(7) << 20));
    CHECK(s.allocated >= 12 * (size_t(13) << 19));
    if (step > 0) CHECK(s.cached == 0);  // every block came from the cache
    live.clear();
    CHECK(cpu_memory_stats().cached == 12 * (size_t(7) << 20));
  }
  CHECK(cpu_memory_stats().held == before);
  cpu_empty_cache();
}

TEST_CASE("the CPU allocator grows a smaller cached block for a request that no cached block fits", "[allocator]") {
  // A batch of wider lines after a narrower one: its activations are more than twice as large
  // as any cached block, so none serves it by best fit. The largest smaller one is taken out of
  // the cache and grown (Linux: mremap), keeping its pages; only the new ones fault in.
  cpu_empty_cache();
  {
    Tensor t = Tensor::empty({1 << 20});  // 4 MiB
    t.fill_(7.0);
  }
  REQUIRE(cpu_memory_stats().cached == (4u << 20));
  {
    Tensor wide = Tensor::empty({3 << 20});  // 12 MiB: no cached block within twice of it
    const CpuMemoryStats s = cpu_memory_stats();
#if defined(__linux__)
    CHECK(s.cached == 0);  // the 4 MiB block became this one
    const float* v = wide.data<float>();
    CHECK(v[0] == 7.0f);  // its pages kept what they held
    CHECK(v[(1 << 20) - 1] == 7.0f);
#endif
    CHECK(s.held >= (12u << 20));
    wide.fill_(1.0);  // every page of the grown block can be written
  }
  CHECK(cpu_memory_stats().cached == (12u << 20));
  cpu_empty_cache();
}
