// The two kernel tables are complete: every entry of the tensor table (runtime/backend.h) and of
// the layer table (ops/backend.h) is filled on the CPU, and, in builds with CUDA, on CUDA too
// (checked without a GPU: building a table only fills in function pointers). The entry lists
// below must name every field: a size check fails when a table gains an entry they lack.
// And every entry has a CPU-vs-CUDA parity case in tests/cuda/parity_table.h (checked here, so
// in every build: a kernel entry without a parity case fails the CPU suite too).
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "cuda/parity_table.h"

#include "ops/backend.h"
#include "runtime/backend.h"

using namespace ocrt;

#define OCRT_TENSOR_ENTRIES(X)                                                                         \
  X(copy) X(fill) X(unary) X(unary_backward) X(binary) X(where) X(reduce) X(arg_reduce) X(matmul)   \
  X(index_select) X(index_add) X(gather) X(scatter_add) X(uniform) X(normal)
#define OCRT_LAYER_ENTRIES(X)                                                                          \
  X(softmax) X(softmax_backward) X(window_attention) X(window_attention_backward) X(conv2d) X(conv2d_backward) X(max_pool2d) X(max_pool2d_backward)   \
  X(avg_pool2d) X(avg_pool2d_backward) X(adaptive_avg_pool2d) X(adaptive_avg_pool2d_backward)        \
  X(upsample_nearest2d) X(upsample_nearest2d_backward) X(upsample_nearest2d_into)                    \
  X(batch_norm_stats) X(batch_norm_apply) X(batch_norm_backward) X(layer_norm) X(layer_norm_backward) \
  X(lstm_cell) X(lstm_cell_backward) X(ctc_loss) X(ctc_loss_backward) X(adam_step) X(sum_squares)

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

TEST_CASE("kernel tables: every entry has a CUDA parity case, and every case named exists", "[backend]") {
  std::set<std::string> entries;
#define OCRT_NAME(field) entries.insert(#field);
  OCRT_TENSOR_ENTRIES(OCRT_NAME)
  OCRT_LAYER_ENTRIES(OCRT_NAME)
#undef OCRT_NAME
  std::set<std::string> rows;
  for (const parity::ParityRow& row : parity::parity_table()) {
    INFO("parity table row " << row.entry);
    CHECK(entries.count(row.entry) == 1);  // no row for an entry the tables do not have
    CHECK(rows.insert(row.entry).second);  // one row per entry
    CHECK(!row.cases.empty());
    for (const parity::ParityCase& c : row.cases) {
      const std::string path = std::string(OCRT_SOURCE_DIR) + "/tests/cuda/" + c.file;
      std::ifstream f(path);
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      INFO("case \"" << c.name << "\" in " << path);
      CHECK(text.find(std::string("TEST_CASE(\"") + c.name + "\"") != std::string::npos);
    }
  }
  for (const std::string& e : entries) {
    INFO("kernel entry " << e);
    CHECK(rows.count(e) == 1);  // an entry without a parity case
  }
}
