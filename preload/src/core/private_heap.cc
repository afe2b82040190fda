#include "core/private_heap.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>

#include "core/common.h"

namespace hs::heap {
namespace {

using MiMalloc = void *(*)(size_t);
using MiZalloc = void *(*)(size_t);
using MiRealloc = void *(*)(void *, size_t);
using MiFree = void (*)(void *);

MiMalloc mi_malloc_fn;
MiZalloc mi_zalloc_fn;
MiRealloc mi_realloc_fn;
MiFree mi_free_fn;
using MiIsInHeap = bool (*)(const void *);
MiIsInHeap mi_is_in_heap_region_fn;
using MiUsableSize = size_t (*)(const void *);
MiUsableSize mi_usable_size_fn;
bool loaded;
// The program itself runs on this mimalloc (preloaded or linked): dlopen then gives the same
// instance, and its segments hold the program's blocks as well as the tracer's.
bool shared;

// Child arena: each allocation is preceded by its size, so grow() can copy. The snapshot child's
// scan threads (child_threads.h) allocate from it at once: one compare-and-swap claims the room, no
// lock (a thread holding one could not be waited for by the others without a futex of its own).
bool g_child = false;
uint8_t *g_arena = nullptr;
size_t g_arena_size = 0;
std::atomic<size_t> g_arena_used{0};

void *arena_alloc(size_t n) {
  if (n > g_arena_size) return nullptr;
  size_t need = (n + 8 + 15) & ~size_t(15);
  // Claimed only if it fits, so that a big request that does not (a column's grow) leaves the
  // room to the small ones after it (the snapshot's closing records).
  size_t at = g_arena_used.load(std::memory_order_relaxed);
  do {
    if (need > g_arena_size - at) return nullptr;
  } while (!g_arena_used.compare_exchange_weak(at, at + need, std::memory_order_relaxed));
  uint8_t *p = g_arena + at;
  memcpy(p, &n, 8);
  return p + 8;  // fresh anonymous memory: already zero
}

}  // namespace

bool switch_to_child_arena(size_t bytes, uint64_t *lo, uint64_t *hi) {
  void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return false;
  *lo = reinterpret_cast<uint64_t>(m);
  *hi = *lo + bytes;
  g_arena = static_cast<uint8_t *>(m);
  g_arena_size = bytes;
  g_arena_used.store(0, std::memory_order_relaxed);
  g_child = true;
  return true;
}

bool init() {
  if (loaded) return true;
  // RTLD_LOCAL: mimalloc's malloc/free must never join the global scope (see header).
  // (Looked up in the loader's list of objects: dlopen with RTLD_NOLOAD searches the library path
  // and mallocs on the way, which leaves the program's heap other than it is natively.)
  for (const link_map *l = _r_debug.r_map; l; l = l->l_next) {
    const char *base = l->l_name ? strrchr(l->l_name, '/') : nullptr;
    base = base ? base + 1 : l->l_name;
    if (base && strncmp(base, "libmimalloc.so", 14) == 0) shared = true;
  }
  void *h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  mi_malloc_fn = reinterpret_cast<MiMalloc>(dlsym(h, "mi_malloc"));
  mi_zalloc_fn = reinterpret_cast<MiZalloc>(dlsym(h, "mi_zalloc"));
  mi_realloc_fn = reinterpret_cast<MiRealloc>(dlsym(h, "mi_realloc"));
  mi_free_fn = reinterpret_cast<MiFree>(dlsym(h, "mi_free"));
  mi_is_in_heap_region_fn = reinterpret_cast<MiIsInHeap>(dlsym(h, "mi_is_in_heap_region"));
  mi_usable_size_fn = reinterpret_cast<MiUsableSize>(dlsym(h, "mi_usable_size"));
  loaded = mi_malloc_fn && mi_zalloc_fn && mi_realloc_fn && mi_free_fn;
  return loaded;
}

bool ready() { return loaded; }

bool shared_with_program() { return shared; }

bool owns(const void *p) { return !shared && mi_is_in_heap_region_fn && mi_is_in_heap_region_fn(p); }

static std::atomic<int64_t> g_held{0};
static size_t usable(void *p) { return p && mi_usable_size_fn ? mi_usable_size_fn(p) : 0; }

void *alloc(size_t n) {
  if (HS_UNLIKELY(g_child)) return arena_alloc(n);
  void *p = mi_malloc_fn(n);
  g_held.fetch_add(int64_t(usable(p)), std::memory_order_relaxed);
  return p;
}
void *alloc_zeroed(size_t n) {
  if (HS_UNLIKELY(g_child)) return arena_alloc(n);
  void *p = mi_zalloc_fn(n);
  g_held.fetch_add(int64_t(usable(p)), std::memory_order_relaxed);
  return p;
}
uint64_t held_bytes() {
  int64_t v = g_held.load(std::memory_order_relaxed);
  return v > 0 ? uint64_t(v) : 0;
}
void *grow(void *p, size_t n) {
  if (HS_LIKELY(!g_child)) {
    size_t before = usable(p);
    void *q = mi_realloc_fn(p, n);
    if (q) g_held.fetch_add(int64_t(usable(q)) - int64_t(before), std::memory_order_relaxed);
    return q;
  }
  void *q = arena_alloc(n);
  if (q && p) {
    // A block of the arena has its size before it; one mimalloc gave before the switch (the tail
    // guard's salvage grows the writer's buffers) has the size mimalloc knows (a lock-free read).
    size_t old = 0;
    auto *b = static_cast<uint8_t *>(p);
    if (b > g_arena && b < g_arena + g_arena_size) memcpy(&old, b - 8, 8);
    else if (mi_usable_size_fn) old = mi_usable_size_fn(p);
    memcpy(q, p, old < n ? old : n);
  }
  return q;
}
void release(void *p) {
  if (p && HS_LIKELY(!g_child)) {
    g_held.fetch_sub(int64_t(usable(p)), std::memory_order_relaxed);
    mi_free_fn(p);
  }
}

}  // namespace hs::heap
