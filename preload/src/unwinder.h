// Stack capture for sampled allocations only (never on the fast path).
#pragma once
#include <cstddef>
#include <cstdint>

namespace hs::unwind {

constexpr int kMaxDepth = 256;

// Fills frames[] with return addresses, leaf first, starting at the frame that called the
// allocation function whose return address is `caller_ra` (the shim's own frames are dropped).
// Returns the number of frames; *truncated is set when `max_depth` cut the stack.
int capture(uintptr_t caller_ra, uintptr_t *frames, int max_depth, bool *truncated);

void init();

}  // namespace hs::unwind
