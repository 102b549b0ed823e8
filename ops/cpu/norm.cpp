// Batch and layer normalisation on the CPU. Statistics and gradient sums accumulate in double
// in a fixed order (deterministic, and accurate for large N*H*W). Channels (batch norm) and
// rows (layer norm) are independent, so they are shared among OpenMP threads.
//
// Backward, with xhat = (x - mean) * invstd and n values per channel (or per row):
//   dbias = sum(dy),  dweight = sum(dy * xhat)
//   training (statistics depend on x):
//     dx = weight * invstd * (dy - sum(dy)/n - xhat * sum(dy * xhat)/n)
//   eval (constant statistics):  dx = weight * invstd * dy
// Layer norm is the training formula over each row, with weight inside the sums.
#include <omp.h>

#include <cmath>
#include <vector>

#include "ops/backend.h"
#include "runtime/cpu/loops.h"

namespace ocrt {

namespace {

template <class T>
void bn_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  const T* xp = x.data<T>();
  T* mp = mean.data<T>();
  T* vp = var.data<T>();
#pragma omp parallel for schedule(static) if (N * C * S > cpu::kParallelGrain)
  for (int64_t c = 0; c < C; ++c) {
    // Sums in float64 lanes (cpu::lane_sum), a row of the plane at a time.
    double sum = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* row = xp + (n * C + c) * S;
      sum += cpu::lane_sum(S, [row](int64_t s) { return (double)row[s]; });
    }
    const double m = sum / (double)(N * S);
    double sq = 0;  // two passes: no cancellation when |mean| >> std
    for (int64_t n = 0; n < N; ++n) {
      const T* row = xp + (n * C + c) * S;
      sq += cpu::lane_sum(S, [row, m](int64_t s) {
        const double d = (double)row[s] - m;
        return d * d;
      });
    }
    mp[c] = (T)m;
    vp[c] = (T)(sq / (double)(N * S));
  }
}

template <class T>
void bn_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& bias,
              const Tensor& y) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  const T *xp = x.data<T>(), *mp = mean.data<T>(), *ip = invstd.data<T>();
  const T* wp = weight.defined() ? weight.data<T>() : nullptr;
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  T* yp = y.data<T>();
#pragma omp parallel for schedule(static) if (N * C * S > cpu::kParallelGrain)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const int64_t c = nc % C;
    const T scale = ip[c] * (wp ? wp[c] : T(1));
    const T shift = (bp ? bp[c] : T(0)) - mp[c] * scale;
    const T* in = xp + nc * S;
    T* out = yp + nc * S;
    for (int64_t s = 0; s < S; ++s) out[s] = in[s] * scale + shift;
  }
}

template <class T>
void bn_backward(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                 bool training, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  const T *xp = x.data<T>(), *gp = dy.data<T>(), *mp = mean.data<T>(), *ip = invstd.data<T>();
  const T* wp = weight.defined() ? weight.data<T>() : nullptr;
  T* dxp = dx.defined() ? dx.data<T>() : nullptr;
  T* dwp = dweight.defined() ? dweight.data<T>() : nullptr;
  T* dbp = dbias.defined() ? dbias.data<T>() : nullptr;
  const double n = (double)(N * S);
#pragma omp parallel for schedule(static) if (N * C * S > cpu::kParallelGrain)
  for (int64_t c = 0; c < C; ++c) {
    const double m = mp[c], inv = ip[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t k = 0; k < N; ++k) {
      const T *xr = xp + (k * C + c) * S, *gr = gp + (k * C + c) * S;
      sum_dy += cpu::lane_sum(S, [gr](int64_t s) { return (double)gr[s]; });
      sum_dy_xhat +=
          cpu::lane_sum(S, [gr, xr, m, inv](int64_t s) { return (double)gr[s] * (((double)xr[s] - m) * inv); });
    }
    if (dbp) dbp[c] = (T)sum_dy;
    if (dwp) dwp[c] = (T)sum_dy_xhat;
    if (!dxp) continue;
    const double w = wp ? (double)wp[c] : 1.0;
    const double mean_dy = training ? sum_dy / n : 0, mean_dy_xhat = training ? sum_dy_xhat / n : 0;
    for (int64_t k = 0; k < N; ++k) {
      const T *xr = xp + (k * C + c) * S, *gr = gp + (k * C + c) * S;
      T* out = dxp + (k * C + c) * S;
      for (int64_t s = 0; s < S; ++s) {
        const double xhat = ((double)xr[s] - m) * inv;
        out[s] = (T)(w * inv * ((double)gr[s] - mean_dy - xhat * mean_dy_xhat));
      }
    }
  }
}

