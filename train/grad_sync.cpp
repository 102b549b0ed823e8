// Gradient buckets (see grad_sync.h).
#include "train/grad_sync.h"

#include "ops/shape.h"
#include "runtime/error.h"

namespace ocrt::train {

GradSync::GradSync(std::vector<Tensor> params, int64_t bucket_bytes) : params_(std::move(params)) {
  OCRT_CHECK(bucket_bytes >= 1, "GradSync: bucket_bytes must be >= 1");
  GradBucket cur;
  int64_t cur_bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    OCRT_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64, "GradSync: parameter ", k, " is ",
               dtype_name(p.dtype()), "; only float parameters can be trained");
    const int64_t bytes = p.numel() * (int64_t)p.itemsize();
    const bool fits = cur.params.empty() ||
                      (p.dtype() == cur.dtype && p.device() == cur.device && cur_bytes + bytes <= bucket_bytes);
    if (!fits) {
      buckets_.push_back(std::move(cur));
      cur = GradBucket();
      cur_bytes = 0;
    }
    if (cur.params.empty()) {
      cur.dtype = p.dtype();
      cur.device = p.device();
    }
    cur.params.push_back(k);
    cur.numel += p.numel();
    cur_bytes += bytes;
  }
  if (!cur.params.empty()) buckets_.push_back(std::move(cur));
  bucket_of_.resize(params_.size());
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t k : buckets_[b].params) bucket_of_[k] = b;
  for (size_t k = 0; k < params_.size(); ++k) index_[params_[k].impl()] = k;
}

void GradSync::all_reduce(Communicator& comm) {
  begin(comm);
  finish();
}

void GradSync::begin(Communicator& comm) {
  OCRT_CHECK(!comm_, "GradSync::begin: the previous step was not finished");
  started_early_ = 0;
  if (comm.size() == 1) return;
  comm_ = &comm;
  if (flat_.size() != buckets_.size()) {
    flat_.clear();
    for (const auto& b : buckets_) flat_.push_back(Tensor::empty({b.numel}, b.dtype, b.device));
  }
  ready_.assign(params_.size(), 0);
  missing_.clear();
  for (const auto& b : buckets_) missing_.push_back((int64_t)b.params.size());
  pending_.clear();
  pending_.resize(buckets_.size());
  next_ = 0;
  hook_.emplace([this](const TensorImpl* leaf) { on_leaf_ready(leaf); });
}

void GradSync::on_leaf_ready(const TensorImpl* leaf) {
  const auto it = index_.find(leaf);
  if (it == index_.end() || ready_[it->second]) return;  // not a parameter (an input), or seen
  ready_[it->second] = 1;
  --missing_[bucket_of_[it->second]];
  start_ready_buckets();
  // MPI makes progress on started collectives only inside MPI calls: poll them now and then.
  for (size_t b = 0; b < next_; ++b)
    if (pending_[b]) pending_[b]->poll();
}

void GradSync::start_ready_buckets() {
  while (next_ < buckets_.size() && missing_[next_] == 0) {
    start(next_++);
    ++started_early_;
  }
}

void GradSync::start(size_t i) {
  NoGradGuard no_grad;
  const GradBucket& b = buckets_[i];
  Tensor& flat = flat_[i];
  int64_t at = 0;
  for (size_t k : b.params) {
    const Tensor& p = params_[k];
    Tensor dst = flat.narrow(0, at, p.numel());
    const Tensor g = p.grad();
    if (g.defined()) dst.copy_(g.reshape(p.shape()).flatten());
    else dst.zero_();
    at += p.numel();
  }
  pending_[i] = comm_->start_all_reduce(flat, ReduceOp::sum);
}

void GradSync::finish() {
  if (!comm_) return;  // one rank: nothing to sum
  hook_.reset();
  while (next_ < buckets_.size()) start(next_++);
  NoGradGuard no_grad;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    pending_[i]->wait();
    const Tensor& flat = flat_[i];
    int64_t at = 0;
    for (size_t k : buckets_[i].params) {
      Tensor& p = params_[k];
      const Tensor src = flat.narrow(0, at, p.numel()).reshape(p.shape());
      Tensor g = p.grad();
      // A fresh gradient tensor per step (gradients are dropped by zero_grad every step).
      if (!g.defined() || !g.is_contiguous()) g = Tensor::empty(p.shape(), p.dtype(), p.device());
      g.copy_(src);
      p.set_grad(g);
      at += p.numel();
    }
  }
  pending_.clear();
  comm_ = nullptr;
}

void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors, int root) {
  if (comm.size() == 1) return;
  NoGradGuard no_grad;
  for (const Tensor& t : tensors) {
    // Collectives work on contiguous float tensors; others go through a contiguous float copy.
    if (t.is_contiguous() && (t.dtype() == DType::f32 || t.dtype() == DType::f64)) {
      comm.broadcast({t}, root);
    } else {
      Tensor tmp = t.to(DType::f64).contiguous().clone();
      comm.broadcast({tmp}, root);
      Tensor(t).copy_(tmp);
    }
  }
}

}  // namespace ocrt::train
