// Reductions (sum, mean, max, min over dims), arg-reductions, and softmax / log_softmax.
// Dims may be negative; an empty dim list means "all dims". keepdim keeps reduced dims as
// size 1, as in PyTorch.
#pragma once
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt {

Tensor sum(const Tensor& x);                                     // all elements -> scalar
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);  // gradient split evenly among ties
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// (values, indices) along one dim; indices are int64; gradient flows to the chosen index.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// Sums g over the dims that broadcasting stretched, so the result has `shape` (the adjoint
// of broadcasting; used by every broadcasting op's backward).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace ocrt
