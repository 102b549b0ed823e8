// CUDA windowed self-attention (ops/backend.h's window_attention entries), the counterpart of
// ops/cpu/attention.cpp; the window's geometry in ops/window_attention.h.
//
// One warp per (line, head, query) in the forward pass and for dq; one warp per (line, head,
// key) for dk and dv, which gathers the terms of every query whose window holds that key (a
// window is symmetric: key u is in query t's window exactly when t is in u's), so no two warps
// write one value and nothing depends on scheduling. Sums in double, as on the CPU.
//   forward: pass 1, lanes over the window's slots: each lane's running max and sum of exp
//            (rescaled as its max grows), combined over the warp; pass 2, lanes over the
//            channels: slot by slot the score again (a warp sum), its weight, and the weighted
//            value rows summed; lane 0 keeps the weights in probs.
//   dq:      D = dO . O, then slot by slot dp_j = dO . v_j (a warp sum), ds_j = p_j (dp_j - D)
//            scale, dq += ds_j k_j; ds is kept (probs' shape) for the second kernel.
//   dk, dv:  for each query t holding key u at slot j: dk_u += ds_tj q_t, dv_u += p_tj dO_t.
// Written for correctness and parity with the CPU first: svtr-lite on a GPU still takes the
// composed path (ops/attention.cpp, local_multi_head_attention), which uses cuBLAS's products.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "ops/backend.h"
#include "ops/window_attention.h"
#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

constexpr int kWarps = 8;  // warps per block

struct Geometry {
  int64_t L, N, E, heads, hd, H, W, wh, ww, S;
  int64_t items;      // warps' work items (N x heads x L)
  int64_t ts, ls;     // q, k, v (and dq, dk, dv): a token's and a line's stride (q's own)
  int64_t ots;        // a token's row stride in the output and its gradient (contiguous: N x E)
  double scale;
};

Geometry geometry_of(const Tensor& q, const WindowAttentionParams& p) {
  Geometry g;
  g.L = q.size(0);
  g.N = q.size(1);
  g.E = q.size(2);
  g.heads = p.heads;
  g.hd = g.E / p.heads;
  g.H = p.H;
  g.W = p.W;
  g.wh = p.window_h;
  g.ww = p.window_w;
  g.S = window_slots(p.H, p.W, p.window_h, p.window_w);
  g.items = g.N * g.heads * g.L;
  g.ts = q.stride(0);
  g.ls = q.stride(1);
  g.ots = g.N * g.E;
  g.scale = p.scale;
  return g;
}

// Work item `it` of a warp: pair (line n, head h) = it / L, token t = it % L; off is the pair's
// first channel in a row of q, k, v, ooff in a row of the output (L, N, E).
struct Item {
  int64_t pair, t, n, off, ooff;
};

__device__ __forceinline__ Item item_of(const Geometry& g, int64_t it) {
  Item i;
  i.pair = it / g.L;
  i.t = it - i.pair * g.L;
  i.n = i.pair / g.heads;
  i.off = i.n * g.ls + (i.pair - i.n * g.heads) * g.hd;
  i.ooff = i.n * g.E + (i.pair - i.n * g.heads) * g.hd;
  return i;
}

// A grid-stride loop over work items, one per warp.
__device__ __forceinline__ int64_t first_item() { return blockIdx.x * (int64_t)kWarps + (threadIdx.x >> 5); }
__device__ __forceinline__ int64_t item_stride() { return (int64_t)gridDim.x * kWarps; }

// The warp's dot product of two rows of hd values (lanes over the channels); every lane gets it.
template <class T>
__device__ __forceinline__ double warp_dot(const T* a, const T* b, int64_t hd, int lane) {
  double s = 0;
  for (int64_t d = lane; d < hd; d += 32) s += (double)a[d] * (double)b[d];
  return cuda::warp_sum(s);
}

