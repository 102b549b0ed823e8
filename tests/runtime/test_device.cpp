// Devices (runtime/device.h): parsing, validation, device lists, and a CUDA device asked for
// where there is none.
#include <catch2/catch.hpp>

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
