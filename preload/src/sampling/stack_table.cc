#include "sampling/stack_table.h"

#include <pthread.h>

#include "core/private_heap.h"
#include "core/thread_state.h"
#include "core/tracer.h"

namespace hs {
namespace {

// Whole stacks: 64-bit hash of the frames -> leaf node id.
struct StackSlot {
  uint64_t hash;  // 0 = empty
  uint32_t leaf;
};
// Tree nodes: (parent, return address) -> node id. See proto/heapsnap.proto, Stack.
struct NodeSlot {
  uint64_t key;   // mix of parent and address; 0 = empty
  uint64_t addr;
  uint32_t parent;
  uint32_t id;
};

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
StackSlot *g_stacks = nullptr;
size_t g_stack_mask = 0, g_stack_used = 0;
NodeSlot *g_nodes = nullptr;
size_t g_node_mask = 0, g_node_used = 0;
uint32_t g_next_node = 1;
// Address of each node, to delta-encode a child against its parent.
uint64_t *g_node_addr = nullptr;
size_t g_node_addr_cap = 0;

uint64_t node_key(uint32_t parent, uint64_t addr) {
  uint64_t k = mix64(addr ^ (uint64_t(parent) << 40) ^ 0x2545F4914F6CDD1Dull);
  return k ? k : 1;
}

template <typename Slot>
bool grow_table(Slot *&slots, size_t &mask, size_t min_cap, uint64_t Slot::*key) {
  size_t cap = mask ? (mask + 1) * 2 : min_cap;
  auto *n = heap::make_array<Slot>(cap);
  if (!n) return false;
  for (size_t i = 0; slots && i <= mask; ++i) {
    if (!(slots[i].*key)) continue;
    size_t j = (slots[i].*key) & (cap - 1);
    while (n[j].*key) j = (j + 1) & (cap - 1);
    n[j] = slots[i];
  }
  heap::release(slots);
  slots = n;
  mask = cap - 1;
  return true;
}

// Finds or creates the node (parent, addr). *fresh tells whether it was created.
bool intern_node(uint32_t parent, uint64_t addr, uint32_t *id, bool *fresh) {
  if (!g_nodes || (g_node_used + 1) * 2 > g_node_mask + 1) {
    if (!grow_table(g_nodes, g_node_mask, 4096, &NodeSlot::key)) return false;
  }
  uint64_t k = node_key(parent, addr);
  size_t j = k & g_node_mask;
  while (g_nodes[j].key) {
    if (g_nodes[j].key == k && g_nodes[j].parent == parent && g_nodes[j].addr == addr) {
      *id = g_nodes[j].id;
      *fresh = false;
      return true;
    }
    j = (j + 1) & g_node_mask;
  }
  if (g_next_node >= g_node_addr_cap) {
    size_t cap = g_node_addr_cap ? g_node_addr_cap * 2 : 4096;
    auto *a = static_cast<uint64_t *>(heap::grow(g_node_addr, cap * sizeof(uint64_t)));
    if (!a) return false;
    g_node_addr = a;
    g_node_addr_cap = cap;
  }
  uint32_t nid = g_next_node++;
  g_node_addr[nid] = addr;
  g_nodes[j] = {k, addr, parent, nid};
  ++g_node_used;
  *id = nid;
  *fresh = true;
  return true;
}

}  // namespace

uint32_t intern_stack(ThreadState *ts, const uintptr_t *frames, int n, bool truncated) {
  uint64_t h = hash_frames(frames, n, truncated);
  StackCacheEntry &c = ts->stack_cache[h & (ThreadState::kStackCacheSize - 1)];
  if (c.hash == h) return c.id;
  return intern_stack_hashed(ts, frames, n, truncated, h);
}

uint32_t intern_stack_hashed(ThreadState *ts, const uintptr_t *frames, int n, bool truncated,
                             uint64_t h) {
  StackCacheEntry &c = ts->stack_cache[h & (ThreadState::kStackCacheSize - 1)];
  pthread_mutex_lock(&g_mutex);
  if (!g_stacks || (g_stack_used + 1) * 2 > g_stack_mask + 1) {
    if (!grow_table(g_stacks, g_stack_mask, 4096, &StackSlot::hash)) {
      pthread_mutex_unlock(&g_mutex);
      return 0;
    }
  }
  size_t j = h & g_stack_mask;
  while (g_stacks[j].hash && g_stacks[j].hash != h) j = (j + 1) & g_stack_mask;
  uint32_t leaf = g_stacks[j].hash == h ? g_stacks[j].leaf : 0;
  if (!leaf) {
    // Walk from the outermost frame to the leaf; the new nodes form one chain at the end. The
    // record is written while the lock is held, so no event can use the id before it is defined.
    uint32_t parent = 0, first_new = 0, parent_of_first = 0;
    int first_new_index = -1;
    bool ok = true;
    int total = n + (truncated ? 1 : 0);
    for (int k = 0; k < total && ok; ++k) {
      // k = 0 is the outermost: the truncation marker (address 0) if any, then frames[n-1] ...
      uint64_t addr = truncated ? (k == 0 ? 0 : frames[n - k]) : frames[n - 1 - k];
      bool fresh = false;
      uint32_t id = 0;
      ok = intern_node(parent, addr, &id, &fresh);
      if (ok && fresh && first_new_index < 0) {
        first_new_index = k;
        first_new = id;
        parent_of_first = parent;
      }
      parent = id;
    }
    if (!ok || total == 0) {
      pthread_mutex_unlock(&g_mutex);
      return 0;
    }
    leaf = parent;
    g_stacks[j] = {h, leaf};
    ++g_stack_used;
    if (first_new_index >= 0) {
      outbox_lock();
      wire::Buf &b = outbox();
      wire::RecordMark m = wire::begin_record(b, wire::kStack);
      b.u64(1, leaf);
      b.u64(2, parent_of_first);
      b.u64(3, first_new);
      size_t at = b.open(4);
      uint64_t prev = parent_of_first ? g_node_addr[parent_of_first] : 0;
      for (uint32_t id = first_new; id <= leaf; ++id) {
        uint64_t a = g_node_addr[id];
        b.varint(wire::zigzag(int64_t(a - prev)));
        prev = a;
      }
      b.close(at);
      wire::end_record(b, m);
      outbox_unlock();
    }
  }
  pthread_mutex_unlock(&g_mutex);
  c = {h, leaf};
  return leaf;
}

void stack_table_lock() { pthread_mutex_lock(&g_mutex); }
void stack_table_unlock() { pthread_mutex_unlock(&g_mutex); }

void stack_table_after_fork_child() {
  // The child's capture starts afresh: stacks must be written again before they are used.
  pthread_mutex_init(&g_mutex, nullptr);
  for (size_t i = 0; g_stacks && i <= g_stack_mask; ++i) g_stacks[i] = {0, 0};
  g_stack_used = 0;
  for (size_t i = 0; g_nodes && i <= g_node_mask; ++i) g_nodes[i] = NodeSlot{};
  g_node_used = 0;
  g_next_node = 1;
  if (ThreadState *s = t_local.state) {
    for (auto &e : s->stack_cache) e = {0, 0};
    fast_unwind::forget_ids(s->unwind_cache);
  }
}

}  // namespace hs
