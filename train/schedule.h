// Learning-rate schedules. A schedule is a pure function of the step number (0-based: the LR
// used for the update of step s), so it needs no state of its own and resume is exact: a
// checkpoint only has to remember the step.
#pragma once
#include <cstdint>
#include <string>

namespace ocrt::train {

enum class ScheduleKind { constant, step, cosine, onecycle };

struct Schedule {
  ScheduleKind kind = ScheduleKind::constant;
  double base_lr = 1e-3;     // the peak (cosine, onecycle) or starting (step) LR
  int64_t total_steps = 0;   // cosine and onecycle: the length of the run
  // step: multiply by gamma every step_size steps (torch.optim.lr_scheduler.StepLR).
  int64_t step_size = 1000;
  double gamma = 0.1;
  // cosine: linear warm-up from 0 over warmup_steps, then half a cosine from base_lr down to
  // min_lr at total_steps.
  int64_t warmup_steps = 0;
  double min_lr = 0;
  // onecycle (torch.optim.lr_scheduler.OneCycleLR with anneal_strategy 'cos', three_phase
  // false): from base_lr / div_factor up to base_lr over pct_start of the run, then down to
  // base_lr / div_factor / final_div_factor.
  double pct_start = 0.3, div_factor = 25, final_div_factor = 1e4;

  // The LR for step s (0-based). Steps past total_steps keep the last value.
  double lr_at(int64_t s) const;
  // Checks the fields for the chosen kind; throws naming the bad one.
  void validate() const;
};

// "constant", "step", "cosine", "onecycle" (the names ocrt-train's --schedule takes).
ScheduleKind parse_schedule_kind(const std::string& name);
const char* schedule_kind_name(ScheduleKind kind);

}  // namespace ocrt::train
