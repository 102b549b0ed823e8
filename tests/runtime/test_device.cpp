// Devices (runtime/device.h): parsing, validation, device lists, a CUDA device asked for
// where there is none, and a GPU's turn (DeviceTurn) taken by one thread at a time.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/cuda/cuda_glue.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

using namespace ocrt;

TEST_CASE("device parsing and validation", "[device]") {
  REQUIRE(Device::parse("cpu") == Device::cpu());
  REQUIRE(Device::parse("cuda:3") == Device::cuda(3));
  REQUIRE(Device::parse("cuda:12").str() == "cuda:12");
  for (const char* bad : {"gpu", "cuda", "cuda:", "cuda:x", "cuda:-1", "CPU", "", "cuda:0 "})
    REQUIRE_THROWS_WITH(Device::parse(bad), Catch::Contains("invalid device") && Catch::Contains("cuda:N"));
  REQUIRE_NOTHROW(validate(Device::cpu()));
  // A GPU index that cannot exist lists what does.
  REQUIRE_THROWS_WITH(validate(Device::cuda(999)), Catch::Contains("cuda:999") && Catch::Contains("cpu"));
  REQUIRE(parse_device_list("cpu").size() == 1);
  REQUIRE_THROWS_WITH(parse_device_list("cpu,cpu"), Catch::Contains("twice"));
  REQUIRE_THROWS_WITH(parse_device_list(""), Catch::Contains("empty"));
}

TEST_CASE("cuda devices fail clearly when absent", "[device]") {
  if (cuda_device_count() > 0) return;  // covered by the cuda tests on a GPU machine
  REQUIRE_THROWS_WITH(Tensor::zeros({2}, DType::f32, Device::cuda(0)), Catch::Contains("cuda:0"));
  REQUIRE_THROWS_WITH(Tensor::zeros({2}).to(Device::cuda(0)), Catch::Contains("cuda:0"));
}

TEST_CASE("a GPU's turn is held by one thread at a time, a CPU takes none", "[device]") {
  // No CUDA call is made: the turn is a lock per GPU index, so this runs without a GPU.
  const DeviceTurn cpu_turn(Device::cpu());
  CHECK_FALSE(cpu_turn.holds());
  {
    const DeviceTurn again(Device::cpu());  // the CPU never waits
    CHECK_FALSE(again.holds());
  }
  std::atomic<int> inside{0}, most{0}, turns{0};
  auto take_turns = [&](int gpu) {
    for (int i = 0; i < 50; ++i) {
      const DeviceTurn turn(Device::cuda(gpu));
      CHECK(turn.holds());
      const int now = ++inside;
      for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      --inside;
      ++turns;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(take_turns, 3);
  for (auto& t : threads) t.join();
  CHECK(turns == 200);
  CHECK(most == 1);  // never two threads in cuda:3's turn at once
  // Different GPUs have different turns: cuda:4's is free while cuda:5's is held.
  const DeviceTurn five(Device::cuda(5));
  std::thread other([] {
    const DeviceTurn four(Device::cuda(4));
    CHECK(four.holds());
  });
  other.join();
  CHECK_THROWS_WITH(DeviceTurn(Device::cuda(64)), Catch::Contains("GPU index out of range"));
}
