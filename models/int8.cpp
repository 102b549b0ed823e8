// int8 inference: see models/int8.h for the scheme and docs/int8.md for the figures.
#include "models/int8.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>

#include "models/layers.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/int8_winograd.h"
#include "runtime/error.h"

namespace ocrt::nn {

namespace {

std::atomic<Int8Calibration*> g_calibration{nullptr};

int64_t round_up4(int64_t x) { return (x + 3) / 4 * 4; }

// The most bytes of an image's codes an int8 convolution keeps for its thread's next call.
constexpr size_t kKeptCodes = size_t(4) << 20;

// Visits module and every module below it with its dotted name ("" for the root), except
// what is inside a MultiheadAttention: its out_proj is a Linear whose weight the attention op
// reads itself (ops/attention.h), never through Linear::forward, so int8 leaves it alone.
void walk(const Module& m, const std::string& prefix, const std::function<void(const std::string&, const Module&)>& fn) {
  fn(prefix, m);
  if (dynamic_cast<const MultiheadAttention*>(&m)) return;
  for (const auto& [name, child] : m.children()) walk(*child, prefix.empty() ? name : prefix + "." + name, fn);
}

std::string join(const std::string& prefix, const std::string& name) { return prefix.empty() ? name : prefix + "." + name; }

// Layer l's direction d input weight of an LSTM: "weight_ih_l<l>" or "weight_ih_l<l>_reverse";
// its recurrent weight "weight_hh_l<l>[_reverse]".
std::string lstm_ih_name(int64_t l, int64_t d) { return "weight_ih_l" + std::to_string(l) + (d ? "_reverse" : ""); }
std::string lstm_hh_name(int64_t l, int64_t d) { return "weight_hh_l" + std::to_string(l) + (d ? "_reverse" : ""); }

// The per-column epilogue of a layer: scale = input scale x weight scale, offset = the input's
// code offset x the column's sum of codes, bias or 0.
void make_epilogue(const Int8Input& in, const Tensor& scales, const Tensor& bias, const cpu::Int8PackedWeights& packed,
                   std::vector<float>& scale, std::vector<float>& bias_out, std::vector<int32_t>& offset) {
  const int64_t n = packed.cols();
  OCRT_CHECK(scales.dtype() == DType::f32 && scales.numel() == n, "int8 layer: expected ", n,
             " float32 weight scales, got ", scales.numel(), " ", dtype_name(scales.dtype()));
  OCRT_CHECK(!bias.defined() || (bias.dtype() == DType::f32 && bias.numel() == n), "int8 layer: expected a bias of ",
             n, " float32 values");
  const std::vector<float> s = scales.contiguous().to_vector<float>();
  const std::vector<float> b = bias.defined() ? bias.contiguous().to_vector<float>() : std::vector<float>((size_t)n, 0.f);
  scale.resize((size_t)n), bias_out = b, offset.resize((size_t)n);
  for (int64_t j = 0; j < n; ++j) {
    scale[(size_t)j] = in.scale * s[(size_t)j];
    offset[(size_t)j] = in.offset() * packed.column_sums()[(size_t)j];
  }
}

void check_input(const Int8Input& in) {
  OCRT_CHECK(std::isfinite(in.scale) && in.scale > 0, "int8 layer: the input scale must be a positive number, got ",
             in.scale);
}

}  // namespace

void int8_quantize_input(const float* x, int64_t n, const Int8Input& in, uint8_t* codes) {
  cpu::int8_quantize(x, n, 1.0f / in.scale, in.is_signed ? -in.max_code() : 0, in.max_code(), in.offset(), codes);
}

Int8Weight quantize_weight(const Tensor& w) {
  OCRT_CHECK(w.dtype() == DType::f32 && w.dim() >= 1 && w.device().is_cpu(),
             "quantize_weight: expected a float32 CPU tensor of rank >= 1");
  const int64_t rows = w.size(0), per = rows ? w.numel() / rows : 0;
  const std::vector<float> v = w.contiguous().to_vector<float>();
  std::vector<int8_t> codes(v.size());
  std::vector<float> scales((size_t)rows);
  // (A NaN would reach the int8 cast below: undefined. A file's weights are checked finite when
  // it is read, but a detector's head quantizes weights it folded with a BatchNorm, whose
  // running variance a damaged file may make negative.)
  for (const float x : v) OCRT_CHECK(std::isfinite(x), "quantize_weight: a weight is not finite (", x, ")");
  for (int64_t o = 0; o < rows; ++o) {
    float amax = 0;
    for (int64_t k = 0; k < per; ++k) amax = std::max(amax, std::fabs(v[(size_t)(o * per + k)]));
    const float s = amax > 0 ? amax / cpu::kInt8CodeMax : 1.0f;
    scales[(size_t)o] = s;
    for (int64_t k = 0; k < per; ++k) {
      const float q = std::nearbyint(v[(size_t)(o * per + k)] / s);
      codes[(size_t)(o * per + k)] = (int8_t)std::clamp(q, -127.0f, 127.0f);
    }
  }
  return {Tensor::from_vector(codes, w.shape()), Tensor::from_vector(scales, {rows})};
}

Tensor dequantize_weight(const Tensor& codes, const Tensor& scales) {
  OCRT_CHECK(codes.dtype() == DType::i8 && codes.dim() >= 1, "dequantize_weight: expected int8 codes");
  const int64_t rows = codes.size(0), per = rows ? codes.numel() / rows : 0;
  OCRT_CHECK(scales.dtype() == DType::f32 && scales.numel() == rows, "dequantize_weight: expected ", rows,
             " float32 scales, got ", scales.numel());
  const std::vector<int8_t> c = codes.contiguous().to_vector<int8_t>();
  const std::vector<float> s = scales.contiguous().to_vector<float>();
  std::vector<float> out(c.size());
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t k = 0; k < per; ++k) out[(size_t)(o * per + k)] = (float)c[(size_t)(o * per + k)] * s[(size_t)o];
  return Tensor::from_vector(out, codes.shape());
}

