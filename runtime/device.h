// Where a tensor lives: the CPU, or one CUDA GPU by index. There is no default GPU: every
// tensor carries its device, and every op checks that its inputs agree.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ocrt {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // GPU index for cuda; always 0 for cpu

  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int index) { return {DeviceKind::cuda, index}; }

  // Parses "cpu", "cuda:N" (and "cuda" as "cuda:0" is NOT accepted: say which GPU). Throws on
  // anything else, quoting the text. Does not check that the GPU exists; see validate().
  static Device parse(const std::string& text);

  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  std::string str() const;

  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// Throws unless the device exists on this machine and this build can use it; the message
// lists the devices that do exist.
void validate(const Device& d);

// Every device this process can use: cpu first, then cuda:0..N-1.
std::vector<Device> available_devices();

// Parses a comma-separated list such as "cuda:0,cuda:1,cpu" and validates each entry.
std::vector<Device> parse_device_list(const std::string& text);

// A GPU's turn: while it is held, this thread alone queues work on that GPU. A GPU is driven by
// one thread at a time (docs/cuda.md: its work goes to its one stream, and cuBLAS's handle and
// math mode are set per call); where several threads share one GPU (ocrt-infer's page lanes,
// infer/page_lanes.h), each holds the GPU's turn from the first op it queues there until it has
// the results on the host, and does its CPU work (decoding images, the detector's outlines,
// cutting lines, beam search) without it, while the others use the GPU. One lock per GPU index,
// process-wide; a CPU device takes no lock (its ops share threads, not a queue). Not reentrant.
class DeviceTurn {
 public:
  explicit DeviceTurn(const Device& d);
  DeviceTurn(const DeviceTurn&) = delete;
  DeviceTurn& operator=(const DeviceTurn&) = delete;
  bool holds() const { return lock_.owns_lock(); }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace ocrt
