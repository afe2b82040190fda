/* heapsnap client API: talk to the heapsnap tracer from C or C++.
 *
 * Header-only. A program compiled with just `-I .../preload/include` (no library to link) runs
 * unchanged without the tracer: every call is then one predictable branch on a symbol address
 * that the dynamic linker left null. When the program runs under heapsnap (LD_PRELOAD of
 * libheapsnap_preload.so, or `heapsnap record`), the same calls reach the tracer.
 *
 * This relies on weak undefined symbols, which position-independent executables (Debian's
 * default) resolve at load time. A program linked with -no-pie must add
 * -Wl,-z,dynamic-undefined-weak (GNU ld) for the calls to reach the tracer.
 *
 *   heapsnap_pool *pool = heapsnap_pool_create("arena");
 *   heapsnap_pool_alloc(pool, p, size);          heapsnap_pool_free(pool, p);
 *   heapsnap_moved_ranges(pool, old_starts, new_starts, byte_lengths, n, HEAPSNAP_COMPACTING);
 *   heapsnap_marker("request 1000 done");         heapsnap_snapshot("after warm-up");
 *   if (heapsnap_active()) ...
 *
 * Pools: objects of a custom allocator (arena, GC heap, object pool) that the system allocator
 * never sees. They are first-class blocks for heapsnap: sampled with stacks, in heap snapshots
 * (scanned for pointers; the pool's own memory is not a root), in replay and every query,
 * labelled with the pool's name.
 *
 * Moves (.NET's MovedReferences semantics): an object at old_starts[i] + k is now at
 * new_starts[i] + k, for 0 <= k < lengths[i]. With HEAPSNAP_COMPACTING, every live object of the
 * pool that no range covers did not survive (the pool plays the role of a collected generation);
 * without it, objects no range covers stay where they are. An object keeps its identity
 * (allocation stack and time) across moves.
 */
#ifndef HEAPSNAP_H
#define HEAPSNAP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct heapsnap_pool heapsnap_pool;

#define HEAPSNAP_COMPACTING 1

/* Defined by the tracer (libheapsnap_preload.so); null when it is not loaded. */
extern heapsnap_pool *heapsnap_api_pool_create(const char *name) __attribute__((weak));
extern void heapsnap_api_pool_alloc(heapsnap_pool *pool, const void *p, size_t size) __attribute__((weak));
extern void heapsnap_api_pool_free(heapsnap_pool *pool, const void *p) __attribute__((weak));
extern void heapsnap_api_moved_ranges(heapsnap_pool *pool, const void *const *old_starts,
                                      const void *const *new_starts, const size_t *lengths, size_t n,
                                      int flags) __attribute__((weak));
extern void heapsnap_api_marker(const char *text) __attribute__((weak));
extern void heapsnap_api_snapshot(const char *label) __attribute__((weak));
extern int heapsnap_api_active(void) __attribute__((weak));

#if defined(__GNUC__)
#define HEAPSNAP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HEAPSNAP_UNLIKELY(x) (x)
#endif

/* Registers a pool; returns NULL when not tracing (the other calls accept NULL). */
static inline heapsnap_pool *heapsnap_pool_create(const char *name) {
  return HEAPSNAP_UNLIKELY(heapsnap_api_pool_create != 0) ? heapsnap_api_pool_create(name) : (heapsnap_pool *)0;
}

/* Object p of `size` bytes now lives in the pool. */
static inline void heapsnap_pool_alloc(heapsnap_pool *pool, const void *p, size_t size) {
  if (HEAPSNAP_UNLIKELY(heapsnap_api_pool_alloc != 0)) heapsnap_api_pool_alloc(pool, p, size);
}

/* Object p is gone. */
static inline void heapsnap_pool_free(heapsnap_pool *pool, const void *p) {
  if (HEAPSNAP_UNLIKELY(heapsnap_api_pool_free != 0)) heapsnap_api_pool_free(pool, p);
}

static inline void heapsnap_moved_ranges(heapsnap_pool *pool, const void *const *old_starts,
                                         const void *const *new_starts, const size_t *lengths, size_t n,
                                         int flags) {
  if (HEAPSNAP_UNLIKELY(heapsnap_api_moved_ranges != 0))
    heapsnap_api_moved_ranges(pool, old_starts, new_starts, lengths, n, flags);
}

/* A labelled point on the capture's timeline. */
static inline void heapsnap_marker(const char *text) {
  if (HEAPSNAP_UNLIKELY(heapsnap_api_marker != 0)) heapsnap_api_marker(text);
}

/* Asks for a heap snapshot (taken by the tracer within ~100 ms; needs snapshots enabled).
 * Requests wait their turn, one snapshot at a time, up to 16 of them; more are dropped (a marker
 * at exit counts them). The cap on snapshots (--max-snapshots, default 10) applies. */
static inline void heapsnap_snapshot(const char *label) {
  if (HEAPSNAP_UNLIKELY(heapsnap_api_snapshot != 0)) heapsnap_api_snapshot(label);
}

/* Non-zero when the tracer is loaded and recording. */
static inline int heapsnap_active(void) {
  return HEAPSNAP_UNLIKELY(heapsnap_api_active != 0) ? heapsnap_api_active() : 0;
}

#ifdef __cplusplus
}
#endif

#endif /* HEAPSNAP_H */
