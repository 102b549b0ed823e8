// Reading and writing the Hugging Face safetensors format, ocrt's model file format. Tensor
// names follow PyTorch's state_dict, so weights move between PyTorch and ocrt unchanged.
//
// Layout of a file:
//   8 bytes   N, the header length, a little-endian u64
//   N bytes   a JSON object: tensor name -> {"dtype": "F32", "shape": [2, 3],
//             "data_offsets": [begin, end]}, plus an optional "__metadata__" object that maps
//             strings to strings; padded with spaces to a multiple of 8 bytes
//   the rest  the data buffer: each tensor's bytes, row-major and little-endian, at
//             [begin, end) counted from the start of the buffer
//
// Supported dtypes: F32, F64, I32, I64, U8, I8 (an int8 model file's codes, models/int8.h) and
// BOOL (read as uint8; ocrt writes uint8 as U8).
// The reader copies every tensor into an owned CPU tensor and checks everything a damaged or
// hostile file could get wrong; each problem is an Error that names the file.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt {

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in the order of the header
  std::map<std::string, std::string> metadata;          // the "__metadata__" object, if any
  std::string name;                                     // the path (or name) it was read from

  // Throws when missing, listing the names the file does hold.
  const Tensor& get(const std::string& tensor_name) const;
  bool contains(const std::string& tensor_name) const;
};

// Reads a whole file into CPU tensors.
SafetensorsFile load_safetensors(const std::string& path);

// Parses the bytes of a file held in memory; name_for_errors is used in messages.
SafetensorsFile parse_safetensors(const void* data, size_t size, const std::string& name_for_errors);

// Writes tensors (any device, any layout) in the given order. Names must be unique and not
// "__metadata__"; an empty metadata map writes no "__metadata__" entry. The file is replaced
// atomically: written to "<path>.tmp.<pid>", flushed to disk, then renamed over path, so a
// crash never leaves a half-written model behind.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The safetensors name of a dtype ("F32", ...) and back (throws for names ocrt cannot hold).
const char* safetensors_dtype_name(DType dtype);

}  // namespace ocrt