// ---- Int8Linear ----

namespace {
cpu::Int8PackedWeights pack_linear(const Tensor& codes) {
  OCRT_CHECK(codes.dtype() == DType::i8 && codes.dim() == 2, "Int8Linear: expected (out, in) int8 codes");
  const Tensor c = codes.contiguous();
  return cpu::Int8PackedWeights(c.size(1), c.size(0), c.data<int8_t>(), c.size(1), 1);
}
}  // namespace

Int8Linear::Int8Linear(const Tensor& codes, const Tensor& scales, const Tensor& bias, Int8Input input)
    : in_(codes.size(1)), out_(codes.size(0)), kp_(round_up4(codes.size(1))), input_(input), packed_(pack_linear(codes)) {
  check_input(input);
  make_epilogue(input_, scales, bias, packed_, scale_, bias_, offset_);
}

Tensor Int8Linear::forward(const Tensor& x) const {
  OCRT_CHECK(x.device().is_cpu() && x.dtype() == DType::f32 && x.dim() >= 1 && x.size(-1) == in_,
             "Int8Linear: expected a float32 CPU input with ", in_, " features, got ", shape_str(x.shape()), " ",
             dtype_name(x.dtype()), " on ", x.device().str());
  const Tensor xc = x.contiguous();
  const int64_t M = xc.numel() / in_;
  thread_local std::vector<uint8_t> codes;  // kept per thread between calls, as Int8Conv2d's
  codes.assign((size_t)(M * kp_), (uint8_t)input_.offset());
  const float* xp = xc.data<float>();
  for (int64_t i = 0; i < M; ++i) int8_quantize_input(xp + i * in_, in_, input_, codes.data() + i * kp_);
  Shape shape = x.shape();
  shape.back() = out_;
  Tensor y = Tensor::empty(shape);
  const cpu::Int8Epilogue e{scale_.data(), offset_.data(), bias_.data()};
  cpu::int8_gemm(M, cpu::int8_rows(codes.data(), kp_), packed_, e, y.data<float>(), out_, 1);
  return y;
}

// ---- Int8Conv2d ----

namespace {
// K ordered tap-major then channel (k = (ki * kw + kj) * cp + c), the order the packer reads an
// image stored pixel by pixel (channels last); channels c..cp-1 get zero codes.
cpu::Int8PackedWeights pack_conv(const Tensor& codes, int64_t cp) {
  OCRT_CHECK(codes.dtype() == DType::i8 && codes.dim() == 4, "Int8Conv2d: expected (out, in, kh, kw) int8 codes");
  const Tensor c = codes.contiguous();
  const int64_t cout = c.size(0), C = c.size(1), kh = c.size(2), kw = c.size(3), K = kh * kw * cp;
  const int8_t* w = c.data<int8_t>();
  std::vector<int8_t> rows((size_t)(cout * K), 0);
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t t = 0; t < kh * kw; ++t) rows[(size_t)(o * K + t * cp + ch)] = w[(o * C + ch) * kh * kw + t];
  return cpu::Int8PackedWeights(K, cout, rows.data(), K, 1);
}
}  // namespace

Int8Conv2d::Int8Conv2d(const Tensor& codes, const Tensor& scales, const Tensor& bias, const Conv2dOptions& options,
                       Int8Input input)
    : cout_(codes.size(0)), c_(codes.size(1)), cp_(round_up4(codes.size(1))), kh_(codes.size(2)), kw_(codes.size(3)),
      opt_(options), input_(input), packed_(pack_conv(codes, cp_)) {
  OCRT_CHECK(options.groups == 1, "Int8Conv2d: one group only, got ", options.groups);
  for (int i = 0; i < 2; ++i)
    OCRT_CHECK(options.stride[i] >= 1 && options.dilation[i] >= 1 && options.padding[i] >= 0,
               "Int8Conv2d: bad stride, dilation or padding");
  check_input(input);
  make_epilogue(input_, scales, bias, packed_, scale_, bias_, offset_);
  winograd_shape_ = kh_ == 3 && kw_ == 3 && options.stride[0] == 1 && options.stride[1] == 1 &&
                    options.padding[0] == 1 && options.padding[1] == 1 && options.dilation[0] == 1 &&
                    options.dilation[1] == 1 && c_ <= cpu::kInt8WinogradMaxChannels;
  if (winograd_shape_) codes_ = codes.contiguous();
}

