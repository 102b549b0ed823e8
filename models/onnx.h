// Building an ONNX model (onnx.proto's ModelProto) with ocrt's own protobuf encoder
// (models/protobuf.h): a graph of standard ai.onnx nodes, its initializers (tensors stored as
// raw little-endian bytes), typed inputs and outputs with symbolic dimensions, and the model's
// metadata. models/onnx_export.h uses it to write the recognisers; docs/formats.md describes
// what they look like.
//
// The builder checks what a hand-written graph gets wrong most easily: every node input must be
// a value defined before it (a graph input, an initializer or an earlier node's output), so the
// nodes come out in the topological order ONNX requires, and every value has one producer.
//
// Field numbers are onnx.proto's (ModelProto, GraphProto, NodeProto, AttributeProto,
// TensorProto, ValueInfoProto, TypeProto, TensorShapeProto, OperatorSetIdProto,
// StringStringEntryProto), listed in onnx.cpp beside the code that writes them.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "models/protobuf.h"
#include "runtime/tensor.h"

namespace ocrt::onnx {

// TensorProto.DataType values of the element types used here.
enum class ElemType : int32_t { f32 = 1, u8 = 2, i32 = 6, i64 = 7, boolean = 9, f64 = 11 };

// One dimension of a graph input or output: a size, or a symbolic name ("N", "W") that the
// runtime binds to the size it is given.
struct Dim {
  int64_t value = 0;
  std::string param;  // symbolic when not empty
  Dim(int64_t v) : value(v) {}                     // NOLINT: sizes read naturally as {1, 32}
  Dim(const char* p) : param(p) {}                 // NOLINT: and names as {"N", "W"}
};

// A node attribute (AttributeProto) of the kinds the exporter writes.
struct Attr {
  enum class Kind { f = 1, i = 2, s = 3, floats = 6, ints = 7 };  // AttributeProto.AttributeType
  std::string name;
  Kind kind = Kind::i;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<float> fs;
  std::vector<int64_t> is;

  static Attr Float(std::string name, float v);
  static Attr Int(std::string name, int64_t v);
  static Attr String(std::string name, std::string v);
  static Attr Floats(std::string name, std::vector<float> v);
  static Attr Ints(std::string name, std::vector<int64_t> v);
};

struct ModelOptions {
  int64_t ir_version = 8;  // IR 8 is ONNX 1.12, the release that brought opset 17
  int64_t opset = 17;      // of the default domain ai.onnx, the only one imported
  std::string producer_name = "ocrt";
  std::string producer_version;
  std::string graph_name = "graph";
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata;  // metadata_props, keys distinct
};

class GraphBuilder {
 public:
  // Graph inputs and outputs with their element type and shape. An output must name a value
  // that exists when the model is serialised.
  void add_input(const std::string& name, ElemType type, const std::vector<Dim>& shape);
  void add_output(const std::string& name, ElemType type, const std::vector<Dim>& shape);

  // Initializers; each returns its name. add_tensor takes a float32 or int64 tensor on any
  // device and layout (stored row-major).
  std::string add_tensor(const std::string& name, const Tensor& t);
  std::string add_floats(const std::string& name, const std::vector<float>& values, const Shape& shape);
  std::string add_ints(const std::string& name, const std::vector<int64_t>& values, const Shape& shape);
  std::string add_bools(const std::string& name, const std::vector<uint8_t>& values, const Shape& shape);
  // An int64 1-D initializer (shapes, axes, Slice bounds): add_ints with shape {n}.
  std::string add_ints(const std::string& name, const std::vector<int64_t>& values);

  // A node of the default domain. inputs: defined values, or "" for an optional input left out
  // before a later one; outputs: new names. Returns outputs[0].
  std::string add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& outputs, const std::vector<Attr>& attrs = {});
  // The usual case: one output, named `out`.
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs, const std::string& out,
                 const std::vector<Attr>& attrs = {}) {
    return add_node(op_type, inputs, {out}, attrs);
  }

  bool defined(const std::string& name) const { return values_.count(name) > 0; }
  int64_t node_count() const { return nodes_count_; }
  // Op types used, for documentation and tests.
  const std::set<std::string>& op_types() const { return op_types_; }

  // The serialised ModelProto.
  std::string model(const ModelOptions& opt) const;

 private:
  void define(const std::string& name, const char* what);
  std::string add_initializer(const std::string& name, ElemType type, const Shape& shape, const void* data,
                              size_t bytes);

  pb::Writer nodes_, initializers_, inputs_, outputs_;  // each a run of repeated GraphProto fields
  std::set<std::string> values_, outputs_named_, op_types_;
  int64_t nodes_count_ = 0;
};

}  // namespace ocrt::onnx
