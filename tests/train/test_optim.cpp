// Optimizers and gradient clipping against torch.optim (the schedules are in
// test_schedule.cpp): the fixture written by tools/reference/optim.py holds initial parameters,
// the gradient of every step and the parameters after every step; here the same steps run
// through ocrt and are compared.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>

#include "gradcheck.h"
#include "optim_fixture.h"
#include "train/optim.h"
#include "train/schedule.h"
#include "runtime/threading.h"

using namespace ocrt;
using namespace ocrt::train;
using ocrt::testing::optim_golden;
using ocrt::testing::require_close;

namespace {

std::string key(const std::string& name, int k, const char* what, int s) {
  return name + ".p" + std::to_string(k) + "." + what + std::to_string(s);
}

void run_case(const std::string& name, const std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>& make) {
  INFO("optimizer case " << name);
  std::vector<Tensor> params;
  for (int k = 0; k < 2; ++k) {
    Tensor p = optim_golden(name + ".p" + std::to_string(k) + ".init").clone();
    p.set_requires_grad(true);
    params.push_back(p);
  }
  auto opt = make(params);
  for (int s = 0; s < 5; ++s) {
    for (int k = 0; k < 2; ++k) params[k].set_grad(optim_golden(key(name, k, "grad", s)).clone());
    opt->step();
    for (int k = 0; k < 2; ++k)
      require_close(params[k], optim_golden(key(name, k, "step", s)), 1e-5, 1e-6,
                    "param " + std::to_string(k) + " after step " + std::to_string(s));
  }
  CHECK(opt->steps() == 5);
}

}  // namespace

TEST_CASE("SGD matches torch.optim.SGD (plain, momentum + dampening + weight decay, Nesterov)", "[optim]") {
  run_case("sgd_plain", [](std::vector<Tensor> p) { return std::make_unique<SGD>(p, SGDOptions{.lr = 0.1}); });
  run_case("sgd_momentum_wd", [](std::vector<Tensor> p) {
    return std::make_unique<SGD>(p, SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  });
  run_case("sgd_nesterov", [](std::vector<Tensor> p) {
    return std::make_unique<SGD>(p, SGDOptions{.lr = 0.05, .momentum = 0.8, .weight_decay = 0.001, .nesterov = true});
  });
}

TEST_CASE("Adam and AdamW match torch.optim", "[optim]") {
  run_case("adam", [](std::vector<Tensor> p) {
    return std::make_unique<Adam>(p, AdamOptions{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-6});
  });
  run_case("adam_wd", [](std::vector<Tensor> p) {
    return std::make_unique<Adam>(p, AdamOptions{.lr = 0.01, .weight_decay = 0.1});
  });
  run_case("adamw", [](std::vector<Tensor> p) {
    return std::make_unique<Adam>(p, AdamOptions{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .weight_decay = 0.05}, true);
  });
}

TEST_CASE("an optimizer restored from its state_dict continues exactly", "[optim]") {
  // Five steps straight through, against three steps, save, and a fresh optimizer that loads
  // the saved state and takes the last two.
  auto make_params = [] {
    std::vector<Tensor> p{optim_golden("adamw.p0.init").clone(), optim_golden("adamw.p1.init").clone()};
    for (auto& t : p) t.set_requires_grad(true);
    return p;
  };
  AdamOptions o{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .weight_decay = 0.05};
  auto a = make_params();
  Adam opt_a(a, o, true);
  nn::StateDict saved;
  std::vector<Tensor> saved_params;
  for (int s = 0; s < 5; ++s) {
    if (s == 3) {
      saved = opt_a.state_dict();
      for (auto& t : a) saved_params.push_back(t.detach().clone());
    }
    for (int k = 0; k < 2; ++k) a[k].set_grad(optim_golden(key("adamw", k, "grad", s)).clone());
    opt_a.step();
  }
  std::vector<Tensor> b;
  for (auto& t : saved_params) {
    Tensor p = t.clone();
    p.set_requires_grad(true);
    b.push_back(p);
  }
  Adam opt_b(b, o, true);
  opt_b.load_state_dict(saved);
  CHECK(opt_b.steps() == 3);
  for (int s = 3; s < 5; ++s) {
    for (int k = 0; k < 2; ++k) b[k].set_grad(optim_golden(key("adamw", k, "grad", s)).clone());
    opt_b.step();
  }
  for (int k = 0; k < 2; ++k) CHECK(b[k].to_vector<float>() == a[k].to_vector<float>());

  nn::StateDict wrong = saved;
  wrong["0.exp_avg"] = Tensor::zeros({2, 2});
  CHECK_THROWS_WITH(opt_b.load_state_dict(wrong), Catch::Contains("has shape [2, 2] but parameter 0 has shape [3, 4]"));
  wrong = saved;
  wrong["7.exp_avg"] = Tensor::zeros({3, 4});
  CHECK_THROWS_WITH(opt_b.load_state_dict(wrong), Catch::Contains("only 2 parameters"));
}

TEST_CASE("clip_grad_norm matches torch.nn.utils.clip_grad_norm_", "[optim]") {
  std::vector<Tensor> params{Tensor::zeros({3, 4}), Tensor::zeros({7})};
  for (int k = 0; k < 2; ++k) {
    params[k].set_requires_grad(true);
    params[k].set_grad(optim_golden("clip.grad" + std::to_string(k)).clone());
  }
  const double norm = clip_grad_norm(params, 1.5);
  CHECK(norm == Approx(optim_golden("clip.norm").item()).epsilon(1e-6));
  for (int k = 0; k < 2; ++k) require_close(params[k].grad(), optim_golden("clip.clipped" + std::to_string(k)), 1e-5, 1e-7);
  CHECK(grad_norm(params) == Approx(1.5).epsilon(1e-5));
  // A non-finite gradient: the norm says so and nothing is scaled.
  params[1].set_grad(Tensor::full({7}, INFINITY));
  const auto before = params[0].grad().to_vector<float>();
  CHECK(std::isinf(clip_grad_norm(params, 1.0)));
  CHECK(params[0].grad().to_vector<float>() == before);
}

TEST_CASE("a gradient's norm is its float64 sum of squares, read in place, the same on any thread count", "[optim]") {
  // 1,000,003 values (chunks of 32768 and a ragged tail) of both signs, from 1e-3 to 1e3: the
  // float64 sum in order is the reference; a sum of n products reordered differs by at most
  // n * 2^-52 of it (each product is exact in float64 for float32 values).
  const int64_t n = 1000003;
  Tensor g = Tensor::empty({n});
  float* d = g.data<float>();
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    d[i] = (float)((i % 2 ? -1.0 : 1.0) * std::pow(10.0, -3.0 + 6.0 * (double)((i * 7919) % 1000) / 1000.0));
    want += (double)d[i] * (double)d[i];
  }
  Tensor p = Tensor::zeros({n});
  p.set_requires_grad(true);
  p.set_grad(g);
  const int threads = num_threads();
  set_num_threads(1);
  const double one = grad_norm({p});
  set_num_threads(2);
  const double two = grad_norm({p});
  set_num_threads(threads);
  CHECK(one == two);
  CHECK(std::abs(one * one - want) <= (double)n * std::ldexp(1.0, -52) * want);
  // A gradient that is not contiguous (a transposed view) is made contiguous first: the same norm.
  Tensor q = Tensor::zeros({1000, 1000});
  q.set_requires_grad(true);
  q.set_grad(g.narrow(0, 0, 1000000).reshape({1000, 1000}).transpose(0, 1));
  Tensor r = Tensor::zeros({1000000});
  r.set_requires_grad(true);
  r.set_grad(g.narrow(0, 0, 1000000).clone());
  CHECK(grad_norm({q}) == Approx(grad_norm({r})).epsilon(1e-12));
}

