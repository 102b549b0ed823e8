// The nn building blocks (see layers.h).
#include "models/layers.h"

#include "ops/linalg.h"
#include "ops/random.h"

namespace ocrt::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator& gen)
    : in_features(in_features), out_features(out_features) {
  OCRT_CHECK(in_features >= 1 && out_features >= 1, "Linear: in_features and out_features must be >= 1, got ",
             in_features, " and ", out_features);
  weight = init_uniform_fan_in({out_features, in_features}, in_features, gen);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = init_uniform_fan_in({out_features}, in_features, gen);
    register_parameter("bias", &bias);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

Dropout::Dropout(double p, uint64_t seed) : p(p), gen_(seed) {
  OCRT_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training(), gen_); }

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& [name, child] : children()) y = child->forward(y);
  return y;
}

Module& Sequential::operator[](int64_t i) const {
  OCRT_CHECK(i >= 0 && i < size_, "Sequential: index ", i, " out of range for ", size_, " modules");
  return *children()[(size_t)i].second;
}

}  // namespace ocrt::nn
