// The thread count: set_num_threads keeps OpenMP and Eigen in step, rejects nonsense, and
// default_num_threads follows OMP_NUM_THREADS; threads lent to a thread for a while (LentThreads)
// widen its own teams and come back.
#include <catch2/catch.hpp>

#include <omp.h>

#include <Eigen/Core>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "runtime/threading.h"

using namespace ocrt;

namespace {

// The size of the team a parallel region started on this thread gets.
int team_size() {
  int seen = 0;
#pragma omp parallel
  {
#pragma omp single
    seen = omp_get_num_threads();
  }
  return seen;
}

}  // namespace

TEST_CASE("set_num_threads sets OpenMP and Eigen together", "[threading]") {
  const int saved = num_threads();
  set_num_threads(3);
  REQUIRE(num_threads() == 3);
  REQUIRE(omp_get_max_threads() == 3);
  REQUIRE(Eigen::nbThreads() == 3);
  int seen = 0;
#pragma omp parallel
  {
#pragma omp single
    seen = omp_get_num_threads();
  }
  REQUIRE(seen == 3);
  set_num_threads(1);
  REQUIRE(num_threads() == 1);
  REQUIRE(Eigen::nbThreads() == 1);
  set_num_threads(saved);
  REQUIRE(num_threads() == saved);
}

TEST_CASE("limit_this_thread: a worker thread's parallel regions get one thread, the others keep theirs",
          "[threading]") {
  const int saved = num_threads();
  set_num_threads(3);
  int unlimited = 0, limited = 0;
  // A std::thread does not inherit the count: its regions start from OpenMP's default.
  std::thread([&] { unlimited = team_size(); }).join();
  std::thread([&] {
    limit_this_thread(1);
    limited = team_size();
  }).join();
  CHECK(unlimited == default_num_threads());
  CHECK(limited == 1);
  CHECK(team_size() == 3);  // the calling thread and Eigen are left alone
  CHECK(Eigen::nbThreads() == 3);
  CHECK_THROWS_WITH(limit_this_thread(0), Catch::Contains(">= 1"));
  set_num_threads(saved);
}

TEST_CASE("LentThreads: a thread's teams grow by the threads lent while it lives, then shrink back", "[threading]") {
  int before = 0, lent = 0, none = 0, after = 0;
  std::thread([&] {
    limit_this_thread(1);  // a page lane of one thread
    before = team_size();
    {
      const LentThreads borrowed(2);
      CHECK(borrowed.extra() == 2);
      lent = team_size();
    }
    {
      const LentThreads nothing(-1);  // nothing lent: nothing changes
      CHECK(nothing.extra() == 0);
      none = team_size();
    }
    after = team_size();
  }).join();
  CHECK(before == 1);
  CHECK(lent == 3);
  CHECK(none == 1);
  CHECK(after == 1);
}

TEST_CASE("set_num_threads rejects counts below 1", "[threading]") {
  const int saved = num_threads();
  REQUIRE_THROWS_WITH(set_num_threads(0), Catch::Contains("set_num_threads") && Catch::Contains(">= 1"));
  REQUIRE_THROWS_WITH(set_num_threads(-4), Catch::Contains("set_num_threads"));
  REQUIRE(num_threads() == saved);  // unchanged by the failed calls
}

TEST_CASE("default_num_threads follows OMP_NUM_THREADS", "[threading]") {
  std::optional<std::string> saved;
  if (const char* v = std::getenv("OMP_NUM_THREADS")) saved = v;

  setenv("OMP_NUM_THREADS", "5", 1);
  REQUIRE(default_num_threads() == 5);
  setenv("OMP_NUM_THREADS", "3,2", 1);  // a list: the first level is ours
  REQUIRE(default_num_threads() == 3);
  unsetenv("OMP_NUM_THREADS");
  const int hw = default_num_threads();
  REQUIRE(hw >= 1);
  REQUIRE(hw == omp_get_num_procs());
  for (const char* bad : {"0", "-2", "lots", ""}) {
    setenv("OMP_NUM_THREADS", bad, 1);
    REQUIRE(default_num_threads() == hw);  // ignored, not an error
  }

  if (saved) setenv("OMP_NUM_THREADS", saved->c_str(), 1);
  else unsetenv("OMP_NUM_THREADS");
}