Int8Conv2d::~Int8Conv2d() = default;

const cpu::Int8WinogradWeights* Int8Conv2d::winograd_weights() const {
  if (!winograd_shape_ || !cpu::int8_winograd_enabled() || c_ < cpu::int8_winograd_min_channels()) return nullptr;
  std::call_once(winograd_made_, [&] {
    winograd_ = cpu::shared_int8_winograd_weights(cout_, c_, codes_.data<int8_t>(), cpu::int8_winograd_max_tile());
  });
  return winograd_.get();
}

Int8Conv2d::Layout Int8Conv2d::layout(int64_t H, int64_t W) const {
  Layout l;
  const int64_t sh = opt_.stride[0], sw = opt_.stride[1], ph = opt_.padding[0], pw = opt_.padding[1];
  const int64_t dh = opt_.dilation[0], dw = opt_.dilation[1];
  OCRT_CHECK(H + 2 * ph >= dh * (kh_ - 1) + 1 && W + 2 * pw >= dw * (kw_ - 1) + 1, "Int8Conv2d: input ",
             H, "x", W, " is smaller than the kernel");
  l.H = H, l.W = W;
  l.Ho = (H + 2 * ph - dh * (kh_ - 1) - 1) / sh + 1, l.Wo = (W + 2 * pw - dw * (kw_ - 1) - 1) / sw + 1;
  l.Hp = H + 2 * ph, l.Wp = W + 2 * pw;
  for (int64_t ki = 0; ki < kh_; ++ki)
    for (int64_t kj = 0; kj < kw_; ++kj) l.tap_offset.push_back((ki * dh * l.Wp + kj * dw) * cp_);
  // A stride-1 convolution also describes the image for kernels that load its taps in place
  // (cpu::Int8Image: AMX, where a pixel's codes are whole tile rows), for which the image runs on
  // past its last row.
  int64_t image_codes = 0;
  if (sh == 1 && sw == 1) {
    l.geometry.pixel = cp_, l.geometry.width = l.Wo, l.geometry.pitch = l.Wp;
    l.geometry.taps = l.tap_offset;
    image_codes = cpu::int8_image_codes(l.geometry, l.Ho * l.Wo);
  }
  l.codes = std::max(l.Hp * l.Wp * cp_, image_codes);
  l.stride = (l.codes + 63) / 64 * 64;  // each image from a cache line's start (AMX tile rows)
  return l;
}

void Int8Conv2d::lay_out(const float* x, const Layout& l, uint8_t* image) const {
  // The image's codes, channels last, with the padding's rows and columns at the code of 0.
  // The planes' codes are kept per thread between calls, up to kKeptCodes: fresh pages for
  // every line image cost more than the copy; a page's maps (a detector's, up to 13 MB at 2048
  // pixels) are let go, so that they do not add to the recogniser's peak memory after them.
  thread_local std::vector<uint8_t> planes;
  planes.resize((size_t)(c_ * l.H * l.W));
  std::fill(image, image + l.codes, (uint8_t)input_.offset());
  int8_quantize_input(x, c_ * l.H * l.W, input_, planes.data());
  const int64_t ph = opt_.padding[0], pw = opt_.padding[1];
  for (int64_t h = 0; h < l.H; ++h)  // row h of every plane -> its pixels' channels
    cpu::transpose_bytes(planes.data() + h * l.W, c_, l.W, l.H * l.W, image + ((h + ph) * l.Wp + pw) * cp_, cp_);
  if (planes.capacity() > kKeptCodes) std::vector<uint8_t>().swap(planes);
}

Tensor Int8Conv2d::forward(const Tensor& x, const Int8PostOps& post) const {
  return run(&x, nullptr, post, nullptr).first;
}

Tensor Int8Conv2d::forward(const Int8Codes& x, const Int8PostOps& post) const {
  return run(nullptr, &x, post, nullptr).first;
}

Int8Codes Int8Conv2d::forward_codes(const Tensor& x, const Int8PostOps& post, const Int8Conv2d& next) const {
  return run(&x, nullptr, post, &next).second;
}

Int8Codes Int8Conv2d::forward_codes(const Int8Codes& x, const Int8PostOps& post, const Int8Conv2d& next) const {
  return run(nullptr, &x, post, &next).second;
}

