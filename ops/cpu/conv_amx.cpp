// bf16 convolutions on AMX tiles: see ops/cpu/conv_amx.h.
#include "ops/cpu/conv_amx.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "ops/cpu/fingerprint.h"
#include "runtime/bf16.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/gemm_kernels.h"
#include "runtime/cpu_isa.h"
#include "runtime/error.h"

namespace ocrt::cpu {

#if defined(OCRT_CPU_SGEMM)

namespace {

constexpr int64_t kPanel = 16;  // output channels a panel (a tile's columns)

// A layer's weights as the tiles read them: panel q (output channels 16q ..) holds, for each pair
// row kp of K (k = tap * C + channel, tap-major), the pairs (w[j][2kp], w[j][2kp + 1]) of its 16
// channels; channels past Cout are zero. The key says which weights these are.
struct PanelKey {
  const float* w;
  int64_t C, Cout, taps;
  uint64_t print;
  bool operator==(const PanelKey&) const = default;
};

struct Panels {
  PanelKey key;
  int64_t rows = 0;  // pair rows a panel: taps * C / 2
  std::unique_ptr<uint32_t, void (*)(void*)> owned{nullptr, std::free};  // null: data is a thread's buffer
  uint32_t* data = nullptr;
  size_t bytes = 0;
  const uint32_t* panel(int64_t q) const { return data + q * rows * kPanel; }
};

size_t panel_bytes(int64_t C, int64_t Cout, int64_t taps) {
  return (size_t)((Cout + kPanel - 1) / kPanel * kPanel * taps * C / 2) * sizeof(uint32_t);
}

// Memory for `bytes` of panels, from a cache line's start.
std::unique_ptr<uint32_t, void (*)(void*)> panel_memory(size_t bytes) {
  std::unique_ptr<uint32_t, void (*)(void*)> m((uint32_t*)std::aligned_alloc(64, (bytes + 63) / 64 * 64), std::free);
  OCRT_CHECK(m != nullptr, "conv2d: out of memory for ", bytes, " bytes of packed weights");
  return m;
}

// w into p's panels (p->key says its shape). turned: w is the forward's (C_f = Cout, Cout_f = C,
// kh, kw) and the panels are of the convolution of dx (conv2d.cpp's amx_backward_input): output
// channel co takes input channel c at tap t from w[c, co, taps - 1 - t], the filter turned by 180
// degrees. A pair of input channels at a time, all taps: a filter's values for them lie side by
// side in w (2 taps of them), so each of the panel's 16 filters is read front to back.
// The values are made bf16 first, all of w in vectors (detail::avx512bf16_convert, the bits of
// runtime/bf16.h), then paired as integers: converting each value on its own took most of the
// packing's time.
void pack_into(Panels& p, const float* w_float, bool turned) {
  const int64_t C = p.key.C, Cout = p.key.Cout, taps = p.key.taps, panels = (Cout + kPanel - 1) / kPanel;
  p.rows = taps * C / 2;
  const int64_t count = C * Cout * taps;  // a multiple of 32: C is
  thread_local std::vector<uint16_t> bits;
  bits.resize((size_t)count);
  uint16_t* const converted = bits.data();  // this thread's buffer, named for the team
  constexpr int64_t kChunk = 32 * 1024;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; i += kChunk)
    detail::avx512bf16_convert(w_float + i, std::min(kChunk, count - i), converted + i);
  const uint16_t* w = converted;
  auto bf16_pair = [](uint16_t even, uint16_t odd) { return (uint32_t)even | (uint32_t)odd << 16; };
#pragma omp parallel for schedule(static)
  for (int64_t q = 0; q < panels; ++q) {
    uint32_t* out = p.data + q * p.rows * kPanel;
    for (int64_t c = 0; c < C; c += 2)  // C is even: a pair never straddles two taps
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t co = q * kPanel + j;
        if (co >= Cout) {
          for (int64_t t = 0; t < taps; ++t) out[(t * C + c) / 2 * kPanel + j] = 0u;
          continue;
        }
        if (turned) {  // w[c, co, taps - 1 - t] and w[c + 1, co, ...]
          const uint16_t *even = w + (c * Cout + co) * taps + taps - 1, *odd = even + Cout * taps;
          for (int64_t t = 0; t < taps; ++t) out[(t * C + c) / 2 * kPanel + j] = bf16_pair(even[-t], odd[-t]);
        } else {  // w[co, c, t] and w[co, c + 1, t]
          const uint16_t *even = w + (co * C + c) * taps, *odd = even + taps;
          for (int64_t t = 0; t < taps; ++t) out[(t * C + c) / 2 * kPanel + j] = bf16_pair(even[t], odd[t]);
        }
      }
  }
}

