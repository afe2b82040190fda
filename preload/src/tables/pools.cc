#include "tables/pools.h"

#include <algorithm>
#include <cstring>

#include "tables/call_sites.h"
#include "core/config.h"
#include "tables/info_shadow.h"
#include "core/private_heap.h"
#include "sampling/sampled_path.h"
#include "core/thread_state.h"
#include "core/tracer.h"

namespace hs::pools {
namespace {

Pool *g_pools[kMaxPools];
std::atomic<uint32_t> g_count{0};

HS_INLINE uint64_t home(const Pool *p, uint64_t addr) { return mix64(addr) & p->mask; }

bool grow(Pool *pool) {
  uint64_t cap = pool->mask ? (pool->mask + 1) * 2 : 1024;
  auto *slots = heap::make_array<Object>(cap);
  if (!slots) return false;
  for (uint64_t i = 0; pool->slots && i <= pool->mask; ++i) {
    if (!pool->slots[i].addr_d) continue;
    uint64_t j = mix64(reveal(pool->slots[i].addr_d)) & (cap - 1);
    while (slots[j].addr_d) j = (j + 1) & (cap - 1);
    slots[j] = pool->slots[i];
  }
  heap::release(pool->slots);
  pool->slots = slots;
  pool->mask = cap - 1;
  return true;
}

// Under pool->lock.
bool insert(Pool *pool, const Object &o) {
  if (!pool->slots || (pool->used + 1) * 2 > pool->mask + 1) {
    if (!grow(pool)) return false;
  }
  uint64_t j = home(pool, reveal(o.addr_d));
  while (pool->slots[j].addr_d && pool->slots[j].addr_d != o.addr_d) j = (j + 1) & pool->mask;
  if (!pool->slots[j].addr_d) ++pool->used;
  pool->slots[j] = o;
  return true;
}

// Under pool->lock. Backward-shift deletion, as in sampled_blocks.cc.
bool take(Pool *pool, uint64_t addr, Object *out) {
  if (!pool->slots) return false;
  uint64_t key = disguise(addr);
  uint64_t j = home(pool, addr);
  while (pool->slots[j].addr_d != key) {
    if (!pool->slots[j].addr_d) return false;
    j = (j + 1) & pool->mask;
  }
  *out = pool->slots[j];
  uint64_t hole = j;
  for (uint64_t k = (j + 1) & pool->mask; pool->slots[k].addr_d; k = (k + 1) & pool->mask) {
    uint64_t h = home(pool, reveal(pool->slots[k].addr_d));
    bool between = hole <= k ? (h > hole && h <= k) : (h > hole || h <= k);
    if (!between) {
      pool->slots[hole] = pool->slots[k];
      hole = k;
    }
  }
  pool->slots[hole] = Object{};
  --pool->used;
  return true;
}

struct Range {
  uint64_t old_start, new_start, length;
};

}  // namespace

Pool *create(const char *name) {
  if (!tracing()) return nullptr;
  ThreadLocal &t = t_local;
  enter_sampling(t);
  Pool *pool = nullptr;
  uint32_t index = g_count.load(std::memory_order_relaxed);
  if (index < kMaxPools) {
    pool = static_cast<Pool *>(heap::alloc_zeroed(sizeof(Pool)));
    if (pool) {
      index = g_count.fetch_add(1);
      if (index >= kMaxPools) {
        heap::release(pool);
        pool = nullptr;
      } else {
        pool->id = index + 1;
        size_t n = name ? strlen(name) : 0;
        if (n >= sizeof(pool->name)) n = sizeof(pool->name) - 1;
        if (n) memcpy(pool->name, name, n);
        g_pools[index] = pool;
        outbox_lock();
        wire::RecordMark m = wire::begin_record(outbox(), wire::kPool);
        outbox().u64(1, pool->id);
        outbox().str(2, pool->name);
        outbox().u64(3, coarse_rel_ns());
        wire::end_record(outbox(), m);
        outbox_unlock();
      }
    }
  }
  leave_sampling(t);
  return pool;
}

void alloc(Pool *pool, const void *p, size_t size, uintptr_t ra) {
  if (!pool || !p || !tracing()) return;
  ThreadLocal &t = t_local;
  if (t.guard) return;
  t.countdown -= int64_t(size);
  bool sampled = false;
  if (HS_UNLIKELY(t.countdown <= 0)) sampled = reach_sample_point(t, size);
  Object o{disguise(p), size, 0, 0, 0, uint32_t(coarse_rel_ns() / 1000000)};
  if (info::enabled) o.site = call_sites::intern(ra);
  if (sampled) record_pool_alloc(t, pool->id, p, size, ra, &o.id, &o.stack);
  enter_sampling(t);
  pool->lock.lock();
  insert(pool, o);
  pool->lock.unlock();
  leave_sampling(t);
}

void release(Pool *pool, const void *p) {
  if (!pool || !p || !tracing()) return;
  ThreadLocal &t = t_local;
  if (t.guard) return;
  Object o;
  enter_sampling(t);
  pool->lock.lock();
  bool found = take(pool, reinterpret_cast<uint64_t>(p), &o);
  pool->lock.unlock();
  leave_sampling(t);
  if (found && o.id) record_pool_free(t, pool->id, o.id, o.stack);
}

void moved(Pool *pool, const void *const *olds, const void *const *news, const size_t *lens, size_t n,
           bool compacting) {
  if (!pool || !tracing()) return;
  ThreadLocal &t = t_local;
  if (t.guard) return;
  ErrnoSaver es;
  enter_sampling(t);
  // The events of every thread so far go first, so the analyzer applies the move after them.
  writer_collect_batches();
  auto *ranges = static_cast<Range *>(heap::alloc((n ? n : 1) * sizeof(Range)));
  if (!ranges) {
    leave_sampling(t);
    return;
  }
  for (size_t i = 0; i < n; ++i)
    ranges[i] = {reinterpret_cast<uint64_t>(olds[i]), reinterpret_cast<uint64_t>(news[i]), lens[i]};
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kMoves);
  outbox().u64(1, pool->id);
  outbox().u64(2, coarse_rel_ns());
  outbox().u64(3, t.state ? t.state->tid : 0);
  size_t at = outbox().open(4);
  uint64_t prev = 0;
  for (size_t i = 0; i < n; ++i) {
    outbox().varint(wire::zigzag(int64_t(ranges[i].old_start - prev)));
    prev = ranges[i].old_start;
  }
  outbox().close(at);
  at = outbox().open(5);
  prev = 0;
  for (size_t i = 0; i < n; ++i) {
    outbox().varint(wire::zigzag(int64_t(ranges[i].new_start - prev)));
    prev = ranges[i].new_start;
  }
  outbox().close(at);
  at = outbox().open(6);
  for (size_t i = 0; i < n; ++i) outbox().varint(ranges[i].length);
  outbox().close(at);
  outbox().boolean(7, compacting);
  wire::end_record(outbox(), m);
  outbox_unlock();

