// CPU indexing kernels: index_select / index_add (whole slices picked by a 1-D index) and
// gather / scatter_add (one element picked per index element), forward and adjoint side by side.
//
// Contract (runtime/backend.h): index is int64 and contiguous, and every index is already known to
// be in range (the front-end, ops/index.cpp, checks that and reports the first bad one); x,
// src and dst may have any strides.
//
// Two ways of cutting a tensor appear below:
//  - slices, for index_select/index_add: a tensor is (outer, D, inner) around `dim`; index
//    entry j moves the whole inner block at (o, index[j]) for every outer o;
//  - lines, for gather/scatter_add: a line is the set of elements that share every coordinate
//    but `dim`; index entry p only ever points inside its own line.
// Accumulating kernels split the work so that no two threads can touch the same destination
// element (different outer slices or disjoint inner chunks for index_add; different lines
// for scatter_add) and accumulate in a fixed order inside a thread, so repeated indices add up
// correctly and the result does not depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "runtime/backend.h"
#include "runtime/cpu/loops.h"

namespace ocrt {

namespace {

using cpu::offset_of;

// The dims of `t` before `dim` (outer) and after it (inner), as sizes and strides. `shape`
// gives the sizes (the shape of the iteration), t the strides.
struct Split {
  std::vector<int64_t> outer_sizes, outer_strides, inner_sizes, inner_strides;
  int64_t outer = 1, inner = 1;
  bool inner_contiguous = true;  // the inner dims are one packed row-major block
};

Split split_at(const Shape& shape, const Tensor& t, int64_t dim) {
  Split s;
  int64_t expected = 1;
  for (int64_t d = (int64_t)shape.size() - 1; d > dim; --d) {
    if (shape[d] != 1 && t.strides()[d] != expected) s.inner_contiguous = false;
    expected *= shape[d];
  }
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
    if (d == dim) continue;
    auto& sizes = d < dim ? s.outer_sizes : s.inner_sizes;
    auto& strides = d < dim ? s.outer_strides : s.inner_strides;
    sizes.push_back(shape[d]);
    strides.push_back(t.strides()[d]);
    (d < dim ? s.outer : s.inner) *= shape[d];
  }
  return s;
}

bool run_parallel(int64_t work) { return work >= cpu::kParallelGrain && omp_get_max_threads() > 1 && !omp_in_parallel(); }

// ---- index_select: x is (outer, D, inner), index (n), out (outer, n, inner).
//   out[o][j][k] = x[o][index[j]][k]

// Plain reference: one element at a time, any strides.
template <class T>
void index_select_ref(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const T* xd = x.data<T>();
  T* od = out.data<T>();
  const int64_t* idx = index.data<int64_t>();
  const int64_t n = index.numel();
  Split xs = split_at(out.shape(), x, dim), os = split_at(out.shape(), out, dim);
  const int64_t x_step = x.strides()[dim], out_step = out.strides()[dim];
#pragma omp parallel for schedule(static) if (run_parallel(out.numel()))
  for (int64_t p = 0; p < xs.outer * n; ++p) {
    const int64_t o = p / n, j = p % n;
    const T* src = xd + offset_of(o, xs.outer_sizes, xs.outer_strides) + idx[j] * x_step;
    T* dst = od + offset_of(o, os.outer_sizes, os.outer_strides) + j * out_step;
    for (int64_t k = 0; k < xs.inner; ++k)
      dst[offset_of(k, os.inner_sizes, os.inner_strides)] = src[offset_of(k, xs.inner_sizes, xs.inner_strides)];
  }
}

// Fast path when both inner blocks are packed: each (o, j) is one memcpy of `inner` values.
template <class T>
void index_select_packed(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const T* xd = x.data<T>();
  T* od = out.data<T>();
  const int64_t* idx = index.data<int64_t>();
  const int64_t n = index.numel();
  Split xs = split_at(out.shape(), x, dim), os = split_at(out.shape(), out, dim);
  const int64_t x_step = x.strides()[dim], out_step = out.strides()[dim], inner = xs.inner;
#pragma omp parallel for schedule(static) if (run_parallel(out.numel()))
  for (int64_t p = 0; p < xs.outer * n; ++p) {
    const int64_t o = p / n, j = p % n;
    const T* src = xd + offset_of(o, xs.outer_sizes, xs.outer_strides) + idx[j] * x_step;
    T* dst = od + offset_of(o, os.outer_sizes, os.outer_strides) + j * out_step;
    std::memcpy(dst, src, (size_t)inner * sizeof(T));
  }
}

void cpu_index_select(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  dispatch_all(x.dtype(), "index_select", [&](auto zero) {
    using T = decltype(zero);
    if (split_at(out.shape(), x, dim).inner_contiguous && split_at(out.shape(), out, dim).inner_contiguous)
      index_select_packed<T>(x, dim, index, out);
    else
      index_select_ref<T>(x, dim, index, out);
  });
}

// ---- index_add: dst is (outer, D, inner), index (n), src (outer, n, inner).
//   dst[o][index[j]][k] += src[o][j][k]
// Two j with the same index hit the same dst elements, so j runs serially inside a task; the
// tasks are (outer slice, chunk of inner), which never overlap. When there are fewer outer
// slices than threads (dim 0: embedding's backward), the inner range is cut into chunks.
template <class T>
void index_add_typed(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  T* dd = dst.data<T>();
  const T* sd = src.data<T>();
  const int64_t* idx = index.data<int64_t>();
  const int64_t n = index.numel();
  Split ds = split_at(src.shape(), dst, dim), ss = split_at(src.shape(), src, dim);
  const int64_t d_step = dst.strides()[dim], s_step = src.strides()[dim];
  const bool packed = ds.inner_contiguous && ss.inner_contiguous;
  const int64_t outer = ds.outer, inner = ds.inner;

  const bool parallel = run_parallel(src.numel());
  const int64_t threads = parallel ? omp_get_max_threads() : 1;
  const int64_t chunks = outer >= threads ? 1 : std::min<int64_t>(std::max<int64_t>(inner, 1), (threads + outer - 1) / outer);
  const int64_t chunk = (inner + chunks - 1) / chunks;

#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < outer * chunks; ++task) {
    const int64_t o = task / chunks, k0 = (task % chunks) * chunk, k1 = std::min(inner, k0 + chunk);
    T* d_slice = dd + offset_of(o, ds.outer_sizes, ds.outer_strides);
    const T* s_slice = sd + offset_of(o, ss.outer_sizes, ss.outer_strides);
    for (int64_t j = 0; j < n; ++j) {
      T* d = d_slice + idx[j] * d_step;
      const T* s = s_slice + j * s_step;
      if (packed) {
        for (int64_t k = k0; k < k1; ++k) d[k] += s[k];
      } else {  // plain reference: any strides
        for (int64_t k = k0; k < k1; ++k)
          d[offset_of(k, ds.inner_sizes, ds.inner_strides)] += s[offset_of(k, ss.inner_sizes, ss.inner_strides)];
      }
    }
  }
}

