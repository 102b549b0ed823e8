// The ONNX builder and the recognisers' export, read back with a wire-format reader of the tests'
// own (tests/proto_reader.h) at onnx.proto's field numbers: the builder's messages field by
// field and its refusals; then a small CRNN's and SVTR-lite's graphs: interface, metadata, nodes
// in topological order and of the default domain only, and initializers holding the numbers the
// model computes with (the LSTM's gates reordered to ONNX's i, o, f, c; BatchNorm's running
// statistics; transposed Linear weights; the position table and the local window).
// Whether ONNX Runtime computes ocrt's logits from these graphs is checked by
// tests/onnx/check_onnx.py (ctest -L onnx), which needs pip; these tests need nothing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "models/crnn.h"
#include "models/onnx.h"
#include "models/onnx_export.h"
#include "models/svtr_lite.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "proto_reader.h"

using namespace ocrt;
using namespace ocrt::testing;
using std::string;
using std::string_view;

namespace {

// onnx.proto's field numbers, written out again here from the spec.
namespace F {
constexpr uint32_t model_ir_version = 1, model_producer = 2, model_graph = 7, model_opset = 8, model_metadata = 14;
constexpr uint32_t opset_domain = 1, opset_version = 2;
constexpr uint32_t graph_node = 1, graph_initializer = 5, graph_input = 11, graph_output = 12;
constexpr uint32_t node_input = 1, node_output = 2, node_op_type = 4, node_attribute = 5, node_domain = 7;
constexpr uint32_t attr_name = 1, attr_f = 2, attr_i = 3, attr_s = 4, attr_ints = 8, attr_type = 20;
constexpr uint32_t tensor_dims = 1, tensor_data_type = 2, tensor_name = 8, tensor_raw = 9;
constexpr uint32_t value_name = 1, value_type = 2, type_tensor = 1, ttype_elem = 1, ttype_shape = 2, shape_dim = 1;
constexpr uint32_t dim_value = 1, dim_param = 2, entry_key = 1, entry_value = 2;
}  // namespace F

string str(const ProtoField& f) { return string(f.bytes); }

struct ValueType {
  int64_t elem_type = 0;
  std::vector<string> dims;  // a size as its digits, a symbolic dim as its name
};

ValueType value_info(string_view v) {
  ValueType out;
  const string_view tensor = proto_one(proto_one(v, F::value_type).bytes, F::type_tensor).bytes;
  out.elem_type = proto_one(tensor, F::ttype_elem).as_int();
  for (const auto& d : proto_all(proto_one(tensor, F::ttype_shape).bytes, F::shape_dim)) {
    const auto fs = proto_fields(d.bytes);
    REQUIRE(fs.size() == 1);
    out.dims.push_back(fs[0].number == F::dim_param ? str(fs[0]) : std::to_string(fs[0].as_int()));
  }
  return out;
}

struct Initializer {
  std::vector<int64_t> dims;
  int64_t type = 0;
  string_view raw;
  std::vector<float> floats() const {
    std::vector<float> v(raw.size() / 4);
    std::memcpy(v.data(), raw.data(), raw.size());
    return v;
  }
};

struct GraphNode {
  string op;
  std::vector<string> inputs, outputs;
  std::map<string, ProtoField> attrs;  // name -> the AttributeProto's value field
  std::map<string, std::vector<int64_t>> ints;
  bool has_domain = false;
};

// A ModelProto read back: the graph's parts by name, nodes in order, metadata.
struct ReadModel {
  string bytes;  // owns what the views below point into
  int64_t ir_version = 0, opset = 0;
  bool opset_has_domain = false;
  string producer;
  std::map<string, string> metadata;
  std::map<string, ValueType> inputs, outputs;
  std::vector<string> input_order;
  std::map<string, Initializer> initializers;
  std::vector<GraphNode> nodes;