// Turned weights for one call, in a buffer of the calling thread's that only grows: the
// backward's weights change every step, so they are never kept, and a buffer of the kernel's
// (std::aligned_alloc) would fault its pages in afresh every call.
std::shared_ptr<const Panels> pack_turned(const float* w, int64_t C, int64_t Cout, int64_t taps) {
  thread_local std::unique_ptr<uint32_t, void (*)(void*)> buffer{nullptr, std::free};
  thread_local size_t capacity = 0;
  auto p = std::make_shared<Panels>();
  p->key = PanelKey{w, C, Cout, taps, 0};
  p->bytes = panel_bytes(C, Cout, taps);
  if (capacity < p->bytes) {
    buffer = panel_memory(p->bytes);
    capacity = p->bytes;
  }
  p->data = buffer.get();
  pack_into(*p, w, true);
  return p;
}

// The packed weights kept between calls, newest use last, at most kKeptBytes in all; weights that
// change in place (training) replace their own entry instead of adding one, in its memory when
// no call still reads it.
constexpr size_t kKeptBytes = size_t(128) << 20;
std::mutex g_mu;
std::list<std::shared_ptr<Panels>> g_kept;
KeysInMaking<PanelKey> g_making;  // the panels being made now

// The panels of these weights: kept ones, found or made now; made for this call alone while
// another thread makes the kept ones.
std::shared_ptr<const Panels> kept_panels(const float* w, int64_t C, int64_t Cout, int64_t taps) {
  const PanelKey key{w, C, Cout, taps, weights_fingerprint(w, Cout * C * taps)};
  std::shared_ptr<Panels> made;
  bool claimed = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (auto found = find_kept(g_kept, key)) return found;
    claimed = g_making.claim(key);
    // The same weights' stale entry, if no other call holds it: its memory is reused.
    for (auto it = g_kept.begin(); claimed && it != g_kept.end(); ++it)
      if ((*it)->key.w == w && (*it)->key.C == C && (*it)->key.Cout == Cout && (*it)->key.taps == taps &&
          it->use_count() == 1) {
        made = *it;
        g_kept.erase(it);
        break;
      }
  }
  std::optional<Making<PanelKey>> making;
  if (claimed) making.emplace(g_mu, g_making, key);
  if (!made) {
    made = std::make_shared<Panels>();
    made->bytes = panel_bytes(C, Cout, taps);
    made->owned = panel_memory(made->bytes);
    made->data = made->owned.get();
  }
  made->key = key;
  pack_into(*made, w, false);
  if (!claimed) return made;  // another thread is making the kept ones now: these serve this call alone
  std::lock_guard<std::mutex> lock(g_mu);
  g_kept.remove_if([&](const std::shared_ptr<Panels>& e) {
    return e->key.w == w && e->key.C == C && e->key.Cout == Cout && e->key.taps == taps;
  });
  g_kept.push_back(made);
  drop_oldest_beyond(g_kept, kKeptBytes);
  return made;
}

}  // namespace

bool amx_conv_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p) {
  return C >= 32 && C % 32 == 0 && Cout >= 16 && kh >= 1 && kw >= 1 && p.groups == 1 && p.stride_h == 1 &&
         p.stride_w == 1 && matmul_precision() == MatmulPrecision::bf16 && cpu_isa() == CpuIsa::amx;
}

