// The dense-prediction losses (ops/loss.h) on CUDA against the CPU: they are composed of
// elementwise ops and reductions, so this checks the composition on both backends, forward and
// every input's gradient (a detector's loss maps are large: reductions over 100k elements).
#include <catch2/catch.hpp>

#include <vector>

#include "cuda/parity.h"
#include "ops/loss.h"

using namespace ocrt;
using namespace ocrt::parity;

TEST_CASE("binary_cross_entropy_with_logits and dice_loss on CUDA match the CPU", "[cuda][loss]") {
  {
    ParityEnv env;
    check_op(env, "bce mean, a detector-sized map", {env.uniform({4, 1, 160, 160}, -12, 12), env.uniform({4, 1, 160, 160}, 0, 1)},
             [](const std::vector<Tensor>& t) { return std::vector<Tensor>{binary_cross_entropy_with_logits(t[0], t[1])}; },
             kTolElementwise);
  }
  {
    ParityEnv env;
    check_op(env, "bce with a weight, none", {env.uniform({2, 3, 8, 9}, -5, 5), env.uniform({2, 3, 8, 9}, 0, 1),
                                              env.uniform({2, 3, 8, 9}, 0, 2)},
             [](const std::vector<Tensor>& t) {
               return std::vector<Tensor>{binary_cross_entropy_with_logits(t[0], t[1], t[2], Reduction::none)};
             },
             kTolElementwise);
  }
  {
    ParityEnv env;
    check_op(env, "dice with a mask", {env.uniform({4, 1, 96, 96}, 0, 1), env.uniform({4, 1, 96, 96}, 0, 1),
                                       env.uniform({4, 1, 96, 96}, 0, 1)},
             [](const std::vector<Tensor>& t) { return std::vector<Tensor>{dice_loss(t[0], t[1], t[2])}; },
             kTolElementwise);
  }
}
