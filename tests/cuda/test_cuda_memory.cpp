// CUDA plumbing: tensors move to a GPU and back unchanged, device errors name the devices.
#include <catch2/catch.hpp>

#include "ops/elementwise.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/tensor.h"

using namespace ocrt;

TEST_CASE("host -> cuda:0 -> host round trip keeps every value", "[cuda]") {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (float)i * 0.5f - 7.0f;
  Tensor x = Tensor::from_vector(v, {10, 100});
  Tensor g = x.to(Device::cuda(0));
  REQUIRE(g.device() == Device::cuda(0));
  REQUIRE(g.to(Device::cpu()).to_vector<float>() == v);
  // A non-contiguous view is made contiguous on the way.
  REQUIRE(x.t().to(Device::cuda(0)).to(Device::cpu()).to_vector<float>() == x.t().to_vector<float>());
}

TEST_CASE("ops refuse to mix cpu and cuda tensors", "[cuda]") {
  Tensor a = Tensor::ones({3});
  Tensor b = Tensor::ones({3}).to(Device::cuda(0));
  REQUIRE_THROWS_WITH(add(a, b), Catch::Contains("cpu") && Catch::Contains("cuda:0"));
}

TEST_CASE("a GPU index past the last one lists the devices that exist", "[cuda]") {
  int n = cuda_device_count();
  REQUIRE_THROWS_WITH(validate(Device::cuda(n)), Catch::Contains("does not exist") && Catch::Contains("cuda:0"));
}
