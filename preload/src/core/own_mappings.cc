#include "core/own_mappings.h"

#include <linux/prctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>

#include "core/common.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

namespace hs::own_mappings {
namespace {

// A slot's hi is 0 while free, kBusy while being filled; lo is valid once hi is a real end (a
// reader loads hi first, with acquire). Slots are reused; g_used is how many were ever taken.
// 4096 ranges: mimalloc maps one per thread that allocates (its thread data), libunwind a few.
constexpr size_t kSlots = 4096;
constexpr uint64_t kBusy = 1;
struct Slot {
  std::atomic<uint64_t> lo{0}, hi{0};
};
Slot g_slots[kSlots];
std::atomic<size_t> g_used{0};
std::atomic<uint64_t> g_dropped{0};
std::atomic<bool> g_cannot_name{false};  // the kernel said EINVAL once: do not ask again

void add(uint64_t lo, uint64_t hi) {
  if (hi <= lo) return;
  // (g_used may be past kSlots for a moment: another add's fetch_add before its store below.)
  const size_t used = std::min(g_used.load(std::memory_order_acquire), kSlots);
  for (size_t i = 0; i < used; ++i) {
    uint64_t expected = 0;
    if (g_slots[i].hi.load(std::memory_order_relaxed) == 0 &&
        g_slots[i].hi.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) {
      g_slots[i].lo.store(lo, std::memory_order_relaxed);
      g_slots[i].hi.store(hi, std::memory_order_release);
      return;
    }
  }
  const size_t i = g_used.fetch_add(1, std::memory_order_acq_rel);
  if (i >= kSlots) {
    g_used.store(kSlots, std::memory_order_relaxed);
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_slots[i].lo.store(lo, std::memory_order_relaxed);
  g_slots[i].hi.store(hi, std::memory_order_release);
}

}  // namespace

bool name(void *p, size_t len) {
  if (!p || !len || g_cannot_name.load(std::memory_order_relaxed)) return false;
  ErrnoSaver es;
  if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, reinterpret_cast<unsigned long>(p), len,
            reinterpret_cast<unsigned long>(kName)) == 0)
    return true;
  if (errno == EINVAL) g_cannot_name.store(true, std::memory_order_relaxed);
  return false;
}

void note(void *p, size_t len) {
  if (!p || !len) return;
  name(p, len);
  const uint64_t lo = reinterpret_cast<uint64_t>(p);
  add(lo, lo + ((len + 4095) & ~size_t(4095)));
}

void forget(void *p, size_t len) {
  if (!p || !len) return;
  const uint64_t lo = reinterpret_cast<uint64_t>(p), hi = lo + ((len + 4095) & ~size_t(4095));
  const size_t used = g_used.load(std::memory_order_acquire);
  for (size_t i = 0; i < used && i < kSlots; ++i) {
    Slot &s = g_slots[i];
    const uint64_t h = s.hi.load(std::memory_order_acquire);
    if (h <= kBusy) continue;
    const uint64_t l = s.lo.load(std::memory_order_relaxed);
    if (hi <= l || h <= lo) continue;
    if (lo <= l && h <= hi) {
      s.hi.store(0, std::memory_order_release);  // all of it goes
    } else if (lo <= l) {
      s.lo.store(hi, std::memory_order_release);  // its front goes
    } else {
      s.hi.store(lo, std::memory_order_release);  // its back goes, or its middle: the rest is a new range
      if (hi < h) add(hi, h);
    }
  }
}

size_t copy(uint64_t *lo, uint64_t *hi, size_t cap) {
  size_t n = 0;
  const size_t used = g_used.load(std::memory_order_acquire);
  for (size_t i = 0; i < used && i < kSlots && n < cap; ++i) {
    const uint64_t h = g_slots[i].hi.load(std::memory_order_acquire);
    if (h <= kBusy) continue;
    const uint64_t l = g_slots[i].lo.load(std::memory_order_relaxed);
    if (l >= h) continue;
    lo[n] = l;
    hi[n++] = h;
  }
  return n;
}

uint64_t dropped() { return g_dropped.load(std::memory_order_relaxed); }

void *mmap_noted(void *addr, size_t len, int prot, int flags, int fd, long off) {
  void *p = mmap(addr, len, prot, flags, fd, off);
  // (Anonymous private memory only: a file or shared mapping is smaps' own kind, by its path.)
  if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && !(flags & MAP_SHARED)) {
    if (flags & MAP_FIXED) forget(p, len);  // (replaces what was there)
    note(p, len);
  }
  return p;
}

int munmap_noted(void *addr, size_t len) {
  forget(addr, len);
  return munmap(addr, len);
}

}  // namespace hs::own_mappings
