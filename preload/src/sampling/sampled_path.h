// Everything the shim does for a sampled allocation or the free of a sampled block: off the fast
// path, under the thread's reentrancy guard.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tables/sampled_blocks.h"
#include "core/thread_state.h"

namespace hs {

// Called when the countdown ran out (or the thread is new). Returns whether this block of `size`
// bytes is sampled; registers the thread on first use.
bool reach_sample_point(ThreadLocal &t, size_t size);

void record_alloc(ThreadLocal &t, const void *p, size_t size, uint8_t fn, uintptr_t ra);
void record_free(ThreadLocal &t, const void *p);
void record_free_id(ThreadLocal &t, sampled_blocks::Name n);
// A sampled block (whose id the caller took from sampled_blocks before the real realloc, so
// that no other thread can reuse the old address first) now lives at new_p.
void record_realloc(ThreadLocal &t, sampled_blocks::Name n, const void *new_p, size_t size,
                    bool moved, uintptr_t ra);

// Pool objects (client API). record_pool_alloc fills in the sample id and stack it assigned.
void record_pool_alloc(ThreadLocal &t, uint32_t pool, const void *p, size_t size, uintptr_t ra,
                       uint64_t *id, uint32_t *stack);
void record_pool_free(ThreadLocal &t, uint32_t pool, uint64_t id, uint32_t stack);

// Registers the thread if it is not yet (a thread that frees before it ever allocated: its
// counters are summed into the totals only once it is registered). Returns its state, or nullptr
// if it cannot be registered (out of memory, or past its exit handler).
ThreadState *ensure_thread(ThreadLocal &t);
// Thread exit (pthread key destructor).
void thread_exit_handler(void *state);
bool create_thread_key();

}  // namespace hs