  ReadModel(const ReadModel&) = delete;  // the views point into this object's bytes
  explicit ReadModel(string b) : bytes(std::move(b)) {
    const string_view m = bytes;
    ir_version = proto_one(m, F::model_ir_version).as_int();
    producer = str(proto_one(m, F::model_producer));
    const string_view opset_id = proto_one(m, F::model_opset).bytes;
    opset = proto_one(opset_id, F::opset_version).as_int();
    opset_has_domain = !proto_all(opset_id, F::opset_domain).empty();
    for (const auto& e : proto_all(m, F::model_metadata))
      metadata[str(proto_one(e.bytes, F::entry_key))] = str(proto_one(e.bytes, F::entry_value));
    const string_view g = proto_one(m, F::model_graph).bytes;
    for (const auto& v : proto_all(g, F::graph_input)) {
      const string name = str(proto_one(v.bytes, F::value_name));
      inputs[name] = value_info(v.bytes);
      input_order.push_back(name);
    }
    for (const auto& v : proto_all(g, F::graph_output)) outputs[str(proto_one(v.bytes, F::value_name))] = value_info(v.bytes);
    for (const auto& t : proto_all(g, F::graph_initializer)) {
      Initializer x;
      for (const auto& d : proto_all(t.bytes, F::tensor_dims)) x.dims.push_back(d.as_int());
      x.type = proto_one(t.bytes, F::tensor_data_type).as_int();
      x.raw = proto_one(t.bytes, F::tensor_raw).bytes;
      initializers[str(proto_one(t.bytes, F::tensor_name))] = x;
    }
    for (const auto& n : proto_all(g, F::graph_node)) {
      GraphNode node;
      node.op = str(proto_one(n.bytes, F::node_op_type));
      for (const auto& i : proto_all(n.bytes, F::node_input)) node.inputs.push_back(str(i));
      for (const auto& o : proto_all(n.bytes, F::node_output)) node.outputs.push_back(str(o));
      node.has_domain = !proto_all(n.bytes, F::node_domain).empty();
      for (const auto& a : proto_all(n.bytes, F::node_attribute)) {
        const string name = str(proto_one(a.bytes, F::attr_name));
        const int64_t type = proto_one(a.bytes, F::attr_type).as_int();
        if (type == 7) {
          for (const auto& v : proto_all(a.bytes, F::attr_ints)) node.ints[name].push_back(v.as_int());
        } else {
          const uint32_t field = type == 1 ? F::attr_f : type == 2 ? F::attr_i : F::attr_s;
          node.attrs[name] = proto_one(a.bytes, field);
        }
      }
      nodes.push_back(node);
    }
  }

  const GraphNode& producer_of(const string& value) const {
    for (const auto& n : nodes)
      for (const auto& o : n.outputs)
        if (o == value) return n;
    FAIL("no node computes '" << value << "'");
    return nodes.front();
  }
};

// Every node reads only values defined before it, and every value has one producer.
void check_topological(const ReadModel& m) {
  std::set<string> defined;
  for (const auto& [name, v] : m.inputs) defined.insert(name);
  for (const auto& [name, t] : m.initializers) CHECK(defined.insert(name).second);
  for (const auto& n : m.nodes) {
    for (const auto& in : n.inputs) {
      INFO(n.op << " node " << n.outputs[0] << " reads " << in);
      CHECK((in.empty() || defined.count(in)));
    }
    for (const auto& out : n.outputs) CHECK(defined.insert(out).second);
    CHECK_FALSE(n.has_domain);  // the default domain, ai.onnx
  }
  for (const auto& [name, v] : m.outputs) CHECK(defined.count(name));
}

std::vector<float> values(const Tensor& t) { return t.to(Device::cpu()).contiguous().to_vector<float>(); }

// Rows [k * block, (k + 1) * block) of a (4H, K) gate matrix stored flat.
std::vector<float> block(const std::vector<float>& v, size_t offset, size_t k, size_t size) {
  return std::vector<float>(v.begin() + (ptrdiff_t)(offset + k * size), v.begin() + (ptrdiff_t)(offset + (k + 1) * size));
}

void randomise_bn(nn::BatchNorm2d& bn, Generator& gen) {
  NoGradGuard no_grad;
  bn.running_mean.copy_(uniform(bn.running_mean.shape(), -0.2, 0.2, gen));
  bn.running_var.copy_(uniform(bn.running_var.shape(), 0.5, 1.5, gen));
}

nn::ModelInfo info_for(const nn::Recognizer& m, const string& arch, int64_t chars) {
  nn::ModelInfo info;
  info.arch = arch;
  info.config = m.config_json();
  for (int64_t i = 0; i < chars; ++i) info.charset.push_back(string(1, (char)('a' + i)));
  info.input = nn::default_input_spec();
  return info;
}

}  // namespace

