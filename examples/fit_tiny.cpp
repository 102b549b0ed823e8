// ocrt-demo: the runtime end to end, in one page. A two-layer network learns to tell the
// two arms of a spiral apart, with nothing but tensors, autograd and plain SGD:
//
//   points (N,2) -> linear(2,H) -> tanh -> linear(H,2) -> log_softmax -> NLL loss
//
// Every step runs the forward pass (recording the tape), backward() (filling .grad of the
// four parameter tensors), and an update under NoGradGuard. The loss falls from ln 2 and the
// accuracy climbs to ~100%. Run: ocrt-demo [--threads N] [--steps N] [--seed N]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "runtime/threading.h"

using namespace ocrt;

namespace {

// Two interleaved spirals: class c, point i at angle t and radius t (with a little noise).
void make_spirals(int per_class, Generator& gen, Tensor& points, Tensor& labels) {
  const int n = 2 * per_class;
  std::vector<float> xy((size_t)n * 2);
  std::vector<int64_t> y((size_t)n);
  std::vector<float> noise = randn({n, 2}, gen).to_vector<float>();
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < per_class; ++i) {
      int k = c * per_class + i;
      float t = 0.25f + 3.0f * (float)i / (float)per_class;  // radius and angle grow together
      float angle = t * 2.2f + (float)c * 3.14159265f;
      xy[2 * k] = t * std::cos(angle) + 0.04f * noise[2 * k];
      xy[2 * k + 1] = t * std::sin(angle) + 0.04f * noise[2 * k + 1];
      y[k] = c;
    }
  points = Tensor::from_vector(xy, {n, 2});
  labels = Tensor::from_vector(y, {n, 1});
}

// A parameter: a leaf tensor drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as PyTorch's Linear.
Tensor parameter(const Shape& shape, int64_t fan_in, Generator& gen) {
  double bound = 1.0 / std::sqrt((double)fan_in);
  return uniform(shape, -bound, bound, gen).set_requires_grad();
}

int usage(const char* prog) {
  std::printf("usage: %s [--threads N] [--steps N] [--seed N] [--hidden N]\n", prog);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 600, hidden = 32;
  uint64_t seed = 1;
  int threads = default_num_threads();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") return usage(argv[0]), 0;
    if (i + 1 >= argc) return usage(argv[0]);
    if (a == "--threads") threads = std::atoi(argv[++i]);
    else if (a == "--steps") steps = std::atoi(argv[++i]);
    else if (a == "--seed") seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--hidden") hidden = std::atoi(argv[++i]);
    else return usage(argv[0]);
  }
  try {
    set_num_threads(threads);
    Generator gen(seed);
    Tensor points, labels;
    make_spirals(200, gen, points, labels);

    Tensor w1 = parameter({hidden, 2}, 2, gen), b1 = parameter({hidden}, 2, gen);
    Tensor w2 = parameter({2, hidden}, hidden, gen), b2 = parameter({2}, hidden, gen);
    std::vector<Tensor> params = {w1, b1, w2, b2};
    const double lr = 0.5;

    std::printf("ocrt demo: %lld points, 2 classes, MLP 2-%d-2, SGD lr %.2f, %d threads\n",
                (long long)points.size(0), hidden, lr, num_threads());
    for (int step = 0; step <= steps; ++step) {
      Tensor logits = linear(tanh(linear(points, w1, b1)), w2, b2);   // (N, 2)
      Tensor logp = log_softmax(logits, 1);
      Tensor loss = neg(mean(gather(logp, 1, labels)));               // negative log-likelihood

      for (auto& p : params) p.zero_grad();
      loss.backward();
      {
        NoGradGuard no_grad;
        for (auto& p : params) add_(p, p.grad(), -lr);
      }
      if (step % 100 == 0 || step == steps) {
        NoGradGuard no_grad;
        Tensor predicted = argmax(logits, 1, true);
        double accuracy = mean(eq(predicted, labels).to(DType::f32)).item();
        std::printf("step %4d  loss %.4f  accuracy %5.1f%%\n", step, loss.item(), 100 * accuracy);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "ocrt-demo: %s\n", e.what());
    return 1;
  }
  return 0;
}
