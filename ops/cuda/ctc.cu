// CTC loss on CUDA: the counterpart of ops/cpu/ctc.cpp (read its header for the recursions),
// with the same semantics: log-space alpha and beta in double, any blank, per-sample input and
// target lengths, +inf for a target that cannot be aligned and a zero gradient for it.
//
// One block per sample. The alpha recursion at frame t needs all of frame t-1, so the block
// walks the frames in order with a __syncthreads() between them, its threads spread over the
// extended label positions s (each thread takes s = tid, tid + blockDim, ... when 2L+1 is
// larger than the block). alpha lives in the (N, T, 2*max_target_length+1) tensor the front-end
// keeps for the backward; the backward runs beta the other way through two scratch rows per
// sample and turns alpha + beta into the gradient frame by frame.
//
// The posterior of class c at frame t sums over every position s labelled c (the blank has L+1
// of them, and a repeated label several). To do that without races or atomics, each class that
// occurs in the target is summed by one thread, the owner of its first position, walking a
// per-sample list that links each position to the next one with the same label. The sum is
// taken in linear space: each term exp(alpha + beta - y + nll) is the probability that the
// alignment passes through (t, s), so it lies in [0, 1] and cannot overflow, whatever T or the
// logits are; the CPU's log-sum-exp gives the same value up to rounding.
#include <algorithm>
#include <cmath>

#include "ops/backend.h"
#include "ops/log_space.h"  // lse, shared with the CPU
#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

constexpr double kNegInf = -INFINITY;

// Per-sample arguments, packed by the host into one (N, 3) int64 tensor.
enum SampleField { kOffset = 0, kFrames = 1, kTargetLength = 2, kSampleFields = 3 };

// One sample's view of the inputs (mirrors Sample in ops/cpu/ctc.cpp).
template <class T>
struct Sample {
  const T* lp;             // y[t][c] at lp[t * stride_t + c]
  int64_t stride_t;
  const int64_t* label;    // the L target labels
  int64_t frames, L, blank;  // frames: this sample's input length

  __device__ Sample(const T* log_probs, const int64_t* targets, const int64_t* info, int64_t N, int64_t C,
                    int64_t blank_)
      : blank(blank_) {
    const int64_t n = blockIdx.x;
    const int64_t* f = info + n * kSampleFields;
    lp = log_probs + n * C;
    stride_t = N * C;
    label = targets + f[kOffset];
    frames = f[kFrames];
    L = f[kTargetLength];
  }
  __device__ int64_t ext(int64_t s) const { return s % 2 == 0 ? blank : label[s / 2]; }  // l'(s)
  __device__ double y(int64_t t, int64_t s) const { return (double)lp[t * stride_t + ext(s)]; }
  // May s-2 -> s be skipped over (no blank in between needed)?
  __device__ bool can_skip(int64_t s) const { return s >= 2 && ext(s) != blank && ext(s) != ext(s - 2); }
};

// log p(l|x) from the last alpha row of a sample (S = 2L+1 valid positions).
__device__ __forceinline__ double log_likelihood(const double* last, int64_t S) {
  return S > 1 ? lse(last[S - 1], last[S - 2]) : last[0];
}

// Grid: one block per sample. log_probs (T,N,C) contiguous; alpha (N,T,S_max); losses (N).
// Positions s >= 2L+1 and frames t >= input length are set to -inf: the backward never reads
// them, but this way the whole alpha tensor holds defined values.
template <class T>
__global__ void ctc_forward_kernel(const T* log_probs, const int64_t* targets, const int64_t* info, int64_t N,
                                   int64_t C, int64_t Tmax, int64_t S_max, int64_t blank, T* losses, double* alpha) {
  const Sample<T> x(log_probs, targets, info, N, C, blank);
  const int64_t n = blockIdx.x, S = 2 * x.L + 1;
  double* al = alpha + n * Tmax * S_max;

  for (int64_t i = x.frames * S_max + threadIdx.x; i < Tmax * S_max; i += blockDim.x) al[i] = kNegInf;
  if (x.frames == 0) {
    if (threadIdx.x == 0) losses[n] = (T)(x.L == 0 ? 0.0 : INFINITY);
    return;
  }

  for (int64_t s = threadIdx.x; s < S_max; s += blockDim.x) {
    double a = kNegInf;
    if (s == 0) a = x.y(0, 0);
    else if (s == 1 && S > 1) a = x.y(0, 1);
    al[s] = a;
  }
  __syncthreads();
  for (int64_t t = 1; t < x.frames; ++t) {
    const double* prev = al + (t - 1) * S_max;
    double* cur = al + t * S_max;
    for (int64_t s = threadIdx.x; s < S_max; s += blockDim.x) {
      if (s >= S) {
        cur[s] = kNegInf;
        continue;
      }
      double a = prev[s];
      if (s >= 1) a = lse(a, prev[s - 1]);
      if (x.can_skip(s)) a = lse(a, prev[s - 2]);
      cur[s] = a == kNegInf ? kNegInf : a + x.y(t, s);
    }
    __syncthreads();  // frame t is complete before anyone reads it
  }
  if (threadIdx.x == 0) losses[n] = (T)(-log_likelihood(al + (x.frames - 1) * S_max, S));  // +inf if impossible
}

