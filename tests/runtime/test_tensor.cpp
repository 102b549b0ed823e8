// Tensor metadata, views, copies and printing. Devices (test_device.cpp) and the CPU allocator
// underneath (test_cpu_allocator.cpp) have their own tests.
#include <catch2/catch.hpp>

#include "gradcheck.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "runtime/storage.h"
#include "runtime/tensor.h"

using namespace ocrt;

TEST_CASE("factories, metadata and 64-byte alignment", "[tensor]") {
  Tensor t = Tensor::zeros({2, 3, 4});
  REQUIRE(t.shape() == Shape{2, 3, 4});
  REQUIRE(t.strides() == Shape{12, 4, 1});
  REQUIRE(t.numel() == 24);
  REQUIRE(t.dtype() == DType::f32);
  REQUIRE(t.device() == Device::cpu());
  REQUIRE(t.is_contiguous());
  REQUIRE(t.size(-1) == 4);
  REQUIRE_THROWS_WITH(t.size(3), Catch::Contains("out of range"));
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8}) {
    Tensor x = Tensor::full({3, 5}, 7, dt);
    REQUIRE(reinterpret_cast<uintptr_t>(x.raw_data()) % kCpuAlignment == 0);
    REQUIRE(x.to_vector<double>() == std::vector<double>(15, 7.0));
  }
  REQUIRE(Tensor::arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  REQUIRE(Tensor::arange(1.0, 2.0, 0.25, DType::f64).to_vector<double>() == std::vector<double>{1, 1.25, 1.5, 1.75});
  REQUIRE(Tensor::scalar(2.5).item() == 2.5);
  REQUIRE(Tensor::empty({0, 3}).numel() == 0);
  REQUIRE_THROWS_WITH(Tensor::empty({2, -1}), Catch::Contains("negative"));
  REQUIRE_THROWS_WITH(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), Catch::Contains("do not fill"));
  REQUIRE_THROWS_WITH(Tensor::zeros({2}).data<double>(), Catch::Contains("float32"));
  REQUIRE_THROWS_WITH(Tensor().shape(), Catch::Contains("undefined"));
}

TEST_CASE("storage is shared by views and freed with the last one", "[tensor]") {
  size_t before = cpu_bytes_allocated();
  {
    Tensor a = Tensor::zeros({1000});
    Tensor v = a.narrow(0, 10, 5);
    REQUIRE(cpu_bytes_allocated() == before + 4000);
    a = Tensor();
    REQUIRE(cpu_bytes_allocated() == before + 4000);  // v keeps the storage alive
    REQUIRE(v.to_vector<float>() == std::vector<float>(5, 0.f));
  }
  REQUIRE(cpu_bytes_allocated() == before);
}

