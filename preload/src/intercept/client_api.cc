// The functions behind preload/include/heapsnap.h. The header reaches them through weak symbols,
// so they must keep these names and C linkage.
#include <cstring>

#include "heapsnap.h"
#include "core/common.h"
#include "tables/pools.h"
#include "snapshot/snapshot.h"
#include "core/thread_state.h"
#include "core/tracer.h"

using namespace hs;

#define RA() reinterpret_cast<uintptr_t>(__builtin_return_address(0))

HS_EXPORT heapsnap_pool *heapsnap_api_pool_create(const char *name) {
  return reinterpret_cast<heapsnap_pool *>(pools::create(name));
}

HS_EXPORT void heapsnap_api_pool_alloc(heapsnap_pool *pool, const void *p, size_t size) {
  pools::alloc(reinterpret_cast<pools::Pool *>(pool), p, size, RA());
}

HS_EXPORT void heapsnap_api_pool_free(heapsnap_pool *pool, const void *p) {
  pools::release(reinterpret_cast<pools::Pool *>(pool), p);
}

HS_EXPORT void heapsnap_api_moved_ranges(heapsnap_pool *pool, const void *const *old_starts,
                                         const void *const *new_starts, const size_t *lengths, size_t n,
                                         int flags) {
  pools::moved(reinterpret_cast<pools::Pool *>(pool), old_starts, new_starts, lengths, n,
               (flags & HEAPSNAP_COMPACTING) != 0);
}

HS_EXPORT void heapsnap_api_marker(const char *text) {
  if (!tracing() || !text) return;
  ThreadLocal &t = t_local;
  if (t.guard) return;
  ErrnoSaver es;
  enter_sampling(t);
  writer_collect_batches();  // events before the marker stay before it
  outbox_append_marker(t.state ? t.state->tid : 0, text, strnlen(text, 4096));
  leave_sampling(t);
}

HS_EXPORT void heapsnap_api_snapshot(const char *label) {
  if (tracing()) snapshot::request(label);
}

HS_EXPORT int heapsnap_api_active(void) { return tracing() ? 1 : 0; }
