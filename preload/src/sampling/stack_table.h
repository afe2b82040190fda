// Interning of call stacks: each distinct stack gets an id and is written to the stream once,
// before the first event that uses it.
#pragma once
#include <cstdint>

#include "core/common.h"

namespace hs {

struct ThreadState;

// Two lanes of xor-multiply (odd multipliers: each step is a bijection of the lane for a given
// frame and of the frame for a given lane state, so stacks that differ in one frame never collide),
// then one full mix. The lanes halve the serial multiply chain: deep stacks (an interpreter's)
// hash in about a fifth of the time that a full mix64 per frame took (callgrind, py workload).
HS_INLINE uint64_t hash_frames(const uintptr_t *frames, int n, bool truncated) {
  uint64_t a = 0x9e3779b97f4a7c15ull ^ uint64_t(n) ^ (truncated ? 0x5bd1e995ull : 0);
  uint64_t b = 0xd6e8feb86659fd93ull;
  int i = 0;
  for (; i + 1 < n; i += 2) {
    a = (a ^ frames[i]) * 0xff51afd7ed558ccdull;
    b = (b ^ frames[i + 1]) * 0xc4ceb9fe1a85ec53ull;
    a ^= a >> 29;
    b ^= b >> 29;
  }
  if (i < n) a = (a ^ frames[i]) * 0xff51afd7ed558ccdull;
  uint64_t h = mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ull));
  return h ? h : 1;
}

// Returns the id of the stack (ids start at 1), or 0 if it could not be interned.
// Identity is a 64-bit hash of the frames: a collision (about 2^-64 per pair) would merge two
// stacks, which we accept instead of keeping every frame list in memory.
uint32_t intern_stack(ThreadState *ts, const uintptr_t *frames, int n, bool truncated);

// The same, for callers that hashed the frames already (hash_frames) and missed the thread's
// cache (thread_state.h: ThreadState::stack_cache; sampled_path.cc looks it up inline).
uint32_t intern_stack_hashed(ThreadState *ts, const uintptr_t *frames, int n, bool truncated,
                             uint64_t h);

void stack_table_lock();
void stack_table_unlock();
void stack_table_after_fork_child();

}  // namespace hs
