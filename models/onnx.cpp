// The ONNX model builder (see onnx.h). Each message is written by the function named after it,
// with onnx.proto's field numbers.
#include "models/onnx.h"

#include <bit>

#include "runtime/error.h"

namespace ocrt::onnx {

// raw_data is little-endian by the spec; tensors are copied byte for byte from memory.
static_assert(std::endian::native == std::endian::little, "the ONNX writer assumes a little-endian host");

namespace {

// TensorShapeProto.Dimension: dim_value = 1, dim_param = 2.
pb::Writer dimension(const Dim& d) {
  pb::Writer w;
  if (d.param.empty()) w.int_field(1, d.value);
  else w.bytes_field(2, d.param);
  return w;
}

// ValueInfoProto: name = 1, type = 2 (TypeProto: tensor_type = 1; TypeProto.Tensor: elem_type =
// 1, shape = 2; TensorShapeProto: dim = 1).
pb::Writer value_info(const std::string& name, ElemType type, const std::vector<Dim>& shape) {
  pb::Writer dims, tensor, type_proto, w;
  for (const Dim& d : shape) dims.message_field(1, dimension(d));
  tensor.int_field(1, (int32_t)type);
  tensor.message_field(2, dims);
  type_proto.message_field(1, tensor);
  w.bytes_field(1, name);
  w.message_field(2, type_proto);
  return w;
}

// AttributeProto: name = 1, f = 2, i = 3, s = 4, floats = 7, ints = 8, type = 20.
pb::Writer attribute(const Attr& a) {
  pb::Writer w;
  w.bytes_field(1, a.name);
  switch (a.kind) {
    case Attr::Kind::f: w.float_field(2, a.f); break;
    case Attr::Kind::i: w.int_field(3, a.i); break;
    case Attr::Kind::s: w.bytes_field(4, a.s); break;
    case Attr::Kind::floats:
      for (float v : a.fs) w.float_field(7, v);
      break;
    case Attr::Kind::ints:
      for (int64_t v : a.is) w.int_field(8, v);
      break;
  }
  w.int_field(20, (int32_t)a.kind);
  return w;
}

}  // namespace

Attr Attr::Float(std::string name, float v) {
  Attr a;
  a.name = std::move(name), a.kind = Kind::f, a.f = v;
  return a;
}
Attr Attr::Int(std::string name, int64_t v) {
  Attr a;
  a.name = std::move(name), a.kind = Kind::i, a.i = v;
  return a;
}
Attr Attr::String(std::string name, std::string v) {
  Attr a;
  a.name = std::move(name), a.kind = Kind::s, a.s = std::move(v);
  return a;
}
Attr Attr::Floats(std::string name, std::vector<float> v) {
  Attr a;
  a.name = std::move(name), a.kind = Kind::floats, a.fs = std::move(v);
  return a;
}
Attr Attr::Ints(std::string name, std::vector<int64_t> v) {
  Attr a;
  a.name = std::move(name), a.kind = Kind::ints, a.is = std::move(v);
  return a;
}

void GraphBuilder::define(const std::string& name, const char* what) {
  OCRT_CHECK(!name.empty(), "ONNX graph: a ", what, " needs a name");
  OCRT_CHECK(values_.insert(name).second, "ONNX graph: the value '", name, "' is defined twice (", what, ")");
}

void GraphBuilder::add_input(const std::string& name, ElemType type, const std::vector<Dim>& shape) {
  define(name, "graph input");
  inputs_.message_field(11, value_info(name, type, shape));  // GraphProto.input = 11
}

void GraphBuilder::add_output(const std::string& name, ElemType type, const std::vector<Dim>& shape) {
  OCRT_CHECK(outputs_named_.insert(name).second, "ONNX graph: output '", name, "' is listed twice");
  outputs_.message_field(12, value_info(name, type, shape));  // GraphProto.output = 12
}

// TensorProto: dims = 1, data_type = 2, name = 8, raw_data = 9.
std::string GraphBuilder::add_initializer(const std::string& name, ElemType type, const Shape& shape, const void* data,
                                          size_t bytes) {
  define(name, "initializer");
  pb::Writer t;
  for (int64_t d : shape) t.int_field(1, d);
  t.int_field(2, (int32_t)type);
  t.bytes_field(8, name);
  t.bytes_field(9, std::string_view((const char*)data, bytes));
  initializers_.message_field(5, t);  // GraphProto.initializer = 5
  return name;
}

std::string GraphBuilder::add_tensor(const std::string& name, const Tensor& t) {
  OCRT_CHECK(t.defined(), "ONNX graph: initializer '", name, "' is an undefined tensor");
  const Tensor c = t.to(Device::cpu()).contiguous();
  if (c.dtype() == DType::f32) return add_initializer(name, ElemType::f32, c.shape(), c.data<float>(), 4 * c.numel());
  if (c.dtype() == DType::i64) return add_initializer(name, ElemType::i64, c.shape(), c.data<int64_t>(), 8 * c.numel());
  fail("ONNX graph: initializer '", name, "' must be float32 or int64, got ", dtype_name(c.dtype()));
}

std::string GraphBuilder::add_floats(const std::string& name, const std::vector<float>& values, const Shape& shape) {
  OCRT_CHECK((int64_t)values.size() == numel_of(shape), "ONNX graph: initializer '", name, "' has ", values.size(),
             " values for shape ", shape_str(shape));
  return add_initializer(name, ElemType::f32, shape, values.data(), 4 * values.size());
}

std::string GraphBuilder::add_ints(const std::string& name, const std::vector<int64_t>& values, const Shape& shape) {
  OCRT_CHECK((int64_t)values.size() == numel_of(shape), "ONNX graph: initializer '", name, "' has ", values.size(),
             " values for shape ", shape_str(shape));
  return add_initializer(name, ElemType::i64, shape, values.data(), 8 * values.size());
}

std::string GraphBuilder::add_ints(const std::string& name, const std::vector<int64_t>& values) {
  return add_ints(name, values, {(int64_t)values.size()});
}

std::string GraphBuilder::add_bools(const std::string& name, const std::vector<uint8_t>& values, const Shape& shape) {
  OCRT_CHECK((int64_t)values.size() == numel_of(shape), "ONNX graph: initializer '", name, "' has ", values.size(),
             " values for shape ", shape_str(shape));
  for (uint8_t v : values) OCRT_CHECK(v <= 1, "ONNX graph: boolean initializer '", name, "' holds ", (int)v);
  return add_initializer(name, ElemType::boolean, shape, values.data(), values.size());  // one byte each, 0 or 1
}

// NodeProto: input = 1, output = 2, name = 3, op_type = 4, attribute = 5.
std::string GraphBuilder::add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& outputs, const std::vector<Attr>& attrs) {
  OCRT_CHECK(!outputs.empty(), "ONNX graph: a ", op_type, " node needs an output");
  for (const auto& in : inputs)
    OCRT_CHECK(in.empty() || defined(in), "ONNX graph: ", op_type, " node '", outputs[0], "' reads '", in,
               "', which no earlier node, input or initializer defines");
  for (const auto& out : outputs) define(out, "node output");
  pb::Writer n;
  for (const auto& in : inputs) n.bytes_field(1, in);
  for (const auto& out : outputs) n.bytes_field(2, out);
  n.bytes_field(3, outputs[0]);  // nodes are named after their first output
  n.bytes_field(4, op_type);
  for (const Attr& a : attrs) n.message_field(5, attribute(a));
  nodes_.message_field(1, n);  // GraphProto.node = 1
  op_types_.insert(op_type);
  ++nodes_count_;
  return outputs[0];
}

