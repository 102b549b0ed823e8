// Golden tests of the core ops against PyTorch. tools/reference/ops_core.py ran each case in
// PyTorch and wrote tests/fixtures/ops_core.safetensors; here the same case runs in ocrt and
// every output and gradient is compared with what PyTorch got.
//
// For a case "name" the fixture holds name.in0, .in1, ... (inputs), name.out (or .out0, .out1
// for several outputs), name.gout (or .gout0, ...: the upstream gradient of each float output)
// and name.grad0, ... (the gradient of each float input). Each table below mirrors a block of
// CASES in ops_core.py: the names must match, and the scalar parameters of a case (dims,
// exponents, clamp bounds, ...) are written in both places. A case the fixture lacks fails,
// and so does a fixture case no table here runs.
//
// Tolerances: float64 inputs compare to 1e-10 relative (the two libraries differ only in
// summation order and last-bit libm rounding); float32 to 1e-5 relative + 1e-6 (about 170 u:
// the core ops are element-wise, a few roundings and a libm call each, or sums over a few
// elements, which ocrt adds in double and PyTorch pairwise, within log2(n) u sum|x|;
// tests/golden_runner.h says more); integer outputs exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gradcheck.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "runtime/autograd.h"
#include "runtime/safetensors.h"

namespace ocrt {
namespace {

const char* const kFixture = "tests/fixtures/ops_core.safetensors";
const char* const kRegenerate = "regenerate with: python3 tools/reference/ops_core.py";

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = load_safetensors(std::string(OCRT_SOURCE_DIR) + "/" + kFixture);
  return f;
}

// The inputs of a case; operator[] is bounds-checked so a table that asks for more inputs
// than the fixture holds throws instead of reading past the end.
struct Inputs : TensorList {
  const Tensor& operator[](size_t i) const { return at(i); }
};
using In = const Inputs&;

// What a case's function returns: one tensor (compared with name.out) or several (name.out0,
// name.out1, ...). Converts implicitly from Tensor, TensorList and the (values, indices) pair.
struct Outputs {
  TensorList list;
  bool single = false;
  Outputs(Tensor t) : list{std::move(t)}, single(true) {}                     // NOLINT: implicit
  Outputs(TensorList l) : list(std::move(l)) {}                               // NOLINT: implicit
  Outputs(std::pair<Tensor, Tensor> p) : list{p.first, p.second} {}           // NOLINT: implicit
};

struct Case {
  const char* name;
  std::function<Outputs(In)> fn;
};

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::f64: return {1e-10, 1e-12};
    case DType::f32: return {1e-5, 1e-6};
    default: return {0.0, 0.0};  // indices and masks must match exactly
  }
}

void compare(const Tensor& actual, const Tensor& expected, const std::string& what) {
  INFO(what << ": got dtype " << dtype_name(actual.dtype()) << " shape " << shape_str(actual.shape())
            << ", expected dtype " << dtype_name(expected.dtype()) << " shape " << shape_str(expected.shape()));
  REQUIRE(actual.dtype() == expected.dtype());
  Tolerance tol = tolerance_for(expected.dtype());
  testing::require_close(actual, expected, tol.rtol, tol.atol, what);
}

const Tensor& fixture_tensor(const std::string& name) {
  INFO("tensor '" << name << "' is missing from " << kFixture << "; " << kRegenerate);
  REQUIRE(fixture().contains(name));
  return fixture().get(name);
}

