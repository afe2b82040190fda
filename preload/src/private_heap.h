// The tracer's own memory: a mimalloc instance the traced program never sees.
//
// Debian ships mimalloc only as a shared library that also exports malloc/free. Linking it into
// the shim would put those symbols in the global scope ahead of glibc, silently switching the
// program's heap. Loading it with dlopen(RTLD_LOCAL) keeps its symbols private; we call only its
// mi_* entry points through pointers. tests/integration checks that the program's blocks still come
// from glibc.
#pragma once
#include <cstddef>

namespace hs::heap {

// Loads mimalloc. Returns false (and tracing stays off) if it cannot be loaded.
bool init();
bool ready();

void *alloc(size_t n);             // never returns memory of the program's allocator
void *alloc_zeroed(size_t n);
void *grow(void *p, size_t n);     // realloc
void release(void *p);

template <typename T>
T *make_array(size_t n) { return static_cast<T *>(alloc_zeroed(n * sizeof(T))); }

}  // namespace hs::heap
