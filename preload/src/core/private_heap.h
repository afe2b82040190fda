// The tracer's own memory: a mimalloc instance the traced program never sees.
//
// Debian ships mimalloc only as a shared library that also exports malloc/free. Linking it into
// the shim would put those symbols in the global scope ahead of glibc, silently switching the
// program's heap. Loading it with dlopen(RTLD_LOCAL) keeps its symbols private; we call only its
// mi_* entry points through pointers. tests/integration checks that the program's blocks still come
// from glibc.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hs::heap {

// Loads mimalloc. Returns false (and tracing stays off) if it cannot be loaded.
bool init();
bool ready();

void *alloc(size_t n);             // never returns memory of the program's allocator
void *alloc_zeroed(size_t n);
void *grow(void *p, size_t n);     // realloc
void release(void *p);
// Bytes (usable sizes) the tracer holds in mimalloc now: a floor for its own RSS, for the RSS
// parts over time. Counted on the private heap's calls only, never on the program's path.
uint64_t held_bytes();

template <typename T>
T *make_array(size_t n) { return static_cast<T *>(alloc_zeroed(n * sizeof(T))); }

// Whether p lies in memory only the tracer uses: mimalloc's segments, unless the program runs on
// the same mimalloc (then its segments hold the program's blocks too, and this is false).
// Lock-free, usable in the child.
bool owns(const void *p);
// Whether the program uses the same mimalloc (loaded before the tracer's dlopen): then its
// mappings are not the tracer's alone.
bool shared_with_program();

// The snapshot child (a raw fork of a multithreaded process) must not touch mimalloc, whose
// locks another thread may have held at fork time. From this call on, this process allocates
// from a private bump arena of `bytes` (fresh anonymous mappings, never freed: the child exits).
bool switch_to_child_arena(size_t bytes, uint64_t *lo, uint64_t *hi);

}  // namespace hs::heap