// Runs one case: forward on the fixture's inputs, compare outputs, backward with the
// fixture's upstream gradients, compare the inputs' gradients.
void run_case(const Case& c) {
  const std::string name = c.name;
  INFO("golden case " << name);
  {
    INFO("case '" << name << "' is missing from " << kFixture << "; " << kRegenerate);
    REQUIRE(fixture().contains(name + ".in0"));
  }

  // Fresh leaves over the fixture's data; every float input requires grad, as in the script.
  Inputs x;
  for (int k = 0; fixture().contains(name + ".in" + std::to_string(k)); ++k) {
    Tensor t = fixture().get(name + ".in" + std::to_string(k)).detach();
    if (is_floating(t.dtype())) t.set_requires_grad(true);
    x.push_back(t);
  }

  Outputs outs = c.fn(x);
  auto out_name = [&](size_t k) { return outs.single ? name + ".out" : name + ".out" + std::to_string(k); };
  auto gout_name = [&](size_t k) { return outs.single ? name + ".gout" : name + ".gout" + std::to_string(k); };
  for (size_t k = 0; k < outs.list.size(); ++k) compare(outs.list[k], fixture_tensor(out_name(k)), out_name(k));
  {
    INFO("the fixture has more outputs for '" << name << "' than ocrt returned (" << outs.list.size() << ")");
    REQUIRE_FALSE(fixture().contains(name + ".out" + std::to_string(outs.list.size())));
  }

  // Backward from every float output at once (run_backward takes several roots).
  TensorList roots, grads;
  for (size_t k = 0; k < outs.list.size(); ++k) {
    if (!is_floating(outs.list[k].dtype())) continue;
    roots.push_back(outs.list[k]);
    grads.push_back(fixture_tensor(gout_name(k)));
  }
  if (roots.empty()) return;  // comparisons, argmax: output only
  run_backward(roots, grads, /*retain_graph=*/false);

  for (size_t k = 0; k < x.size(); ++k) {
    if (!is_floating(x[k].dtype())) continue;
    std::string gname = name + ".grad" + std::to_string(k);
    const Tensor& expected = fixture_tensor(gname);
    INFO(gname << ": ocrt left input " << k << " without a gradient");
    REQUIRE(x[k].grad().defined());
    compare(x[k].grad(), expected, gname);
  }
}

void run_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) { run_case(c); }
  }
}

// ---------------------------------------------------------------- the tables

std::vector<Case> binary_cases() {
  return {
      {"add_same", [](In x) { return add(x[0], x[1]); }},
      {"add_broadcast", [](In x) { return add(x[0], x[1]); }},
      {"add_0d", [](In x) { return add(x[0], x[1]); }},
      {"add_batch1", [](In x) { return add(x[0], x[1]); }},
      {"add_size1_vec", [](In x) { return add(x[0], x[1]); }},
      {"add_f32", [](In x) { return x[0] + x[1]; }},
      {"add_scalar", [](In x) { return add(x[0], 2.5); }},
      {"sub_broadcast", [](In x) { return sub(x[0], x[1]); }},
      {"sub_scalar", [](In x) { return sub(x[0], 1.5); }},
      {"rsub_scalar", [](In x) { return rsub(2.0, x[0]); }},
      {"mul_broadcast", [](In x) { return mul(x[0], x[1]); }},
      {"mul_f32", [](In x) { return x[0] * x[1]; }},
      {"mul_scalar", [](In x) { return mul(x[0], -3.0); }},
      {"div_broadcast", [](In x) { return div(x[0], x[1]); }},
      {"div_scalar", [](In x) { return div(x[0], 4.0); }},
      {"pow_tensor", [](In x) { return pow(x[0], x[1]); }},
      {"pow_scalar_int", [](In x) { return pow(x[0], 3.0); }},
      {"pow_scalar_frac", [](In x) { return pow(x[0], 2.5); }},
      {"pow_scalar_neg", [](In x) { return pow(x[0], -1.5); }},
      {"maximum_broadcast", [](In x) { return maximum(x[0], x[1]); }},
      {"maximum_f32", [](In x) { return maximum(x[0], x[1]); }},
      {"minimum_broadcast", [](In x) { return minimum(x[0], x[1]); }},
  };
}

std::vector<Case> unary_cases() {
  return {
      {"neg", [](In x) { return neg(x[0]); }},
      {"exp", [](In x) { return exp(x[0]); }},
      {"log", [](In x) { return log(x[0]); }},
      {"sqrt", [](In x) { return sqrt(x[0]); }},
      {"abs", [](In x) { return abs(x[0]); }},
      {"clamp", [](In x) { return clamp(x[0], -0.5, 0.8); }},
      {"clamp_min", [](In x) { return clamp_min(x[0], 0.2); }},
  };
}

