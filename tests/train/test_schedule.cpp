// Learning-rate schedules (train/schedule.h) against torch's StepLR and OneCycleLR (the values
// of tools/reference/optim.py's fixture) and the cosine schedule's shape by hand. Their
// arguments' checks are in test_optim.cpp, beside the optimizers'.
#include <catch2/catch.hpp>

#include <string>

#include "optim_fixture.h"
#include "train/schedule.h"

using namespace ocrt;
using namespace ocrt::train;
using ocrt::testing::optim_golden;

TEST_CASE("LR schedules match torch's StepLR and OneCycleLR", "[optim]") {
  Schedule step{.kind = ScheduleKind::step, .base_lr = 0.1, .step_size = 7, .gamma = 0.5};
  Schedule one{.kind = ScheduleKind::onecycle, .base_lr = 0.1, .total_steps = 40};
  Schedule one_pct{.kind = ScheduleKind::onecycle, .base_lr = 0.1, .total_steps = 40, .pct_start = 0.25,
                   .div_factor = 10, .final_div_factor = 100};
  auto check = [](const Schedule& s, const std::string& name) {
    s.validate();
    const auto expect = optim_golden("sched." + name).to_vector<double>();
    for (size_t i = 0; i < expect.size(); ++i) {
      INFO(name << " step " << i);
      CHECK(s.lr_at((int64_t)i) == Approx(expect[i]).epsilon(1e-9).margin(1e-15));
    }
  };
  check(step, "step");
  check(one, "onecycle");
  check(one_pct, "onecycle_pct");
}

TEST_CASE("cosine schedule warms up, peaks and decays to min_lr", "[optim]") {
  Schedule s{.kind = ScheduleKind::cosine, .base_lr = 1.0, .total_steps = 110, .warmup_steps = 10, .min_lr = 0.01};
  s.validate();
  CHECK(s.lr_at(0) == Approx(1.0 / 11));
  CHECK(s.lr_at(9) == Approx(10.0 / 11));
  CHECK(s.lr_at(10) == Approx(1.0));
  CHECK(s.lr_at(60) == Approx(0.505));
  CHECK(s.lr_at(110) == Approx(0.01));
  CHECK(s.lr_at(1000) == Approx(0.01));
  for (int64_t i = 11; i < 110; ++i) CHECK(s.lr_at(i) < s.lr_at(i - 1));
}
