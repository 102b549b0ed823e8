#!/usr/bin/python3
"""Writes tests/fixtures/ops_core.safetensors: golden values for ocrt's core ops, computed by
PyTorch. Run from anywhere:  python3 tools/reference/ops_core.py

Every case below is one line of the CASES table: a name, the PyTorch computation, and how to
make its inputs. tests/ops/test_golden_core.cpp holds the same table with the ocrt call;
scalar parameters (dims, keepdim, exponents, clamp bounds, slopes, padding_idx, split sizes...)
live in the code of both tables, so a change on one side must be made on the other.

Inputs are float64 unless a case ends in _f32, so the C++ side can compare tightly. Inputs of
ops with kinks (relu, abs, clamp, hardswish, leaky_relu) are kept away from the kinks, and
max/min inputs are continuous random values (no ties), so every gradient is unambiguous.
Each case draws from its own generator seeded by its name: adding a case changes no other.
See tools/reference/README.md for the naming scheme inside the file.
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden import Fixture, seed_for  # noqa: E402

F64, F32 = torch.float64, torch.float32
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_PATH = os.path.join(ROOT, "tests", "fixtures", "ops_core.safetensors")


# ---- input specs: each returns a function of a torch.Generator, so inputs are drawn per case
def randn(*shape, scale=1.0, shift=0.0, dtype=F64):
    return lambda g: (torch.randn(shape, dtype=F64, generator=g) * scale + shift).to(dtype)


def uniform(lo, hi, *shape, dtype=F64):
    return lambda g: (torch.rand(shape, dtype=F64, generator=g) * (hi - lo) + lo).to(dtype)


def away(spec, points, margin=0.05):
    """spec's values, with any value closer than `margin` to one of `points` pushed out to
    exactly `margin` away (points must be further than 2*margin apart)."""
    def make(g):
        x = spec(g)
        for p in points:
            d = x - p
            near = d.abs() < margin
            side = torch.where(d >= 0, torch.ones_like(x), -torch.ones_like(x))
            x = torch.where(near, p + margin * side, x)
        return x
    return make


def randint(lo, hi, *shape):  # int64 in [lo, hi)
    return lambda g: torch.randint(lo, hi, shape, generator=g, dtype=torch.int64)


def randint_f(lo, hi, *shape):  # integer-valued float64, so comparisons see ties
    return lambda g: torch.randint(lo, hi, shape, generator=g).to(F64)


def mask(*shape):  # uint8 0/1
    return lambda g: torch.randint(0, 2, shape, generator=g, dtype=torch.uint8)


def const(values, dtype=torch.int64):
    return lambda g: torch.tensor(values, dtype=dtype)


# ---- the cases: (name, fn, input specs). Comments give the ocrt call where it is not obvious.
CASES = [
    # -- binary arithmetic, with broadcasting
    ("add_same", lambda a, b: a + b, [randn(3, 5), randn(3, 5)]),
    ("add_broadcast", lambda a, b: a + b, [randn(3, 1, 5), randn(4, 1)]),
    ("add_0d", lambda a, b: a + b, [randn(2, 3), randn()]),
    ("add_batch1", lambda a, b: a + b, [randn(1, 3, 4), randn(3, 4)]),
    ("add_size1_vec", lambda a, b: a + b, [randn(1), randn(7)]),
    ("add_f32", lambda a, b: a + b, [randn(4, 1, 3, dtype=F32), randn(5, 3, dtype=F32)]),
    ("add_scalar", lambda a: a + 2.5, [randn(3, 4)]),
    ("sub_broadcast", lambda a, b: a - b, [randn(2, 1, 3), randn(5, 1)]),
    ("sub_scalar", lambda a: a - 1.5, [randn(4, 3)]),
    ("rsub_scalar", lambda a: 2.0 - a, [randn(4, 3)]),  # rsub(2.0, x)
    ("mul_broadcast", lambda a, b: a * b, [randn(4, 1), randn(1, 6)]),
    ("mul_f32", lambda a, b: a * b, [randn(5, 7, dtype=F32), randn(5, 7, dtype=F32)]),
    ("mul_scalar", lambda a: a * -3.0, [randn(2, 5)]),
    ("div_broadcast", lambda a, b: a / b, [randn(3, 4), away(uniform(-2, 2, 4), [0.0], 0.5)]),
    ("div_scalar", lambda a: a / 4.0, [randn(3, 3)]),
    ("pow_tensor", lambda a, b: torch.pow(a, b), [uniform(0.5, 2, 3, 4), randn(1, 4)]),
    ("pow_scalar_int", lambda a: torch.pow(a, 3.0), [randn(4, 5)]),
    ("pow_scalar_frac", lambda a: torch.pow(a, 2.5), [uniform(0.2, 2, 3, 5)]),
    ("pow_scalar_neg", lambda a: torch.pow(a, -1.5), [uniform(0.5, 2, 5, 2)]),
    ("maximum_broadcast", lambda a, b: torch.maximum(a, b), [randn(3, 1, 4), randn(5, 4)]),
    ("maximum_f32", lambda a, b: torch.maximum(a, b), [randn(4, 5, dtype=F32), randn(4, 5, dtype=F32)]),
    ("minimum_broadcast", lambda a, b: torch.minimum(a, b), [randn(2, 5), randn(2, 1)]),
    # -- unary math
    ("neg", lambda x: -x, [randn(3, 4)]),
    ("exp", lambda x: torch.exp(x), [randn(2, 3, 4, scale=2.0)]),
    ("log", lambda x: torch.log(x), [uniform(0.1, 5, 5, 3)]),
    ("sqrt", lambda x: torch.sqrt(x), [uniform(0.1, 4, 4, 5)]),
    ("abs", lambda x: torch.abs(x), [away(randn(3, 7), [0.0])]),
    ("clamp", lambda x: torch.clamp(x, -0.5, 0.8), [away(randn(4, 6), [-0.5, 0.8])]),
    ("clamp_min", lambda x: torch.clamp(x, min=0.2), [away(randn(3, 5), [0.2])]),  # clamp_min(x, 0.2)
    # -- selection
    ("where_broadcast", lambda c, a, b: torch.where(c.bool(), a, b), [mask(3, 1, 5), randn(4, 5), randn(3, 4, 1)]),
    ("where_same", lambda c, a, b: torch.where(c.bool(), a, b), [mask(2, 3), randn(2, 3), randn(2, 3)]),
    ("masked_fill", lambda x, m: x.masked_fill(m.bool(), -2.5), [randn(3, 5), mask(1, 5)]),
    ("masked_fill_neginf", lambda x, m: x.masked_fill(m.bool(), float("-inf")), [randn(2, 3, 4), mask(2, 1, 4)]),
    # -- comparisons (uint8 output, no gradient); integer-valued inputs so that ties occur
    ("eq_broadcast", lambda a, b: a == b, [randint_f(-2, 3, 3, 1, 4), randint_f(-2, 3, 5, 4)]),
    ("ne_broadcast", lambda a, b: a != b, [randint_f(-2, 3, 3, 1, 4), randint_f(-2, 3, 5, 4)]),
    ("lt_broadcast", lambda a, b: a < b, [randint_f(-2, 3, 3, 1, 4), randint_f(-2, 3, 5, 4)]),
    ("le_broadcast", lambda a, b: a <= b, [randint_f(-2, 3, 3, 1, 4), randint_f(-2, 3, 5, 4)]),
    ("gt_broadcast", lambda a, b: a > b, [randint_f(-2, 3, 3, 1, 4), randint_f(-2, 3, 5, 4)]),
    ("ge_broadcast", lambda a, b: a >= b, [randint_f(-2, 3, 3, 1, 4), randint_f(-2, 3, 5, 4)]),
    ("eq_scalar", lambda a: a == 0.0, [randint_f(-2, 3, 4, 5)]),
    ("ne_scalar", lambda a: a != 0.0, [randint_f(-2, 3, 4, 5)]),
    ("lt_scalar", lambda a: a < 0.0, [randint_f(-2, 3, 4, 5)]),
    ("le_scalar", lambda a: a <= 0.0, [randint_f(-2, 3, 4, 5)]),
    ("gt_scalar", lambda a: a > 0.0, [randint_f(-2, 3, 4, 5)]),
    ("ge_scalar", lambda a: a >= 0.0, [randint_f(-2, 3, 4, 5)]),
    # -- activations
    ("relu", lambda x: torch.relu(x), [away(randn(4, 5), [0.0])]),
    ("relu_f32", lambda x: torch.relu(x), [away(randn(3, 7, dtype=F32), [0.0])]),
    ("sigmoid", lambda x: torch.sigmoid(x), [randn(3, 5, scale=3.0)]),
    ("tanh", lambda x: torch.tanh(x), [randn(3, 5, scale=2.0)]),
    ("gelu_erf", lambda x: F.gelu(x), [randn(4, 5, scale=2.0)]),  # gelu(x, GeluApprox::none)
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), [randn(4, 5, scale=2.0)]),
    ("gelu_erf_f32", lambda x: F.gelu(x), [randn(3, 6, scale=2.0, dtype=F32)]),
    ("hardswish", lambda x: F.hardswish(x), [away(randn(5, 6, scale=3.0), [-3.0, 3.0])]),
    ("leaky_relu_default", lambda x: F.leaky_relu(x), [away(randn(3, 5), [0.0])]),  # slope 0.01
    ("leaky_relu_0_2", lambda x: F.leaky_relu(x, 0.2), [away(randn(4, 3), [0.0])]),
    # -- sum / mean
    ("sum_dim1", lambda x: x.sum(dim=1), [randn(3, 5, 4)]),
    ("sum_dims02_keepdim", lambda x: x.sum(dim=(0, 2), keepdim=True), [randn(3, 5, 4)]),
    ("sum_negdim_keepdim", lambda x: x.sum(dim=-1, keepdim=True), [randn(3, 5, 4)]),
    ("sum_all", lambda x: x.sum(), [randn(3, 5, 4)]),
    ("sum_all_dims_keepdim", lambda x: x.sum(dim=(0, 1), keepdim=True), [randn(2, 3)]),
    ("sum_size1_dim", lambda x: x.sum(dim=1), [randn(3, 1, 4)]),
    ("sum_batch1", lambda x: x.sum(dim=0), [randn(1, 7)]),
    ("sum_f32", lambda x: x.sum(dim=1), [randn(6, 7, dtype=F32)]),
    ("mean_dim0", lambda x: x.mean(dim=0), [randn(4, 3)]),
    ("mean_dims12_keepdim", lambda x: x.mean(dim=(1, 2), keepdim=True), [randn(2, 3, 5)]),
    ("mean_negdim", lambda x: x.mean(dim=-2), [randn(2, 3, 5)]),
    ("mean_all", lambda x: x.mean(), [randn(3, 5, 4)]),
    ("mean_f32", lambda x: x.mean(dim=0), [randn(9, 4, dtype=F32)]),
    # -- amax / amin (continuous inputs: no ties)
    ("amax_dim1", lambda x: torch.amax(x, dim=1), [randn(3, 5, 4)]),
    ("amax_dims02_keepdim", lambda x: torch.amax(x, dim=(0, 2), keepdim=True), [randn(3, 5, 4)]),
    ("amax_all_dims", lambda x: torch.amax(x, dim=(0, 1)), [randn(3, 4)]),
    ("amin_negdim", lambda x: torch.amin(x, dim=-1), [randn(3, 5)]),
    # -- max / min along a dim: out0 values, out1 indices
    ("max_dim1", lambda x: torch.max(x, dim=1), [randn(3, 5, 4)]),
    ("max_negdim_keepdim", lambda x: torch.max(x, dim=-1, keepdim=True), [randn(3, 5, 4)]),
    ("max_batch1", lambda x: torch.max(x, dim=1), [randn(1, 6)]),
    ("min_dim0", lambda x: torch.min(x, dim=0), [randn(4, 3)]),
    ("min_dim2_keepdim", lambda x: torch.min(x, dim=2, keepdim=True), [randn(2, 3, 5)]),
    ("argmax_dim1", lambda x: torch.argmax(x, dim=1), [randn(3, 5, 4)]),
    ("argmax_negdim_keepdim", lambda x: torch.argmax(x, dim=-1, keepdim=True), [randn(4, 6)]),
    ("argmin_dim0", lambda x: torch.argmin(x, dim=0), [randn(5, 3)]),
    # -- softmax / log_softmax
    ("softmax_dim0", lambda x: torch.softmax(x, dim=0), [randn(3, 4, 5)]),
    ("softmax_dim1", lambda x: torch.softmax(x, dim=1), [randn(3, 4, 5)]),
    ("softmax_negdim", lambda x: torch.softmax(x, dim=-1), [randn(3, 4, 5)]),
    ("softmax_large", lambda x: torch.softmax(x, dim=-1), [randn(4, 7, scale=20.0, shift=1000.0)]),
    ("softmax_size1", lambda x: torch.softmax(x, dim=1), [randn(4, 1)]),
    ("softmax_batch1", lambda x: torch.softmax(x, dim=1), [randn(1, 5)]),
    ("softmax_large_f32", lambda x: torch.softmax(x, dim=-1), [randn(3, 6, scale=10.0, shift=100.0, dtype=F32)]),
    ("log_softmax_dim0", lambda x: torch.log_softmax(x, dim=0), [randn(3, 4, 5)]),
    ("log_softmax_dim1", lambda x: torch.log_softmax(x, dim=1), [randn(3, 4, 5)]),
    ("log_softmax_negdim", lambda x: torch.log_softmax(x, dim=-1), [randn(3, 4, 5)]),
    ("log_softmax_large", lambda x: torch.log_softmax(x, dim=-1), [randn(4, 7, scale=20.0, shift=-1000.0)]),
    ("log_softmax_f32", lambda x: torch.log_softmax(x, dim=1), [randn(3, 7, dtype=F32)]),
    # -- matmul
    ("matmul_dot", lambda a, b: torch.matmul(a, b), [randn(5), randn(5)]),
    ("matmul_vec_mat", lambda a, b: torch.matmul(a, b), [randn(4), randn(4, 3)]),
    ("matmul_mat_vec", lambda a, b: torch.matmul(a, b), [randn(3, 4), randn(4)]),
    ("matmul_2d", lambda a, b: torch.matmul(a, b), [randn(3, 5), randn(5, 7)]),
    ("matmul_2d_f32", lambda a, b: torch.matmul(a, b), [randn(6, 5, dtype=F32), randn(5, 4, dtype=F32)]),
    ("matmul_batched", lambda a, b: torch.matmul(a, b), [randn(2, 3, 4), randn(2, 4, 5)]),
    ("matmul_batched_bcast_b", lambda a, b: torch.matmul(a, b), [randn(2, 3, 4), randn(4, 5)]),
    ("matmul_batched_bcast_a", lambda a, b: torch.matmul(a, b), [randn(3, 4), randn(2, 4, 5)]),
    ("matmul_bcast_batch_dims", lambda a, b: torch.matmul(a, b), [randn(2, 1, 3, 4), randn(3, 4, 5)]),
    ("matmul_batch1", lambda a, b: torch.matmul(a, b), [randn(1, 3, 4), randn(1, 4, 2)]),
    ("matmul_vec_batched", lambda a, b: torch.matmul(a, b), [randn(4), randn(2, 4, 5)]),
    ("matmul_batched_vec", lambda a, b: torch.matmul(a, b), [randn(2, 3, 4), randn(4)]),
    ("matmul_transposed_a", lambda a, b: torch.matmul(a.t(), b), [randn(5, 3), randn(5, 4)]),
    ("matmul_transposed_b", lambda a, b: torch.matmul(a, b.t()), [randn(3, 5), randn(4, 5)]),
    ("matmul_batched_transposed", lambda a, b: torch.matmul(a.transpose(-1, -2), b), [randn(2, 4, 3), randn(2, 4, 5)]),
    # -- linear: in0 x, in1 weight (out, in), in2 bias
    ("linear_bias", lambda x, w, b: F.linear(x, w, b), [randn(4, 6), randn(5, 6), randn(5)]),
    ("linear_nobias", lambda x, w: F.linear(x, w), [randn(4, 6), randn(5, 6)]),
    ("linear_3d", lambda x, w, b: F.linear(x, w, b), [randn(2, 3, 6), randn(5, 6), randn(5)]),
    ("linear_batch1", lambda x, w, b: F.linear(x, w, b), [randn(1, 6), randn(3, 6), randn(3)]),
    ("linear_f32", lambda x, w, b: F.linear(x, w, b), [randn(3, 8, dtype=F32), randn(4, 8, dtype=F32), randn(4, dtype=F32)]),
    # -- concat / stack / split / chunk
    ("concat_dim0", lambda a, b, c: torch.cat([a, b, c], dim=0), [randn(2, 3), randn(4, 3), randn(1, 3)]),
    ("concat_dim1", lambda a, b: torch.cat([a, b], dim=1), [randn(3, 2), randn(3, 5)]),
    ("concat_negdim", lambda a, b: torch.cat([a, b], dim=-1), [randn(2, 3, 1), randn(2, 3, 4)]),
    ("concat_single", lambda a: torch.cat([a], dim=0), [randn(3, 4)]),
    ("stack_dim0", lambda a, b, c: torch.stack([a, b, c], dim=0), [randn(2, 3), randn(2, 3), randn(2, 3)]),
    ("stack_dim1", lambda a, b: torch.stack([a, b], dim=1), [randn(2, 3), randn(2, 3)]),
    ("stack_negdim", lambda a, b: torch.stack([a, b], dim=-1), [randn(3, 4), randn(3, 4)]),
    ("split_size", lambda x: torch.split(x, 3, dim=1), [randn(3, 7)]),  # pieces 3, 3, 1
    ("split_sizes", lambda x: torch.split(x, [1, 3, 2], dim=0), [randn(6, 4)]),
    ("split_negdim", lambda x: torch.split(x, 2, dim=-1), [randn(2, 5)]),
    ("chunk_7_by_3", lambda x: torch.chunk(x, 3, dim=0), [randn(7, 2)]),  # pieces 3, 3, 1
    ("chunk_6_by_4", lambda x: torch.chunk(x, 4, dim=1), [randn(2, 6)]),  # 3 pieces of 2 (not 4)
    # -- index_select / gather / embedding: integer inputs are int64
    ("index_select_dim0", lambda x, i: torch.index_select(x, 0, i), [randn(5, 3), const([4, 0, 2, 2])]),
    ("index_select_dim1", lambda x, i: torch.index_select(x, 1, i), [randn(3, 6), const([5, 1, 1, 0, 3])]),
    ("index_select_negdim", lambda x, i: torch.index_select(x, -1, i), [randn(2, 3, 4), const([3, 0])]),
    ("gather_dim0", lambda x, i: torch.gather(x, 0, i), [randn(4, 3), randint(0, 4, 5, 3)]),
    ("gather_dim1_smaller", lambda x, i: torch.gather(x, 1, i), [randn(3, 5), randint(0, 5, 2, 4)]),
    ("gather_negdim_3d", lambda x, i: torch.gather(x, -1, i), [randn(2, 3, 4), randint(0, 4, 2, 3, 6)]),
    # embedding: in0 weight, in1 indices
    ("embedding", lambda w, i: F.embedding(i, w), [randn(10, 4), const([[1, 4, 4], [9, 0, 2]])]),
    ("embedding_padding0", lambda w, i: F.embedding(i, w, padding_idx=0), [randn(6, 3), const([0, 2, 0, 5, 2])]),
    ("embedding_padding3_2d", lambda w, i: F.embedding(i, w, padding_idx=3),
     [randn(7, 5), const([[3, 1, 6, 3], [0, 3, 1, 2]])]),
    ("embedding_batch1", lambda w, i: F.embedding(i, w), [randn(4, 2), const([[2]])]),
    # -- views (gradients flow back through them)
    ("permute_contiguous", lambda x: x.permute(2, 0, 1).contiguous(), [randn(2, 3, 4)]),
    ("transpose_contiguous", lambda x: x.transpose(0, 2).contiguous(), [randn(3, 4, 5)]),
    ("transpose_negdims", lambda x: x.transpose(-1, -2), [randn(2, 3, 4)]),
    ("t_2d", lambda x: x.t(), [randn(3, 5)]),
    ("narrow_dim1", lambda x: x.narrow(1, 1, 3), [randn(4, 6)]),
    ("narrow_dim0", lambda x: x.narrow(0, 2, 3), [randn(5, 2, 3)]),
    ("slice_step2", lambda x: x[:, 0:7:2], [randn(3, 7)]),        # slice(1, 0, 7, 2)
    ("slice_step3_start1", lambda x: x[1:8:3], [randn(8, 3)]),    # slice(0, 1, 8, 3)
    ("slice_step1", lambda x: x[:, 1:4], [randn(4, 5)]),          # slice(1, 1, 4)
    ("select_dim1", lambda x: x.select(1, 2), [randn(3, 4, 5)]),
    ("select_dim0_last", lambda x: x.select(0, 3), [randn(4, 3)]),
    ("expand_size1", lambda x: x.expand(3, 4), [randn(3, 1)]),
    ("expand_new_dims", lambda x: x.expand(2, 3, 4), [randn(3, 1)]),
    ("expand_keep", lambda x: x.expand(-1, 4, -1), [randn(3, 1, 2)]),
    ("reshape", lambda x: x.reshape(5, 12), [randn(3, 4, 5)]),
    ("reshape_infer", lambda x: x.reshape(-1, 6), [randn(2, 3, 4)]),
    ("reshape_noncontiguous", lambda x: x.t().reshape(12), [randn(3, 4)]),  # x.t().reshape({12}) copies
    ("view", lambda x: x.view(3, 4), [randn(2, 6)]),
    ("flatten_from1", lambda x: x.flatten(1), [randn(2, 3, 4)]),
    ("squeeze_dim", lambda x: x.squeeze(1), [randn(3, 1, 4)]),
    ("squeeze_all", lambda x: x.squeeze(), [randn(1, 3, 1, 4, 1)]),
    ("unsqueeze_0", lambda x: x.unsqueeze(0), [randn(3, 4)]),
    ("unsqueeze_negdim", lambda x: x.unsqueeze(-1), [randn(3, 4)]),
    ("slice_f32", lambda x: x[:, 1:6:2], [randn(2, 7, dtype=F32)]),  # slice(1, 1, 6, 2)
    # chains: several views of one input, so gradients accumulate into it
    ("view_chain", lambda x, y: x.permute(1, 0, 2)[:, 1:4:2].reshape(-1) * y, [randn(4, 3, 5), randn(30)]),
    ("views_accumulate", lambda x: x.narrow(1, 0, 2) + x.narrow(1, 2, 2) * x.select(1, 3).unsqueeze(1),
     [randn(3, 4)]),
    # -- non-contiguous inputs: ops read views (transposed, strided, expanded) correctly
    ("exp_noncontig", lambda x: torch.exp(x.t()), [randn(4, 3)]),
    ("add_noncontig", lambda x, y: x.t() + y[0:10:2], [randn(3, 5), randn(10, 3)]),  # add(x.t(), y.slice(0, 0, 10, 2))
    ("mul_expand", lambda x, y: x.expand(4, 3) * y, [randn(1, 3), randn(4, 3)]),
    ("where_noncontig", lambda c, a, b: torch.where(c.bool(), a.t(), b), [mask(4, 3), randn(3, 4), randn(4, 3)]),
    ("sum_noncontig", lambda x: x.permute(2, 0, 1).sum(dim=1), [randn(3, 4, 5)]),
    ("max_noncontig", lambda x: torch.max(x.t(), dim=0), [randn(4, 3)]),
    ("softmax_noncontig", lambda x: torch.softmax(x.transpose(0, 1), dim=1), [randn(4, 3, 5)]),
    ("log_softmax_noncontig", lambda x: torch.log_softmax(x.t(), dim=0), [randn(5, 3)]),
    ("matmul_strided", lambda a, b: torch.matmul(a[:, 0:6:2], b), [randn(3, 6), randn(3, 4)]),  # a.slice(1, 0, 6, 2)
    ("linear_noncontig", lambda x, w, b: F.linear(x.t(), w, b), [randn(6, 4), randn(5, 6), randn(5)]),
    ("concat_noncontig", lambda a, b: torch.cat([a.t(), b], dim=0), [randn(3, 2), randn(1, 3)]),
    ("index_select_noncontig", lambda x, i: torch.index_select(x.t(), 0, i), [randn(3, 5), const([4, 1, 1])]),
    ("gather_noncontig", lambda x, i: torch.gather(x.t(), 1, i), [randn(4, 3), randint(0, 4, 3, 2)]),
    # -- softmax over a row with -inf entries (attention masks): those get 0 and no gradient
    ("softmax_masked_neginf", lambda x, m: torch.softmax(x.masked_fill(m.bool(), float("-inf")), dim=-1),
     [randn(3, 4), const([[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0]], torch.uint8)]),
    ("log_softmax_masked_neginf", lambda x, m: torch.log_softmax(x.masked_fill(m.bool(), float("-inf")), dim=-1),
     [randn(2, 3), const([[0, 1, 0], [0, 0, 1]], torch.uint8)]),
    # -- empty tensors (a size-0 dim)
    ("add_empty", lambda a, b: a + b, [randn(0, 3), randn(3)]),
    ("sum_empty", lambda x: x.sum(dim=0), [randn(0, 3)]),  # zeros(3)
    # K = 0 gives zeros(2, 3). in0 is stored as (0, 2) and transposed in the op; stored as (2, 0)
    # it hit an ocrt bug when this was written (is_contiguous() false for shape (2, 0), so the
    # safetensors reader refused the whole file).
    ("matmul_empty_k", lambda a, b: torch.matmul(a.t(), b), [randn(0, 2), randn(0, 3)]),
    ("concat_empty", lambda a, b: torch.cat([a, b], dim=0), [randn(2, 3), randn(0, 3)]),
    ("softmax_empty", lambda x: torch.softmax(x, dim=1), [randn(0, 4)]),
]


def main():
    fx = Fixture()
    for entry in CASES:
        name, fn, specs = entry[0], entry[1], entry[2]
        gen = torch.Generator().manual_seed(seed_for(name))
        inputs = [spec(gen) for spec in specs]
        fx.case(name, fn, inputs, gen)
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    fx.write(OUT_PATH, "tools/reference/ops_core.py")
    print(f"wrote {len(fx.case_names)} cases, {len(fx.tensors)} tensors, "
          f"{os.path.getsize(OUT_PATH)} bytes to {os.path.relpath(OUT_PATH, ROOT)}")


if __name__ == "__main__":
    main()
