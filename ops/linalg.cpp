// Matrix-product front-ends: matmul (torch.matmul semantics) and linear, with their gradients.
//
// Every product ends in one kernel call, TensorBackend::matmul, on (B,M,K) @ (B,K,N) views. This file
// turns the user's shapes into those views without copying data where strides allow it:
//   - a 1-D operand becomes a (1,K) row or a (K,1) column (a view), and that dim is dropped
//     from the result again;
//   - batch dims broadcast with expand() (stride 0) and are flattened into B with reshape(),
//     which is a view unless the strides cannot be merged (then, and only then, it copies);
//   - a transposed operand stays a strided view; the kernel reads it as a column-major matrix;
//   - when only `a` has batch dims (x @ W, the common case), its rows are folded into M and
//     the whole thing is one (1, batch*M, K) @ (1, K, N) GEMM instead of a batch of small ones.
//
// Gradients, for out = a @ b with g = dL/dout:
//   da = g @ b^T,   db = a^T @ g,
// each summed over the batch dims that broadcasting stretched (sum_to). When b had no batch
// dims, db = a_rows^T @ g_rows is one GEMM over all batch*M rows, never a (batch,K,N) stack.
#include "ops/linalg.h"

#include <algorithm>
#include <list>
#include <mutex>

#include "runtime/backend.h"
#include "runtime/cpu/gemm.h"
#include "ops/cpu/fingerprint.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {

Shape batch_dims(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 2); }

Shape with_matrix_dims(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// True when every dim of x but the last can be merged into one without a copy (so that
// x (batch..., M, K) can be viewed as (batch*M, K)).
bool leading_dims_mergeable(const Tensor& x) {
  int64_t expected = -1;  // the stride the next outer dim must have to continue the run
  for (int64_t d = x.dim() - 2; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (expected >= 0 && x.stride(d) != expected) return false;
    expected = x.stride(d) * x.size(d);
  }
  return true;
}

// x (batch_x..., R, C) broadcast to (batch..., R, C) and flattened to (B, R, C).
Tensor as_batched(const Tensor& x, const Shape& batch) {
  Tensor e = x.expand(with_matrix_dims(batch, x.size(-2), x.size(-1)));
  return e.reshape({numel_of(batch), x.size(-2), x.size(-1)});
}

// The kernel call: out (B,M,N) = a (B,M,K) @ b (B,K,N).
void gemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  kernel(out.device(), &TensorBackend::matmul, "matmul")(a, b, out);
}

// The product of a (batch_a..., M, K) and b (batch_b..., K, N), both at least 2-D, already
// checked: a new tensor (batch..., M, N). No autograd (inputs are detached or grad is off).
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const Shape ba = batch_dims(a), bb = batch_dims(b);
  const Shape batch = broadcast_shapes(ba, bb, "matmul");
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1), nb = numel_of(batch);
  Tensor out = Tensor::empty(with_matrix_dims(batch, M, N), a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (nb > 1 && numel_of(bb) == 1 && leading_dims_mergeable(a)) {
    // Only a has batch dims: one GEMM over all its rows.
    gemm(a.view({1, nb * M, K}), b.reshape({1, K, N}), out.view({1, nb * M, N}));
    return out;
  }
  gemm(as_batched(a, batch), as_batched(b, batch), out.view({nb, M, N}));
  return out;
}

Tensor transpose_last(const Tensor& x) { return x.transpose(-1, -2); }

// Device and dtype checks shared by matmul and linear; messages name both shapes.
void check_pair(const Tensor& a, const Tensor& b, const char* op) {
  OCRT_CHECK(a.device() == b.device(), op, ": inputs are on different devices (", a.device().str(), " for ",
             shape_str(a.shape()), ", ", b.device().str(), " for ", shape_str(b.shape()), "); move one with .to(device)");
  OCRT_CHECK(a.dtype() == b.dtype(), op, ": inputs have different dtypes (", dtype_name(a.dtype()), " for ",
             shape_str(a.shape()), ", ", dtype_name(b.dtype()), " for ", shape_str(b.shape()),
             "); convert one with .to(dtype)");
  OCRT_CHECK(is_floating(a.dtype()), op, ": expected float32 or float64 tensors, got ", dtype_name(a.dtype()),
             " (shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()), ")");
}

}  // namespace

#if defined(OCRT_CPU_SGEMM)
struct MatmulRhsReuse::Packed {
  cpu::SgemmReusedB b;
};

