// Custom pools reported through the client API (preload/include/heapsnap.h): their objects are
// blocks the system allocator never sees. Each pool keeps every live object (for snapshots and
// for applying moves) in an open-addressing table keyed by address; sampled objects carry their
// sample id, so that frees and moves reach the stream by identity.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/spinlock.h"

namespace hs::pools {

struct Object {
  uint64_t addr_d;   // disguised address; 0 = empty slot
  uint64_t size;
  uint64_t id;       // sample id, 0 if not sampled
  uint32_t stack;    // when sampled
  uint32_t site;     // call_sites index (snapshots on)
  uint32_t time_ms;
};

struct Pool {
  uint32_t id;
  char name[64];
  SpinLock lock;
  Object *slots;
  uint64_t mask;
  uint64_t used;
};

constexpr uint32_t kMaxPools = 1024;

Pool *create(const char *name);
void alloc(Pool *pool, const void *p, size_t size, uintptr_t ra);
void release(Pool *pool, const void *p);
void moved(Pool *pool, const void *const *olds, const void *const *news, const size_t *lens, size_t n,
           bool compacting);

// For the snapshot child (its frozen copy: no locks): every pool, or nullptr past the last.
Pool *pool_at(uint32_t index);

}  // namespace hs::pools
