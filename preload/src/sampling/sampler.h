// Byte-based Poisson sampling: the next sampled allocation comes after an exponentially
// distributed number of bytes with mean `mean`. A block of size s is then sampled with
// probability 1 - exp(-s/mean), independently of how allocations are split, and the analyzer
// weights it by 1 / (1 - exp(-s/mean)) to get unbiased estimates. mean <= 1 samples everything.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/common.h"

namespace hs {

// xorshift64*: a few cycles, good enough statistics for drawing sample gaps.
HS_INLINE uint64_t next_random(uint64_t &state) {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

// Bytes until the next sample. Never 0, so one allocation consumes at most one draw.
HS_INLINE int64_t draw_sample_gap(uint64_t &rng, uint64_t mean) {
  if (mean <= 1) return 0;
  // Uniform in (0, 1]: 53 random bits, never 0 so log() stays finite.
  double u = double((next_random(rng) >> 11) + 1) * (1.0 / 9007199254740992.0);
  double gap = -std::log(u) * double(mean);
  if (gap > 9.0e18) gap = 9.0e18;
  return int64_t(gap) + 1;
}

}  // namespace hs
