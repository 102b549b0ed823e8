// Shared by the CPU convolutions that keep a packed form of their weights between calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ocrt::cpu {

// A 64-bit fingerprint of a layer's weights' bytes (a multiply-xorshift over 8-byte words): what
// the forms of weights kept between calls (Winograd's transforms, ops/cpu/winograd.cpp; the AMX
// panels, ops/cpu/conv_amx.cpp) are matched by, so that weights changed in place are never read
// stale.
inline uint64_t weights_fingerprint(const float* w, int64_t count) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(w);
  const size_t n = (size_t)count * sizeof(float);
  // Four independent lanes, so that the multiplies overlap (one chain took 2.4 ms for 9.4 MB).
  uint64_t h[4] = {0x9e3779b97f4a7c15ull ^ n, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull, 0x27d4eb2f165667c5ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t v;
      std::memcpy(&v, bytes + i + 8 * l, 8);
      h[l] = (h[l] ^ v) * 0xff51afd7ed558ccdull;
      h[l] ^= h[l] >> 32;
    }
  uint64_t out = h[0] ^ (h[1] * 0x9e3779b97f4a7c15ull) ^ (h[2] * 0xc4ceb9fe1a85ec53ull) ^ (h[3] * 0xff51afd7ed558ccdull);
  for (; i < n; ++i) out = (out ^ bytes[i]) * 0xc4ceb9fe1a85ec53ull;
  return out ^ (out >> 29);
}

}  // namespace ocrt::cpu