std::pair<Tensor, Int8Codes> Int8Conv2d::run(const Tensor* xf, const Int8Codes* xc, const Int8PostOps& post,
                                             const Int8Conv2d* next) const {
  int64_t N, H, W;
  Tensor xcont;
  if (xf) {
    const Tensor& x = *xf;
    OCRT_CHECK(x.device().is_cpu() && x.dtype() == DType::f32 && x.dim() == 4 && x.size(1) == c_,
               "Int8Conv2d: expected a float32 CPU input (N, ", c_, ", H, W), got ", shape_str(x.shape()), " ",
               dtype_name(x.dtype()), " on ", x.device().str());
    xcont = x.contiguous();
    N = x.size(0), H = x.size(2), W = x.size(3);
  } else {
    OCRT_CHECK(xc->reader == this && xc->C == c_, "Int8Conv2d: these codes were laid out for another layer");
    N = xc->N, H = xc->H, W = xc->W;
  }
  const Layout l = layout(H, W);
  const int64_t HoWo = l.Ho * l.Wo;
  OCRT_CHECK(!xc || xc->codes.numel() == N * l.stride, "Int8Conv2d: codes of the wrong size");
  // The output: float32 (N, Cout, Ho, Wo), pooled or not; or, for `next`, its input's codes.
  const bool pooled = post.pool.has_value();
  const Shape made{N, cout_, l.Ho, l.Wo};
  const Shape out_shape = pooled ? max_pool2d_shape(made, *post.pool) : made;
  Tensor y;
  Int8Codes codes_out;
  Layout nl;
  if (next) {
    OCRT_CHECK(next->c_ == cout_, "Int8Conv2d: the next layer takes ", next->c_, " channels, this one makes ", cout_);
    nl = next->layout(out_shape[2], out_shape[3]);
    codes_out.codes = Tensor::empty({N, nl.stride}, DType::u8);
    codes_out.N = N, codes_out.C = cout_, codes_out.H = out_shape[2], codes_out.W = out_shape[3];
    codes_out.reader = next;
  } else {
    y = Tensor::empty(out_shape);
  }
  // Each thread makes its image in a buffer of its own when it is pooled or becomes codes:
  // NCHW for a pooled float output, channels last (a pixel's channels together) for codes.
  const bool by_image = N >= 2 && omp_get_max_threads() > 1 && !omp_in_parallel();
  const bool buffered = pooled || next;
  const cpu::Int8WinogradWeights* wino = winograd_weights();
  // Images go to the product `group` at a time: one for im2col; for Winograd as many as fill a
  // chunk of its tiles (a batch of short lines' deep layers then reads the transformed weights
  // once for several lines, not once a line).
  const int64_t group = wino ? std::min(N, cpu::int8_winograd_images_per_call(*wino, cp_, H, W)) : 1;
  const int64_t groups = (N + group - 1) / group;
  const bool by_group = by_image && groups >= 2;
  const Tensor buffers =
      buffered ? Tensor::empty({(by_group ? omp_get_max_threads() : 1) * group, cout_, l.Ho, l.Wo}) : Tensor();
  const float* xp = xf ? xcont.data<float>() : nullptr;
  float* yp = next ? nullptr : y.data<float>();
  cpu::Int8Epilogue e{scale_.data(), offset_.data(), bias_.data(), post.relu};
  std::vector<float> fused_scale, fused_bias;
  if (post.affine.first.defined()) {
    const Tensor &a = post.affine.first, &b = post.affine.second;
    OCRT_CHECK(a.dtype() == DType::f32 && b.dtype() == DType::f32 && a.numel() == cout_ && b.numel() == cout_,
               "Int8Conv2d: the affine map after it needs ", cout_, " float32 scales and shifts");
    const std::vector<float> va = a.contiguous().to_vector<float>(), vb = b.contiguous().to_vector<float>();
    fused_scale.resize((size_t)cout_), fused_bias.resize((size_t)cout_);
    for (size_t o = 0; o < (size_t)cout_; ++o) {
      fused_scale[o] = scale_[o] * va[o];
      fused_bias[o] = std::fma(bias_[o], va[o], vb[o]);
    }
    e.scale = fused_scale.data(), e.bias = fused_bias.data();
  }
  const int64_t sh = opt_.stride[0], sw = opt_.stride[1], Wp = l.Wp, cp = cp_;
  // Images n0 .. n0 + count - 1 (count > 1 only through Winograd).
  auto images = [&](int64_t n0, int64_t count, bool parallel_gemm, int slot) {
    // The images' codes: laid out here from the float input (kept per thread between calls, up
    // to kKeptCodes), or as the layer before made them.
    thread_local std::vector<uint8_t> xq;
    std::vector<const uint8_t*> qs((size_t)count);
    const int64_t lined = (l.stride + 63) / 64 * 64;  // each image's codes from a cache line
    if (xc) {
      for (int64_t i = 0; i < count; ++i) qs[(size_t)i] = xc->codes.data<uint8_t>() + (n0 + i) * l.stride;
    } else {
      xq.resize((size_t)(count * lined + 64));
      uint8_t* at = cpu::cache_line_start(xq.data());  // the AMX tiles' rows of 64 codes one line each
      for (int64_t i = 0; i < count; ++i) {
        lay_out(xp + (n0 + i) * c_ * H * W, l, at + i * lined);
        qs[(size_t)i] = at + i * lined;
      }
    }
    struct Release {  // after the product, however it ends
      ~Release() {
        if (xq.capacity() > kKeptCodes) std::vector<uint8_t>().swap(xq);
      }
    } release;
    // Where each image's product goes: its own buffer when it is pooled or becomes codes
    // (channels last then), else its place in y.
    std::vector<float*> ys((size_t)count);
    for (int64_t i = 0; i < count; ++i)
      ys[(size_t)i] = buffered ? buffers.data<float>() + (slot * group + i) * cout_ * HoWo : yp + (n0 + i) * cout_ * HoWo;
    const int64_t y_row = next ? cout_ : 1, y_col = next ? 1 : HoWo;
    if (wino) {
      cpu::int8_winograd_conv(qs.data(), ys.data(), count, H, W, cp_, (uint8_t)input_.offset(), *wino, e, y_row, y_col,
                              parallel_gemm);
    } else {
      OCRT_CHECK(count == 1, "Int8Conv2d: im2col takes one image at a time");
      const uint8_t* q = qs[0];
      // Each output pixel's row of A is its kh x kw taps' runs of cp codes in the image: one
      // segment per tap, pointed at, never copied (an implicit im2col).
      // (Called once per 6 output pixels: with few channels the kernel's work per call is small,
      // so the pixel is stepped along rather than divided out, and the taps' offsets are fixed.)
      cpu::Int8A a;
      a.segments = kh_ * kw_;
      cpu::Int8Image in_place = l.geometry;  // the AMX kernels read the taps from q itself
      in_place.codes = q;
      if (in_place.pixel) a.image = &in_place;
      a.rows = [&](int64_t i0, int64_t rows, const uint8_t** ptrs) {
        int64_t oh = i0 / l.Wo, ow = i0 - oh * l.Wo;
        const int64_t taps = kh_ * kw_, MR = cpu::kInt8MR;
        for (int64_t r = 0; r < MR; ++r) {
          if (r >= rows) {  // past the end of A: the last row again
            for (int64_t t = 0; t < taps; ++t) ptrs[t * MR + r] = ptrs[t * MR + r - 1];
            continue;
          }
          const uint8_t* pixel = q + (oh * sh * Wp + ow * sw) * cp;
          for (int64_t t = 0; t < taps; ++t) ptrs[t * MR + r] = pixel + l.tap_offset[(size_t)t];
          if (++ow == l.Wo) ow = 0, ++oh;
        }
      };
      cpu::int8_gemm(HoWo, a, packed_, e, ys[0], y_row, y_col, parallel_gemm);
    }
    for (int64_t i = 0; i < count && buffered; ++i) {
      const int64_t n = n0 + i;
      if (!next) {  // pooled
        max_pool2d_into(buffers.narrow(0, slot * group + i, 1), *post.pool, y.narrow(0, n, 1));
        continue;
      }
      // For the next layer: channels last, then its codes (the same values as its own
      // quantization of this layer's float output), pooled on the codes (the quantization is
      // monotonic, so the largest code is the largest value's code), into its padded image.
      next->codes_from_pixels(ys[(size_t)i], l.Ho, l.Wo, post.pool ? &*post.pool : nullptr, nl,
                              codes_out.codes.data<uint8_t>() + n * nl.stride);
    }
  };
  if (!by_group) {
    for (int64_t g = 0; g < groups; ++g) images(g * group, std::min(group, N - g * group), true, 0);
  } else {
    std::exception_ptr failed;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t g = 0; g < groups; ++g) {
      try {
        images(g * group, std::min(group, N - g * group), false, omp_get_thread_num());
      } catch (...) {
#pragma omp critical(ocrt_int8_conv)
        failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
  }
  return {y, codes_out};
}

namespace {
// out[i] = max(out[i], in[i]) for n bytes that do not overlap (vectorised: vpmaxub).
void max_bytes(uint8_t* __restrict out, const uint8_t* __restrict in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = out[i] > in[i] ? out[i] : in[i];
}
}  // namespace

void Int8Conv2d::codes_from_pixels(const float* pixels, int64_t H, int64_t W, const MaxPool2dOptions* pool,
                                   const Layout& l, uint8_t* image) const {
  // pixels: H x W pixels of c_ floats each (channels last), this layer's input before pooling.
  const uint8_t zero = (uint8_t)input_.offset();
  const int64_t ph = opt_.padding[0], pw = opt_.padding[1];
  std::fill(image, image + l.codes, zero);
  const float inv = 1.0f / input_.scale;
  const int lo = input_.is_signed ? -input_.max_code() : 0, hi = input_.max_code();
  if (!pool) {
    OCRT_CHECK(H == l.H && W == l.W, "Int8Conv2d: codes for ", l.H, "x", l.W, " from ", H, "x", W);
    for (int64_t h = 0; h < H; ++h) {
      uint8_t* row = image + ((h + ph) * l.Wp + pw) * cp_;
      if (cp_ == c_) {
        cpu::int8_quantize(pixels + h * W * c_, W * c_, inv, lo, hi, input_.offset(), row);
      } else {
        for (int64_t w = 0; w < W; ++w)
          cpu::int8_quantize(pixels + (h * W + w) * c_, c_, inv, lo, hi, input_.offset(), row + w * cp_);
      }
    }
    return;
  }
  // The codes of every pixel first (a window's largest code is its largest value's code), then
  // the windows over them: padding takes no part, and a window wholly in it gets the code of
  // -inf, as max_pool2d's -inf would get from the quantization.
  thread_local std::vector<uint8_t> q;
  q.resize((size_t)(H * W * c_));
  cpu::int8_quantize(pixels, H * W * c_, inv, lo, hi, input_.offset(), q.data());
  const float minus_inf = -std::numeric_limits<float>::infinity();
  uint8_t empty;
  cpu::int8_quantize(&minus_inf, 1, inv, lo, hi, input_.offset(), &empty);
  const int64_t kh = pool->kernel[0], kw = pool->kernel[1];
  const int64_t sh = pool->stride[0] > 0 ? pool->stride[0] : kh, sw = pool->stride[1] > 0 ? pool->stride[1] : kw;
  const int64_t qh = pool->padding[0], qw = pool->padding[1], dh = pool->dilation[0], dw = pool->dilation[1];
  for (int64_t oh = 0; oh < l.H; ++oh)
    for (int64_t ow = 0; ow < l.W; ++ow) {
      uint8_t* out = image + ((oh + ph) * l.Wp + ow + pw) * cp_;
      bool any = false;
      for (int64_t i = 0; i < kh; ++i) {
        const int64_t ih = oh * sh - qh + i * dh;
        if (ih < 0 || ih >= H) continue;
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t iw = ow * sw - qw + j * dw;
          if (iw < 0 || iw >= W) continue;
          const uint8_t* in = q.data() + (ih * W + iw) * c_;
          if (!any) {
            std::memcpy(out, in, (size_t)c_);
            any = true;
          } else {
            max_bytes(out, in, c_);
          }
        }
      }
      if (!any) std::fill(out, out + c_, empty);
    }
  if (q.capacity() > kKeptCodes) std::vector<uint8_t>().swap(q);
}

