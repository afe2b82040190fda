#include "tables/call_sites.h"

#include "core/private_heap.h"
#include "core/spinlock.h"

namespace hs::call_sites {

__thread CacheEntry t_cache[kCacheSize] HS_TLS;

namespace {

struct Slot {
  uint64_t ra;  // 0 = empty
  uint32_t index;
};

SpinLock g_lock;
Slot *g_slots = nullptr;
uint64_t g_mask = 0;
uint64_t *g_addresses = nullptr;  // index -> return address; [0] unused
uint32_t g_count = 1;
uint32_t g_cap = 0;

bool grow() {
  uint64_t cap = g_mask ? (g_mask + 1) * 2 : 4096;
  auto *slots = heap::make_array<Slot>(cap);
  if (!slots) return false;
  for (uint64_t i = 0; g_slots && i <= g_mask; ++i) {
    if (!g_slots[i].ra) continue;
    uint64_t j = mix64(g_slots[i].ra) & (cap - 1);
    while (slots[j].ra) j = (j + 1) & (cap - 1);
    slots[j] = g_slots[i];
  }
  heap::release(g_slots);
  g_slots = slots;
  g_mask = cap - 1;
  return true;
}

}  // namespace

uint32_t intern_slow(uint64_t ra) {
  SpinGuard g(g_lock);
  if (!g_slots || (uint64_t(g_count) + 1) * 2 > g_mask + 1) {
    if (!grow()) return 0;
  }
  uint64_t j = mix64(ra) & g_mask;
  while (g_slots[j].ra && g_slots[j].ra != ra) j = (j + 1) & g_mask;
  if (g_slots[j].ra == ra) return g_slots[j].index;
  if (g_count >= g_cap) {
    uint32_t cap = g_cap ? g_cap * 2 : 4096;
    auto *a = static_cast<uint64_t *>(heap::grow(g_addresses, size_t(cap) * sizeof(uint64_t)));
    if (!a) return 0;
    g_addresses = a;
    g_cap = cap;
  }
  uint32_t index = g_count++;
  g_addresses[index] = ra;
  g_slots[j] = {ra, index};
  return index;
}

uint64_t address(uint32_t index) { return index && index < g_count ? g_addresses[index] : 0; }
uint32_t count() { return g_count; }

void after_fork_child() { g_lock.reset(); }

}  // namespace hs::call_sites
