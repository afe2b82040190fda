// The allocator the program would have used without the shim ("next" in the lookup order).
//
// Until the shim's constructor has run, calls go to glibc's __libc_* entry points, which need no
// dlsym (dlsym itself allocates, and the loader may call malloc before anything is set up).
// The constructor then resolves the next definitions with dlsym(RTLD_NEXT), so that an allocator
// preloaded after heapsnap keeps working.
#pragma once
#include <cstddef>

#include "core/common.h"

namespace hs::real {

using MallocFn = void *(*)(size_t);
using FreeFn = void (*)(void *);
using CallocFn = void *(*)(size_t, size_t);
using ReallocFn = void *(*)(void *, size_t);
using MemalignFn = void *(*)(size_t, size_t);
using PosixMemalignFn = int (*)(void **, size_t, size_t);
using UsableSizeFn = size_t (*)(void *);

struct Functions {
  MallocFn malloc;
  FreeFn free;
  CallocFn calloc;
  ReallocFn realloc;
  MemalignFn memalign;
  PosixMemalignFn posix_memalign;
  MemalignFn aligned_alloc;
  MallocFn valloc;
  MallocFn pvalloc;
  UsableSizeFn usable_size;
};

extern Functions fn HS_HIDDEN;

// Switches from the __libc_* bootstrap entry points to dlsym(RTLD_NEXT) results.
void resolve_next();

}  // namespace hs::real