TEST_CASE("ONNX builder: a ModelProto field by field", "[onnx]") {
  onnx::GraphBuilder g;
  g.add_input("x", onnx::ElemType::f32, {"N", 2});
  const string w = g.add_floats("w", {1, 2, 3, 4, 5, 6}, {2, 3});
  const string y = g.op("MatMul", {"x", w}, "xw");
  g.op("Transpose", {y}, "y", {onnx::Attr::Ints("perm", {1, 0})});
  g.op("LayerNormalization", {"x", g.add_floats("s", {1, 1}, {2}), g.add_floats("b", {0, 0}, {2})}, "ln",
       {onnx::Attr::Int("axis", -1), onnx::Attr::Float("epsilon", 0.5f)});
  g.op("Cast", {"ln"}, "ln_i", {onnx::Attr::Int("to", 7)});
  g.add_node("LSTM", {"x", "w", "w", "", "ln_i"}, {"lstm_y"}, {onnx::Attr::String("direction", "reverse")});
  g.add_output("y", onnx::ElemType::f32, {3, "N"});
  CHECK(g.node_count() == 5);
  CHECK(g.op_types() == std::set<string>{"MatMul", "Transpose", "LayerNormalization", "Cast", "LSTM"});
  onnx::ModelOptions o;
  o.producer_version = "9.8.7";
  o.metadata = {{"k", "v"}, {"charset", "[\"a\"]"}};
  const ReadModel m(g.model(o));

  CHECK(m.ir_version == 8);
  CHECK(m.opset == 17);
  CHECK_FALSE(m.opset_has_domain);
  CHECK(m.producer == "ocrt");
  CHECK(m.metadata == std::map<string, string>{{"k", "v"}, {"charset", "[\"a\"]"}});
  REQUIRE(m.inputs.count("x"));
  CHECK(m.inputs.at("x").elem_type == 1);
  CHECK(m.inputs.at("x").dims == std::vector<string>{"N", "2"});
  CHECK(m.outputs.at("y").dims == std::vector<string>{"3", "N"});
  REQUIRE(m.initializers.count("w"));
  CHECK(m.initializers.at("w").dims == std::vector<int64_t>{2, 3});
  CHECK(m.initializers.at("w").type == 1);
  CHECK(m.initializers.at("w").floats() == std::vector<float>{1, 2, 3, 4, 5, 6});
  REQUIRE(m.nodes.size() == 5);
  CHECK(m.nodes[0].op == "MatMul");
  CHECK(m.nodes[0].inputs == std::vector<string>{"x", "w"});
  CHECK(m.nodes[1].ints.at("perm") == std::vector<int64_t>{1, 0});
  CHECK(m.nodes[2].attrs.at("axis").as_int() == -1);
  CHECK(m.nodes[2].attrs.at("epsilon").as_float() == 0.5f);
  CHECK(str(m.nodes[4].attrs.at("direction")) == "reverse");
  CHECK(m.nodes[4].inputs == std::vector<string>{"x", "w", "w", "", "ln_i"});  // an optional input left out
  check_topological(m);

  // The same graph input as bytes: GraphProto.input (11) { name (1) "x", type (2) { tensor_type (1)
  // { elem_type (1) FLOAT, shape (2) { dim (1) { dim_param (2) "N" }, dim { dim_value (1) 2 } } } } }
  const std::vector<uint8_t> input{0x5a, 0x14, 0x0a, 0x01, 'x',  0x12, 0x0f, 0x0a, 0x0d, 0x08, 0x01,
                                   0x12, 0x09, 0x0a, 0x03, 0x12, 0x01, 'N',  0x0a, 0x02, 0x08, 0x02};
  CHECK(m.bytes.find(string(input.begin(), input.end())) != string::npos);
}

TEST_CASE("ONNX builder: refuses graphs that are not well formed", "[onnx]") {
  onnx::GraphBuilder g;
  g.add_input("x", onnx::ElemType::f32, {"N"});
  CHECK_THROWS_WITH(g.op("Relu", {"nothing"}, "y"), Catch::Contains("reads 'nothing', which no earlier node"));
  CHECK_THROWS_WITH(g.op("Relu", {"x"}, "x"), Catch::Contains("defined twice"));
  CHECK_THROWS_WITH(g.add_bools("b", {0, 2}, {2}), Catch::Contains("holds 2"));
  CHECK_THROWS_WITH(g.add_floats("f", {1, 2, 3}, {2, 2}), Catch::Contains("3 values for shape [2, 2]"));
  g.add_output("z", onnx::ElemType::f32, {"N"});
  CHECK_THROWS_WITH(g.model({}), Catch::Contains("output 'z' is not computed"));
  onnx::ModelOptions o;
  g.op("Relu", {"x"}, "z");
  o.metadata = {{"a", "1"}, {"a", "2"}};
  CHECK_THROWS_WITH(g.model(o), Catch::Contains("metadata key 'a' is given twice"));
}

