// Interned call sites (the return address of the allocation call), for the live-block table:
// a 32-bit index instead of a 64-bit address per block. Each thread keeps a small direct-mapped
// cache in TLS, so the global table (spin-locked) is touched only for new sites.
#pragma once
#include <cstdint>

#include "core/common.h"

namespace hs::call_sites {

struct CacheEntry {
  uint64_t ra;
  uint32_t index;
};
constexpr unsigned kCacheSize = 256;

uint32_t intern_slow(uint64_t ra);   // 0 if the table is out of memory
uint64_t address(uint32_t index);    // 0 for unknown
uint32_t count();

extern __thread CacheEntry t_cache[kCacheSize] HS_TLS;

HS_INLINE uint32_t intern(uint64_t ra) {
  CacheEntry &c = t_cache[(ra >> 2) & (kCacheSize - 1)];
  if (HS_LIKELY(c.ra == ra)) return c.index;
  uint32_t i = intern_slow(ra);
  c = {ra, i};
  return i;
}

void after_fork_child();

}  // namespace hs::call_sites