// ---- which weights ----

bool int8_quantizable(const Module& module, const std::string& name) {
  if (auto* conv = dynamic_cast<const Conv2d*>(&module))
    return name == "weight" && conv->options.groups == 1 && conv->weight.dim() == 4 && conv->weight.size(1) >= 4;
  if (dynamic_cast<const Linear*>(&module)) return name == "weight";
  if (auto* lstm = dynamic_cast<const LSTM*>(&module)) {
    const int64_t dirs = lstm->options.bidirectional ? 2 : 1;
    for (int64_t l = 0; l < lstm->options.num_layers; ++l)
      for (int64_t d = 0; d < dirs; ++d)
        if (name == lstm_ih_name(l, d) || name == lstm_hh_name(l, d)) return true;
  }
  return false;
}

// ---- calibration ----

Int8Calibration::Int8Calibration(double percentile) : percentile_(percentile) {
  OCRT_CHECK(percentile > 0 && percentile <= 100, "int8 calibration: the percentile must be in (0, 100], got ",
             percentile);
  Int8Calibration* expected = nullptr;
  OCRT_CHECK(g_calibration.compare_exchange_strong(expected, this), "int8 calibration: one at a time");
}

Int8Calibration::~Int8Calibration() { g_calibration.store(nullptr); }

Int8Calibration* Int8Calibration::active() { return g_calibration.load(std::memory_order_relaxed); }