TEST_CASE("ONNX export: a CRNN's graph, its LSTM in ONNX's gate order and its BatchNorm statistics", "[onnx]") {
  Generator gen(41);
  nn::CRNNConfig cfg;
  cfg.channels = {4, 6, 8, 8, 10, 10, 12};
  cfg.hidden = 5;
  cfg.num_classes = 7;
  nn::CRNN model(cfg, gen);
  randomise_bn(dynamic_cast<nn::BatchNorm2d&>((*model.cnn)[7]), gen);
  model.eval();
  const nn::ModelInfo info = info_for(model, "crnn", 6);
  nn::OnnxExportOptions opt;
  opt.producer_version = "1.2.3";

  for (bool widths : {false, true}) {
    opt.widths_input = widths;
    const ReadModel m(nn::export_onnx(model, info, opt));
    INFO("widths input: " << widths);
    CHECK(m.opset == 17);
    check_topological(m);
    CHECK(m.input_order == (widths ? std::vector<string>{"image", "widths"} : std::vector<string>{"image"}));
    CHECK(m.inputs.at("image").dims == std::vector<string>{"N", "1", "32", "W"});
    if (widths) CHECK((m.inputs.at("widths").elem_type == 7 && m.inputs.at("widths").dims == std::vector<string>{"N"}));
    CHECK(m.outputs.at("logits").dims == std::vector<string>{"T", "N", "7"});
    CHECK(m.metadata.at("arch") == "crnn");
    CHECK(m.metadata.at("charset") == "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]");
    CHECK(m.metadata.at("config") == cfg.to_json().dump());
    CHECK(m.metadata.at("ocrt_version") == "1.2.3");
    CHECK(m.metadata.at("widths_input") == (widths ? "true" : "false"));
    std::set<string> ops;
    for (const auto& n : m.nodes) ops.insert(n.op);
    std::set<string> expected{"Conv", "Relu", "MaxPool", "BatchNormalization", "Squeeze", "Transpose", "LSTM",
                              "Reshape", "MatMul", "Add"};
    if (widths) expected.insert({"Div", "Cast"});
    CHECK(ops == expected);

    // BatchNorm in inference form: its running statistics, as the model holds them.
    const GraphNode& bn = m.producer_of("cnn.7");
    CHECK(bn.op == "BatchNormalization");
    CHECK(bn.inputs == std::vector<string>{"cnn.6", "cnn.7.weight", "cnn.7.bias", "cnn.7.running_mean", "cnn.7.running_var"});
    auto& bn7 = dynamic_cast<nn::BatchNorm2d&>((*model.cnn)[7]);
    CHECK(m.initializers.at("cnn.7.running_mean").floats() == values(bn7.running_mean));
    CHECK(m.initializers.at("cnn.7.running_var").floats() == values(bn7.running_var));
    CHECK(bn.attrs.at("epsilon").as_float() == 1e-5f);
    const GraphNode& pool = m.producer_of("cnn.11");  // MaxPool((2, 2), (2, 1), (0, 1))
    CHECK(pool.ints.at("strides") == std::vector<int64_t>{2, 1});
    CHECK(pool.ints.at("pads") == std::vector<int64_t>{0, 1, 0, 1});

    // The LSTM: one bidirectional node a layer; W, R, B with the gates as i, o, f, c.
    const int64_t H = cfg.hidden;
    for (int layer = 0; layer < 2; ++layer) {
      const string l = std::to_string(layer);
      const GraphNode& lstm_node = m.producer_of("rnn.l" + l + ".Y");
      CHECK(lstm_node.op == "LSTM");
      CHECK(lstm_node.attrs.at("hidden_size").as_int() == H);
      CHECK(str(lstm_node.attrs.at("direction")) == "bidirectional");
      CHECK(lstm_node.inputs.size() == (widths ? 5u : 4u));
      if (widths) CHECK(lstm_node.inputs[4] == "rnn.lengths");
      const auto sd = model.state_dict();
      const auto W = m.initializers.at("rnn.W_l" + l), R = m.initializers.at("rnn.R_l" + l), B = m.initializers.at("rnn.B_l" + l);
      const int64_t in = layer == 0 ? cfg.channels[6] : 2 * H;
      CHECK(W.dims == std::vector<int64_t>{2, 4 * H, in});
      CHECK(R.dims == std::vector<int64_t>{2, 4 * H, H});
      CHECK(B.dims == std::vector<int64_t>{2, 8 * H});
      const std::vector<float> w = W.floats(), r = R.floats(), b = B.floats();
      for (int d = 0; d < 2; ++d) {
        const string suffix = "_l" + l + (d ? "_reverse" : "");
        const std::vector<float> w_ih = values(sd.at("rnn.weight_ih" + suffix)), w_hh = values(sd.at("rnn.weight_hh" + suffix));
        const std::vector<float> b_ih = values(sd.at("rnn.bias_ih" + suffix)), b_hh = values(sd.at("rnn.bias_hh" + suffix));
        const size_t wb = (size_t)(H * in), rb = (size_t)(H * H), bb = (size_t)H;
        const int torch_gate[4] = {0, 3, 1, 2};  // ONNX's i, o, f, c are PyTorch's gates 0 (i), 3 (o), 1 (f), 2 (g)
        for (size_t k = 0; k < 4; ++k) {
          INFO("layer " << layer << " direction " << d << " ONNX gate " << k);
          const size_t t = (size_t)torch_gate[k];
          CHECK(block(w, d * 4 * wb, k, wb) == block(w_ih, 0, t, wb));
          CHECK(block(r, d * 4 * rb, k, rb) == block(w_hh, 0, t, rb));
          CHECK(block(b, d * 8 * bb, k, bb) == block(b_ih, 0, t, bb));      // Wb first
          CHECK(block(b, d * 8 * bb + 4 * bb, k, bb) == block(b_hh, 0, t, bb));  // then Rb
        }
      }
    }
    // fc as MatMul with the transposed weight, named logits.
    CHECK(m.initializers.at("fc.weight_t").dims == std::vector<int64_t>{2 * H, 7});
    CHECK(m.initializers.at("fc.weight_t").floats() == values(model.fc->weight.t()));
    CHECK(m.producer_of("logits").inputs == std::vector<string>{"fc.matmul", "fc.bias"});
  }

  nn::ModelInfo wrong = info;
  wrong.arch = "svtr-lite";
  CHECK_THROWS_WITH(nn::export_onnx(model, wrong), Catch::Contains("is a CRNN but its arch is 'svtr-lite'"));
  wrong = info;
  wrong.charset.pop_back();
  CHECK_THROWS_WITH(nn::export_onnx(model, wrong), Catch::Contains("7 classes but the charset 5 characters"));
}

