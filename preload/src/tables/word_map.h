// A direct-mapped 8-byte word per unit of address space: the word of the unit where a block
// starts says something about that block, found with two loads and no hash or lock. Used for the
// snapshots' live-block table (info_shadow.h) and the dense sampling's block names
// (sampled_blocks.h).
//
// A unit is 32 bytes when the next allocator is glibc's (its chunks are at least 32 bytes long, so
// no two blocks start in one unit), else the byte shadow's 8-byte granule (block_unit_shift()).
//
// Layout as the byte shadow's (shadow_map.h, entries not biased): top[addr >> 30] -> leaf of the words of one 1 GiB
// region, mapped with MAP_NORESERVE on first use, so only touched pages cost memory. Words are
// written by whichever thread the allocator handed the block to; the allocator orders them.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/common.h"
#include "tables/shadow_map.h"

namespace hs {

// The unit, as a shift: 5 (32 bytes) on glibc's chunk layout, else the byte shadow's granule.
HS_INLINE unsigned block_unit_shift(bool glibc_layout) { return glibc_layout ? 5 : shadow::granule_shift; }

class WordMap {
 public:
  // Before the first word is made: the leaves' size follows from it.
  void set_unit_shift(unsigned shift) { shift_ = shift; }
  size_t leaf_bytes() const { return (size_t(1) << (shadow::kRegionShift - shift_)) * 8; }

  // The leaf of region t, or nullptr.
  uint64_t *leaf(size_t t) const { return top_[t].load(std::memory_order_acquire); }

  // p's word, or nullptr (no leaf yet and !create, or no memory for one).
  HS_INLINE uint64_t *word(const void *p, bool create) {
    uint64_t a = reinterpret_cast<uint64_t>(p);
    size_t t = a >> shadow::kRegionShift;
    if (HS_UNLIKELY(t >= shadow::kTopEntries)) return nullptr;
    uint64_t *l = top_[t].load(std::memory_order_acquire);
    if (HS_UNLIKELY(!l)) {
      if (!create) return nullptr;
      l = create_leaf(t);
      if (!l) return nullptr;
    }
    return l + ((a & ((uint64_t(1) << shadow::kRegionShift) - 1)) >> shift_);
  }

  // Maps region t's leaf (racing threads: one mapping wins, the others are unmapped); nullptr if
  // the mapping failed.
  uint64_t *create_leaf(size_t t);

  // Every word back to 0, the pages returned (a forked child that must forget its parent's).
  void clear();

 private:
  unsigned shift_ = shadow::kGlibcGranuleShift;
  std::atomic<uint64_t *> top_[shadow::kTopEntries] = {};
};

// Relaxed atomic word accesses, for the same reason as shadow::get / shadow::set: the allocator
// orders a word's writers, out of ThreadSanitizer's sight. The same single mov on x86-64.
HS_INLINE uint64_t load_word(const uint64_t *w) { return __atomic_load_n(w, __ATOMIC_RELAXED); }
HS_INLINE void store_word(uint64_t *w, uint64_t v) { __atomic_store_n(w, v, __ATOMIC_RELAXED); }

}  // namespace hs