TEST_CASE("optimizer and schedule arguments are validated", "[optim]") {
  Tensor w = Tensor::zeros({2});
  w.set_requires_grad(true);
  std::vector<Tensor> p{w};
  CHECK_THROWS_WITH(SGD(p, SGDOptions{.lr = -1}), Catch::Contains("learning rate must be finite and >= 0"));
  CHECK_THROWS_WITH(SGD(p, SGDOptions{.lr = 0.1, .nesterov = true}), Catch::Contains("Nesterov momentum needs momentum > 0"));
  CHECK_THROWS_WITH(Adam(p, AdamOptions{.beta1 = 1.0}), Catch::Contains("betas must be in [0, 1)"));
  CHECK_THROWS_WITH(SGD({}, SGDOptions{}), Catch::Contains("no parameters"));
  CHECK_THROWS_WITH(parse_schedule_kind("linear"), Catch::Contains("unknown LR schedule 'linear'"));
  CHECK_THROWS_WITH((Schedule{.kind = ScheduleKind::cosine, .total_steps = 10, .warmup_steps = 10}.validate()),
                    Catch::Contains("warmup_steps (10) must be in [0, total_steps = 10)"));
  CHECK_THROWS_WITH((Schedule{.kind = ScheduleKind::onecycle}.validate()), Catch::Contains("at least 2 total steps"));
  // A parameter without a gradient is skipped, as in PyTorch.
  SGD sgd(p, SGDOptions{.lr = 0.1});
  sgd.step();
  CHECK(w.to_vector<float>() == std::vector<float>{0, 0});
}

TEST_CASE("Adam's one-kernel step equals the composite of elementwise ops bit for bit", "[optim]") {
  // The same parameters and gradients twice: one optimizer sees contiguous gradients (the fused
  // adam_step kernel), the other the same values through a transposed view, which is not
  // contiguous (the composite of elementwise ops, the reference the kernel rounds like).
  for (DType dtype : {DType::f32, DType::f64})
    for (bool decoupled : {false, true})
      for (double wd : {0.0, 0.05}) {
        INFO(dtype_name(dtype) << (decoupled ? " AdamW" : " Adam") << " weight decay " << wd);
        // 300 x 250 = 75,000 values: over the CPU kernel's grain, so threads split it.
        const Tensor init = ocrt::testing::det_uniform({300, 250}, 11, -1, 1, dtype);
        std::vector<Tensor> fused{init.clone()}, composite{init.clone()};
        fused[0].set_requires_grad(true);
        composite[0].set_requires_grad(true);
        const AdamOptions o{.lr = 0.01, .beta1 = 0.85, .beta2 = 0.97, .eps = 1e-7, .weight_decay = wd};
        Adam a(fused, o, decoupled), b(composite, o, decoupled);
        for (int s = 0; s < 4; ++s) {
          const Tensor g = ocrt::testing::det_uniform({300, 250}, 100 + (uint64_t)s, -2, 2, dtype);
          fused[0].set_grad(g.clone());
          const Tensor g_t = g.t().contiguous().t();  // the same values, column-major
          REQUIRE_FALSE(g_t.is_contiguous());
          composite[0].set_grad(g_t);
          a.step();
          b.step();
        }
        const std::vector<double> x = fused[0].detach().to_vector<double>(), y = composite[0].detach().to_vector<double>();
        int64_t differ = 0;
        for (size_t i = 0; i < x.size(); ++i) differ += x[i] != y[i];
        CHECK(differ == 0);
        CHECK(a.state_dict().at("0.exp_avg_sq").to_vector<double>() ==
              b.state_dict().at("0.exp_avg_sq").to_vector<double>());
      }
}
