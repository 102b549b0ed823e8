// Thread communicators (runtime/comm.h): the collectives in rank order, and a rank that never
// joins failing the others within the timeout. MPI's are in tests/train/test_distributed.cpp
// (mpirun), NCCL's in tests/cuda/test_nccl.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "golden_runner.h"
#include "models/crnn.h"
#include "ops/conv.h"
#include "ops/ctc.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "runtime/comm.h"
#include "temp_dir.h"
#include "train/replica_fixture.h"
#include "twin_comm.h"
#include "train/grad_sync.h"
#include "train/loader.h"
#include "train/trainer.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;
using ocrt::testing::on_threads;

TEST_CASE("thread communicators: sum, mean and max in rank order, broadcast, barrier", "[distributed]") {
  const int n = 3;
  std::vector<std::vector<float>> got(n);
  on_threads(n, 30, [&](int r, Communicator& c) {
    CHECK(c.size() == n);
    CHECK(c.rank() == r);
    Tensor a = Tensor::from_vector(std::vector<float>{(float)r, 1.0f, -(float)r, 10.0f * (float)r, 0.5f});
    Tensor m = a.clone(), x = a.clone();
    c.all_reduce({a}, ReduceOp::sum);
    c.all_reduce({m}, ReduceOp::mean);
    c.all_reduce({x}, ReduceOp::max);
    CHECK(a.to_vector<float>() == std::vector<float>{3, 3, -3, 30, 1.5f});
    CHECK(m.to_vector<float>() == std::vector<float>{1, 1, -1, 10, 0.5f});
    CHECK(x.to_vector<float>() == std::vector<float>{2, 1, 0, 20, 0.5f});
    Tensor b = Tensor::full({4}, (double)(r + 1), DType::f64);
    c.broadcast({b}, 2);
    CHECK(b.to_vector<double>() == std::vector<double>(4, 3.0));
    c.barrier();
    CHECK(c.all_reduce_values({1.0, (double)r}, ReduceOp::sum, Device::cpu()) == std::vector<double>{3.0, 3.0});
  });
}

TEST_CASE("thread communicators: a rank that never joins makes the others fail within the timeout", "[distributed]") {
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    on_threads(2, 1.0, [&](int r, Communicator& c) {
      if (r == 1) return;  // never joins the collective
      Tensor a = Tensor::ones({3});
      c.all_reduce({a}, ReduceOp::sum);
    });
  } catch (const std::exception& e) {
    what = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_THAT(what, Catch::Contains("rank 0") && Catch::Contains("did not complete within 1 s"));
  CHECK(waited < 10);
  // Mismatched sizes are an error too, not a silent partial sum.
  CHECK_THROWS_WITH(on_threads(2, 5,
                               [&](int r, Communicator& c) {
                                 Tensor a = Tensor::ones({r == 0 ? 3 : 4});
                                 c.all_reduce({a}, ReduceOp::sum);
                               }),
                    Catch::Contains("differ between ranks"));
}
