// The tensors of tools/reference/optim.py's fixture (torch.optim's steps and LR schedules), for
// test_optim.cpp and test_schedule.cpp.
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include "runtime/safetensors.h"

namespace ocrt::testing {

inline Tensor optim_golden(const std::string& name) {
  static const SafetensorsFile f =
      load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/optim.safetensors");
  INFO("regenerate the fixture with: /usr/bin/python3 tools/reference/optim.py");
  return f.get(name);
}

}  // namespace ocrt::testing
