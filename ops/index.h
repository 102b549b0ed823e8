// Indexing by integer tensors: index_select, gather, and embedding lookup. Indices are int64
// or int32 (converted), on the same device as the data; every index is range-checked and an
// out-of-range one is reported with its position and value.
#pragma once
#include "runtime/tensor.h"

namespace ocrt {

// out = x with dim restricted to the rows in index (1-D), in that order (repeats allowed).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j][k] = x[index[i][j][k]][j][k] for dim 0 (and likewise for other dims); index has
// x's rank and sizes <= x's in the other dims, as torch.gather.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// weight (num_embeddings, dim), indices of any shape -> indices.shape + (dim). If padding_idx
// >= 0, that row receives no gradient (as torch.nn.functional.embedding).
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);

}  // namespace ocrt
