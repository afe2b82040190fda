#include "tables/sampled_blocks.h"

#include <atomic>

#include "core/common.h"
#include "core/private_heap.h"
#include "core/thread_state.h"

namespace hs::sampled_blocks {

namespace detail {

bool g_direct = false;
constinit WordMap g_words;
std::atomic<bool> g_table_used{false};

}  // namespace detail

using namespace detail;

namespace {

// --- the striped table ----------------------------------------------------------------------------

struct Slot {
  uint64_t key;  // disguised address; 0 = empty (no block lives at ~0)
  Name name;
};

struct alignas(64) Stripe {
  YieldLock lock;
  Slot *slots = nullptr;
  uint64_t mask = 0;
  uint64_t used = 0;
};

constexpr unsigned kStripeBits = 6;
Stripe g_stripes[1u << kStripeBits];

HS_INLINE uint64_t hash_of(uint64_t addr) { return mix64(addr); }

// A block's stripe follows its 2 MiB region of address space, not its hash. Allocators give
// each thread regions of its own (glibc: an arena per thread, in 64 MiB heaps; jemalloc and
// tcmalloc: per-thread caches refilled from spans), and most blocks are freed by the thread that
// allocated them: so a thread's inserts and takes mostly meet stripes that only it touches, whose
// lock and slots stay in its core's cache. By hash, every sampled allocation and free took a lock
// and a slot line that another core had just written: perf, 4-thread stress with default
// sampling, insert_table and take_table were 2% of the CPU, nearly all of it those two misses.
constexpr unsigned kStripeRegionShift = 21;
HS_INLINE Stripe &stripe_of(uint64_t addr) {
  return g_stripes[((addr >> kStripeRegionShift) * 0x9e3779b97f4a7c15ull) >> (64 - kStripeBits)];
}

bool grow(Stripe &s) {
  uint64_t cap = s.mask ? (s.mask + 1) * 2 : 256;
  auto *slots = heap::make_array<Slot>(cap);
  if (!slots) return false;
  for (uint64_t i = 0; s.slots && i <= s.mask; ++i) {
    if (!s.slots[i].key) continue;
    uint64_t j = (hash_of(reveal(s.slots[i].key)) >> kStripeBits) & (cap - 1);
    while (slots[j].key) j = (j + 1) & (cap - 1);
    slots[j] = s.slots[i];
  }
  heap::release(s.slots);
  __atomic_store_n(&s.slots, slots, __ATOMIC_RELAXED);  // read unlocked by prefetch()
  __atomic_store_n(&s.mask, cap - 1, __ATOMIC_RELAXED);
  return true;
}

}  // namespace

void init(bool dense, unsigned unit_shift) {
  g_direct = dense;
  g_words.set_unit_shift(unit_shift);
}

void detail::prefetch_table(const void *p) {
  uint64_t a = reinterpret_cast<uint64_t>(p);
  uint64_t h = hash_of(a);
  const Stripe &s = stripe_of(a);
  // Unlocked reads, only for a hint: a stale table (grown meanwhile) prefetches freed memory of
  // the private heap, which is harmless.
  Slot *slots = __atomic_load_n(&s.slots, __ATOMIC_RELAXED);
  uint64_t mask = __atomic_load_n(&s.mask, __ATOMIC_RELAXED);
  if (slots) __builtin_prefetch(&slots[(h >> kStripeBits) & mask], 1);
}

// In dense mode: what a direct word could not take (stale_word: p's word, if it has one).
bool detail::insert_table(const void *p, Name n, uint64_t *stale_word) {
  if (g_direct) {
    // A stale word for p (a block freed while the tracer could not take its name) would otherwise
    // be found before the table's entry.
    if (stale_word) store_word(stale_word, 0);
    g_table_used.store(true, std::memory_order_relaxed);
  }
  uint64_t a = reinterpret_cast<uint64_t>(p);
  uint64_t h = hash_of(a);
  Stripe &s = stripe_of(a);
  YieldGuard g(s.lock);
  if (!s.slots || (s.used + 1) * 2 > s.mask + 1) {
    if (!grow(s)) return false;
  }
  uint64_t key = disguise(a);
  uint64_t j = (h >> kStripeBits) & s.mask;
  while (s.slots[j].key && s.slots[j].key != key) j = (j + 1) & s.mask;
  if (!s.slots[j].key) ++s.used;
  s.slots[j] = {key, n};
  return true;
}

bool detail::take_table(const void *p, Name *n) {
  uint64_t a = reinterpret_cast<uint64_t>(p);
  uint64_t h = hash_of(a);
  Stripe &s = stripe_of(a);
  YieldGuard g(s.lock);
  if (!s.slots) return false;
  uint64_t key = disguise(a);
  uint64_t j = (h >> kStripeBits) & s.mask;
  while (s.slots[j].key != key) {
    if (!s.slots[j].key) return false;
    j = (j + 1) & s.mask;
  }
  *n = s.slots[j].name;
  // Backward-shift deletion keeps probe chains intact without tombstones.
  uint64_t hole = j;
  for (uint64_t k = (j + 1) & s.mask; s.slots[k].key; k = (k + 1) & s.mask) {
    uint64_t home = (hash_of(reveal(s.slots[k].key)) >> kStripeBits) & s.mask;
    // Move k into the hole if its home is not cyclically in (hole, k].
    bool between = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
    if (!between) {
      s.slots[hole] = s.slots[k];
      hole = k;
    }
  }
  s.slots[hole] = Slot{};
  --s.used;
  return true;
}

bool peek(const void *p, Name *n) {
  if (g_direct) {
    if (const uint64_t *w = g_words.word(p, false)) {
      if (uint64_t v = load_word(w)) {
        *n = decode(v);
        return true;
      }
    }
    if (!g_table_used.load(std::memory_order_relaxed)) return false;
  }
  uint64_t a = reinterpret_cast<uint64_t>(p);
  uint64_t h = hash_of(a);
  const Stripe &s = stripe_of(a);
  if (!s.slots) return false;
  uint64_t key = disguise(a);
  uint64_t j = (h >> kStripeBits) & s.mask;
  for (uint64_t probes = 0; probes <= s.mask; ++probes) {
    if (s.slots[j].key == key) {
      *n = s.slots[j].name;
      return true;
    }
    if (!s.slots[j].key) return false;
    j = (j + 1) & s.mask;
  }
  return false;
}

void lock_all() {
  for (auto &s : g_stripes) s.lock.lock();
}
void unlock_all() {
  for (auto &s : g_stripes) s.lock.unlock();
}
void after_fork_child() {
  // The child's capture names blocks afresh: blocks inherited from the parent are not sampled in
  // it (their frees become plain frees there).
  g_words.clear();
  for (auto &s : g_stripes) {
    s.lock.reset();
    for (uint64_t i = 0; s.slots && i <= s.mask; ++i) s.slots[i] = Slot{};
    s.used = 0;
  }
}

}  // namespace hs::sampled_blocks
