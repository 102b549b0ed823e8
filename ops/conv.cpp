// Front-ends of conv2d and the pooling ops: argument checks, output sizes, autograd. The
// kernels are in ops/cpu/conv.cpp and ops/cpu/pool.cpp.
//
// Each op records one autograd node with a fused backward kernel:
//   conv2d:   dx, dw, db from (x, w, dy)              (LayerBackend::conv2d_backward)
//   max_pool: dx = dy scattered to the argmax indices   (saved by the forward)
//   avg_pool: dx = dy spread evenly over each window
#include "ops/conv.h"

#include <atomic>
#include <cmath>

#include "ops/backend.h"
#include "ops/cpu/conv_amx.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/winograd.h"
#include "ops/elementwise.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {
std::atomic<ConvMode> g_conv_mode{ConvMode::fast};
}  // namespace

void set_conv_mode(ConvMode mode) { g_conv_mode.store(mode); }
ConvMode conv_mode() { return g_conv_mode.load(); }

ConvMode parse_conv_mode(const std::string& name) {
  if (name == "fast") return ConvMode::fast;
  if (name == "exact") return ConvMode::exact;
  fail("unknown convolution mode '", name, "': expected fast or exact");
}

const char* conv_mode_name(ConvMode mode) { return mode == ConvMode::fast ? "fast" : "exact"; }

namespace {

// Appended piece by piece: GCC 12 warns falsely (-Wrestrict) about "(" + std::string once inlined.
std::string pair_str(Pair p) {
  std::string s = "(";
  s += std::to_string(p[0]);
  s += ", ";
  s += std::to_string(p[1]);
  s += ")";
  return s;
}

void check_image(const Tensor& x, const char* op) {
  OCRT_CHECK(x.defined(), op, ": input is an undefined tensor");
  OCRT_CHECK(x.dim() == 4, op, ": expected a 4-D input (N, C, H, W), got shape ", shape_str(x.shape()));
  OCRT_CHECK(is_floating(x.dtype()), op, ": expected a float32 or float64 input, got ", dtype_name(x.dtype()));
}

// Output length of one spatial dim (PyTorch's pooling_output_shape / conv formula).
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;  // the window does not fit even once
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window must start inside the input or left padding
  return out;
}

}  // namespace

