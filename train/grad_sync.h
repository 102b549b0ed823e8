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
//
// Overlap with the backward pass: between begin() and finish(), a LeafGradHook (autograd.h)
// tells GradSync when each parameter's gradient is final; once every parameter of the next
// bucket is, the bucket is packed and its all-reduce started (non-blocking under MPI and NCCL),
// while backward goes on with the layers nearer the input. Buckets start strictly in order, so
// every rank starts the same collectives in the same order; finish() starts those still
// waiting (a parameter the pass never reached), waits for all, and unpacks the sums.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "runtime/autograd.h"
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
  // Sums every parameter's .grad over comm's ranks, in place (a no-op for one rank), after the
  // backward pass.
  void all_reduce(Communicator& comm);

  // The overlapped form: begin(comm); loss.backward(); finish(); on one thread. Same result as
  // backward then all_reduce (the same sums of the same buffers).
  void begin(Communicator& comm);
  void finish();
  // How many buckets had started before finish() in the last overlapped step (for tests and
  // logs: 0 means nothing overlapped).
  int started_during_backward() const { return started_early_; }

 private:
  void on_leaf_ready(const TensorImpl* leaf);
  void start_ready_buckets();
  void start(size_t bucket);

  std::vector<Tensor> params_;
  std::vector<GradBucket> buckets_;
  std::vector<size_t> bucket_of_;                        // parameter -> bucket
  std::unordered_map<const TensorImpl*, size_t> index_;  // parameter -> its index
  std::vector<Tensor> flat_;                             // one buffer per bucket, reused every step

  // One step's state.
  Communicator* comm_ = nullptr;
  std::optional<LeafGradHook> hook_;
  std::vector<char> ready_;          // per parameter
  std::vector<int64_t> missing_;     // per bucket: parameters not ready yet
  std::vector<std::unique_ptr<PendingCollective>> pending_;
  size_t next_ = 0;                  // the next bucket to start
  int started_early_ = 0;
};

// Every parameter and buffer of a model from `root` (the start of a run and a resume), so that
// all replicas begin identical whatever their seeds or files said.
void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors, int root = 0);

}  // namespace ocrt::train
