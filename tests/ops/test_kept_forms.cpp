// Threads that run one model at once (the predictor's CPU workers share one): each layer's
// transformed weights, kept between calls (ops/cpu/winograd.cpp, winograd_2x2.cpp), are made
// once, not once a thread, and every thread reads the same bits as a lone call does; a call
// that meets a form another thread is making waits for it (KeysInMaking, ops/cpu/fingerprint.h).
#include <catch2/catch.hpp>

#include <omp.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "ops/cpu/fingerprint.h"
#include "ops/cpu/winograd.h"
#include "ops/cpu/winograd_2x2.h"
#include "runtime/tensor.h"

using namespace ocrt;

TEST_CASE("a call that meets a form in making waits until it is made, and only for its own key", "[conv]") {
  std::mutex mu;
  cpu::KeysInMaking<int> making;
  std::atomic<bool> made{false};
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(making.claim(1));
    REQUIRE(making.claim(2));
    REQUIRE_FALSE(making.claim(1));  // one maker a key
  }
  std::thread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    making.wait_made(lock, 1);
    CHECK(made.load());  // key 1's maker had finished
    CHECK(lock.owns_lock());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {
    const cpu::Making<int> release_2(mu, making, 2);  // key 2 made: the waiter waits on
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  made = true;
  { const cpu::Making<int> release_1(mu, making, 1); }
  waiter.join();
  std::lock_guard<std::mutex> lock(mu);
  CHECK(making.claim(1));  // free again
}

#if defined(OCRT_CPU_WINOGRAD)

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  return v;
}

// kThreads threads call conv(w, y) twice each, all starting each call together, on one thread
// apiece and outside autograd, as the predictor's workers do. Returns each thread's outputs of
// its second call.
constexpr int kThreads = 4;
template <class Conv>
std::vector<std::vector<float>> at_once(const Conv& conv, size_t y_size) {
  std::vector<std::vector<float>> outs(kThreads, std::vector<float>(y_size));
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      omp_set_num_threads(1);
      NoGradGuard no_grad;  // grad mode is per thread
      for (int call = 0; call < 2; ++call) {
        sync.arrive_and_wait();
        conv(outs[(size_t)t].data());
      }
    });
  for (auto& th : threads) th.join();
  return outs;
}

}  // namespace

// conv(w) is a call on weights w into y. A lone thread's two calls on a copy of the weights (at
// another address, so kept apart) give the bytes of one kept copy and the expected outputs;
// then kThreads threads on the weights themselves must add one copy in all and give those bits.
template <class Conv>
void check_one_copy(const Conv& conv, const std::vector<float>& w, size_t y_size, size_t (*kept_bytes)()) {
  std::vector<float> lone_w = w, expected(y_size);
  const size_t before_lone = kept_bytes();
  {
    NoGradGuard no_grad;
    for (int call = 0; call < 2; ++call) conv(lone_w.data())(expected.data());
  }
  const size_t one_copy = kept_bytes() - before_lone;
  REQUIRE(one_copy > 0);
  const size_t before = kept_bytes();
  const auto outs = at_once(conv(w.data()), y_size);
  CHECK(kept_bytes() - before == one_copy);
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    CHECK(std::memcmp(outs[(size_t)t].data(), expected.data(), y_size * sizeof(float)) == 0);
  }
}

TEST_CASE("threads running one 3x3 layer at once keep one copy of its transformed weights", "[conv][winograd]") {
  const int64_t N = 2, C = 256, Cout = 256, H = 8, W = 64;
  const std::vector<float> x = random_values((size_t)(N * C * H * W), 1);
  const std::vector<float> w = random_values((size_t)(Cout * C * 9), 2), bias = random_values((size_t)Cout, 3);
  auto conv = [&](const float* weights) {
    return [&, weights](float* y) {
      cpu::winograd_conv2d(x.data(), weights, bias.data(), y, N, C, H, W, Cout, 1, 1);
    };
  };
  check_one_copy(conv, w, (size_t)(N * Cout * H * W), cpu::winograd_kept_bytes);
}

TEST_CASE("threads running one 2x2 layer at once keep one copy of its packed weights", "[conv][winograd]") {
  const int64_t N = 4, C = 256, Cout = 256, H = 2, W = 64;
  const std::vector<float> x = random_values((size_t)(N * C * H * W), 4);
  const std::vector<float> w = random_values((size_t)(Cout * C * 4), 5), bias = random_values((size_t)Cout, 6);
  auto conv = [&](const float* weights) {
    return [&, weights](float* y) {
      cpu::winograd_2x2_conv2d(x.data(), weights, bias.data(), y, N, C, H, W, Cout, 0, 0);
    };
  };
  check_one_copy(conv, w, (size_t)(N * Cout * (H - 1) * (W - 1)), cpu::winograd_2x2_kept_bytes);
}

#endif