  // Apply to the pool's table: every object moves by its range, or dies if compacting and no
  // range covers it. Ranges sorted by old start for a binary search per object.
  std::sort(ranges, ranges + n, [](const Range &a, const Range &b) { return a.old_start < b.old_start; });
  pool->lock.lock();
  Object *old_slots = pool->slots;
  uint64_t old_mask = pool->mask;
  pool->slots = nullptr;
  pool->mask = 0;
  pool->used = 0;
  for (uint64_t i = 0; old_slots && i <= old_mask; ++i) {
    Object o = old_slots[i];
    if (!o.addr_d) continue;
    uint64_t a = reveal(o.addr_d);
    const Range *r = std::upper_bound(ranges, ranges + n, a, [](uint64_t v, const Range &x) { return v < x.old_start; });
    bool covered = r != ranges && a < (r - 1)->old_start + (r - 1)->length;
    if (covered) o.addr_d = disguise((r - 1)->new_start + (a - (r - 1)->old_start));
    else if (compacting) continue;  // did not survive (the analyzer infers this from the record)
    insert(pool, o);
  }
  pool->lock.unlock();
  heap::release(old_slots);
  heap::release(ranges);
  leave_sampling(t);
}

Pool *pool_at(uint32_t index) {
  return index < g_count.load(std::memory_order_relaxed) && index < kMaxPools ? g_pools[index] : nullptr;
}

}  // namespace hs::pools
