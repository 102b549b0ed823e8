// Device parsing and validation. The number of GPUs comes from the CUDA glue (runtime/cuda/),
// which reports 0 in builds without CUDA.
#include "runtime/device.h"

#include <cctype>
#include <sstream>

#include "runtime/cuda/cuda_glue.h"
#include "runtime/error.h"

namespace ocrt {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  const std::string prefix = "cuda:";
  if (text.rfind(prefix, 0) == 0 && text.size() > prefix.size() && text.size() <= prefix.size() + 4) {
    bool digits = true;
    for (size_t i = prefix.size(); i < text.size(); ++i) digits &= std::isdigit((unsigned char)text[i]) != 0;
    if (digits) return cuda(std::stoi(text.substr(prefix.size())));
  }
  fail("invalid device '", text, "': expected 'cpu' or 'cuda:N' (N = GPU index, e.g. cuda:0)");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::vector<Device> available_devices() {
  std::vector<Device> out{Device::cpu()};
  int n = cuda_device_count();
  for (int i = 0; i < n; ++i) out.push_back(Device::cuda(i));
  return out;
}

void validate(const Device& d) {
  if (d.is_cpu()) return;
  if (!cuda_built())
    fail("device ", d.str(), " requested, but this ocrt was built without CUDA (OCRT_CUDA=OFF or no toolkit "
         "found); available devices: cpu");
  int n = cuda_device_count();
  if (d.index < 0 || d.index >= n) {
    std::ostringstream os;
    os << "device " << d.str() << " does not exist; available devices: ";
    auto all = available_devices();
    for (size_t i = 0; i < all.size(); ++i) os << (i ? ", " : "") << all[i].str();
    if (n == 0) os << " (no CUDA GPU visible" << cuda_status_note() << ")";
    throw Error(os.str());
  }
}

std::vector<Device> parse_device_list(const std::string& text) {
  std::vector<Device> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Device d = Device::parse(item);
    validate(d);
    for (const auto& seen : out)
      if (seen == d) fail("device list '", text, "' names ", d.str(), " twice");
    out.push_back(d);
  }
  if (out.empty()) fail("empty device list: expected e.g. 'cpu' or 'cuda:0,cuda:1'");
  return out;
}

namespace {

std::mutex& turn_lock(int index) {
  static std::mutex locks[64];
  OCRT_CHECK(index >= 0 && index < 64, "cuda:", index, ": GPU index out of range");
  return locks[index];
}

}  // namespace

DeviceTurn::DeviceTurn(const Device& d) {
  if (d.is_cuda()) lock_ = std::unique_lock<std::mutex>(turn_lock(d.index));
}

}  // namespace ocrt
