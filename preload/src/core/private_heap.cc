#include "core/private_heap.h"

#include <dlfcn.h>
#include <sys/mman.h>

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
bool loaded;

// Child arena: each allocation is preceded by its size, so grow() can copy.
bool g_child = false;
uint8_t *g_arena = nullptr;
size_t g_arena_used = 0, g_arena_size = 0;

void *arena_alloc(size_t n) {
  size_t need = (n + 8 + 15) & ~size_t(15);
  if (g_arena_used + need > g_arena_size) return nullptr;
  uint8_t *p = g_arena + g_arena_used;
  g_arena_used += need;
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
  g_arena_used = 0;
  g_child = true;
  return true;
}

bool init() {
  if (loaded) return true;
  // RTLD_LOCAL: mimalloc's malloc/free must never join the global scope (see header).
  void *h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  mi_malloc_fn = reinterpret_cast<MiMalloc>(dlsym(h, "mi_malloc"));
  mi_zalloc_fn = reinterpret_cast<MiZalloc>(dlsym(h, "mi_zalloc"));
  mi_realloc_fn = reinterpret_cast<MiRealloc>(dlsym(h, "mi_realloc"));
  mi_free_fn = reinterpret_cast<MiFree>(dlsym(h, "mi_free"));
  mi_is_in_heap_region_fn = reinterpret_cast<MiIsInHeap>(dlsym(h, "mi_is_in_heap_region"));
  loaded = mi_malloc_fn && mi_zalloc_fn && mi_realloc_fn && mi_free_fn;
  return loaded;
}

bool ready() { return loaded; }

bool owns(const void *p) { return mi_is_in_heap_region_fn && mi_is_in_heap_region_fn(p); }

void *alloc(size_t n) { return HS_UNLIKELY(g_child) ? arena_alloc(n) : mi_malloc_fn(n); }
void *alloc_zeroed(size_t n) { return HS_UNLIKELY(g_child) ? arena_alloc(n) : mi_zalloc_fn(n); }
void *grow(void *p, size_t n) {
  if (HS_LIKELY(!g_child)) return mi_realloc_fn(p, n);
  void *q = arena_alloc(n);
  if (q && p) {
    size_t old;
    memcpy(&old, static_cast<uint8_t *>(p) - 8, 8);
    memcpy(q, p, old < n ? old : n);
  }
  return q;
}
void release(void *p) {
  if (p && HS_LIKELY(!g_child)) mi_free_fn(p);
}

}  // namespace hs::heap