std::vector<Case> selection_cases() {
  return {
      {"where_broadcast", [](In x) { return where(x[0], x[1], x[2]); }},
      {"where_same", [](In x) { return where(x[0], x[1], x[2]); }},
      {"masked_fill", [](In x) { return masked_fill(x[0], x[1], -2.5); }},
      {"masked_fill_neginf", [](In x) { return masked_fill(x[0], x[1], -INFINITY); }},
  };
}

std::vector<Case> comparison_cases() {
  return {
      {"eq_broadcast", [](In x) { return eq(x[0], x[1]); }},
      {"ne_broadcast", [](In x) { return ne(x[0], x[1]); }},
      {"lt_broadcast", [](In x) { return lt(x[0], x[1]); }},
      {"le_broadcast", [](In x) { return le(x[0], x[1]); }},
      {"gt_broadcast", [](In x) { return gt(x[0], x[1]); }},
      {"ge_broadcast", [](In x) { return ge(x[0], x[1]); }},
      {"eq_scalar", [](In x) { return eq(x[0], 0.0); }},
      {"ne_scalar", [](In x) { return ne(x[0], 0.0); }},
      {"lt_scalar", [](In x) { return lt(x[0], 0.0); }},
      {"le_scalar", [](In x) { return le(x[0], 0.0); }},
      {"gt_scalar", [](In x) { return gt(x[0], 0.0); }},
      {"ge_scalar", [](In x) { return ge(x[0], 0.0); }},
  };
}

std::vector<Case> activation_cases() {
  return {
      {"relu", [](In x) { return relu(x[0]); }},
      {"relu_f32", [](In x) { return relu(x[0]); }},
      {"sigmoid", [](In x) { return sigmoid(x[0]); }},
      {"tanh", [](In x) { return tanh(x[0]); }},
      {"gelu_erf", [](In x) { return gelu(x[0], GeluApprox::none); }},
      {"gelu_tanh", [](In x) { return gelu(x[0], GeluApprox::tanh); }},
      {"gelu_erf_f32", [](In x) { return gelu(x[0]); }},
      {"hardswish", [](In x) { return hardswish(x[0]); }},
      {"leaky_relu_default", [](In x) { return leaky_relu(x[0]); }},
      {"leaky_relu_0_2", [](In x) { return leaky_relu(x[0], 0.2); }},
  };
}

std::vector<Case> sum_mean_cases() {
  return {
      {"sum_dim1", [](In x) { return sum(x[0], {1}); }},
      {"sum_dims02_keepdim", [](In x) { return sum(x[0], {0, 2}, true); }},
      {"sum_negdim_keepdim", [](In x) { return sum(x[0], {-1}, true); }},
      {"sum_all", [](In x) { return sum(x[0]); }},
      {"sum_all_dims_keepdim", [](In x) { return sum(x[0], {0, 1}, true); }},
      {"sum_size1_dim", [](In x) { return sum(x[0], {1}); }},
      {"sum_batch1", [](In x) { return sum(x[0], {0}); }},
      {"sum_f32", [](In x) { return sum(x[0], {1}); }},
      {"mean_dim0", [](In x) { return mean(x[0], {0}); }},
      {"mean_dims12_keepdim", [](In x) { return mean(x[0], {1, 2}, true); }},
      {"mean_negdim", [](In x) { return mean(x[0], {-2}); }},
      {"mean_all", [](In x) { return mean(x[0]); }},
      {"mean_f32", [](In x) { return mean(x[0], {0}); }},
  };
}

std::vector<Case> max_min_cases() {
  return {
      {"amax_dim1", [](In x) { return amax(x[0], {1}); }},
      {"amax_dims02_keepdim", [](In x) { return amax(x[0], {0, 2}, true); }},
      {"amax_all_dims", [](In x) { return amax(x[0], {0, 1}); }},
      {"amin_negdim", [](In x) { return amin(x[0], {-1}); }},
      {"max_dim1", [](In x) { return max(x[0], 1); }},
      {"max_negdim_keepdim", [](In x) { return max(x[0], -1, true); }},
      {"max_batch1", [](In x) { return max(x[0], 1); }},
      {"min_dim0", [](In x) { return min(x[0], 0); }},
      {"min_dim2_keepdim", [](In x) { return min(x[0], 2, true); }},
      {"argmax_dim1", [](In x) { return argmax(x[0], 1); }},
      {"argmax_negdim_keepdim", [](In x) { return argmax(x[0], -1, true); }},
      {"argmin_dim0", [](In x) { return argmin(x[0], 0); }},
  };
}