TEST_CASE("views share storage and compute the right elements", "[tensor][views]") {
  Tensor x = Tensor::arange(24, DType::f32).reshape({2, 3, 4});
  SECTION("permute/transpose do not copy") {
    Tensor p = x.permute({2, 0, 1});
    REQUIRE(p.shape() == Shape{4, 2, 3});
    REQUIRE(p.strides() == Shape{1, 12, 4});
    REQUIRE(p.storage() == x.storage());
    REQUIRE(!p.is_contiguous());
    auto v = p.contiguous().to_vector<float>();
    REQUIRE(v[0] == 0);
    REQUIRE(v[1] == 4);   // p[0,0,1] = x[0,1,0]
    REQUIRE(v[3] == 12);  // p[0,1,0] = x[1,0,0]
    REQUIRE(x.transpose(0, -1).shape() == Shape{4, 3, 2});
    REQUIRE_THROWS_WITH(x.permute({0, 0, 1}), Catch::Contains("twice"));
    REQUIRE_THROWS_WITH(x.permute({0, 1}), Catch::Contains("permute"));
  }
  SECTION("narrow, slice with step, select") {
    REQUIRE(x.narrow(2, 1, 2).contiguous().to_vector<float>() ==
            std::vector<float>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
    REQUIRE(x.slice(2, 0, 4, 3).contiguous().to_vector<float>() ==
            std::vector<float>{0, 3, 4, 7, 8, 11, 12, 15, 16, 19, 20, 23});
    REQUIRE(x.slice(1, -2, 3).shape() == Shape{2, 2, 4});
    REQUIRE(x.select(1, -1).contiguous().to_vector<float>() == std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23});
    REQUIRE_THROWS_WITH(x.narrow(0, 1, 2), Catch::Contains("outside dim 0"));
    REQUIRE_THROWS_WITH(x.select(1, 3), Catch::Contains("out of range"));
    REQUIRE_THROWS_WITH(x.slice(0, 0, 1, 0), Catch::Contains("step"));
  }
  SECTION("reshape views when strides allow, copies otherwise") {
    Tensor r = x.reshape({6, -1});
    REQUIRE(r.shape() == Shape{6, 4});
    REQUIRE(r.storage() == x.storage());
    Tensor t = x.transpose(1, 2);  // (2,4,3) with strides (12,1,4): not a view of (2,12)
    REQUIRE_THROWS_WITH(t.view({2, 12}), Catch::Contains("reshape"));
    Tensor c = t.reshape({2, 12});
    REQUIRE(c.storage() != x.storage());
    REQUIRE(c.to_vector<float>() == t.contiguous().to_vector<float>());
    REQUIRE(t.view({2, 2, 2, 3}).storage() == x.storage());  // splitting a dim is always a view
    REQUIRE_THROWS_WITH(x.reshape({5, -1}), Catch::Contains("cannot infer"));
    REQUIRE_THROWS_WITH(x.reshape({-1, -1}), Catch::Contains("only one"));
    REQUIRE(x.flatten().shape() == Shape{24});
    REQUIRE(x.flatten(1).shape() == Shape{2, 12});
  }
  SECTION("expand, squeeze, unsqueeze") {
    Tensor col = Tensor::arange(3, DType::f32).reshape({3, 1});
    Tensor e = col.expand({2, 3, 4});
    REQUIRE(e.strides() == Shape{0, 1, 0});
    REQUIRE(e.contiguous().to_vector<float>()[5] == 1);
    REQUIRE(col.expand({-1, 5}).shape() == Shape{3, 5});
    REQUIRE_THROWS_WITH(col.expand({4, 4}), Catch::Contains("only size-1"));
    REQUIRE(col.squeeze().shape() == Shape{3});
    REQUIRE(col.squeeze(0).shape() == Shape{3, 1});
    REQUIRE(col.unsqueeze(0).shape() == Shape{1, 3, 1});
    REQUIRE(col.unsqueeze(-1).shape() == Shape{3, 1, 1});
    REQUIRE_THROWS_WITH(col.unsqueeze(3), Catch::Contains("out of range"));
  }
}

TEST_CASE("contiguous, clone, dtype conversion, copy_ and fill_", "[tensor]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1.5, -2.5, 3.25, 4}, {2, 2});
  Tensor c = x.clone();
  REQUIRE(c.storage() != x.storage());
  c.fill_(0);
  REQUIRE(x.to_vector<double>() == std::vector<double>{1.5, -2.5, 3.25, 4});
  REQUIRE(x.to(DType::i32).to_vector<int32_t>() == std::vector<int32_t>{1, -2, 3, 4});
  REQUIRE(x.to(DType::f32).dtype() == DType::f32);
  REQUIRE(x.to(DType::f64).same(x));
  REQUIRE(x.contiguous().same(x));
  REQUIRE(x.to(Device::cpu()).same(x));
  Tensor dst = Tensor::zeros({2, 2}, DType::f64);
  dst.t().copy_(x);  // writes through a transposed view
  REQUIRE(dst.to_vector<double>() == std::vector<double>{1.5, 3.25, -2.5, 4});
  dst.copy_(Tensor::from_vector(std::vector<double>{7, 8}));  // broadcast
  REQUIRE(dst.to_vector<double>() == std::vector<double>{7, 8, 7, 8});
}

TEST_CASE("printing shows shape, dtype, device and values", "[tensor]") {
  Tensor x = Tensor::arange(6, DType::f32).reshape({2, 3});
  std::string s = x.str();
  REQUIRE_THAT(s, Catch::Contains("shape=[2, 3]") && Catch::Contains("float32") && Catch::Contains("cpu"));
  REQUIRE_THAT(s, Catch::Contains("[[0, 1, 2],"));
  Tensor big = Tensor::arange(1000, DType::i64);
  REQUIRE_THAT(big.str(), Catch::Contains("...") && Catch::Contains("999"));
  Tensor g = Tensor::ones({2}).set_requires_grad();
  REQUIRE_THAT(mul(g, 2.0).str(), Catch::Contains("grad_fn=mul"));
}
