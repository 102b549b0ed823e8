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
}

void GradSync::all_reduce(Communicator& comm) {
  if (comm.size() == 1) return;
  if (flat_.size() != buckets_.size()) {
    flat_.clear();
    for (const auto& b : buckets_) flat_.push_back(Tensor::empty({b.numel}, b.dtype, b.device));
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < buckets_.size(); ++i) {
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
    comm.all_reduce({flat}, ReduceOp::sum);
    at = 0;
    for (size_t k : b.params) {
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