std::vector<Case> softmax_cases() {
  return {
      {"softmax_dim0", [](In x) { return softmax(x[0], 0); }},
      {"softmax_dim1", [](In x) { return softmax(x[0], 1); }},
      {"softmax_negdim", [](In x) { return softmax(x[0], -1); }},
      {"softmax_large", [](In x) { return softmax(x[0], -1); }},
      {"softmax_size1", [](In x) { return softmax(x[0], 1); }},
      {"softmax_batch1", [](In x) { return softmax(x[0], 1); }},
      {"softmax_large_f32", [](In x) { return softmax(x[0], -1); }},
      {"log_softmax_dim0", [](In x) { return log_softmax(x[0], 0); }},
      {"log_softmax_dim1", [](In x) { return log_softmax(x[0], 1); }},
      {"log_softmax_negdim", [](In x) { return log_softmax(x[0], -1); }},
      {"log_softmax_large", [](In x) { return log_softmax(x[0], -1); }},
      {"log_softmax_f32", [](In x) { return log_softmax(x[0], 1); }},
  };
}

std::vector<Case> matmul_cases() {
  return {
      {"matmul_dot", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_vec_mat", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_mat_vec", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_2d", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_2d_f32", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_batched", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_batched_bcast_b", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_batched_bcast_a", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_bcast_batch_dims", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_batch1", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_vec_batched", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_batched_vec", [](In x) { return matmul(x[0], x[1]); }},
      {"matmul_transposed_a", [](In x) { return matmul(x[0].t(), x[1]); }},
      {"matmul_transposed_b", [](In x) { return matmul(x[0], x[1].t()); }},
      {"matmul_batched_transposed", [](In x) { return matmul(x[0].transpose(-1, -2), x[1]); }},
  };
}

std::vector<Case> linear_cases() {
  return {
      {"linear_bias", [](In x) { return linear(x[0], x[1], x[2]); }},
      {"linear_nobias", [](In x) { return linear(x[0], x[1]); }},
      {"linear_3d", [](In x) { return linear(x[0], x[1], x[2]); }},
      {"linear_batch1", [](In x) { return linear(x[0], x[1], x[2]); }},
      {"linear_f32", [](In x) { return linear(x[0], x[1], x[2]); }},
  };
}

std::vector<Case> join_split_cases() {
  return {
      {"concat_dim0", [](In x) { return concat(x, 0); }},
      {"concat_dim1", [](In x) { return concat(x, 1); }},
      {"concat_negdim", [](In x) { return concat(x, -1); }},
      {"concat_single", [](In x) { return concat(x, 0); }},
      {"stack_dim0", [](In x) { return stack(x, 0); }},
      {"stack_dim1", [](In x) { return stack(x, 1); }},
      {"stack_negdim", [](In x) { return stack(x, -1); }},
      {"split_size", [](In x) { return split(x[0], 3, 1); }},
      {"split_sizes", [](In x) { return split(x[0], std::vector<int64_t>{1, 3, 2}, 0); }},
      {"split_negdim", [](In x) { return split(x[0], 2, -1); }},
      {"chunk_7_by_3", [](In x) { return chunk(x[0], 3, 0); }},
      {"chunk_6_by_4", [](In x) { return chunk(x[0], 4, 1); }},
  };
}

std::vector<Case> index_cases() {
  return {
      {"index_select_dim0", [](In x) { return index_select(x[0], 0, x[1]); }},
      {"index_select_dim1", [](In x) { return index_select(x[0], 1, x[1]); }},
      {"index_select_negdim", [](In x) { return index_select(x[0], -1, x[1]); }},
      {"gather_dim0", [](In x) { return gather(x[0], 0, x[1]); }},
      {"gather_dim1_smaller", [](In x) { return gather(x[0], 1, x[1]); }},
      {"gather_negdim_3d", [](In x) { return gather(x[0], -1, x[1]); }},
      {"embedding", [](In x) { return embedding(x[0], x[1]); }},
      {"embedding_padding0", [](In x) { return embedding(x[0], x[1], 0); }},
      {"embedding_padding3_2d", [](In x) { return embedding(x[0], x[1], 3); }},
      {"embedding_batch1", [](In x) { return embedding(x[0], x[1]); }},
  };
}

std::vector<Case> view_cases() {
  return {
      {"permute_contiguous", [](In x) { return x[0].permute({2, 0, 1}).contiguous(); }},
      {"transpose_contiguous", [](In x) { return x[0].transpose(0, 2).contiguous(); }},
      {"transpose_negdims", [](In x) { return x[0].transpose(-1, -2); }},
      {"t_2d", [](In x) { return x[0].t(); }},
      {"narrow_dim1", [](In x) { return x[0].narrow(1, 1, 3); }},
      {"narrow_dim0", [](In x) { return x[0].narrow(0, 2, 3); }},
      {"slice_step2", [](In x) { return x[0].slice(1, 0, 7, 2); }},
      {"slice_step3_start1", [](In x) { return x[0].slice(0, 1, 8, 3); }},
      {"slice_step1", [](In x) { return x[0].slice(1, 1, 4); }},
      {"select_dim1", [](In x) { return x[0].select(1, 2); }},
      {"select_dim0_last", [](In x) { return x[0].select(0, 3); }},
      {"expand_size1", [](In x) { return x[0].expand({3, 4}); }},
      {"expand_new_dims", [](In x) { return x[0].expand({2, 3, 4}); }},
      {"expand_keep", [](In x) { return x[0].expand({-1, 4, -1}); }},
      {"reshape", [](In x) { return x[0].reshape({5, 12}); }},
      {"reshape_infer", [](In x) { return x[0].reshape({-1, 6}); }},
      {"reshape_noncontiguous", [](In x) { return x[0].t().reshape({12}); }},
      {"view", [](In x) { return x[0].view({3, 4}); }},
      {"flatten_from1", [](In x) { return x[0].flatten(1); }},
      {"squeeze_dim", [](In x) { return x[0].squeeze(1); }},
      {"squeeze_all", [](In x) { return x[0].squeeze(); }},
      {"unsqueeze_0", [](In x) { return x[0].unsqueeze(0); }},
      {"unsqueeze_negdim", [](In x) { return x[0].unsqueeze(-1); }},
      {"slice_f32", [](In x) { return x[0].slice(1, 1, 6, 2); }},
      {"view_chain", [](In x) { return mul(x[0].permute({1, 0, 2}).slice(1, 1, 4, 2).reshape({-1}), x[1]); }},
      {"views_accumulate",
       [](In x) { return add(x[0].narrow(1, 0, 2), mul(x[0].narrow(1, 2, 2), x[0].select(1, 3).unsqueeze(1))); }},
  };
}

std::vector<Case> noncontiguous_cases() {
  return {
      {"exp_noncontig", [](In x) { return exp(x[0].t()); }},
      {"add_noncontig", [](In x) { return add(x[0].t(), x[1].slice(0, 0, 10, 2)); }},
      {"mul_expand", [](In x) { return mul(x[0].expand({4, 3}), x[1]); }},
      {"where_noncontig", [](In x) { return where(x[0], x[1].t(), x[2]); }},
      {"sum_noncontig", [](In x) { return sum(x[0].permute({2, 0, 1}), {1}); }},
      {"max_noncontig", [](In x) { return max(x[0].t(), 0); }},
      {"softmax_noncontig", [](In x) { return softmax(x[0].transpose(0, 1), 1); }},
      {"log_softmax_noncontig", [](In x) { return log_softmax(x[0].t(), 0); }},
      {"matmul_strided", [](In x) { return matmul(x[0].slice(1, 0, 6, 2), x[1]); }},
      {"linear_noncontig", [](In x) { return linear(x[0].t(), x[1], x[2]); }},
      {"concat_noncontig", [](In x) { return concat({x[0].t(), x[1]}, 0); }},
      {"index_select_noncontig", [](In x) { return index_select(x[0].t(), 0, x[1]); }},
      {"gather_noncontig", [](In x) { return gather(x[0].t(), 1, x[1]); }},
  };
}

std::vector<Case> masked_softmax_cases() {
  return {
      {"softmax_masked_neginf", [](In x) { return softmax(masked_fill(x[0], x[1], -INFINITY), -1); }},
      {"log_softmax_masked_neginf", [](In x) { return log_softmax(masked_fill(x[0], x[1], -INFINITY), -1); }},
  };
}

std::vector<Case> empty_cases() {
  return {
      {"add_empty", [](In x) { return add(x[0], x[1]); }},
      {"sum_empty", [](In x) { return sum(x[0], {0}); }},
      {"matmul_empty_k", [](In x) { return matmul(x[0].t(), x[1]); }},
      {"concat_empty", [](In x) { return concat(x, 0); }},
      {"softmax_empty", [](In x) { return softmax(x[0], 1); }},
  };
}

std::vector<std::vector<Case>> all_tables() {
  return {binary_cases(),     unary_cases(),   selection_cases(), comparison_cases(), activation_cases(),
          sum_mean_cases(),   max_min_cases(), softmax_cases(),   matmul_cases(),     linear_cases(),
          join_split_cases(), index_cases(),   view_cases(),      noncontiguous_cases(), masked_softmax_cases(),
          empty_cases()};
}

}  // namespace