namespace {

// The packings kept between scopes (MatmulRhsReuse with keep), newest use last.
struct RhsKey {
  const float* B;
  int64_t K, N, b_row, b_col;
  cpu::MatmulPrecision precision;
  uint64_t print;
  bool operator==(const RhsKey&) const = default;
};
struct KeptRhs {
  RhsKey key;
  std::shared_ptr<const cpu::SgemmPackedB> packed;
  size_t bytes = 0;
};
std::mutex g_rhs_mu;
std::list<std::shared_ptr<const KeptRhs>> g_rhs;
cpu::KeysInMaking<RhsKey> g_rhs_making;

// The kept packing of b: found, or made and kept now (by another thread: waited for).
std::shared_ptr<const cpu::SgemmPackedB> kept_rhs(const Tensor& b) {
  const float* B = b.data<float>();
  const int64_t K = b.size(0), N = b.size(1), rs = b.stride(0), cs = b.stride(1);
  // The values b's strides reach: a transposed contiguous matrix is its whole memory.
  const int64_t span = (K - 1) * rs + (N - 1) * cs + 1;
  const RhsKey key{B, K, N, rs, cs, cpu::matmul_precision(), cpu::weights_fingerprint(B, span)};
  {
    std::unique_lock<std::mutex> lock(g_rhs_mu);
    if (auto found = cpu::find_kept(g_rhs, key)) return found->packed;
    if (!g_rhs_making.claim_or_wait(lock, key)) {  // another thread made it meanwhile
      auto found = cpu::find_kept(g_rhs, key);
      return found ? found->packed : nullptr;  // null if that making threw
    }
  }
  const cpu::Making<RhsKey> making(g_rhs_mu, g_rhs_making, key);
  auto k = std::make_shared<KeptRhs>();
  k->key = key;
  k->packed = std::make_shared<const cpu::SgemmPackedB>(K, N, B, rs, cs);
  k->bytes = k->packed->bytes();
  std::lock_guard<std::mutex> lock(g_rhs_mu);
  g_rhs.push_back(k);
  cpu::drop_oldest_beyond(g_rhs, kMatmulKeptBytes);
  return k->packed;
}

}  // namespace
#else
struct MatmulRhsReuse::Packed {};
#endif

#if defined(OCRT_CPU_SGEMM)
namespace {
// Whether ocrt's GEMM takes b as a right operand: a 2-D float32 CPU matrix, on a path with a kernel.
bool gemm_operand(const Tensor& b) {
  return b.device().is_cpu() && b.dtype() == DType::f32 && b.dim() == 2 && cpu::sgemm_available();
}
}  // namespace
#endif

bool MatmulRhsReuse::packs(const Tensor& b) {
#if defined(OCRT_CPU_SGEMM)
  // Products of any number of rows read a kept packing (float32 ones of a few rows too:
  // runtime/cpu/gemm_loops.inc, few_rows_packed_of).
  return gemm_operand(b);
#else
  (void)b;
  return false;
#endif
}

MatmulRhsReuse::MatmulRhsReuse(const Tensor& b, int64_t rows, bool keep) {
#if defined(OCRT_CPU_SGEMM)
  if (!gemm_operand(b)) return;
  if (keep && !grad_enabled() && b.size(0) >= 1 && b.size(1) >= 1) {
    if (auto kept = kept_rhs(b)) {
      packed_.reset(new Packed{cpu::SgemmReusedB(std::move(kept), b.data<float>(), b.stride(0), b.stride(1))});
      return;
    }
  }
  packed_.reset(new Packed{cpu::SgemmReusedB(b.size(0), b.size(1), b.data<float>(), b.stride(0), b.stride(1), rows)});
#else
  (void)b, (void)rows, (void)keep;
#endif
}

MatmulRhsReuse::~MatmulRhsReuse() = default;