// ModelProto: ir_version = 1, producer_name = 2, producer_version = 3, doc_string = 6, graph = 7,
// opset_import = 8, metadata_props = 14. GraphProto: name = 2, doc_string = 10, and the
// repeated fields collected above. OperatorSetIdProto: domain = 1 (absent: ai.onnx), version = 2.
// StringStringEntryProto: key = 1, value = 2.
std::string GraphBuilder::model(const ModelOptions& opt) const {
  for (const auto& name : outputs_named_)
    OCRT_CHECK(defined(name), "ONNX graph: output '", name, "' is not computed by any node");
  pb::Writer graph;
  graph.append(nodes_);
  graph.bytes_field(2, opt.graph_name);
  graph.append(initializers_);
  graph.append(inputs_);
  graph.append(outputs_);

  pb::Writer opset, model;
  opset.int_field(2, opt.opset);
  model.int_field(1, opt.ir_version);
  model.bytes_field(2, opt.producer_name);
  if (!opt.producer_version.empty()) model.bytes_field(3, opt.producer_version);
  if (!opt.doc_string.empty()) model.bytes_field(6, opt.doc_string);
  model.message_field(7, graph);
  model.message_field(8, opset);
  std::set<std::string> keys;
  for (const auto& [key, value] : opt.metadata) {
    OCRT_CHECK(keys.insert(key).second, "ONNX model: metadata key '", key, "' is given twice");
    pb::Writer entry;
    entry.bytes_field(1, key);
    entry.bytes_field(2, value);
    model.message_field(14, entry);
  }
  return model.bytes();
}

}  // namespace ocrt::onnx
