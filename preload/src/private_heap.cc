#include "private_heap.h"

#include <dlfcn.h>

#include "common.h"

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
bool loaded;

}  // namespace

bool init() {
  if (loaded) return true;
  // RTLD_LOCAL: mimalloc's malloc/free must never join the global scope (see header).
  void *h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  mi_malloc_fn = reinterpret_cast<MiMalloc>(dlsym(h, "mi_malloc"));
  mi_zalloc_fn = reinterpret_cast<MiZalloc>(dlsym(h, "mi_zalloc"));
  mi_realloc_fn = reinterpret_cast<MiRealloc>(dlsym(h, "mi_realloc"));
  mi_free_fn = reinterpret_cast<MiFree>(dlsym(h, "mi_free"));
  loaded = mi_malloc_fn && mi_zalloc_fn && mi_realloc_fn && mi_free_fn;
  return loaded;
}

bool ready() { return loaded; }

void *alloc(size_t n) { return mi_malloc_fn(n); }
void *alloc_zeroed(size_t n) { return mi_zalloc_fn(n); }
void *grow(void *p, size_t n) { return mi_realloc_fn(p, n); }
void release(void *p) {
  if (p) mi_free_fn(p);
}

}  // namespace hs::heap