namespace {

// Every entry point: into y, or (y null) group by group into buffers handed to done; w as it
// is (packed and kept) or turned (packed for this call alone: the backward's weights change
// every step).
void amx_conv(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H, int64_t W,
              int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p, const AmxConvDone* done,
              bool turned = false) {
  const int64_t dh = p.dilation_h, dw = p.dilation_w, ph = p.pad_h, pw = p.pad_w;
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw;
  const int64_t Ho = Hp - dh * (kh - 1), Wo = Wp - dw * (kw - 1);
  OCRT_CHECK(Ho >= 1 && Wo >= 1, "conv2d: the input is smaller than the kernel");
  const int64_t P = C / 2, HoWo = Ho * Wo, taps = kh * kw;
  const std::shared_ptr<const Panels> panels =
      turned ? pack_turned(w, C, Cout, taps) : kept_panels(w, C, Cout, taps);
  std::vector<int64_t> tap_at, tap_bytes;  // where each tap's pairs lie from the pixel at its top left
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) tap_at.push_back((i * dh * Wp + j * dw) * P);
  for (const int64_t t : tap_at) tap_bytes.push_back(t * (int64_t)sizeof(uint32_t));
  // The product runs over the padded image's pixels (each output row and the pitch - width
  // pixels after it), in blocks of 32; dest says where each pixel's sums go (-1: nowhere).
  const std::vector<int64_t> dest = detail::pitched_destinations(Ho, Wo, Wp);
  const int64_t blocks = (int64_t)dest.size() / 32;
  // The image's pairs: the padded image, and as far past it as the last block's taps read.
  const int64_t image_pairs = std::max(Hp * Wp * P, blocks * 32 * P + tap_at.back() + P);
  const int64_t panel_count = (Cout + kPanel - 1) / kPanel, pairs = (panel_count + 1) / 2;
  // Panel pairs q0..q1 of output channels against row blocks b0..b1 of `count` images (their
  // pairs one after another, image_stride apart, made by make_images), into y from image n0 on.
  // Each panel pair is taken by every image's blocks in turn while it is in the L2.
  const int64_t image_stride = (image_pairs + 15) / 16 * 16;  // whole cache lines
  auto product = [&](const uint32_t* images, float* out, int64_t count, int64_t q0, int64_t q1, int64_t b0,
                     int64_t b1) {
    alignas(64) float acc[4 * 256];
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t pb = 2 * q;
      const bool second = pb + 1 < panel_count;
      for (int64_t i = 0; i < count; ++i) {
        const uint32_t* image = images + i * image_stride;
        float* yn = out + i * Cout * HoWo;
        for (int64_t blk = b0; blk < b1; ++blk) {
          detail::amx_bf16_conv_tiles(image + blk * 32 * P, P, tap_bytes.data(), taps, P, panels->panel(pb),
                                      second ? panels->panel(pb + 1) : nullptr, acc);
          for (int h = 0; h < (second ? 2 : 1); ++h) {
            const int64_t j0 = (pb + h) * kPanel, cols = std::min(kPanel, Cout - j0);
            for (int half = 0; half < 2; ++half)
              detail::amx_f32_store_mapped(acc + (2 * half + h) * 256, dest.data() + blk * 32 + half * 16, j0, cols,
                                           bias, yn, HoWo);
          }
        }
      }
    }
  };
  // Images n0 .. n0 + count as channels-last pairs, in a buffer kept per thread, from a cache
  // line's start (cache_line_start: every tile row one line).
  auto make_images = [&](int64_t n0, int64_t count) -> const uint32_t* {
    thread_local std::vector<uint32_t> buf;
    buf.resize((size_t)(count * image_stride) + 16);
    uint32_t* images = cache_line_start(buf.data());
    for (int64_t i = 0; i < count; ++i) {
      uint32_t* image = images + i * image_stride;
      std::fill(image, image + image_pairs, 0u);
      detail::amx_bf16_image(x + (n0 + i) * C * H * W, C, H, W, ph, pw, Wp, image);
    }
    return images;
  };
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool by_group = N >= 2 && threads > 1;
  // Images in groups that share each panel pair's trip through the L2: as many as keep their
  // pairs under kGroupBytes, so that a layer whose weights outgrow the L2 (512 -> 512
  // channels: 4.7 MB) reads them from memory once a group rather than once an image.
  constexpr int64_t kGroupBytes = int64_t(1300) << 10;
  const int64_t group =
      by_group ? std::clamp<int64_t>(kGroupBytes / (image_stride * 4), 1, std::max<int64_t>(1, N / threads)) : 1;
  const int64_t groups = (N + group - 1) / group;
  // With done: each thread's group goes to its slot of buffers first.
  const Tensor buffers =
      done ? Tensor::empty({by_group ? threads : 1, group, Cout, Ho, Wo}) : Tensor();
  auto target = [&](int64_t n0, int slot) {
    return done ? buffers.narrow(0, slot, 1).data<float>() : y + n0 * Cout * HoWo;
  };
  auto finish = [&](int64_t n0, int64_t count, int slot) {
    if (done) (*done)(n0, count, buffers.narrow(0, slot, 1).reshape({group, Cout, Ho, Wo}).narrow(0, 0, count));
  };
  if (by_group) {
    std::exception_ptr failed;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t gi = 0; gi < groups; ++gi) {
      try {
        const int64_t n0 = gi * group, count = std::min(group, N - n0);
        const int slot = omp_get_thread_num();
        product(make_images(n0, count), target(n0, slot), count, 0, pairs, 0, blocks);
        finish(n0, count, slot);
      } catch (...) {
#pragma omp critical(ocrt_amx_conv)
        failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    return;
  }
  for (int64_t n = 0; n < N; ++n) {
    const uint32_t* image = make_images(n, 1);
    float* out = target(n, 0);
    detail::share_pairs_or_blocks(threads, pairs, blocks, [&](int64_t q0, int64_t q1, int64_t b0, int64_t b1) {
      product(image, out, 1, q0, q1, b0, b1);
    });
    finish(n, 1, 0);
  }
}

}  // namespace

