// NCCL communicators on the GPUs present: one rank per GPU, driven from one thread each. With a
// single GPU this is a one-rank communicator (collectives leave values unchanged), which still
// runs NCCL's initialisation, the non-blocking wait and the error paths end to end.
#include <catch2/catch.hpp>

#include <functional>
#include <thread>

#include "runtime/cuda/cuda_glue.h"
#include "runtime/nccl_comm.h"

using namespace ocrt;

namespace {

// One NCCL rank per visible GPU, each driven by its own thread running fn(rank, comm); a rank's
// failure is an exception whose message is reported against that rank. Skipped without NCCL.
void on_every_gpu(const std::function<void(int, Communicator&)>& fn) {
  if (!nccl_built()) {
    WARN("built without NCCL: skipped");
    return;
  }
  const int n = cuda_device_count();
  std::vector<int> gpus;
  for (int i = 0; i < n; ++i) gpus.push_back(i);
  auto comms = make_nccl_communicators(gpus, 60);
  REQUIRE((int)comms.size() == n);
  std::vector<std::string> errors((size_t)n);
  std::vector<std::thread> pool;
  for (int r = 0; r < n; ++r)
    pool.emplace_back([&, r] {
      try {
        fn(r, *comms[(size_t)r]);
      } catch (const std::exception& e) {
        errors[(size_t)r] = e.what();
      }
    });
  for (auto& t : pool) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(errors[(size_t)r].empty());
  }
}

}  // namespace

TEST_CASE("nccl: all-reduce, broadcast and barrier over every visible GPU", "[cuda][nccl]") {
  const int n = cuda_device_count();
  on_every_gpu([&](int r, Communicator& c) {
    const Device d = Device::cuda(r);
    if (c.rank() != r || c.size() != n || c.kind() != "nccl") throw std::runtime_error("bad rank/size/kind");
    Tensor a = Tensor::from_vector(std::vector<float>{(float)r, 1.0f, -2.0f * (float)r}).to(d);
    Tensor m = a.clone(), x = a.clone();
    Tensor w = Tensor::full({1000}, (double)(r + 1), DType::f64, d);
    c.all_reduce({a, w}, ReduceOp::sum);
    c.all_reduce({m}, ReduceOp::mean);
    c.all_reduce({x}, ReduceOp::max);
    const double s = n * (n - 1) / 2.0;
    if (a.to_vector<float>() != std::vector<float>{(float)s, (float)n, (float)(-2 * s)})
      throw std::runtime_error("sum");
    if (w.to_vector<double>() != std::vector<double>(1000, n * (n + 1) / 2.0)) throw std::runtime_error("sum f64");
    if (m.to_vector<float>()[1] != 1.0f) throw std::runtime_error("mean");
    if (x.to_vector<float>()[0] != (float)(n - 1)) throw std::runtime_error("max");
    Tensor b = Tensor::full({7}, (double)(r + 5), DType::f32, d);
    c.broadcast({b}, 0);
    if (b.to_vector<float>() != std::vector<float>(7, 5.0f)) throw std::runtime_error("broadcast");
    c.barrier();
  });
}

TEST_CASE("nccl: started all-reduces on the side stream follow the compute stream and are waited for",
          "[cuda][nccl]") {
  const int n = cuda_device_count();
  on_every_gpu([&](int r, Communicator& c) {
    const Device d = Device::cuda(r);
    // Large buffers written by compute-stream kernels just before the start: the side stream
    // must see the written values, and a later compute-stream read must see the sum.
    std::vector<Tensor> bufs;
    std::vector<std::unique_ptr<PendingCollective>> pending;
    for (int k = 0; k < 4; ++k) {
      Tensor t = Tensor::zeros({1 << 20}, DType::f32, d);
      t.fill_((double)(r + k));
      bufs.push_back(t);
      pending.push_back(c.start_all_reduce(t, ReduceOp::sum));
    }
    // A blocking collective in between, as synchronised BatchNorm makes during backward.
    Tensor mid = Tensor::full({3}, 1.0, DType::f32, d);
    c.all_reduce({mid}, ReduceOp::sum);
    if (mid.to_vector<float>() != std::vector<float>(3, (float)n)) throw std::runtime_error("blocking sum");
    for (int k = 0; k < 4; ++k) {
      pending[(size_t)k]->wait();
      const double want = n * (n - 1) / 2.0 + (double)n * k;
      const auto v = bufs[(size_t)k].to_vector<float>();
      if (v.front() != (float)want || v.back() != (float)want) throw std::runtime_error("started sum");
      if (!pending[(size_t)k]->poll()) throw std::runtime_error("poll after wait");
    }
  });
}

TEST_CASE("nccl: wrong devices are refused and an aborted communicator fails clearly", "[cuda][nccl]") {
  if (!nccl_built()) {
    WARN("built without NCCL: skipped");
    return;
  }
  auto comms = make_nccl_communicators({0}, 30);
  Communicator& c = *comms[0];
  Tensor cpu = Tensor::ones({4});
  CHECK_THROWS_WITH(c.all_reduce({cpu}, ReduceOp::sum), Catch::Contains("cuda:0") && Catch::Contains("cpu"));
  c.abort();
  Tensor g = Tensor::ones({4}).to(Device::cuda(0));
  CHECK_THROWS_WITH(c.all_reduce({g}, ReduceOp::sum), Catch::Contains("aborted"));
  CHECK(!nccl_version().empty());
}