void cpu_index_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  dispatch_all(dst.dtype(), "index_add", [&](auto zero) { index_add_typed<decltype(zero)>(dst, dim, index, src); });
}

// ---- gather / scatter_add, walked line by line. index has the iteration shape (its size
// along dim is n); line l covers the elements whose non-dim coordinates are the l-th
// combination (row-major) of index's other dims.
//   gather:      out[.., j, ..] = x[.., index[.., j, ..], ..]
//   scatter_add: dst[.., index[.., j, ..], ..] += src[.., j, ..]
struct Lines {
  std::vector<int64_t> sizes;                 // index's shape without dim
  std::vector<int64_t> a_strides, b_strides;  // of the data tensor and of the other tensor, without dim
  std::vector<int64_t> i_strides;             // of index, without dim
  int64_t count = 1, n = 1;
  int64_t a_step = 0, b_step = 0, i_step = 0;  // strides along dim
};

// a: the tensor addressed through the index (x for gather, dst for scatter_add);
// b: the tensor addressed like the index (out for gather, src for scatter_add).
Lines lines_of(const Tensor& a, const Tensor& b, const Tensor& index, int64_t dim) {
  Lines L;
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    L.sizes.push_back(index.shape()[d]);
    L.a_strides.push_back(a.strides()[d]);
    L.b_strides.push_back(b.strides()[d]);
    L.i_strides.push_back(index.strides()[d]);
    L.count *= index.shape()[d];
  }
  L.n = index.shape()[dim];
  L.a_step = a.strides()[dim];
  L.b_step = b.strides()[dim];
  L.i_step = index.strides()[dim];
  return L;
}

// Every element of a gather is independent, so the lines can go to any thread.
template <class T>
void gather_typed(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const T* xd = x.data<T>();
  T* od = out.data<T>();
  const int64_t* idx = index.data<int64_t>();
  Lines L = lines_of(x, out, index, dim);
#pragma omp parallel for schedule(static) if (run_parallel(out.numel()))
  for (int64_t l = 0; l < L.count; ++l) {
    const T* xl = xd + offset_of(l, L.sizes, L.a_strides);
    T* ol = od + offset_of(l, L.sizes, L.b_strides);
    const int64_t* il = idx + offset_of(l, L.sizes, L.i_strides);
    for (int64_t j = 0; j < L.n; ++j) ol[j * L.b_step] = xl[il[j * L.i_step] * L.a_step];
  }
}

void cpu_gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  dispatch_all(x.dtype(), "gather", [&](auto zero) { gather_typed<decltype(zero)>(x, dim, index, out); });
}

// Indices of one line only point inside that line of dst, so lines never collide: each is
// accumulated by one thread, in order of j.
template <class T>
void scatter_add_typed(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  T* dd = dst.data<T>();
  const T* sd = src.data<T>();
  const int64_t* idx = index.data<int64_t>();
  Lines L = lines_of(dst, src, index, dim);
#pragma omp parallel for schedule(static) if (run_parallel(src.numel()))
  for (int64_t l = 0; l < L.count; ++l) {
    T* dl = dd + offset_of(l, L.sizes, L.a_strides);
    const T* sl = sd + offset_of(l, L.sizes, L.b_strides);
    const int64_t* il = idx + offset_of(l, L.sizes, L.i_strides);
    for (int64_t j = 0; j < L.n; ++j) dl[il[j * L.i_step] * L.a_step] += sl[j * L.b_step];
  }
}

void cpu_scatter_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  dispatch_all(dst.dtype(), "scatter_add", [&](auto zero) { scatter_add_typed<decltype(zero)>(dst, dim, index, src); });
}

}  // namespace

void register_cpu_index(TensorBackend& b) {
  b.index_select = cpu_index_select;
  b.index_add = cpu_index_add;
  b.gather = cpu_gather;
  b.scatter_add = cpu_scatter_add;
}

}  // namespace ocrt
