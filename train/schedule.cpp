// Learning-rate schedules as functions of the step (see schedule.h).
#include "train/schedule.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace ocrt::train {

namespace {
constexpr double kPi = 3.14159265358979323846;

// Cosine interpolation from a (at pct 0) to b (at pct 1), as OneCycleLR's _annealing_cos.
double anneal_cos(double a, double b, double pct) { return b + (a - b) / 2.0 * (std::cos(kPi * pct) + 1); }
}  // namespace

void Schedule::validate() const {
  OCRT_CHECK(std::isfinite(base_lr) && base_lr >= 0, "schedule: the learning rate must be finite and >= 0, got ",
             base_lr);
  switch (kind) {
    case ScheduleKind::constant: break;
    case ScheduleKind::step:
      OCRT_CHECK(step_size >= 1, "schedule step: step_size must be >= 1, got ", step_size);
      OCRT_CHECK(gamma > 0, "schedule step: gamma must be > 0, got ", gamma);
      break;
    case ScheduleKind::cosine:
      OCRT_CHECK(total_steps >= 1, "schedule cosine: needs the total number of steps (got ", total_steps, ")");
      OCRT_CHECK(warmup_steps >= 0 && warmup_steps < total_steps, "schedule cosine: warmup_steps (", warmup_steps,
                 ") must be in [0, total_steps = ", total_steps, ")");
      OCRT_CHECK(min_lr >= 0 && min_lr <= base_lr, "schedule cosine: min_lr (", min_lr, ") must be in [0, lr = ",
                 base_lr, "]");
      break;
    case ScheduleKind::onecycle:
      OCRT_CHECK(total_steps >= 2, "schedule onecycle: needs at least 2 total steps (got ", total_steps, ")");
      OCRT_CHECK(pct_start > 0 && pct_start < 1, "schedule onecycle: pct_start must be in (0, 1), got ", pct_start);
      OCRT_CHECK(div_factor > 0 && final_div_factor > 0, "schedule onecycle: div factors must be > 0");
      break;
  }
}

double Schedule::lr_at(int64_t s) const {
  s = std::max<int64_t>(s, 0);
  switch (kind) {
    case ScheduleKind::constant: return base_lr;
    case ScheduleKind::step: return base_lr * std::pow(gamma, (double)(s / step_size));
    case ScheduleKind::cosine: {
      // Warm-up reaches base_lr at step warmup_steps (step 0 already gets a small, non-zero LR).
      if (s < warmup_steps) return base_lr * (double)(s + 1) / (double)(warmup_steps + 1);
      const double span = (double)std::max<int64_t>(total_steps - warmup_steps, 1);
      const double pct = std::min(1.0, (double)(s - warmup_steps) / span);
      return anneal_cos(base_lr, min_lr, pct);
    }
    case ScheduleKind::onecycle: {
      // OneCycleLR's two phases end at steps pct_start * total - 1 and total - 1.
      const double initial = base_lr / div_factor, final_lr = initial / final_div_factor;
      const double end_up = pct_start * (double)total_steps - 1, end_down = (double)total_steps - 1;
      const double step = std::min((double)s, end_down);
      if (step <= end_up) return anneal_cos(initial, base_lr, end_up > 0 ? step / end_up : 1.0);
      return anneal_cos(base_lr, final_lr, (step - end_up) / (end_down - end_up));
    }
  }
  return base_lr;
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "constant") return ScheduleKind::constant;
  if (name == "step") return ScheduleKind::step;
  if (name == "cosine") return ScheduleKind::cosine;
  if (name == "onecycle") return ScheduleKind::onecycle;
  fail("unknown LR schedule '", name, "' (expected constant, step, cosine or onecycle)");
}

const char* schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::step: return "step";
    case ScheduleKind::cosine: return "cosine";
    case ScheduleKind::onecycle: return "onecycle";
  }
  return "?";
}

}  // namespace ocrt::train