void matmul_into(const Tensor& a, const Tensor& b, const Tensor& out) {
  OCRT_CHECK(a.defined() && b.defined() && out.defined(), "matmul_into: an operand is an undefined tensor");
  check_pair(a, b, "matmul_into");
  OCRT_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2, "matmul_into: expected 2-D operands, got shapes ",
             shape_str(a.shape()), ", ", shape_str(b.shape()), " and ", shape_str(out.shape()));
  OCRT_CHECK(a.size(1) == b.size(0) && out.size(0) == a.size(0) && out.size(1) == b.size(1),
             "matmul_into: shapes ", shape_str(a.shape()), " @ ", shape_str(b.shape()), " do not make ",
             shape_str(out.shape()));
  OCRT_CHECK(out.is_contiguous() && out.dtype() == a.dtype() && out.device() == a.device(),
             "matmul_into: out must be contiguous ", dtype_name(a.dtype()), " on ", a.device().str());
  OCRT_CHECK(!a.requires_grad() && !b.requires_grad(), "matmul_into: records no gradient; use matmul");
  gemm(a.unsqueeze(0), b.unsqueeze(0), out.view({1, out.size(0), out.size(1)}));
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  OCRT_CHECK(a.defined() && b.defined(), "matmul: an input is an undefined tensor");
  OCRT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both inputs need at least 1 dim, got shapes ",
             shape_str(a.shape()), " and ", shape_str(b.shape()), " (use mul for a scalar)");
  check_pair(a, b, "matmul");
  // Promote 1-D operands: a (K) -> (1,K), b (K) -> (K,1).
  const Tensor a2 = a.dim() == 1 ? a.detach().unsqueeze(0) : a.detach();
  const Tensor b2 = b.dim() == 1 ? b.detach().unsqueeze(1) : b.detach();
  OCRT_CHECK(a2.size(-1) == b2.size(-2), "matmul: inner dimensions do not match: shapes ", shape_str(a.shape()),
             " and ", shape_str(b.shape()), " (", a2.size(-1), " vs ", b2.size(-2), ")");
  {
    const Shape ba = batch_dims(a2), bb = batch_dims(b2);
    const size_t n = std::max(ba.size(), bb.size());
    for (size_t i = 0; i < n; ++i) {
      int64_t da = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
      int64_t db = i < n - bb.size() ? 1 : bb[i - (n - bb.size())];
      OCRT_CHECK(da == db || da == 1 || db == 1, "matmul: batch dims of shapes ", shape_str(a.shape()), " and ",
                 shape_str(b.shape()), " cannot be broadcast together (", da, " vs ", db, ")");
    }
  }

  const Tensor out_nd = matmul_nd(a2, b2);
  const Shape out_nd_shape = out_nd.shape();
  Tensor out = out_nd;
  if (a.dim() == 1 && b.dim() == 1) out = out_nd.view({});
  else if (a.dim() == 1) out = out_nd.squeeze(-2);
  else if (b.dim() == 1) out = out_nd.squeeze(-1);

  if (any_requires_grad({a, b})) {
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    const Shape shape_a = a.shape(), shape_b = b.shape(), shape_a2 = a2.shape(), shape_b2 = b2.shape();
    // Each gradient needs only the other operand.
    const Tensor a_saved = need_b ? a2 : Tensor(), b_saved = need_a ? b2 : Tensor();
    record("matmul", {a, b}, {out}, [=](const TensorList& grads) {
      const Tensor g = grads[0].reshape(out_nd_shape);  // with the promoted dims
      Tensor ga, gb;
      if (need_a) ga = sum_to(matmul_nd(g, transpose_last(b_saved)), shape_a2).reshape(shape_a);
      if (need_b) {
        if (shape_b2.size() == 2 && g.dim() > 2) {
          // b had no batch dims: db = sum over all rows of a^T g, as one GEMM.
          const int64_t rows = numel_of(Shape(shape_a2.begin(), shape_a2.end() - 1));
          const int64_t K = shape_b2[0], N = shape_b2[1];
          gb = matmul_nd(a_saved.reshape({rows, K}).t(), g.reshape({rows, N})).reshape(shape_b);
        } else {
          gb = sum_to(matmul_nd(transpose_last(a_saved), g), shape_b2).reshape(shape_b);
        }
      }
      return TensorList{ga, gb};
    });
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  OCRT_CHECK(x.defined() && weight.defined(), "linear: input or weight is an undefined tensor");
  OCRT_CHECK(weight.dim() == 2, "linear: weight must be 2-D (out_features, in_features), got shape ",
             shape_str(weight.shape()));
  OCRT_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: input of shape ", shape_str(x.shape()),
             " does not end in in_features = ", weight.size(1), " (weight shape ", shape_str(weight.shape()), ")");
  check_pair(x, weight, "linear");
  if (bias.defined()) {
    OCRT_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias must have shape [",
               weight.size(0), "] (out_features of weight ", shape_str(weight.shape()), "), got ",
               shape_str(bias.shape()));
    check_pair(x, bias, "linear");
  }
  const int64_t in = weight.size(1), outf = weight.size(0);
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = numel_of(lead);
  Shape out_shape = lead;
  out_shape.push_back(outf);

  // All leading dims are rows of one GEMM: (1, rows, in) @ (1, in, out), weight^T a view.
  const Tensor x2 = x.detach().reshape({rows, in});
  const Tensor w = weight.detach();
  Tensor y = Tensor::empty(out_shape, x.dtype(), x.device());
  if (y.numel() > 0) {
    gemm(x2.unsqueeze(0), w.t().unsqueeze(0), y.view({1, rows, outf}));
    if (bias.defined()) add_(y, bias.detach());  // y does not require grad yet
  }

  if (any_requires_grad({x, weight, bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    const Shape shape_x = x.shape();
    const Tensor x_saved = need_w ? x2 : Tensor(), w_saved = need_x ? w : Tensor();
    record("linear", {x, weight, bias}, {y}, [=](const TensorList& grads) {
      const Tensor g = grads[0].reshape({rows, outf});
      Tensor dx, dw, db;
      if (need_x) dx = matmul_nd(g, w_saved).reshape(shape_x);  // (rows,out) @ (out,in)
      if (need_w) dw = matmul_nd(g.t(), x_saved);               // (out,rows) @ (rows,in)
      if (need_b) db = sum(g, {0});
      return TensorList{dx, dw, db};
    });
  }
  return y;
}

}  // namespace ocrt