// Rows of the per-sample double scratch (N, kScratchRows, S_max) used by the backward.
enum ScratchRow { kBetaA = 0, kBetaB = 1, kMass = 2, kPosterior = 3, kScratchRows = 4 };

// Links the positions of l' (S of them) that carry the same label, for the posterior sums:
// next[s] = the next position with l's label, or -1; first[c] = the first position labelled c,
// written only for the classes that occur (the caller has set every first[c] to -1). The
// block's threads share the positions: s = tid, tid + blockDim, ...
template <class T>
__device__ void link_same_labels(const Sample<T>& x, int64_t S, int32_t* next, int32_t* first) {
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
    bool is_first;
    int64_t after = -1;
    if (s % 2 == 0) {  // blanks sit at every even position
      is_first = s == 0;
      if (s + 2 < S) after = s + 2;
    } else {
      const int64_t k = s / 2, c = x.label[k];
      is_first = true;
      for (int64_t j = 0; j < k && is_first; ++j) is_first = x.label[j] != c;
      for (int64_t j = k + 1; j < x.L && after < 0; ++j)
        if (x.label[j] == c) after = 2 * j + 1;
    }
    next[s] = (int32_t)after;
    if (is_first) first[x.ext(s)] = (int32_t)s;  // exactly one position writes each class
  }
}

// Grid: one block per sample. grad (T,N,C) is written in full: 0 past the input length and for
// samples with no gradient, scale * (exp(y) - posterior) elsewhere.
// Scratch: `scratch` (N, 4, S_max) double; `next_same` (N, S_max) int32: the next position with
// the same label as s, or -1; `first_pos` (N, C) int32: the first position labelled c, or -1
// when c does not occur in l'.
template <class T>
__global__ void ctc_backward_kernel(const T* log_probs, const int64_t* targets, const int64_t* info, int64_t N,
                                    int64_t C, int64_t Tmax, int64_t S_max, int64_t blank, const T* losses,
                                    const double* alpha, const double* scale, T* grad, double* scratch,
                                    int32_t* next_same, int32_t* first_pos) {
  const Sample<T> x(log_probs, targets, info, N, C, blank);
  const int64_t n = blockIdx.x, S = 2 * x.L + 1;
  auto grad_row = [&](int64_t t) { return grad + (t * N + n) * C; };

  for (int64_t i = threadIdx.x; i < (Tmax - x.frames) * C; i += blockDim.x) grad_row(x.frames + i / C)[i % C] = T(0);
  if (x.frames == 0) return;

  const double* alpha_n = alpha + n * Tmax * S_max;
  // -log p(l|x) again from alpha, in double (losses may be float32). Every thread computes the
  // same value, so the early return below is taken by the whole block or by none of it.
  const double nll = -log_likelihood(alpha_n + (x.frames - 1) * S_max, S);
  const double sc = scale[n];
  if (!isfinite(nll) || !isfinite((double)losses[n]) || sc == 0) {
    // No alignment exists: no gradient (PyTorch gives NaN here).
    for (int64_t i = threadIdx.x; i < x.frames * C; i += blockDim.x) grad_row(i / C)[i % C] = T(0);
    return;
  }

  // Which positions carry the same label: computed once per sample, O(L) per position.
  int32_t* next = next_same + n * S_max;
  int32_t* first = first_pos + n * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) first[c] = -1;
  __syncthreads();
  link_same_labels(x, S, next, first);

  double* beta = scratch + (n * kScratchRows + kBetaA) * S_max;       // beta at frame t
  double* beta_next = scratch + (n * kScratchRows + kBetaB) * S_max;  // beta at frame t+1
  double* mass = scratch + (n * kScratchRows + kMass) * S_max;
  double* post = scratch + (n * kScratchRows + kPosterior) * S_max;
  __syncthreads();  // next/first are complete

  for (int64_t t = x.frames - 1; t >= 0; --t) {
    // beta[t][s], including the emission at t (as alpha does).
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      double b;
      if (t == x.frames - 1) {
        b = s >= S - 2 ? 0.0 : kNegInf;
      } else {
        b = beta_next[s];
        if (s + 1 < S) b = lse(b, beta_next[s + 1]);
        if (s + 2 < S && x.can_skip(s + 2)) b = lse(b, beta_next[s + 2]);
      }
      beta[s] = b == kNegInf ? kNegInf : b + x.y(t, s);
    }
    __syncthreads();

    // The probability that the alignment is at position s at frame t (y counted once).
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      const double a = alpha_n[t * S_max + s], b = beta[s];
      mass[s] = (a == kNegInf || b == kNegInf) ? 0.0 : exp(a + b - x.y(t, s) + nll);
    }
    __syncthreads();

    // Posterior per class, summed by the owner of the class's first position, in order of s.
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      if (first[x.ext(s)] != s) continue;
      double q = 0;
      for (int64_t k = s; k >= 0; k = next[k]) q += mass[k];
      post[s] = q;
    }
    __syncthreads();

    T* row = grad_row(t);
    const T* lrow = x.lp + t * x.stride_t;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double p = exp((double)lrow[c]);
      const double q = first[c] < 0 ? 0.0 : post[first[c]];
      row[c] = (T)(sc * (p - q));
    }
    // Frame t's beta becomes t-1's beta_next. The next iteration writes only buffers whose last
    // readers are behind one of the barriers above (beta_next was last read before the first,
    // mass before the third, post is rewritten only after two more).
    double* tmp = beta;
    beta = beta_next;
    beta_next = tmp;
  }
}