void Int8Calibration::add_model(const Module& model) {
  std::lock_guard<std::mutex> lock(mutex_);
  walk(model, "", [&](const std::string& name, const Module& m) { names_[&m] = name; });
}

std::string Int8Calibration::key_of(const Module* m, int64_t index) const {
  auto it = names_.find(m);
  if (it == names_.end()) return "";
  if (auto* lstm = dynamic_cast<const LSTM*>(m)) {
    const int64_t L = lstm->options.num_layers;
    return join(it->second, index < L ? lstm_ih_name(index, 0) : lstm_hh_name(index - L, 0));
  }
  return join(it->second, "weight");
}

void Int8Calibration::observe(const Module* m, int64_t index, const Tensor& x) {
  if (!x.device().is_cpu() || x.dtype() != DType::f32) return;
  const Tensor xc = x.contiguous();
  const float* p = xc.data<float>();
  const int64_t n = xc.numel();
  double max_abs = 0;
  bool negative = false;
  for (int64_t i = 0; i < n; ++i) {
    max_abs = std::max(max_abs, (double)std::fabs(p[i]));
    negative |= p[i] < 0;
  }
  const int64_t stride = std::max<int64_t>(1, n / 16384);
  std::vector<float> sample;
  for (int64_t i = 0; i < n; i += stride) sample.push_back(std::fabs(p[i]));
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = key_of(m, index);
  if (key.empty()) return;
  Seen& s = seen_[key];
  s.max_abs = std::max(s.max_abs, max_abs);
  s.negative |= negative;
  s.count += n;
  s.sample.insert(s.sample.end(), sample.begin(), sample.end());
  if (s.sample.size() > (size_t(1) << 21)) {  // thin out: every other value
    size_t k = 0;
    for (size_t i = 0; i < s.sample.size(); i += 2) s.sample[k++] = s.sample[i];
    s.sample.resize(k);
  }
}

