// Interning of call stacks: each distinct stack gets an id and is written to the stream once,
// before the first event that uses it.
#pragma once
#include <cstdint>

namespace hs {

struct ThreadState;

// Returns the id of the stack (ids start at 1), or 0 if it could not be interned.
// Identity is a 64-bit hash of the frames: a collision (about 2^-64 per pair) would merge two
// stacks, which we accept instead of keeping every frame list in memory.
uint32_t intern_stack(ThreadState *ts, const uintptr_t *frames, int n, bool truncated);

void stack_table_lock();
void stack_table_unlock();
void stack_table_after_fork_child();

}  // namespace hs
