// A recogniser as an ONNX graph, for deployment tools (ONNX Runtime, TensorRT, OpenVINO, ...):
// `ocrt-export --onnx` (docs/cli.md) writes what export_onnx returns; docs/formats.md
// describes the graph.
//
//   input  "image"   (N, 1, 32, W) float32, W a multiple of 4: gray pixels p as p / 127.5 - 1
//                    (the model's input spec), lines padded on the right with white (1.0)
//   input  "widths"  (N) int64, only with OnnxExportOptions::widths_input: each line's true
//                    width in pixels (a multiple of 4, at most W), as Recognizer::forward's
//                    widths, so that a line's logits do not depend on its batch's padding
//   output "logits"  (T, N, num_classes) float32: the raw CTC logits Recognizer::forward
//                    returns (no softmax), time first; class 0 is the blank, class k + 1 the
//                    charset's character k; T = W/4 + 1 (crnn, crnn-s) or W/4 (svtr-lite)
//
// The graph is the model's eval-mode forward pass written in standard ai.onnx operators of
// opset 17 (no custom domain): BatchNorm in inference form (running statistics), dropout
// left out, the LSTM as ONNX LSTM nodes (gates reordered from PyTorch's i, f, g, o to ONNX's
// i, o, f, c; both directions in one node), SVTR-lite's attention as MatMul/Softmax with its
// local window built from the grid's width at run time (Range, Sub, Abs, Greater, Or), and its
// fixed position table stored for up to 2048 token columns (8192 pixels, ocrt-infer's widest
// line) and sliced to the width.
#pragma once
#include <string>

#include "models/model_file.h"
#include "models/recognizer.h"

namespace ocrt::nn {

struct OnnxExportOptions {
  bool widths_input = false;  // add the "widths" input (see above)
  std::string producer_version;  // ocrt's version, written as the producer's and in the metadata
};

// The widest line the graph accepts, in token columns (4 pixels each), for SVTR-lite's
// position table; CRNN graphs take any width.
constexpr int64_t kOnnxMaxTokenColumns = 2048;

// The serialised ONNX ModelProto of `model` (crnn, crnn-s or svtr-lite; its weights as they are
// now, read from the CPU or its device). info supplies the metadata: arch (which must be the
// model's), config, charset, input spec; the model's metadata_props hold them as in a model file
// (docs/formats.md) plus the ocrt version and what the output is.
std::string export_onnx(const Recognizer& model, const ModelInfo& info, const OnnxExportOptions& options = {});

}  // namespace ocrt::nn