Int8Input Int8Calibration::input_for(const std::string& name) const {
  std::string key = name;
  const std::string rev = "_reverse";
  if (key.size() > rev.size() && key.compare(key.size() - rev.size(), rev.size(), rev) == 0)
    key.resize(key.size() - rev.size());
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = seen_.find(key);
  OCRT_CHECK(it != seen_.end() && it->second.count > 0, "int8 calibration: the input of ", name,
             " was never seen (did the calibration lines run through the model?)");
  const Seen& s = it->second;
  double range = s.max_abs;
  if (percentile_ < 100 && !s.sample.empty()) {
    std::vector<float> v = s.sample;
    const size_t k = std::min(v.size() - 1, (size_t)std::floor(percentile_ / 100.0 * (double)(v.size() - 1)));
    std::nth_element(v.begin(), v.begin() + (ptrdiff_t)k, v.end());
    range = v[k];
  }
  if (!(range > 0)) range = std::max(s.max_abs, 1e-6);
  Int8Input in;
  in.is_signed = s.negative;
  in.scale = (float)(range / in.max_code());
  return in;
}

int64_t Int8Calibration::values_seen(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = seen_.find(name);
  return it == seen_.end() ? 0 : it->second.count;
}

// ---- files ----

StateDict int8_state_dict(const Module& model, const Int8Calibration& calibration) {
  StateDict sd = model.state_dict();
  walk(model, "", [&](const std::string& prefix, const Module& m) {
    for (const auto& [pname, tensor] : m.named_parameters()) {
      if (pname.find('.') != std::string::npos || !int8_quantizable(m, pname)) continue;  // own parameters only
      const std::string full = join(prefix, pname);
      const Int8Weight q = quantize_weight(sd.at(full).contiguous());
      const Int8Input in = calibration.input_for(full);
      sd[full] = q.codes;
      sd[full + ".int8_scale"] = q.scales;
      sd[full + ".int8_input"] = Tensor::from_vector(std::vector<float>{in.scale, in.is_signed ? 1.0f : 0.0f}, {2});
    }
  });
  return sd;
}

bool is_int8_state_dict(const StateDict& weights) {
  return std::any_of(weights.begin(), weights.end(), [](const auto& kv) { return kv.second.dtype() == DType::i8; });
}

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

const Tensor& need(const StateDict& w, const std::string& name, const std::string& what) {
  auto it = w.find(name);
  OCRT_CHECK(it != w.end(), "int8 model: ", what, " has no tensor ", name);
  return it->second;
}

Int8Input input_of(const StateDict& w, const std::string& name) {
  const Tensor& t = need(w, name + ".int8_input", name);
  OCRT_CHECK(t.dtype() == DType::f32 && t.numel() == 2, "int8 model: ", name, ".int8_input must hold 2 float32 values");
  const std::vector<float> v = t.contiguous().to_vector<float>();
  OCRT_CHECK(v[1] == 0 || v[1] == 1, "int8 model: ", name, ".int8_input's second value must be 0 or 1, got ", v[1]);
  Int8Input in;
  in.scale = v[0];
  in.is_signed = v[1] == 1;
  OCRT_CHECK(std::isfinite(in.scale) && in.scale > 0, "int8 model: ", name, "'s input scale must be positive, got ",
             in.scale);
  return in;
}
}  // namespace

StateDict int8_float_weights(const StateDict& weights, bool dequantize) {
  StateDict out;
  for (const auto& [name, t] : weights) {
    if (ends_with(name, ".int8_scale") || ends_with(name, ".int8_input")) continue;
    if (t.dtype() != DType::i8) {
      out[name] = t;
      continue;
    }
    const Tensor& scales = need(weights, name + ".int8_scale", name);
    OCRT_CHECK(t.dim() >= 1 && scales.dtype() == DType::f32 && scales.dim() == 1 && scales.numel() == t.size(0),
               "int8 model: ", name, ".int8_scale must hold one float32 per output channel (", t.dim() ? t.size(0) : 0,
               ")");
    for (float s : scales.contiguous().to_vector<float>())
      OCRT_CHECK(std::isfinite(s) && s > 0, "int8 model: ", name, " has a weight scale that is not positive: ", s);
    for (int8_t c : t.contiguous().to_vector<int8_t>())
      OCRT_CHECK(c >= -cpu::kInt8CodeMax, "int8 model: ", name, " holds the code -128 (codes are -127..127)");
    if (dequantize) out[name] = dequantize_weight(t, scales);
  }
  return out;
}

