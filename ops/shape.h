// Joining and splitting tensors. The single-tensor views (reshape, permute, narrow, expand,
// ...) are Tensor members, declared in runtime/tensor.h and defined in runtime/tensor_view.cpp.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace ocrt {

// All tensors must agree in every dim but `dim`, and share dtype and device.
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim);
// All tensors must have the same shape; a new dim is inserted at `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Views of consecutive pieces of `split_size` (the last may be smaller), as torch.split.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
// Views of pieces with the given sizes, which must add up to x.size(dim).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// `chunks` nearly equal pieces (as torch.chunk).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);

}  // namespace ocrt
