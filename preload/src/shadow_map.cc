#include "shadow_map.h"

namespace hs::shadow {

std::atomic<uintptr_t> top[kTopEntries];

namespace {
// Never written: its pages stay the kernel's zero page.
std::atomic<uintptr_t> no_leaves[kTopEntries];
}  // namespace

std::atomic<const std::atomic<uintptr_t> *> fast_top{no_leaves};

void enable_fast_paths(bool on) { fast_top.store(on ? top : no_leaves, std::memory_order_relaxed); }

uint8_t *create_leaf(const void *p) {
  size_t t = reinterpret_cast<uint64_t>(p) >> kRegionShift;
  if (t >= kTopEntries) return nullptr;
  void *m = mmap(nullptr, kLeafBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  uintptr_t e = reinterpret_cast<uintptr_t>(m) - leaf_bias(t);
  // 0 means "no leaf": a leaf mapped at exactly the bias cannot be published (and the kernel
  // hands out addresses from the top of the address space down, far above any bias).
  uintptr_t expected = 0;
  if (e == 0 || !top[t].compare_exchange_strong(expected, e, std::memory_order_acq_rel)) {
    munmap(m, kLeafBytes);  // another thread won the race (or the unusable address above)
    if (!expected) return nullptr;
  }
  return find_in(top, p);
}

}  // namespace hs::shadow