// Threads per block: enough to cover `width` items in one pass, up to kThreads; a whole warp at least.
int threads_for(int64_t width) {
  const int64_t w = (width + 31) / 32 * 32;
  return (int)std::min<int64_t>(std::max<int64_t>(w, 32), cuda::kThreads);
}

// The per-sample (offset, input length, target length) rows as an (N, 3) int64 tensor on `device`.
Tensor sample_info(const std::vector<int64_t>& offsets, const std::vector<int64_t>& input_lengths,
                   const std::vector<int64_t>& target_lengths, Device device) {
  const size_t N = input_lengths.size();
  std::vector<int64_t> info(N * kSampleFields);
  for (size_t n = 0; n < N; ++n) {
    info[n * kSampleFields + kOffset] = offsets[n];
    info[n * kSampleFields + kFrames] = input_lengths[n];
    info[n * kSampleFields + kTargetLength] = target_lengths[n];
  }
  return Tensor::from_vector(info, {(int64_t)N, kSampleFields}, device);
}

void cuda_ctc_loss(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& offsets,
                   const std::vector<int64_t>& input_lengths, const std::vector<int64_t>& target_lengths,
                   int64_t blank, const Tensor& losses, const Tensor& alpha) {
  const int64_t Tmax = log_probs.size(0), N = log_probs.size(1), C = log_probs.size(2), S_max = alpha.size(2);
  if (N == 0) return;
  cuda::DeviceScope ds(log_probs);
  const Tensor info = sample_info(offsets, input_lengths, target_lengths, log_probs.device());
  dispatch_float(log_probs.dtype(), "ctc_loss", [&](auto zero) {
    using T = decltype(zero);
    ctc_forward_kernel<T><<<(unsigned)N, threads_for(S_max), 0, ds.stream>>>(
        log_probs.data<T>(), targets.data<int64_t>(), info.data<int64_t>(), N, C, Tmax, S_max, blank,
        losses.data<T>(), alpha.data<double>());
  });
  OCRT_CUDA_LAUNCH_CHECK("ctc_loss", ds.device);
}

void cuda_ctc_loss_backward(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& offsets,
                            const std::vector<int64_t>& input_lengths, const std::vector<int64_t>& target_lengths,
                            int64_t blank, const Tensor& losses, const Tensor& alpha, const std::vector<double>& scale,
                            const Tensor& grad) {
  const int64_t Tmax = log_probs.size(0), N = log_probs.size(1), C = log_probs.size(2), S_max = alpha.size(2);
  if (N == 0) return;
  cuda::DeviceScope ds(log_probs);
  const Device dev = log_probs.device();
  const Tensor info = sample_info(offsets, input_lengths, target_lengths, dev);
  const Tensor scale_d = Tensor::from_vector(scale, {N}, dev);
  const Tensor scratch = Tensor::empty({N, kScratchRows, S_max}, DType::f64, dev);
  const Tensor next_same = Tensor::empty({N, S_max}, DType::i32, dev);
  const Tensor first_pos = Tensor::empty({N, C}, DType::i32, dev);
  // The block covers the label positions and the classes of a frame.
  const int threads = threads_for(std::max(S_max, C));
  dispatch_float(log_probs.dtype(), "ctc_loss backward", [&](auto zero) {
    using T = decltype(zero);
    ctc_backward_kernel<T><<<(unsigned)N, threads, 0, ds.stream>>>(
        log_probs.data<T>(), targets.data<int64_t>(), info.data<int64_t>(), N, C, Tmax, S_max, blank,
        losses.data<T>(), alpha.data<double>(), scale_d.data<double>(), grad.data<T>(),
        scratch.data<double>(), next_same.data<int32_t>(), first_pos.data<int32_t>());
  });
  OCRT_CUDA_LAUNCH_CHECK("ctc_loss backward", ds.device);
}

}  // namespace

void register_cuda_ctc(LayerBackend& b) {
  b.ctc_loss = cuda_ctc_loss;
  b.ctc_loss_backward = cuda_ctc_loss_backward;
}

}  // namespace ocrt