void amx_bf16_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p) {
  amx_conv(x, w, bias, y, N, C, H, W, Cout, kh, kw, p, nullptr);
}

void amx_bf16_conv2d_turned(const float* x, const float* w, float* y, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p) {
  amx_conv(x, w, nullptr, y, N, C, H, W, Cout, kh, kw, p, nullptr, true);
}

void amx_bf16_conv2d_each(const float* x, const float* w, const float* bias, int64_t N, int64_t C, int64_t H,
                          int64_t W, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p,
                          const AmxConvDone& done) {
  amx_conv(x, w, bias, nullptr, N, C, H, W, Cout, kh, kw, p, &done);
}

bool amx_weight_grad_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p) {
  return amx_conv_applies(C, Cout, kh, kw, p) && Cout % 32 == 0;
}

// dw[k, c, i, j] = sum over n, oh, ow of dy[n, k, oh, ow] x_padded[n, c, oh + i dh, ow + j dw], a
// product of Cout rows by C kh kw columns over every output pixel of every image. The pixels run
// over the padded image's grid as the forward's do: output pixel (oh, ow) is grid pixel q = oh
// Wp + ow, where dy is zero past each row's end (the pitch - width pixels), and tap t's input
// pixel is q + off[t]. A tile's K is 32 grid pixels: its rows (output channels) read 32 bf16 of
// dy's row straight from dz (dy on the grid, bf16, one row a channel), its columns (16 input
// channels of one tap) 16 pairs of neighbouring pixels (q, q + 1) from xi (every grid pixel's
// pair with the next one, channels last), starting at q + off[t] whether that is odd or even.
// Each 32 x 32 block of dw (32 output by 32 input channels, one tap) sums in the tiles over all of
// a group's images; groups of images (as many as keep a block's slices of dz and xi under
// kGroupBytes) add into the blocks' sums in turn. A block's sums come in a fixed order whatever
// the thread count (threads share out blocks, never pixels).
void amx_bf16_conv2d_weight_grad(const float* x, const float* dy, float* dw, int64_t N, int64_t C, int64_t H,
                                 int64_t W, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p) {
  const int64_t dh = p.dilation_h, dwl = p.dilation_w, ph = p.pad_h, pw = p.pad_w;
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw;
  const int64_t Ho = Hp - dh * (kh - 1), Wo = Wp - dwl * (kw - 1);
  OCRT_CHECK(Ho >= 1 && Wo >= 1, "conv2d: the input is smaller than the kernel");
  const int64_t taps = kh * kw, Q = (Ho * Wp + 31) / 32 * 32, steps = Q / 32;
  std::vector<int64_t> off;  // each tap's input pixel from the output pixel, on the grid
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) off.push_back(i * dh * Wp + j * dwl);
  // xi's pixels: as far as the last step's pairs reach (Q - 1 + off.back() < L), and the whole
  // padded image (L >= Hp Wp); the planes behind it 16 values further (the pairs' vector reads).
  const int64_t L = (Q + off.back() + 15) / 16 * 16, length = L + 32;
  const int64_t KB = Cout / 32, CB = C / 32, blocks = CB * KB * taps;
  const int64_t slice_bytes = 32 * Q * 2 + L * 128;  // an image's share of a block's dz and xi slices
  constexpr int64_t kGroupBytes = int64_t(1) << 20;
  const int64_t group = std::clamp<int64_t>(kGroupBytes / slice_bytes, 1, N);
  const int64_t dz_image = Cout * Q, xi_image = L * C;  // values an image (both multiples of 32)
  // From the CPU caching allocator (runtime/cpu_allocator.h), not faulted in afresh every call.
  const Tensor dz_mem = Tensor::empty({(group * dz_image + 32) / 2}, DType::f32);
  const Tensor xi_mem = Tensor::empty({group * xi_image + 16}, DType::f32);
  const Tensor acc_mem = Tensor::empty({blocks * 1024 + 16}, DType::f32);
  uint16_t* dz = cache_line_start(reinterpret_cast<uint16_t*>(dz_mem.data<float>()));
  uint32_t* xi = cache_line_start(reinterpret_cast<uint32_t*>(xi_mem.data<float>()));
  float* acc = cache_line_start(acc_mem.data<float>());
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  for (int64_t n0 = 0; n0 < N; n0 += group) {
    const int64_t count = std::min(group, N - n0);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < count; ++i) {
      const int64_t n = n0 + i;
      detail::amx_bf16_pitched_planes(dy + n * Cout * Ho * Wo, Cout, Ho, Wo, 0, 0, Wp, Q, dz + i * dz_image);
      thread_local std::vector<uint16_t> planes;
      planes.resize((size_t)(C * length));
      detail::amx_bf16_pitched_planes(x + n * C * H * W, C, H, W, ph, pw, Wp, length, planes.data());
      detail::amx_bf16_pixel_pairs(planes.data(), C, length, L, xi + i * xi_image);
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t t = b % taps, kb = (b / taps) % KB, cb = b / taps / KB;
      const uint16_t* a[64];
      const uint32_t* bp[64];
      for (int64_t i0 = 0; i0 < count; i0 += 64) {
        const int64_t n = std::min<int64_t>(64, count - i0);
        for (int64_t i = 0; i < n; ++i) {
          a[i] = dz + (i0 + i) * dz_image + kb * 32 * Q;
          bp[i] = xi + (i0 + i) * xi_image + cb * L * 32 + off[t] * 32;
        }
        detail::amx_bf16_wgrad_tiles(a, bp, n, steps, Q, 64, acc + b * 1024, n0 > 0 || i0 > 0);
      }
    }
  }
  // The blocks' tiles into dw (Cout, C, kh, kw).
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t t = b % taps, kb = (b / taps) % KB, cb = b / taps / KB;
    for (int64_t tile = 0; tile < 4; ++tile)
      for (int64_t i = 0; i < 16; ++i)
        for (int64_t j = 0; j < 16; ++j) {
          const int64_t k = kb * 32 + (tile / 2) * 16 + i, c = cb * 32 + (tile % 2) * 16 + j;
          dw[(k * C + c) * taps + t] = acc[b * 1024 + tile * 256 + i * 16 + j];
        }
  }
}

#else

bool amx_conv_applies(int64_t, int64_t, int64_t, int64_t, const Conv2dParams&) { return false; }
bool amx_weight_grad_applies(int64_t, int64_t, int64_t, int64_t, const Conv2dParams&) { return false; }

void amx_bf16_conv2d_weight_grad(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                 int64_t, int64_t, const Conv2dParams&) {
  OCRT_CHECK(false, "conv2d: this build has no AMX kernels");
}

void amx_bf16_conv2d(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                     int64_t, int64_t, const Conv2dParams&) {
  OCRT_CHECK(false, "conv2d: this build has no AMX kernels");
}

void amx_bf16_conv2d_turned(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                            int64_t, const Conv2dParams&) {
  OCRT_CHECK(false, "conv2d: this build has no AMX kernels");
}

void amx_bf16_conv2d_each(const float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                          int64_t, int64_t, const Conv2dParams&, const AmxConvDone&) {
  OCRT_CHECK(false, "conv2d: this build has no AMX kernels");
}

#endif

}  // namespace ocrt::cpu
