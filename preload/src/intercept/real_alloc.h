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

// Whether the program's calls to malloc reach the shim: false when another module defines malloc
// ahead of it in the lookup order (an allocator preloaded before the shim, or one linked into the
// executable), whose name then goes into who (n bytes). The shim would see none of the program's
// allocations.
bool shim_is_first(char *who, size_t n);

// Whether a loaded object calls another allocator's own entry points (jemalloc's mallocx family,
// tcmalloc's tc_*, mimalloc's mi_*), which bypass malloc and free: what goes through them is not
// traced. *what (n bytes) names the first such call and its caller.
bool direct_allocator_api(char *what, size_t n);

}  // namespace hs::real
