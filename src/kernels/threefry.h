// Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11; the Random123 library's threefry2x32_20): the block function behind kiln's
// counter-based random numbers. Shared by the reference and fast kernels of the
// threefry2x32 primitive.
#pragma once

#include <array>
#include <cstdint>

namespace kiln::threefry {

inline constexpr uint32_t rotate_left(uint32_t x, int bits) {
  return (x << bits) | (x >> (32 - bits));
}

// Encrypts the counter (x0, x1) under the key (k0, k1).
inline constexpr std::array<uint32_t, 2> hash(uint32_t k0, uint32_t k1, uint32_t x0, uint32_t x1) {
  // Rotation constants of Threefish/Threefry for two 32-bit words, one per round, cycling
  // with period 8; a key injection follows every 4 rounds.
  constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t keys[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};  // the Skein key-parity constant
  x0 += keys[0];
  x1 += keys[1];
  for (uint32_t injection = 1; injection <= 5; ++injection) {
    for (int round = 0; round < 4; ++round) {
      x0 += x1;
      x1 = rotate_left(x1, kRotations[((injection - 1) % 2) * 4 + round]);
      x1 ^= x0;
    }
    x0 += keys[injection % 3];
    x1 += keys[(injection + 1) % 3] + injection;
  }
  return {x0, x1};
}

}  // namespace kiln::threefry
