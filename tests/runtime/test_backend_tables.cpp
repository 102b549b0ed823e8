// The two kernel tables are complete: every entry of the tensor table (runtime/backend.h) and of
// the layer table (ops/backend.h) is filled on the CPU, and, in builds with CUDA, on CUDA too
// (checked without a GPU: building a table only fills in function pointers). The entry lists
// below must name every field: a size check fails when a table gains an entry they lack.
#include <catch2/catch.hpp>

#include "ops/backend.h"
#include "runtime/backend.h"

using namespace ocrt;

#define OCRT_TENSOR_ENTRIES(X)                                                                         \
  X(copy) X(fill) X(unary) X(unary_backward) X(binary) X(where) X(reduce) X(arg_reduce) X(matmul)   \
  X(index_select) X(index_add) X(gather) X(scatter_add) X(uniform) X(normal)
#define OCRT_LAYER_ENTRIES(X)                                                                          \
  X(softmax) X(softmax_backward) X(conv2d) X(conv2d_backward) X(max_pool2d) X(max_pool2d_backward)   \
  X(avg_pool2d) X(avg_pool2d_backward) X(adaptive_avg_pool2d) X(adaptive_avg_pool2d_backward)        \
  X(batch_norm_stats) X(batch_norm_apply) X(batch_norm_backward) X(layer_norm) X(layer_norm_backward) \
  X(lstm_cell) X(lstm_cell_backward) X(ctc_loss) X(ctc_loss_backward)

#define OCRT_COUNT(field) +1
#define OCRT_CHECK_FILLED(field)                   \
  {                                                \
    INFO(table.name << " backend: entry " #field); \
    CHECK(table.field != nullptr);                 \
  }

namespace {

template <class Table>
void check_tensor_table(const Table& table) {
  OCRT_TENSOR_ENTRIES(OCRT_CHECK_FILLED)
}

template <class Table>
void check_layer_table(const Table& table) {
  OCRT_LAYER_ENTRIES(OCRT_CHECK_FILLED)
}

}  // namespace

TEST_CASE("kernel tables: the entry lists name every field", "[backend]") {
  // Each table is its name followed by function pointers, nothing else.
  CHECK(sizeof(TensorBackend) == sizeof(const char*) + (0 OCRT_TENSOR_ENTRIES(OCRT_COUNT)) * sizeof(void (*)()));
  CHECK(sizeof(LayerBackend) == sizeof(const char*) + (0 OCRT_LAYER_ENTRIES(OCRT_COUNT)) * sizeof(void (*)()));
}

TEST_CASE("kernel tables: every entry is filled on the CPU", "[backend]") {
  check_tensor_table(tensor_backend(Device::cpu()));
  check_layer_table(layer_backend(Device::cpu()));
}

#ifdef OCRT_HAVE_CUDA
TEST_CASE("kernel tables: every entry is filled on CUDA", "[backend]") {
  check_tensor_table(cuda_tensor_backend());
  check_layer_table(cuda_layer_backend());
}
#endif