template <class T>
__global__ void window_attention_kernel(Geometry g, const T* __restrict__ q, const T* __restrict__ k,
                                        const T* __restrict__ v, const uint8_t* __restrict__ pad, T* __restrict__ out,
                                        T* __restrict__ probs) {
  const int lane = threadIdx.x & 31;
  const int64_t ts = g.ts;
  for (int64_t it = first_item(); it < g.items; it += item_stride()) {
    const Item i = item_of(g, it);
    const int64_t t = i.t, n = i.n, off = i.off;
    const TokenWindow w = token_window(t, g.H, g.W, g.wh, g.ww);
    const int64_t nk = w.slots(), cols = w.cols();
    const T* qt = q + t * ts + off;
    // Pass 1: the max and the sum of exp over the window, lanes over slots.
    double m = -INFINITY, sum = 0;
    for (int64_t j = lane; j < nk; j += 32) {
      const int64_t key = (w.r0 + j / cols) * g.W + w.c0 + j % cols;
      if (pad && pad[n * g.L + key]) continue;
      double s = 0;
      for (int64_t d = 0; d < g.hd; ++d) s += (double)qt[d] * (double)k[key * ts + off + d];
      s *= g.scale;
      if (s > m) {
        sum = sum * exp(m - s) + 1;
        m = s;
      } else {
        sum += exp(s - m);
      }
    }
    const double mx = cuda::warp_max(m);
    sum = cuda::warp_sum(m == -INFINITY ? 0.0 : sum * exp(m - mx));
    T* o = out + t * g.ots + i.ooff;
    T* pr = probs ? probs + it * g.S : nullptr;
    if (mx == -INFINITY) {  // no key allowed
      for (int64_t d = lane; d < g.hd; d += 32) o[d] = T(0);
      if (pr)
        for (int64_t j = lane; j < g.S; j += 32) pr[j] = T(0);
      continue;
    }
    // Pass 2: lanes over channels, slot by slot.
    for (int64_t d0 = 0; d0 < g.hd; d0 += 32) {
      const int64_t d = d0 + lane;
      double acc = 0;
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t key = (w.r0 + j / cols) * g.W + w.c0 + j % cols;
        double p = 0;
        if (!(pad && pad[n * g.L + key])) p = exp(warp_dot(qt, k + key * ts + off, g.hd, lane) * g.scale - mx) / sum;
        if (d < g.hd) acc += p * (double)v[key * ts + off + d];
        if (pr && d0 == 0 && lane == 0) pr[j] = (T)p;
      }
      if (d < g.hd) o[d] = (T)acc;
    }
    if (pr)
      for (int64_t j = nk + lane; j < g.S; j += 32) pr[j] = T(0);
  }
}

template <class T>
__global__ void window_attention_dq_kernel(Geometry g, const T* __restrict__ k, const T* __restrict__ v,
                                           const T* __restrict__ out, const T* __restrict__ probs,
                                           const T* __restrict__ dout, T* __restrict__ dq, T* __restrict__ ds) {
  const int lane = threadIdx.x & 31;
  const int64_t ts = g.ts;
  for (int64_t it = first_item(); it < g.items; it += item_stride()) {
    const Item i = item_of(g, it);
    const int64_t t = i.t, off = i.off;
    const TokenWindow w = token_window(t, g.H, g.W, g.wh, g.ww);
    const int64_t nk = w.slots(), cols = w.cols();
    const T* gt = dout + t * g.ots + i.ooff;
    const double D = warp_dot(gt, out + t * g.ots + i.ooff, g.hd, lane);
    const T* pr = probs + it * g.S;
    T* dsr = ds + it * g.S;
    for (int64_t d0 = 0; d0 < g.hd; d0 += 32) {
      const int64_t d = d0 + lane;
      double acc = 0;
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t key = (w.r0 + j / cols) * g.W + w.c0 + j % cols;
        const double dp = warp_dot(gt, v + key * ts + off, g.hd, lane);
        const double s = (double)pr[j] * (dp - D) * g.scale;
        if (d < g.hd) acc += s * (double)k[key * ts + off + d];
        if (d0 == 0 && lane == 0) dsr[j] = (T)s;
      }
      if (d < g.hd) dq[t * ts + off + d] = (T)acc;
    }
  }
}

