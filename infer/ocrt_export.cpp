// ocrt-export: writes a recogniser as an ONNX graph for deployment tools (docs/cli.md has the
// reference, docs/formats.md the graph). The model file is read as ocrt-infer reads it
// (infer/model_loader.h); the graph is built by models/onnx_export.h. --check-input runs ocrt
// itself on given batches and writes its logits, so that what a runtime computes from the ONNX
// file can be compared with ocrt's (tests/onnx/check_onnx.py does that with ONNX Runtime).
//
// Exit status: 0 done; 2 a bad flag, model file or check input, or a file that cannot be written.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "infer/model_loader.h"
#include "models/int8.h"
#include "models/onnx.h"
#include "models/onnx_export.h"
#include "ops/conv.h"
#include "runtime/cli.h"
#include "runtime/error.h"
#include "runtime/files.h"
#include "runtime/safetensors.h"

using namespace ocrt;

#ifndef OCRT_PROJECT_VERSION
#error "OCRT_PROJECT_VERSION must be defined by the build (CMakeLists.txt)"
#endif

namespace {

struct Args {
  std::string onnx, weights, arch, charset, check_input, check_output;
  bool widths_input = false;
};

cli::Parser export_flags(Args& a) {
  cli::Parser p("ocrt-export", R"(usage: ocrt-export --onnx OUT.onnx --weights FILE [options]

Writes a text-line recogniser (crnn, crnn-s or svtr-lite) as an ONNX graph: opset 17, standard
ai.onnx operators only, dynamic batch and width.

  input  "image"   N x 1 x 32 x W float32, W a multiple of 4: gray pixels p as p / 127.5 - 1,
                   lines padded on the right with white (1.0), as ocrt-infer packs a batch
  output "logits"  T x N x C float32, time first: the raw CTC logits (no softmax) the ocrt
                   model returns; class 0 is the blank, class k+1 the charset's character k;
                   T = W/4 + 1 (crnn, crnn-s) or W/4 (svtr-lite)
  The charset, arch, config, input spec and ocrt version are in the model's metadata_props.
)");
  p.note("Model");
  p.add(cli::text("--onnx", "FILE", a.onnx, "where to write the graph (atomically)"));
  p.add(cli::text("--weights", "FILE", a.weights,
                  "the model file; a weights-only file (e.g. exported from PyTorch)\n"
                  "needs --arch and --charset, as with ocrt-infer"));
  p.add(cli::text("--arch", "A", a.arch,
                  "crnn, crnn-s or svtr-lite: architecture of a weights-only file\n"
                  "(checked against a model file's own)"));
  p.add(cli::text("--charset", "FILE", a.charset, "charset of a weights-only file (one character per line)"));
  p.add(cli::toggle("--widths-input", a.widths_input, true,
                    "add a second input \"widths\" (N, int64): each line's true width in\n"
                    "pixels (a multiple of 4, at most W), so that a line's logits do not\n"
                    "depend on the padding of its batch (what ocrt-infer does)"));
  p.note("\nChecking a runtime against ocrt");
  p.add(cli::text("--check-input", "FILE", a.check_input,
                  "a safetensors file of batches: float32 tensors N x 1 x 32 x W (W a\n"
                  "multiple of 4), each optionally with an int64 tensor NAME.widths (N);\n"
                  "ocrt runs the model on every batch (with its widths when given)..."));
  p.add(cli::text("--check-output", "FILE", a.check_output,
                  "...and writes the logits (T x N x C float32) here under the same names.\n"
                  "The check runs convolutions in exact mode (im2col, about 1e-7\n"
                  "relative), not ocrt-infer's default Winograd (about 1e-5)"));
  p.note("  --help                 this text\n\n"
         "Exit status: 0 written; 2 a bad flag, model file or check input, or an unwritable file.");
  return p;
}

Args parse_args(int argc, char** argv) {
  Args a;
  const std::vector<std::string> others = export_flags(a).parse(argc, argv);
  OCRT_CHECK(others.empty(), "unknown argument '", others.empty() ? "" : others[0], "' (see ocrt-export --help)");
  OCRT_CHECK(!a.onnx.empty(), "--onnx FILE is required: where to write the graph (see --help)");
  OCRT_CHECK(!a.weights.empty(), "--weights FILE is required: the model file to export (see --help)");
  OCRT_CHECK(a.check_input.empty() == a.check_output.empty(), "--check-input and --check-output go together");
  return a;
}

// ocrt's logits for every batch of the check input (see --check-input).
void run_check(nn::Recognizer& model, const std::string& in_path, const std::string& out_path, const std::string& arch) {
  const SafetensorsFile in = load_safetensors(in_path);
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : in.tensors) by_name[name] = &t;
  std::vector<std::pair<std::string, Tensor>> out;
  NoGradGuard no_grad;
  for (const auto& [name, x] : in.tensors) {
    if (name.size() > 7 && name.ends_with(".widths")) {
      OCRT_CHECK(by_name.count(name.substr(0, name.size() - 7)), in_path, ": '", name, "' has no batch '",
                 name.substr(0, name.size() - 7), "' beside it");
      continue;
    }
    OCRT_CHECK(x.dtype() == DType::f32 && x.dim() == 4, in_path, ": batch '", name, "' must be float32 N x 1 x 32 x W, got ",
               dtype_name(x.dtype()), " ", shape_str(x.shape()));
    std::vector<int64_t> widths;
    if (auto it = by_name.find(name + ".widths"); it != by_name.end()) {
      const Tensor& w = *it->second;
      OCRT_CHECK(w.dtype() == DType::i64 && w.dim() == 1, in_path, ": '", name, ".widths' must be int64 (N), got ",
                 dtype_name(w.dtype()), " ", shape_str(w.shape()));
      widths = w.to_vector<int64_t>();
    }
    try {
      out.emplace_back(name, model.forward(x, widths));
    } catch (const Error& e) {
      fail(in_path, ": batch '", name, "': ", e.what());
    }
  }
  OCRT_CHECK(!out.empty(), in_path, ": holds no batch to run");
  save_safetensors(out_path, out, {{"format", "ocrt-logits-check-1"}, {"arch", arch}, {"layout", "T, N, C"}});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse_args(argc, argv);
    const infer::LoadedModel loaded = infer::load_model(args.weights, args.arch, args.charset);
    const auto model = infer::build_model(loaded);
    nn::OnnxExportOptions options;
    options.widths_input = args.widths_input;
    options.producer_version = OCRT_PROJECT_VERSION;
    const std::string bytes = nn::export_onnx(*model, loaded.info(), options);
    write_file_atomic(args.onnx, bytes);
    std::fprintf(stderr, "ocrt-export: wrote %s (%s, %lld classes, %.1f MB)\n", args.onnx.c_str(),
                 loaded.arch.c_str(), (long long)model->num_classes(), (double)bytes.size() / 1e6);
    if (nn::is_int8_state_dict(loaded.weights))
      std::fprintf(stderr,
                   "ocrt-export: note: %s is an int8 model file: the graph holds its weights dequantized to float32 "
                   "(no int8 operators)\n",
                   args.weights.c_str());
    if (!args.check_input.empty()) {
      set_conv_mode(ConvMode::exact);  // comparisons to 1e-4 should not spend their margin on Winograd's rounding
      run_check(*model, args.check_input, args.check_output, loaded.arch);
      std::fprintf(stderr, "ocrt-export: wrote ocrt's logits for %s to %s\n", args.check_input.c_str(),
                   args.check_output.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-export: %s\n", e.what());
    return 2;
  }
  return 0;
}