namespace {

// conv2d's arguments checked (op names the caller in messages), and what follows from them.
struct ConvCall {
  Conv2dParams p;
  int64_t N, Cout, Ho, Wo;
};

ConvCall check_conv_args(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& opt,
                         const char* op) {
  check_image(x, op);
  OCRT_CHECK(weight.defined() && weight.dim() == 4, op, ": weight must be 4-D (Cout, Cin/groups, kh, kw), got ",
             weight.defined() ? shape_str(weight.shape()) : std::string("undefined"));
  OCRT_CHECK(x.device() == weight.device(), op, ": input is on ", x.device().str(), " but weight is on ",
             weight.device().str());
  OCRT_CHECK(x.dtype() == weight.dtype(), op, ": input is ", dtype_name(x.dtype()), " but weight is ",
             dtype_name(weight.dtype()));
  const int64_t g = opt.groups;
  OCRT_CHECK(g >= 1, op, ": groups must be >= 1, got ", g);
  for (int i = 0; i < 2; ++i) {
    OCRT_CHECK(opt.stride[i] >= 1, op, ": stride must be >= 1, got ", pair_str(opt.stride));
    OCRT_CHECK(opt.dilation[i] >= 1, op, ": dilation must be >= 1, got ", pair_str(opt.dilation));
    OCRT_CHECK(opt.padding[i] >= 0, op, ": padding must be >= 0, got ", pair_str(opt.padding));
  }
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  OCRT_CHECK(C % g == 0 && Cout % g == 0, op, ": input channels (", C, ") and output channels (", Cout,
             ") must both be divisible by groups (", g, ")");
  OCRT_CHECK(weight.size(1) == C / g, op, ": weight ", shape_str(weight.shape()), " expects ", weight.size(1) * g,
             " input channels with groups = ", g, ", but the input ", shape_str(x.shape()), " has ", C);
  OCRT_CHECK(kh >= 1 && kw >= 1 && Cout >= 1, op, ": weight ", shape_str(weight.shape()), " has an empty dim");
  const int64_t ekh = opt.dilation[0] * (kh - 1) + 1, ekw = opt.dilation[1] * (kw - 1) + 1;
  OCRT_CHECK(ekh <= H + 2 * opt.padding[0] && ekw <= W + 2 * opt.padding[1], op, ": kernel (", ekh, "x", ekw,
             " with dilation) is larger than the padded input (", H + 2 * opt.padding[0], "x", W + 2 * opt.padding[1],
             ") for input ", shape_str(x.shape()), " and weight ", shape_str(weight.shape()));
  if (bias.defined()) {
    OCRT_CHECK(bias.dim() == 1 && bias.size(0) == Cout, op, ": bias must have shape [", Cout, "], got ",
               shape_str(bias.shape()));
    OCRT_CHECK(bias.device() == x.device() && bias.dtype() == x.dtype(), op, ": bias must be ", dtype_name(x.dtype()),
               " on ", x.device().str(), " like the input");
  }
  const Conv2dParams p{opt.stride[0], opt.stride[1], opt.padding[0], opt.padding[1], opt.dilation[0], opt.dilation[1], g,
                       conv_mode() == ConvMode::fast};
  const int64_t Ho = out_size(H, kh, p.stride_h, p.pad_h, p.dilation_h, false);
  const int64_t Wo = out_size(W, kw, p.stride_w, p.pad_w, p.dilation_w, false);
  return {p, N, Cout, Ho, Wo};
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& opt) {
  const char* op = "conv2d";
  const ConvCall call = check_conv_args(x, weight, bias, opt, op);
  const Conv2dParams& p = call.p;
  const int64_t N = call.N, Cout = call.Cout, Ho = call.Ho, Wo = call.Wo;
  const bool grad = any_requires_grad({x, weight, bias});

  const Tensor xc = x.detach().contiguous(), wc = weight.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = Tensor::empty({N, Cout, Ho, Wo}, x.dtype(), x.device());
  if (y.numel() > 0) kernel(x.device(), &LayerBackend::conv2d, op)(xc, wc, bc, p, y);

  if (grad) {
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    record(op, {x, weight, bias}, {y}, [=](const TensorList& grads) {
      const Tensor dy = grads[0].contiguous();
      Tensor dx = need_x ? Tensor::empty(xc.shape(), xc.dtype(), xc.device()) : Tensor();
      Tensor dw = need_w ? Tensor::empty(wc.shape(), wc.dtype(), wc.device()) : Tensor();
      Tensor db = need_b ? Tensor::empty({Cout}, wc.dtype(), wc.device()) : Tensor();
      kernel(xc.device(), &LayerBackend::conv2d_backward, "conv2d backward")(xc, wc, dy, p, dx, dw, db);
      return TensorList{dx, dw, db};
    });
  }
  return y;
}

namespace {

Pool2dParams window_params(const char* op, Pair kernel, Pair stride, Pair padding, Pair dilation) {
  for (int i = 0; i < 2; ++i) {
    OCRT_CHECK(kernel[i] >= 1, op, ": kernel size must be >= 1, got ", pair_str(kernel));
    OCRT_CHECK(stride[i] >= 0, op, ": stride must be >= 1 (or 0 for the kernel size), got ", pair_str(stride));
    OCRT_CHECK(dilation[i] >= 1, op, ": dilation must be >= 1, got ", pair_str(dilation));
    const int64_t effective = dilation[i] * (kernel[i] - 1) + 1;
    OCRT_CHECK(padding[i] >= 0 && padding[i] <= effective / 2, op, ": padding must be >= 0 and at most half the",
               " kernel size, got padding ", pair_str(padding), " for kernel ", pair_str(kernel));
  }
  Pool2dParams p;
  p.kernel_h = kernel[0], p.kernel_w = kernel[1];
  p.stride_h = stride[0] ? stride[0] : kernel[0], p.stride_w = stride[1] ? stride[1] : kernel[1];
  p.pad_h = padding[0], p.pad_w = padding[1];
  p.dilation_h = dilation[0], p.dilation_w = dilation[1];
  return p;
}

Pool2dParams pool_params(const char* op, const Tensor& x, Pair kernel, Pair stride, Pair padding, Pair dilation) {
  check_image(x, op);
  return window_params(op, kernel, stride, padding, dilation);
}

Shape pool_out_shape(const char* op, const Shape& x, const Pool2dParams& p, bool ceil_mode) {
  const int64_t Ho = out_size(x[2], p.kernel_h, p.stride_h, p.pad_h, p.dilation_h, ceil_mode);
  const int64_t Wo = out_size(x[3], p.kernel_w, p.stride_w, p.pad_w, p.dilation_w, ceil_mode);
  OCRT_CHECK(Ho >= 1 && Wo >= 1, op, ": the input ", shape_str(x), " is too small for kernel (", p.kernel_h,
             ", ", p.kernel_w, ") with padding (", p.pad_h, ", ", p.pad_w, "): the output would be ", Ho, "x", Wo);
  return {x[0], x[1], Ho, Wo};
}

Shape pool_out_shape(const char* op, const Tensor& x, const Pool2dParams& p, bool ceil_mode) {
  return pool_out_shape(op, x.shape(), p, ceil_mode);
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const MaxPool2dOptions& opt) {
  const char* op = "max_pool2d";
  const Pool2dParams p = pool_params(op, x, opt.kernel, opt.stride, opt.padding, opt.dilation);
  const Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty(pool_out_shape(op, x, p, opt.ceil_mode), x.dtype(), x.device());
  // The argmax of each window is kept only for a backward pass.
  const bool grad = any_requires_grad({x});
  Tensor indices = grad ? Tensor::empty(y.shape(), DType::i64, x.device()) : Tensor();
  if (y.numel() > 0) kernel(x.device(), &LayerBackend::max_pool2d, op)(xc, p, y, indices);
  if (grad) {
    const Shape shape_x = x.shape();
    record(op, {x}, {y}, [=](const TensorList& grads) {
      Tensor dx = Tensor::empty(shape_x, grads[0].dtype(), grads[0].device());
      kernel(dx.device(), &LayerBackend::max_pool2d_backward, "max_pool2d backward")(grads[0].contiguous(), indices, dx);
      return TensorList{dx};
    });
  }
  return y;
}

Shape max_pool2d_shape(const Shape& x, const MaxPool2dOptions& opt) {
  const char* op = "max_pool2d";
  OCRT_CHECK(x.size() == 4, op, ": expected a 4-D input (N, C, H, W), got shape ", shape_str(x));
  return pool_out_shape(op, x, window_params(op, opt.kernel, opt.stride, opt.padding, opt.dilation), opt.ceil_mode);
}

void max_pool2d_into(const Tensor& x, const MaxPool2dOptions& opt, const Tensor& y) {
  const char* op = "max_pool2d";
  const Pool2dParams p = pool_params(op, x, opt.kernel, opt.stride, opt.padding, opt.dilation);
  const Shape want = pool_out_shape(op, x, p, opt.ceil_mode);
  OCRT_CHECK(y.defined() && y.shape() == want && y.dtype() == x.dtype() && y.device() == x.device() && y.is_contiguous(),
             op, ": the output must be a contiguous ", dtype_name(x.dtype()), " tensor of shape ", shape_str(want),
             " on ", x.device().str());
  if (y.numel() > 0) kernel(x.device(), &LayerBackend::max_pool2d, op)(x.detach().contiguous(), p, y, Tensor());
}

Tensor conv2d_relu_max_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& opt,
                              const MaxPool2dOptions& pool) {
  const char* op = "conv2d_relu_max_pool2d";
  const ConvCall call = check_conv_args(x, weight, bias, opt, op);
  const Pool2dParams pp = window_params(op, pool.kernel, pool.stride, pool.padding, pool.dilation);
  // The one-pass paths are the CPU's (not kernel-table entries: no other device has them, and
  // the three ops compute the same there): the direct convolution's for a 2x2 pool, and
  // Winograd's in fast mode for pools over pairs of rows.
  const int64_t C = x.size(1), kh = weight.size(2), kw = weight.size(3);
  const bool cpu_inference = x.device().is_cpu() && x.dtype() == DType::f32 && !any_requires_grad({x, weight, bias});
  const bool plain_2x2 = pp.kernel_h == 2 && pp.kernel_w == 2 && pp.stride_h == 2 && pp.stride_w == 2 &&
                         pp.pad_h == 0 && pp.pad_w == 0 && pp.dilation_h == 1 && pp.dilation_w == 1 && !pool.ceil_mode;
  if (cpu_inference) {
    const Tensor xc = x.contiguous(), wc = weight.contiguous();
    const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
    const float* bp = bc.defined() ? bc.data<float>() : nullptr;
    if (plain_2x2 && call.Ho >= 2 && call.Wo >= 2 && cpu::direct_conv_applies(C, call.Cout, kh, kw, call.p)) {
      Tensor y = Tensor::empty({call.N, call.Cout, call.Ho / 2, call.Wo / 2});
      cpu::direct_conv2d_relu_max_pool2(xc.data<float>(), wc.data<float>(), bp, y.data<float>(), call.N, C, x.size(2),
                                        x.size(3), call.Cout, kh, kw, call.p.pad_h, call.p.pad_w);
      return y;
    }
    // The pooled output's shape, for the one-pass paths below (computed only where one is taken:
    // a pool that fits no output is max_pool2d's to refuse, in the three ops).
    auto pooled_shape = [&] { return pool_out_shape(op, Shape{call.N, call.Cout, call.Ho, call.Wo}, pp, pool.ceil_mode); };
    // bf16 products on AMX tiles (conv_amx.h): each group of images is made in a buffer of its
    // thread's, rectified there while it is in cache and pooled into y (in that order: ReLU maps
    // NaN to 0, which a pool would otherwise have propagated).
    if (cpu::amx_conv_applies(C, call.Cout, kh, kw, call.p)) {
      Tensor y = Tensor::empty(pooled_shape());
      cpu::amx_bf16_conv2d_each(xc.data<float>(), wc.data<float>(), bp, call.N, C, x.size(2), x.size(3), call.Cout, kh,
                                kw, call.p, [&](int64_t n0, int64_t count, const Tensor& out) {
                                  relu_(out);
                                  max_pool2d_into(out, pool, y.narrow(0, n0, count));
                                });
      return y;
    }
#if defined(OCRT_CPU_WINOGRAD)
    if (call.p.fast && cpu::winograd_applies(C, call.Cout, kh, kw, call.p) && cpu::winograd_pool_fits(pp)) {
      const Shape pooled = pooled_shape();
      Tensor y = Tensor::empty(pooled);
      const cpu::WinogradReluPool spec{pp.kernel_w, pp.stride_w, pp.pad_w, pooled[2], pooled[3]};
      cpu::winograd_conv2d(xc.data<float>(), wc.data<float>(), bp, y.data<float>(), call.N, C, x.size(2), x.size(3),
                           call.Cout, call.p.pad_h, call.p.pad_w, 0, &spec);
      return y;
    }
#endif
  }
  return max_pool2d(relu(conv2d(x, weight, bias, opt)), pool);
}

Tensor avg_pool2d(const Tensor& x, const AvgPool2dOptions& opt) {
  const char* op = "avg_pool2d";
  Pool2dParams p = pool_params(op, x, opt.kernel, opt.stride, opt.padding, {1, 1});
  p.count_include_pad = opt.count_include_pad;
  const Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty(pool_out_shape(op, x, p, opt.ceil_mode), x.dtype(), x.device());
  if (y.numel() > 0) kernel(x.device(), &LayerBackend::avg_pool2d, op)(xc, p, y);
  if (any_requires_grad({x})) {
    const Shape shape_x = x.shape();
    record(op, {x}, {y}, [=](const TensorList& grads) {
      Tensor dx = Tensor::empty(shape_x, grads[0].dtype(), grads[0].device());
      kernel(dx.device(), &LayerBackend::avg_pool2d_backward, "avg_pool2d backward")(grads[0].contiguous(), p, dx);
      return TensorList{dx};
    });
  }
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_image(x, op);
  OCRT_CHECK(output_size[0] >= 1 && output_size[1] >= 1, op, ": output size must be >= 1, got ",
             pair_str(output_size));
  OCRT_CHECK(x.size(2) >= 1 && x.size(3) >= 1, op, ": input ", shape_str(x.shape()), " has an empty spatial dim");
  const Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty({x.size(0), x.size(1), output_size[0], output_size[1]}, x.dtype(), x.device());
  if (y.numel() > 0) kernel(x.device(), &LayerBackend::adaptive_avg_pool2d, op)(xc, y);
  if (any_requires_grad({x})) {
    const Shape shape_x = x.shape();
    record(op, {x}, {y}, [=](const TensorList& grads) {
      Tensor dx = Tensor::empty(shape_x, grads[0].dtype(), grads[0].device());
      kernel(dx.device(), &LayerBackend::adaptive_avg_pool2d_backward, "adaptive_avg_pool2d backward")(
          grads[0].contiguous(), dx);
      return TensorList{dx};
    });
  }
  return y;
}

void upsample_nearest2d_into(const Tensor& x, Pair scale, const Tensor& out, bool accumulate) {
  const char* op = "upsample_nearest2d_into";
  check_image(x, op);
  OCRT_CHECK(out.defined() && out.dim() == 4, op, ": out must be 4-D (N, C, H, W), got ",
             out.defined() ? shape_str(out.shape()) : std::string("undefined"));
  OCRT_CHECK(!(grad_enabled() && (x.requires_grad() || out.requires_grad())), op,
             ": records no gradient (inference only); use upsample_nearest2d");
  const int64_t sh = scale[0], sw = scale[1];
  OCRT_CHECK(sh >= 1 && sw >= 1 && sh <= 1024 && sw <= 1024, op, ": scale factors must be in [1, 1024], got ",
             pair_str(scale));
  const Shape want{x.size(0), x.size(1), x.size(2) * sh, x.size(3) * sw};
  OCRT_CHECK(out.shape() == want, op, ": out has shape ", shape_str(out.shape()), ", the upsampled input ",
             shape_str(want));
  OCRT_CHECK(out.dtype() == x.dtype() && out.device() == x.device(), op, ": out must be ", dtype_name(x.dtype()),
             " on ", x.device().str(), ", like the input");
  OCRT_CHECK(out.stride(3) == 1 && out.stride(2) == out.size(3), op,
             ": out's planes must be contiguous (a slice of channels, not of rows or columns)");
  if (out.numel() == 0) return;
  const Tensor xc = x.detach().contiguous();
  kernel(x.device(), &LayerBackend::upsample_nearest2d_into, op)(xc, sh, sw, out.detach(), accumulate);
}

Tensor upsample_nearest2d(const Tensor& x, Pair scale) {
  const char* op = "upsample_nearest2d";
  check_image(x, op);
  const int64_t sh = scale[0], sw = scale[1];
  OCRT_CHECK(sh >= 1 && sw >= 1 && sh <= 1024 && sw <= 1024, op, ": scale factors must be in [1, 1024], got ",
             pair_str(scale));
  OCRT_CHECK(x.size(2) <= INT64_MAX / sh / std::max<int64_t>(1, x.size(3) * sw), op, ": the output of ",
             shape_str(x.shape()), " x ", pair_str(scale), " is too large");
  const Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty({x.size(0), x.size(1), x.size(2) * sh, x.size(3) * sw}, x.dtype(), x.device());
  if (y.numel() > 0) kernel(x.device(), &LayerBackend::upsample_nearest2d, op)(xc, sh, sw, y);
  if (any_requires_grad({x})) {
    const Shape shape_x = x.shape();
    record(op, {x}, {y}, [=](const TensorList& grads) {
      Tensor dx = Tensor::empty(shape_x, grads[0].dtype(), grads[0].device());
      if (dx.numel() > 0)
        kernel(dx.device(), &LayerBackend::upsample_nearest2d_backward, "upsample_nearest2d backward")(
            grads[0].contiguous(), sh, sw, dx);
      return TensorList{dx};
    });
  }
  return y;
}

}  // namespace ocrt
