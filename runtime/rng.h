// Random numbers that do not depend on the device or the thread count.
//
// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011) is a
// counter-based generator: philox(key, counter) is a pure function, so element i of a random
// tensor can be computed by whichever thread or GPU lane owns it, and the same seed gives the
// same numbers on CPU and CUDA. ocrt's convention (shared by every backend):
//   key     = seed (64 bits)
//   counter = (i low 32, i high 32, offset low 32, offset high 32)
// where i is the element's row-major index and offset is the Generator's draw counter, which
// advances by one per tensor drawn. Uniform floats take the first 32-bit output word.
#pragma once
#include <cstdint>

#include "runtime/host_device.h"

namespace ocrt {

struct Philox4x32 {
  uint32_t v[4];
};

OCRT_HOST_DEVICE inline Philox4x32 philox4x32_10(uint64_t key, uint64_t counter_lo, uint64_t counter_hi) {
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  uint32_t c0 = (uint32_t)counter_lo, c1 = (uint32_t)(counter_lo >> 32);
  uint32_t c2 = (uint32_t)counter_hi, c3 = (uint32_t)(counter_hi >> 32);
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = (uint64_t)M0 * c0, p1 = (uint64_t)M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += W0;
    k1 += W1;
  }
  return {{c0, c1, c2, c3}};
}

// A uniform float in [0, 1) from the top 24 bits of a word (exactly representable in float).
OCRT_HOST_DEVICE inline float uint_to_unit_float(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
// A uniform double in (0, 1] from two words (never 0, safe for log in Box-Muller).
OCRT_HOST_DEVICE inline double uints_to_unit_double_open0(uint32_t a, uint32_t b) {
  uint64_t x = ((uint64_t)a << 21) ^ (uint64_t)b;  // 53 random bits
  x &= (1ull << 53) - 1;
  return ((double)x + 1.0) * (1.0 / 9007199254740992.0);
}

// Seed + draw counter. Each draw (one random tensor) takes the current offset and advances
// it, so a sequence of draws is reproducible from the seed alone. Copyable: saving a
// Generator saves the RNG state (checkpoints do this for exact resume).
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  uint64_t next_offset() { return offset_++; }
  // A fresh 64-bit value (for seeding other generators, picking shuffles...).
  uint64_t next_u64() {
    Philox4x32 r = philox4x32_10(seed_, 0xFFFFFFFFFFFFFFFFull, offset_++);
    return ((uint64_t)r.v[0] << 32) | r.v[1];
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

}  // namespace ocrt
