#include "tables/shadow_map.h"

namespace hs::shadow {

std::atomic<uintptr_t> top[kTopEntries];
unsigned granule_shift = kGlibcGranuleShift;

void set_granule(unsigned shift) { granule_shift = shift; }

namespace {
// Never written: its pages stay the kernel's zero page.
std::atomic<uintptr_t> no_leaves[kTopEntries];
}  // namespace

std::atomic<const std::atomic<uintptr_t> *> fast_top{no_leaves};

void enable_fast_paths(bool on) { fast_top.store(on ? top : no_leaves, std::memory_order_relaxed); }

uint8_t *create_leaf(const void *p) {
  size_t t = reinterpret_cast<uint64_t>(p) >> kRegionShift;
  if (t >= kTopEntries || !map_leaf(top[t], leaf_bytes(), leaf_bias(t))) return nullptr;
  return find_in(top, p, granule_shift);
}

}  // namespace hs::shadow
