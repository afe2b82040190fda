// Usable size of a live block, needed on every traced malloc and free (requested = usable - slack,
// see shadow_map.h). Calling malloc_usable_size through a pointer costs two indirect calls per
// malloc+free pair; when the next allocator is glibc's, its chunk header (the word before the
// block: chunk size | flags) gives the same answer inline. init() checks that on real blocks of
// several sizes (small, large, mmapped) and falls back to the call when anything differs.
#pragma once
#include <cstddef>

#include "core/common.h"
#include "intercept/real_alloc.h"

namespace hs::usable {

extern bool g_glibc_layout HS_HIDDEN;
// False when the next allocator hands out blocks less than 8 bytes apart: the byte shadow cannot
// tell them apart, and tracing is refused (init(), tracer.cc).
extern bool g_blocks_aligned HS_HIDDEN;
// The shared library the program's allocator lives in, when it is not glibc's (jemalloc, tcmalloc,
// mimalloc): its data is the allocator's bookkeeping (free lists, transfer caches), whose stale
// pointers to blocks it handed out again are no roots of the program. "" otherwise.
extern char g_allocator_path[256] HS_HIDDEN;

HS_INLINE size_t glibc_usable(const void *p) {
  size_t head = static_cast<const size_t *>(p)[-1];
  size_t chunk = head & ~size_t(7);
  return (head & 2) ? chunk - 2 * sizeof(size_t) : chunk - sizeof(size_t);  // 2 = IS_MMAPPED
}

HS_INLINE size_t of(void *p) {
  if (HS_LIKELY(g_glibc_layout)) return glibc_usable(p);
  return real::fn.usable_size(p);
}

// A block's base for its shadow byte (shadow_map.h: requested = base - code). Under glibc's layout
// the chunk size itself: usable + 8 for a chunk of the heap, usable + 16 for an mmapped one (whose
// header is a word longer), so that the fast paths compute it with no branch on the chunk's kind
// and the code (slack + 8) with one subtraction. The code is never 0 (a chunk holds at least its
// size word more than the request) and fits the byte for every heap chunk glibc makes for a plain
// malloc (slack at most 24).
// Under any other allocator, kDirectBase: the byte holds the requested size itself (126 - code for
// requests up to 125 bytes; larger ones in the large form, with the size in the next 8 bytes of
// shadow, inside the block's own granules), so that no malloc and no free calls the allocator's
// malloc_usable_size (under jemalloc those two calls were 80 instructions of every pair).
constexpr size_t kDirectBase = 126;
HS_INLINE size_t glibc_shadow_base(const void *p) {
  return static_cast<const size_t *>(p)[-1] & ~size_t(7);
}

HS_INLINE size_t shadow_base(void *p) {
  if (HS_LIKELY(g_glibc_layout)) return glibc_shadow_base(p);
  return kDirectBase;
}

// The same when the caller already has the block's usable size (of(p)): no second call to another
// allocator's malloc_usable_size.
HS_INLINE size_t shadow_base(void *p, size_t) {
  if (HS_LIKELY(g_glibc_layout)) return glibc_shadow_base(p);
  return kDirectBase;
}

// Decides the layout (and with it the shadow's granule, shadow::set_granule) from probe blocks.
void init();

}  // namespace hs::usable
