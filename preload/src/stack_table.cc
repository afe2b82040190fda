#include "stack_table.h"

#include <pthread.h>

#include "private_heap.h"
#include "thread_state.h"
#include "tracer.h"

namespace hs {
namespace {

struct Slot {
  uint64_t hash;  // 0 = empty
  uint32_t id;
};

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
Slot *g_slots = nullptr;
size_t g_mask = 0;
size_t g_used = 0;
uint32_t g_next_id = 1;

uint64_t hash_frames(const uintptr_t *frames, int n, bool truncated) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ uint64_t(n) ^ (truncated ? 0x5bd1e995ull : 0);
  for (int i = 0; i < n; ++i) h = mix64(h ^ frames[i]) + 0x9e3779b97f4a7c15ull;
  return h ? h : 1;
}

bool grow() {
  size_t cap = g_mask ? (g_mask + 1) * 2 : 4096;
  auto *slots = heap::make_array<Slot>(cap);
  if (!slots) return false;
  for (size_t i = 0; g_slots && i <= g_mask; ++i) {
    if (!g_slots[i].hash) continue;
    size_t j = g_slots[i].hash & (cap - 1);
    while (slots[j].hash) j = (j + 1) & (cap - 1);
    slots[j] = g_slots[i];
  }
  heap::release(g_slots);
  g_slots = slots;
  g_mask = cap - 1;
  return true;
}

void emit_stack(uint32_t id, const uintptr_t *frames, int n, bool truncated) {
  outbox_lock();
  wire::Buf &b = outbox();
  wire::RecordMark m = wire::begin_record(b, wire::kStack);
  b.u64(1, id);
  if (n > 0) {
    size_t at = b.open(2);  // packed frames
    for (int i = 0; i < n; ++i) b.varint(frames[i]);
    b.close(at);
  }
  b.boolean(3, truncated);
  wire::end_record(b, m);
  outbox_unlock();
}

}  // namespace

uint32_t intern_stack(ThreadState *ts, const uintptr_t *frames, int n, bool truncated) {
  uint64_t h = hash_frames(frames, n, truncated);
  StackCacheEntry &c = ts->stack_cache[h & (ThreadState::kStackCacheSize - 1)];
  if (c.hash == h) return c.id;

  uint32_t id = 0;
  bool fresh = false;
  pthread_mutex_lock(&g_mutex);
  if (g_used * 2 >= g_mask || !g_slots) {
    if (!grow()) {
      pthread_mutex_unlock(&g_mutex);
      return 0;
    }
  }
  size_t j = h & g_mask;
  while (g_slots[j].hash && g_slots[j].hash != h) j = (j + 1) & g_mask;
  if (g_slots[j].hash == h) {
    id = g_slots[j].id;
  } else {
    id = g_next_id++;
    g_slots[j] = {h, id};
    ++g_used;
    fresh = true;
    // Emitted while the table lock is held so that no other thread can use this id in an event
    // that reaches the outbox before the stack record does.
    emit_stack(id, frames, n, truncated);
  }
  pthread_mutex_unlock(&g_mutex);
  (void)fresh;
  c = {h, id};
  return id;
}

void stack_table_lock() { pthread_mutex_lock(&g_mutex); }
void stack_table_unlock() { pthread_mutex_unlock(&g_mutex); }

void stack_table_after_fork_child() {
  // The child's capture starts afresh: stacks must be written again before they are used.
  pthread_mutex_init(&g_mutex, nullptr);
  for (size_t i = 0; g_slots && i <= g_mask; ++i) g_slots[i] = {0, 0};
  g_used = 0;
  if (ThreadState *s = t_local.state)
    for (auto &e : s->stack_cache) e = {0, 0};
}

}  // namespace hs
