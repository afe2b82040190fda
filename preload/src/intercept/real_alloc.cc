#include "intercept/real_alloc.h"

#include <dlfcn.h>
#include <malloc.h>

extern "C" {
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void *__libc_valloc(size_t);
void *__libc_pvalloc(size_t);
}

namespace hs::real {
namespace {

int bootstrap_posix_memalign(void **out, size_t align, size_t size) {
  // Same checks as glibc: a power of two multiple of sizeof(void*).
  if (align % sizeof(void *) != 0 || (align & (align - 1)) != 0 || align == 0) return 22;  // EINVAL
  void *p = __libc_memalign(align, size);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}

size_t bootstrap_usable_size(void *p) {
  // glibc's malloc_usable_size is shadowed by ours; find it the slow way the first time.
  static UsableSizeFn next = nullptr;
  if (!next) next = reinterpret_cast<UsableSizeFn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  return next ? next(p) : 0;
}

template <typename F>
void pick(F &slot, const char *name) {
  if (void *sym = dlsym(RTLD_NEXT, name)) slot = reinterpret_cast<F>(sym);
}

}  // namespace

Functions fn = {
    __libc_malloc, __libc_free,  __libc_calloc,  __libc_realloc,  __libc_memalign,
    bootstrap_posix_memalign, __libc_memalign, __libc_valloc, __libc_pvalloc, bootstrap_usable_size,
};

void resolve_next() {
  Functions next = fn;
  pick(next.malloc, "malloc");
  pick(next.free, "free");
  pick(next.calloc, "calloc");
  pick(next.realloc, "realloc");
  pick(next.memalign, "memalign");
  pick(next.posix_memalign, "posix_memalign");
  pick(next.aligned_alloc, "aligned_alloc");
  pick(next.valloc, "valloc");
  pick(next.pvalloc, "pvalloc");
  pick(next.usable_size, "malloc_usable_size");
  fn = next;
}

}  // namespace hs::real
