// The detector's training step on the CPU, part by part: where a DBNet step's time goes
// (forward of the backbone, pyramid and heads, the DB loss, backward, the optimizer), for a
// batch of crops of a given size. Random inputs and targets: the cost does not depend on them.
//
//   build/bench_det [--batch 4] [--crop 256] [--steps 5] [--threads N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "models/dbnet.h"
#include "ops/random.h"
#include "runtime/threading.h"
#include "train/det_loss.h"
#include "train/optim.h"
#include "timing.h"

using namespace ocrt;

namespace {
}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 4, crop = 256, steps = 5;
  int threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (f == "--batch") batch = v;
    else if (f == "--crop") crop = v;
    else if (f == "--steps") steps = v;
    else if (f == "--threads") threads = (int)v;
  }
  if (threads > 0) set_num_threads(threads);
  Generator gen(1);
  auto model = nn::make_detector("dbnet", gen);
  model->train(true);
  train::AdamOptions ao;
  train::Adam optim(model->parameters(), ao, true);
  const Tensor x = uniform({batch, 1, crop, crop}, -1, 1, gen);
  std::vector<train::DetTargets> maps((size_t)batch);
  for (auto& m : maps) {
    m.width = m.height = crop;
    const size_t n = (size_t)(crop * crop);
    m.shrink.assign(n, 0);
    for (size_t j = 0; j < n; j += 7) m.shrink[j] = 1;
    m.shrink_mask.assign(n, 1);
    m.thresh.assign(n, 0.5f);
    m.thresh_mask.assign(n, 1);
  }
  std::vector<const train::DetTargets*> ptrs;
  for (auto& m : maps) ptrs.push_back(&m);
  const train::DetLossTargets targets = train::det_loss_targets(ptrs, Device::cpu());
  double t_fwd = 0, t_loss = 0, t_bwd = 0, t_opt = 0;
  for (int64_t s = 0; s < steps + 1; ++s) {
    const double t0 = bench::now_seconds();
    auto out = model->forward_maps(x, true);
    const double t1 = bench::now_seconds();
    auto l = train::det_loss(out.prob, out.thresh, targets);
    l.total.item();
    const double t2 = bench::now_seconds();
    l.total.backward();
    const double t3 = bench::now_seconds();
    optim.step();
    optim.zero_grad();
    const double t4 = bench::now_seconds();
    if (s == 0) continue;  // warm-up
    t_fwd += t1 - t0, t_loss += t2 - t1, t_bwd += t3 - t2, t_opt += t4 - t3;
  }
  const double n = (double)steps;
  std::printf("dbnet step, batch %lld of %lld x %lld, %d threads: forward %.1f ms, loss %.1f ms, backward %.1f ms, "
              "optimizer %.1f ms; %.2f crops/s\n",
              (long long)batch, (long long)crop, (long long)crop, num_threads(), 1000 * t_fwd / n, 1000 * t_loss / n,
              1000 * t_bwd / n, 1000 * t_opt / n, (double)batch * n / (t_fwd + t_loss + t_bwd + t_opt));
}
