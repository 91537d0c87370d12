// Philox4x32-10, the counter-based generator behind every random op: the value of element i
// depends only on (seed, offset, i), so CPU and CUDA draw the same numbers and a stream is
// resumed from two integers.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd.h"

namespace accel {

struct Philox4 {
  uint32_t v[4];
};

ACCEL_HD void mul_hi_lo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

// Four random 32-bit words for (key, block, stream).
ACCEL_HD Philox4 philox4x32(uint64_t key, uint64_t block, uint64_t stream) {
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mul_hi_lo(0xD2511F53u, c0, hi0, lo0);
    mul_hi_lo(0xCD9E8D57u, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 random bits.
ACCEL_HD float philox_uniform(uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }

// Element i of a uniform draw: block offset + i/4, lane i%4.
ACCEL_HD float random_uniform_at(uint64_t seed, uint64_t offset, uint64_t i) {
  const Philox4 r = philox4x32(seed, offset + i / 4, 0);
  return philox_uniform(r.v[i % 4]);
}

// Element i of a normal draw (Box-Muller on lanes 2(i%2), 2(i%2)+1 of block offset + i/2).
ACCEL_HD float random_normal_at(uint64_t seed, uint64_t offset, uint64_t i) {
  const Philox4 r = philox4x32(seed, offset + i / 2, 0);
  const uint32_t lane = static_cast<uint32_t>(i % 2) * 2;
  const float u1 = (static_cast<float>(r.v[lane] >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  const float u2 = philox_uniform(r.v[lane + 1]);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

// Philox blocks that a draw of n uniforms / normals consumes.
ACCEL_HD uint64_t uniform_blocks(uint64_t n) { return (n + 3) / 4; }
ACCEL_HD uint64_t normal_blocks(uint64_t n) { return (n + 1) / 2; }

}  // namespace accel