void attach_int8(Module& model, const StateDict& weights) {
  std::set<std::string> used;
  walk(model, "", [&](const std::string& prefix, const Module& cm) {
    Module& m = const_cast<Module&>(cm);
    auto codes_of = [&](const std::string& pname) -> const Tensor* {
      auto it = weights.find(join(prefix, pname));
      if (it == weights.end() || it->second.dtype() != DType::i8) return nullptr;
      OCRT_CHECK(int8_quantizable(m, pname), "int8 model: ", it->first, " is not a weight that int8 computes");
      used.insert(it->first);
      return &it->second;
    };
    if (auto* conv = dynamic_cast<Conv2d*>(&m)) {
      if (const Tensor* c = codes_of("weight")) {
        const std::string n = join(prefix, "weight");
        conv->int8 = std::make_shared<const Int8Conv2d>(*c, weights.at(n + ".int8_scale"), conv->bias, conv->options,
                                                        input_of(weights, n));
      }
    } else if (auto* lin = dynamic_cast<Linear*>(&m)) {
      if (const Tensor* c = codes_of("weight")) {
        const std::string n = join(prefix, "weight");
        lin->int8 = std::make_shared<const Int8Linear>(*c, weights.at(n + ".int8_scale"), lin->bias, input_of(weights, n));
      }
    } else if (auto* lstm = dynamic_cast<LSTM*>(&m)) {
      const int64_t dirs = lstm->options.bidirectional ? 2 : 1, L = lstm->options.num_layers;
      for (int which = 0; which < 2; ++which) {  // weight_ih, then weight_hh
        std::vector<std::shared_ptr<const Int8Linear>> proj((size_t)(L * dirs));
        int64_t found = 0;
        for (int64_t l = 0; l < L; ++l)
          for (int64_t d = 0; d < dirs; ++d) {
            const std::string pname = which == 0 ? lstm_ih_name(l, d) : lstm_hh_name(l, d);
            if (const Tensor* c = codes_of(pname)) {
              const std::string n = join(prefix, pname);
              proj[(size_t)(l * dirs + d)] =
                  std::make_shared<const Int8Linear>(*c, weights.at(n + ".int8_scale"), Tensor(), input_of(weights, n));
              ++found;
            }
          }
        OCRT_CHECK(found == 0 || found == L * dirs, "int8 model: ", prefix, " has int8 ",
                   which == 0 ? "input" : "recurrent", " weights for ", found, " of ", L * dirs,
                   " directions (all or none)");
        if (found) (which == 0 ? lstm->int8_input : lstm->int8_recurrent) = std::move(proj);
      }
      OCRT_CHECK(lstm->int8_recurrent.empty() || !lstm->int8_input.empty(), "int8 model: ", prefix,
                 " has int8 recurrent weights but float32 input weights");
    }
  });
  for (const auto& [name, t] : weights)
    OCRT_CHECK(t.dtype() != DType::i8 || used.count(name), "int8 model: ", name,
               " is int8 but is not a weight of a layer that int8 computes");
}

namespace {
// load_model_weights' inference_only: the float32 weight `name` of model (one whose codes the
// file holds) becomes a placeholder of its shape, and its layer int8_only. Returns the placeholder.
Tensor placeholder_for(Module& model, const std::string& name) {
  Tensor* slot = nullptr;
  walk(model, "", [&](const std::string& prefix, const Module& cm) {
    Module& m = const_cast<Module&>(cm);
    const std::string head = prefix.empty() ? "" : prefix + ".";
    if (slot || name.compare(0, head.size(), head) != 0) return;
    const std::string own = name.substr(head.size());
    if (auto* conv = dynamic_cast<Conv2d*>(&m); conv && own == "weight") {
      slot = &conv->weight;
      conv->int8_only = true;
    } else if (auto* lin = dynamic_cast<Linear*>(&m); lin && own == "weight") {
      slot = &lin->weight;
      lin->int8_only = true;
    } else if (auto* lstm = dynamic_cast<LSTM*>(&m)) {
      slot = lstm->weight_slot(own);
      if (slot) lstm->int8_only = true;
    }
  });
  OCRT_CHECK(slot, "int8 model: ", name, " is not a weight that int8 computes");
  *slot = Tensor::zeros(Shape((size_t)slot->dim(), 1), slot->dtype(), slot->device()).expand(slot->shape());
  return *slot;
}
}  // namespace

void load_model_weights(Module& model, const StateDict& weights, bool inference_only) {
  if (is_int8_state_dict(weights)) {
    StateDict floats = int8_float_weights(weights, !inference_only);
    if (inference_only)
      for (auto& [name, t] : weights)  // placeholders, which load_state_dict leaves as they are
        if (t.dtype() == DType::i8) floats[name] = placeholder_for(model, name);
    model.load_state_dict(floats);
  } else {
    model.load_state_dict(weights);
  }
  // A variance below zero is no variance: a damaged file (its square root, folded into a
  // convolution or an int8 epilogue, would be NaN). Refused here, naming it.
  walk(model, "", [&](const std::string& prefix, const Module& m) {
    if (auto* bn = dynamic_cast<const BatchNorm2d*>(&m))
      for (const float v : bn->running_var.contiguous().to_vector<float>())
        OCRT_CHECK(v >= 0, join(prefix, "running_var"), " holds a negative variance (", v, ")");
  });
  if (is_int8_state_dict(weights)) attach_int8(model, weights);
  if (auto* calibration = Int8Calibration::active()) calibration->add_model(model);
}

}  // namespace ocrt::nn
