// The full live-block table for snapshots: 8 bytes per 16-byte granule, written at each block's
// first granule when snapshots are enabled: the allocation's call site (an index into
// call_sites) and its allocation time. Together with the byte shadow (which says where blocks
// start and how big they are) this is every live block, with no hash table and no lock on the
// allocation path; a freed block needs no update (its byte-shadow entry is cleared).
//
// Cost: touched pages only, at most 50% of the heap for a heap of 16-byte blocks, about
// 8 bytes per live block for typical ones (measured in the issue note).
//
// An entry is stored with bit 63 set so that it never looks like a pointer to a conservative
// scan of the tracer's own memory.
#pragma once
#include <atomic>
#include <cstdint>

#include "common.h"
#include "shadow_map.h"

namespace hs::info {

constexpr size_t kLeafBytes = shadow::kLeafBytes * 8;
extern std::atomic<uint64_t *> top[shadow::kTopEntries];
extern bool enabled;

uint64_t *create_leaf(size_t index);

HS_INLINE uint64_t *slot(const void *p, bool create) {
  uint64_t a = reinterpret_cast<uint64_t>(p);
  size_t t = a >> shadow::kRegionShift;
  if (HS_UNLIKELY(t >= shadow::kTopEntries)) return nullptr;
  uint64_t *leaf = top[t].load(std::memory_order_acquire);
  if (HS_UNLIKELY(!leaf)) {
    if (!create) return nullptr;
    leaf = create_leaf(t);
    if (!leaf) return nullptr;
  }
  return leaf + ((a & ((uint64_t(1) << shadow::kRegionShift) - 1)) >> shadow::kGranuleShift);
}

HS_INLINE uint64_t encode(uint32_t site, uint32_t time_ms) {
  return (uint64_t(time_ms | 0x80000000u) << 32) | site;
}
HS_INLINE uint32_t site_of(uint64_t e) { return uint32_t(e); }
HS_INLINE uint32_t time_ms_of(uint64_t e) { return uint32_t(e >> 32) & 0x7fffffffu; }

HS_INLINE void record(const void *p, uint32_t site, uint32_t time_ms) {
  if (uint64_t *s = slot(p, true)) *s = encode(site, time_ms);
}

}  // namespace hs::info