template <class T>
void ln_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  const int64_t M = x.size(0), D = x.size(1);
  const T* xp = x.data<T>();
  const T* wp = weight.defined() ? weight.data<T>() : nullptr;
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  T *yp = y.data<T>(), *mp = mean.data<T>(), *rp = rstd.data<T>();
#pragma omp parallel for schedule(static) if (M * D > cpu::kParallelGrain)
  for (int64_t i = 0; i < M; ++i) {
    const T* row = xp + i * D;
    const double m = cpu::lane_sum(D, [row](int64_t j) { return (double)row[j]; }) / (double)D;
    const double sq = cpu::lane_sum(D, [row, m](int64_t j) {
      const double d = (double)row[j] - m;
      return d * d;
    });
    const double r = 1.0 / std::sqrt(sq / (double)D + eps);
    mp[i] = (T)m;
    rp[i] = (T)r;
    T* out = yp + i * D;
    for (int64_t j = 0; j < D; ++j) {
      const double v = ((double)row[j] - m) * r;
      out[j] = (T)(v * (wp ? (double)wp[j] : 1.0) + (bp ? (double)bp[j] : 0.0));
    }
  }
}

template <class T>
void ln_backward(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                 const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t M = x.size(0), D = x.size(1);
  const T *xp = x.data<T>(), *gp = dy.data<T>(), *mp = mean.data<T>(), *rp = rstd.data<T>();
  const T* wp = weight.defined() ? weight.data<T>() : nullptr;
  T* dxp = dx.defined() ? dx.data<T>() : nullptr;
  if (dxp) {
#pragma omp parallel for schedule(static) if (M * D > cpu::kParallelGrain)
    for (int64_t i = 0; i < M; ++i) {
      const T *row = xp + i * D, *g = gp + i * D;
      const double m = mp[i], r = rp[i];
      // g = dy * weight; its sums in float64 lanes (cpu::lane_sum)
      auto gw = [g, wp](int64_t j) { return (double)g[j] * (wp ? (double)wp[j] : 1.0); };
      const double sum_g = cpu::lane_sum(D, gw);
      const double sum_g_xhat = cpu::lane_sum(D, [&](int64_t j) { return gw(j) * ((double)row[j] - m) * r; });
      const double mean_g = sum_g / (double)D, mean_g_xhat = sum_g_xhat / (double)D;
      T* out = dxp + i * D;
      for (int64_t j = 0; j < D; ++j) {
        const double gj = (double)g[j] * (wp ? (double)wp[j] : 1.0), xhat = ((double)row[j] - m) * r;
        out[j] = (T)(r * (gj - mean_g - xhat * mean_g_xhat));
      }
    }
  }
  T* dwp = dweight.defined() ? dweight.data<T>() : nullptr;
  T* dbp = dbias.defined() ? dbias.data<T>() : nullptr;
  if (!dwp && !dbp) return;
  // Column sums over rows, row by row (contiguous): each thread sums its own band of rows into
  // partial sums, which are then added in thread order (deterministic for a thread count).
  const int threads = M * D > cpu::kParallelGrain ? omp_get_max_threads() : 1;
  std::vector<double> partial((size_t)(threads * 2 * D), 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    double* sw = partial.data() + (size_t)(t * 2 * D);
    double* sb = sw + D;
    for (int64_t i = M * t / nt; i < M * (t + 1) / nt; ++i) {
      const T *g = gp + i * D, *row = xp + i * D;
      const double m = mp[i], r = rp[i];
      for (int64_t j = 0; j < D; ++j) {
        sb[j] += g[j];
        sw[j] += (double)g[j] * ((double)row[j] - m) * r;
      }
    }
  }
  for (int64_t j = 0; j < D; ++j) {
    double w = 0, b = 0;
    for (int t = 0; t < threads; ++t) {
      w += partial[(size_t)(t * 2 * D + j)];
      b += partial[(size_t)(t * 2 * D + D + j)];
    }
    if (dwp) dwp[j] = (T)w;
    if (dbp) dbp[j] = (T)b;
  }
}

}  // namespace

void register_cpu_norm(LayerBackend& b) {
  b.batch_norm_stats = [](const Tensor& x, const Tensor& mean, const Tensor& var) {
    dispatch_float(x.dtype(), "batch_norm", [&](auto zero) { bn_stats<decltype(zero)>(x, mean, var); });
  };
  b.batch_norm_apply = [](const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& w, const Tensor& bias,
                          const Tensor& y) {
    dispatch_float(x.dtype(), "batch_norm", [&](auto zero) { bn_apply<decltype(zero)>(x, mean, invstd, w, bias, y); });
  };
  b.batch_norm_backward = [](const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                             const Tensor& w, bool training, const Tensor& dx, const Tensor& dw, const Tensor& db) {
    dispatch_float(x.dtype(), "batch_norm backward",
        [&](auto zero) { bn_backward<decltype(zero)>(x, dy, mean, invstd, w, training, dx, dw, db); });
  };
  b.layer_norm = [](const Tensor& x, const Tensor& w, const Tensor& bias, double eps, const Tensor& y,
                    const Tensor& mean, const Tensor& rstd) {
    dispatch_float(x.dtype(), "layer_norm",
        [&](auto zero) { ln_forward<decltype(zero)>(x, w, bias, eps, y, mean, rstd); });
  };
  b.layer_norm_backward = [](const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& rstd,
                             const Tensor& w, const Tensor& dx, const Tensor& dw, const Tensor& db) {
    dispatch_float(x.dtype(), "layer_norm backward",
        [&](auto zero) { ln_backward<decltype(zero)>(x, dy, mean, rstd, w, dx, dw, db); });
  };
}

}  // namespace ocrt
