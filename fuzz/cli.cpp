// Fuzz target: command-line values (runtime/cli.h, Device::parse and the device lists), as
// ocrt-train, ocrt-synth and ocrt-infer read their flags.
//
// Promises checked: a number is accepted only when the whole text is one (and an unsigned one
// never has a minus sign); split_list drops exactly the empty items; a device parses to a name
// that parses back to it.
#include <cstring>

#include "fuzz/fuzz_common.h"
#include "runtime/cli.h"
#include "runtime/device.h"

using namespace ocrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A command-line argument ends at its first NUL byte.
  const void* nul = std::memchr(data, 0, size);
  const std::string text(reinterpret_cast<const char*>(data),
                         nul ? (size_t)(static_cast<const uint8_t*>(nul) - data) : size);
  try {
    const int64_t x = cli::parse_int("--n", text);
    FUZZ_EXPECT(!text.empty());
    (void)x;
  } catch (const Error&) {
  }
  try {
    const uint64_t x = cli::parse_u64("--seed", text);
    FUZZ_EXPECT(!text.empty() && text[0] != '-');
    (void)x;
  } catch (const Error&) {
  }
  try {
    (void)cli::parse_double("--lr", text);
    FUZZ_EXPECT(!text.empty());
  } catch (const Error&) {
  }
  const std::vector<std::string> items = cli::split_list(text);
  std::string joined, without_empty;
  for (const auto& item : items) {
    FUZZ_EXPECT(!item.empty() && item.find(',') == std::string::npos);
    joined += item;
  }
  for (char c : text)
    if (c != ',') without_empty += c;
  FUZZ_EXPECT(joined == without_empty);
  try {
    const Device d = Device::parse(text);
    FUZZ_EXPECT(Device::parse(d.str()) == d);
  } catch (const Error&) {
  }
  try {
    for (const Device& d : parse_device_list(text)) FUZZ_EXPECT(Device::parse(d.str()) == d);
  } catch (const Error&) {
  }
  return 0;
}
