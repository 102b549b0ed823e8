// Gradient synchronisation for data-parallel training: after the backward pass, every replica
// holds the gradient of its own shard of the global batch; summing them over replicas gives the
// gradient of the whole batch (the trainer scales each replica's loss by its share of the batch,
// so the sum is exactly the full-batch mean).
//
// Parameters are grouped into buckets of about `bucket_bytes`, in reverse registration order
// (roughly the order in which the backward pass finishes them); each bucket is flattened into
// one contiguous buffer and reduced with one collective, so a model with hundreds of small
// tensors costs a few large transfers instead of hundreds of small ones. A parameter that got
// no gradient in a step (an unused branch) contributes zeros and still receives the sum: every
// replica makes the same collectives with the same sizes whatever its data did.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/comm.h"
#include "runtime/tensor.h"

namespace ocrt::train {

struct GradBucket {
  std::vector<size_t> params;  // indices into the parameter list
  int64_t numel = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();
};

class GradSync {
 public:
  // params: the optimizer's parameter list (the same order on every replica).
  GradSync(std::vector<Tensor> params, int64_t bucket_bytes = 4 << 20);
  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // Sums every parameter's .grad over comm's ranks, in place (a no-op for one rank).
  void all_reduce(Communicator& comm);

 private:
  std::vector<Tensor> params_;
  std::vector<GradBucket> buckets_;
  std::vector<Tensor> flat_;  // one buffer per bucket, reused every step
};

// Every parameter and buffer of a model from `root` (the start of a run and a resume), so that
// all replicas begin identical whatever their seeds or files said.
void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors, int root = 0);

}  // namespace ocrt::train