TEST_CASE("golden: add, sub, mul, div, pow, maximum, minimum", "[golden][elementwise]") { run_cases(binary_cases()); }
TEST_CASE("golden: neg, exp, log, sqrt, abs, clamp", "[golden][elementwise]") { run_cases(unary_cases()); }
TEST_CASE("golden: where, masked_fill", "[golden][elementwise]") { run_cases(selection_cases()); }
TEST_CASE("golden: comparisons", "[golden][elementwise]") { run_cases(comparison_cases()); }
TEST_CASE("golden: activations", "[golden][elementwise]") { run_cases(activation_cases()); }
TEST_CASE("golden: sum, mean", "[golden][reduce]") { run_cases(sum_mean_cases()); }
TEST_CASE("golden: amax, amin, max, min, argmax, argmin", "[golden][reduce]") { run_cases(max_min_cases()); }
TEST_CASE("golden: softmax, log_softmax", "[golden][reduce]") { run_cases(softmax_cases()); }
TEST_CASE("golden: matmul", "[golden][linalg]") { run_cases(matmul_cases()); }
TEST_CASE("golden: linear", "[golden][linalg]") { run_cases(linear_cases()); }
TEST_CASE("golden: concat, stack, split, chunk", "[golden][shape]") { run_cases(join_split_cases()); }
TEST_CASE("golden: index_select, gather, embedding", "[golden][index]") { run_cases(index_cases()); }
TEST_CASE("golden: views", "[golden][shape]") { run_cases(view_cases()); }
TEST_CASE("golden: non-contiguous inputs", "[golden]") { run_cases(noncontiguous_cases()); }
TEST_CASE("golden: softmax with -inf (masked) entries", "[golden][reduce]") { run_cases(masked_softmax_cases()); }
TEST_CASE("golden: empty tensors", "[golden]") { run_cases(empty_cases()); }

// The fixture and the tables above must describe the same cases: a case the script wrote
// that no table runs would otherwise go unnoticed.
TEST_CASE("golden: fixture format and coverage", "[golden]") {
  const SafetensorsFile& f = fixture();
  auto format = f.metadata.find("format");
  REQUIRE(format != f.metadata.end());
  CHECK(format->second == "ocrt-golden-1");

  std::set<std::string> in_tables;
  for (const auto& table : all_tables())
    for (const Case& c : table) {
      INFO("case " << c.name << " appears in two tables");
      CHECK(in_tables.insert(c.name).second);
    }
  const std::string suffix = ".in0";
  for (const auto& [name, tensor] : f.tensors) {
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::string case_name = name.substr(0, name.size() - suffix.size());
    INFO("fixture case '" << case_name << "' has no entry in tests/ops/test_golden_core.cpp");
    CHECK(in_tables.count(case_name) == 1);
  }
}

}  // namespace ocrt
