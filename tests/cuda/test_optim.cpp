// The fused Adam / AdamW step (ops/backend.h's adam_step) on CUDA against the CPU: both round
// every operation to the parameter's dtype in the same order (ops/cpu/optim.cpp is compiled
// without FMA contraction, ops/cuda/optim.cu uses the round-to-nearest intrinsics), so the
// parameters and moments after several steps must be equal bit for bit, not merely close.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "cuda/parity.h"
#include "ops/backend.h"
#include "train/optim.h"

using namespace ocrt;
using namespace ocrt::parity;
using ocrt::train::Adam;
using ocrt::train::AdamOptions;

TEST_CASE("Adam and AdamW steps on CUDA equal the CPU's bit for bit", "[cuda][optim]") {
  ParityEnv env;
  for (DType dtype : {DType::f32, DType::f64})
    for (bool decoupled : {false, true}) {
      INFO(dtype_name(dtype) << (decoupled ? " AdamW" : " Adam") << " (seed " << env.seed << ")");
      // A large parameter (many blocks) and a small one (one block, a ragged tail).
      const std::vector<Shape> shapes{{512, 300}, {7, 3}};
      std::vector<Tensor> cpu, gpu;
      for (const Shape& s : shapes) {
        const Tensor init = env.uniform(s, -1, 1, dtype);
        cpu.push_back(init.clone());
        gpu.push_back(init.to(kGpu));
      }
      for (Tensor& t : cpu) t.set_requires_grad(true);
      for (Tensor& t : gpu) t.set_requires_grad(true);
      const AdamOptions o{.lr = 0.003, .beta1 = 0.9, .beta2 = 0.995, .eps = 1e-8, .weight_decay = 0.02};
      Adam on_cpu(cpu, o, decoupled), on_gpu(gpu, o, decoupled);
      for (int step = 0; step < 5; ++step) {
        for (size_t k = 0; k < shapes.size(); ++k) {
          const Tensor g = env.uniform(shapes[k], -3, 3, dtype);
          cpu[k].set_grad(g.clone());
          gpu[k].set_grad(g.to(kGpu));
        }
        on_cpu.step();
        on_gpu.step();
      }
      const auto sc = on_cpu.state_dict(), sg = on_gpu.state_dict();
      for (size_t k = 0; k < shapes.size(); ++k) {
        INFO("parameter " << k);
        CHECK(gpu[k].detach().to(Device::cpu()).to_vector<double>() == cpu[k].detach().to_vector<double>());
        for (const char* buf : {"exp_avg", "exp_avg_sq"}) {
          const std::string key = std::to_string(k) + "." + buf;
          CHECK(sg.at(key).to(Device::cpu()).to_vector<double>() == sc.at(key).to_vector<double>());
        }
      }
    }
}

TEST_CASE("a gradient's sum of squares on CUDA matches the CPU's in float64", "[cuda][optim]") {
  // ops/backend.h's sum_squares: the same float64 products, added in another order, so within
  // n * 2^-52 of the sum; one block's worth, many blocks and a ragged tail; empty gives 0.
  ParityEnv env;
  for (DType dtype : {DType::f32, DType::f64})
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(300007)}) {
      INFO(dtype_name(dtype) << ", " << n << " values (seed " << env.seed << ")");
      const Tensor x = env.uniform({n}, -2, 2, dtype);
      const double cpu = layer_backend(Device::cpu()).sum_squares(x);
      const double gpu = layer_backend(kGpu).sum_squares(x.to(kGpu));
      CHECK(std::abs(gpu - cpu) <= (double)n * std::ldexp(1.0, -52) * cpu);
      CHECK(gpu == layer_backend(kGpu).sum_squares(x.to(kGpu)));  // the same grid, the same sum
    }
  CHECK(layer_backend(kGpu).sum_squares(Tensor::empty({0}, DType::f32, kGpu)) == 0);
}