TEST_CASE("ONNX export: SVTR-lite's position table, local window and masks in standard ops", "[onnx]") {
  Generator gen(43);
  nn::SVTRLiteConfig cfg;
  cfg.dims = {8, 12, 16};
  cfg.depths = {1, 2, 1};
  cfg.heads = {2, 3, 4};
  cfg.mixer = {"local", "local", "global", "global"};
  cfg.out_dim = 10;
  cfg.num_classes = 5;
  nn::SVTRLite model(cfg, gen);
  model.eval();
  const nn::ModelInfo info = info_for(model, "svtr-lite", 4);

  for (bool widths : {false, true}) {
    nn::OnnxExportOptions opt;
    opt.widths_input = widths;
    const ReadModel m(nn::export_onnx(model, info, opt));
    INFO("widths input: " << widths);
    check_topological(m);
    CHECK(m.outputs.at("logits").dims == std::vector<string>{"T", "N", "5"});
    std::set<string> ops;
    for (const auto& n : m.nodes) ops.insert(n.op);
    const std::set<string> standard{"Abs", "Add", "BatchNormalization", "Conv", "Div", "Erf", "Expand", "Flatten",
                                    "Greater", "GreaterOrEqual", "HardSwish", "LayerNormalization", "MatMul", "Mul",
                                    "Or", "Range", "ReduceMean", "Reshape", "Shape", "Slice", "Softmax", "Split",
                                    "Squeeze", "Sub", "Transpose", "Unsqueeze", "Where"};
    for (const auto& op : ops) {
      INFO(op);
      CHECK(standard.count(op));
    }
    CHECK(ops.count("GreaterOrEqual") == (widths ? 1u : 0u));  // the padding columns, only with widths

    // The position table: columns for kOnnxMaxTokenColumns token columns in channels [0, 2q),
    // rows for the 8 rows in [2q, 4q), zeros elsewhere; the values of the formula.
    const int64_t C = cfg.dims[0], q = C / 4;
    const auto cols = m.initializers.at("positions.columns"), rows = m.initializers.at("positions.rows");
    CHECK(cols.dims == std::vector<int64_t>{nn::kOnnxMaxTokenColumns, C});
    CHECK(rows.dims == std::vector<int64_t>{8, 1, C});
    const std::vector<float> cv = cols.floats(), rv = rows.floats();
    for (int64_t j : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{500}, nn::kOnnxMaxTokenColumns - 1})
      for (int64_t k = 0; k < q; ++k) {
        const double omega = std::pow(10000.0, -(double)k / (double)q);
        CHECK(cv[(size_t)(j * C + k)] == Approx(0.1 * std::sin((double)j * omega)).margin(1e-7));
        CHECK(cv[(size_t)(j * C + q + k)] == Approx(0.1 * std::cos((double)j * omega)).margin(1e-7));
        CHECK(cv[(size_t)(j * C + 2 * q + k)] == 0.0f);
        CHECK(cv[(size_t)(j * C + 3 * q + k)] == 0.0f);
      }
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t k = 0; k < q; ++k) {
        const double omega = std::pow(10000.0, -(double)k / (double)q);
        CHECK(rv[(size_t)(i * C + k)] == 0.0f);
        CHECK(rv[(size_t)(i * C + q + k)] == 0.0f);
        CHECK(rv[(size_t)(i * C + 2 * q + k)] == Approx(0.1 * std::sin((double)i * omega)).margin(1e-7));
        CHECK(rv[(size_t)(i * C + 3 * q + k)] == Approx(0.1 * std::cos((double)i * omega)).margin(1e-7));
      }

    // The local window: rows more than 3 apart (a constant per stage) or columns more than 5
    // apart (from the width at run time) are forbidden. Stage 0 has 8 rows, stage 1 four.
    for (auto [stage, H] : {std::pair<int, int64_t>{0, 8}, {1, 4}}) {
      const auto far = m.initializers.at("stage" + std::to_string(stage) + ".window.far_rows");
      CHECK(far.dims == std::vector<int64_t>{H, 1, H, 1});
      CHECK(far.type == 9);  // BOOL, one byte each
      for (int64_t i = 0; i < H; ++i)
        for (int64_t i2 = 0; i2 < H; ++i2) CHECK((int)(uint8_t)far.raw[(size_t)(i * H + i2)] == (std::abs(i - i2) > 3 ? 1 : 0));
    }
    CHECK(m.initializers.count("stage2.window.far_rows") == 0);  // stage 2 is global only
    const GraphNode& far_cols = m.producer_of("window.far_cols");
    CHECK(far_cols.op == "Greater");
    CHECK(far_cols.inputs == std::vector<string>{"window.col_dist", "int(5)"});
    // A local block masks with the window (or the window and the padding keys); a global block
    // only with the padding keys; with widths, rows without any allowed key get weights 0.
    const GraphNode& local = m.producer_of("blocks.0.attn.scores_masked");
    CHECK(local.op == "Where");
    CHECK(local.inputs[0] == (widths ? "stage0.local_mask" : "stage0.window"));
    CHECK(local.inputs[1] == "float(-inf)");
    if (widths) {
      CHECK(m.producer_of("blocks.2.attn.scores_masked").inputs[0] == "stage1.pad_keys");
      CHECK(m.producer_of("blocks.0.attn.weights_masked").op == "Where");
      CHECK(m.producer_of("merges.0.grid_masked").op == "Where");
    } else {
      for (const auto& n : m.nodes) {
        INFO(n.outputs[0]);
        CHECK(n.outputs[0] != "blocks.2.attn.scores_masked");  // a global block without padding: no mask
        CHECK(n.outputs[0] != "blocks.0.attn.weights_masked");
      }
    }
    CHECK(m.producer_of("logits").ints.at("perm") == std::vector<int64_t>{1, 0, 2});  // (N, T, C) -> (T, N, C)
  }
  nn::ModelInfo wrong = info;
  wrong.arch = "crnn";
  CHECK_THROWS_WITH(nn::export_onnx(model, wrong), Catch::Contains("is an SVTR-lite but its arch is 'crnn'"));
}
