// Plain-loop references for batch and layer normalisation, straight from the formulas of
// ops/cpu/norm.cpp's opening comment (docs/ops/norm.md derives them), in float64. The CPU and
// CUDA kernels are tested against these (tests/ops/test_norm.cpp, tests/cuda/test_norm_lstm.cpp).
#pragma once
#include <cmath>
#include <cstdint>

namespace ocrt::reference {

// Per-channel statistics of x (N,C,S): mean (C) and the biased variance var (C).
template <class T>
void batch_norm_stats(const T* x, T* mean, T* var, int64_t N, int64_t C, int64_t S) {
  const double n = (double)(N * S);
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < N; ++k)
      for (int64_t s = 0; s < S; ++s) sum += (double)x[(k * C + c) * S + s];
    const double m = sum / n;
    for (int64_t k = 0; k < N; ++k)
      for (int64_t s = 0; s < S; ++s) sq += ((double)x[(k * C + c) * S + s] - m) * ((double)x[(k * C + c) * S + s] - m);
    mean[c] = (T)m;
    var[c] = (T)(sq / n);
  }
}

// y (N,C,S) = (x - mean[c]) * invstd[c] * w[c] + b[c]; w and b may be null (1 and 0).
template <class T>
void batch_norm_apply(const T* x, const T* mean, const T* invstd, const T* w, const T* b, T* y, int64_t N, int64_t C,
                      int64_t S) {
  for (int64_t k = 0; k < N; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (k * C + c) * S + s;
        const double xhat = ((double)x[i] - (double)mean[c]) * (double)invstd[c];
        y[i] = (T)(xhat * (w ? (double)w[c] : 1.0) + (b ? (double)b[c] : 0.0));
      }
}

// Gradients for dy (N,C,S), with xhat = (x - mean) * invstd and n = N*S values per channel:
//   db = sum(dy),  dw = sum(dy * xhat)
//   training: dx = w * invstd * (dy - sum(dy)/n - xhat * sum(dy * xhat)/n)
//   eval:     dx = w * invstd * dy
// dx, dw, db may each be null (not wanted).
template <class T>
void batch_norm_backward(const T* x, const T* dy, const T* mean, const T* invstd, const T* w, bool training, T* dx,
                         T* dw, T* db, int64_t N, int64_t C, int64_t S) {
  const double n = (double)(N * S);
  for (int64_t c = 0; c < C; ++c) {
    const double m = mean[c], inv = invstd[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t k = 0; k < N; ++k)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (k * C + c) * S + s;
        sum_dy += (double)dy[i];
        sum_dy_xhat += (double)dy[i] * ((double)x[i] - m) * inv;
      }
    if (db) db[c] = (T)sum_dy;
    if (dw) dw[c] = (T)sum_dy_xhat;
    if (!dx) continue;
    const double scale = (w ? (double)w[c] : 1.0) * inv;
    for (int64_t k = 0; k < N; ++k)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (k * C + c) * S + s;
        const double xhat = ((double)x[i] - m) * inv;
        dx[i] = (T)(training ? scale * ((double)dy[i] - sum_dy / n - xhat * sum_dy_xhat / n) : scale * (double)dy[i]);
      }
  }
}

// Layer normalisation of each row of x (M,D): y = (x - mean) * rstd * w + b with
// rstd = 1 / sqrt(var + eps) (biased variance); saves mean and rstd (M). w, b (D) may be null.
template <class T>
void layer_norm(const T* x, const T* w, const T* b, double eps, T* y, T* mean, T* rstd, int64_t M, int64_t D) {
  for (int64_t r = 0; r < M; ++r) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < D; ++j) sum += (double)x[r * D + j];
    const double m = sum / (double)D;
    for (int64_t j = 0; j < D; ++j) sq += ((double)x[r * D + j] - m) * ((double)x[r * D + j] - m);
    const double rs = 1.0 / std::sqrt(sq / (double)D + eps);
    mean[r] = (T)m;
    rstd[r] = (T)rs;
    for (int64_t j = 0; j < D; ++j)
      y[r * D + j] = (T)(((double)x[r * D + j] - m) * rs * (w ? (double)w[j] : 1.0) + (b ? (double)b[j] : 0.0));
  }
}

// The training formula of batch norm over each row, with g = dy * w inside the sums:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat));  dw = sum over rows of dy * xhat;
//   db = sum over rows of dy. dx, dw, db may each be null.
template <class T>
void layer_norm_backward(const T* x, const T* dy, const T* mean, const T* rstd, const T* w, T* dx, T* dw, T* db,
                         int64_t M, int64_t D) {
  for (int64_t j = 0; j < D; ++j) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < M; ++r) {
      sb += (double)dy[r * D + j];
      sw += (double)dy[r * D + j] * ((double)x[r * D + j] - (double)mean[r]) * (double)rstd[r];
    }
    if (dw) dw[j] = (T)sw;
    if (db) db[j] = (T)sb;
  }
  if (!dx) return;
  for (int64_t r = 0; r < M; ++r) {
    const double m = mean[r], rs = rstd[r];
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t j = 0; j < D; ++j) {
      const double g = (double)dy[r * D + j] * (w ? (double)w[j] : 1.0);
      sum_g += g;
      sum_g_xhat += g * ((double)x[r * D + j] - m) * rs;
    }
    for (int64_t j = 0; j < D; ++j) {
      const double g = (double)dy[r * D + j] * (w ? (double)w[j] : 1.0), xhat = ((double)x[r * D + j] - m) * rs;
      dx[r * D + j] = (T)(rs * (g - sum_g / (double)D - xhat * sum_g_xhat / (double)D));
    }
  }
}

}  // namespace ocrt::reference