template <class T>
__global__ void window_attention_dkv_kernel(Geometry g, const T* __restrict__ q, const T* __restrict__ probs,
                                            const T* __restrict__ ds, const T* __restrict__ dout, T* __restrict__ dk,
                                            T* __restrict__ dv) {
  const int lane = threadIdx.x & 31;
  const int64_t ts = g.ts;
  for (int64_t it = first_item(); it < g.items; it += item_stride()) {
    const Item i = item_of(g, it);
    const int64_t pair = i.pair, u = i.t, off = i.off;
    const TokenWindow around = token_window(u, g.H, g.W, g.wh, g.ww);  // the queries whose windows hold u
    const int64_t ru = u / g.W, cu = u - ru * g.W;
    for (int64_t d = lane; d < g.hd; d += 32) {
      double a = 0, b = 0;
      for (int64_t r = around.r0; r <= around.r1; ++r)
        for (int64_t c = around.c0; c <= around.c1; ++c) {
          const int64_t t = r * g.W + c;
          const TokenWindow w = token_window(t, g.H, g.W, g.wh, g.ww);
          const int64_t slot = (ru - w.r0) * w.cols() + (cu - w.c0), row = (pair * g.L + t) * g.S + slot;
          a += (double)ds[row] * (double)q[t * ts + off + d];
          b += (double)probs[row] * (double)dout[t * g.ots + i.ooff + d];
        }
      dk[u * ts + off + d] = (T)a;
      dv[u * ts + off + d] = (T)b;
    }
  }
}

unsigned blocks_for(int64_t items) {
  int64_t b = (items + kWarps - 1) / kWarps;
  return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

void cuda_window_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding,
                           const WindowAttentionParams& p, const Tensor& out, const Tensor& probs) {
  cuda::DeviceScope scope(out);
  const Geometry g = geometry_of(q, p);
  const int64_t items = g.items;
  if (items == 0) return;
  dispatch_float(q.dtype(), "window_attention", [&](auto zero) {
    using T = decltype(zero);
    window_attention_kernel<T><<<blocks_for(items), kWarps * 32, 0, scope.stream>>>(
        g, q.data<T>(), k.data<T>(), v.data<T>(), key_padding.defined() ? key_padding.data<uint8_t>() : nullptr,
        out.data<T>(), probs.defined() ? probs.data<T>() : nullptr);
  });
  OCRT_CUDA_LAUNCH_CHECK("window_attention", scope.device);
}

void cuda_window_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                    const Tensor& probs, const Tensor& dout, const WindowAttentionParams& p,
                                    const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  cuda::DeviceScope scope(dq);
  const Geometry g = geometry_of(q, p);
  const int64_t items = g.items;
  if (items == 0) return;
  const Tensor ds = Tensor::empty(probs.shape(), probs.dtype(), probs.device());
  dispatch_float(q.dtype(), "window_attention_backward", [&](auto zero) {
    using T = decltype(zero);
    window_attention_dq_kernel<T><<<blocks_for(items), kWarps * 32, 0, scope.stream>>>(
        g, k.data<T>(), v.data<T>(), out.data<T>(), probs.data<T>(), dout.data<T>(), dq.data<T>(), ds.data<T>());
    window_attention_dkv_kernel<T><<<blocks_for(items), kWarps * 32, 0, scope.stream>>>(
        g, q.data<T>(), probs.data<T>(), ds.data<T>(), dout.data<T>(), dk.data<T>(), dv.data<T>());
  });
  OCRT_CUDA_LAUNCH_CHECK("window_attention_backward", scope.device);
}

}  // namespace

void register_cuda_attention(LayerBackend& b) {
  b.window_attention = cuda_window_attention;
  b.window_attention_backward = cuda_window_attention_backward;
}

}  // namespace ocrt
