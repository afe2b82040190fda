// Stack capture for sampled allocations only (never on the fast path).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/common.h"
#include "sampling/fast_unwind.h"

#if defined(__SANITIZE_THREAD__)
// Only in the shim's ThreadSanitizer unit test: see unwinder.cc.
#include <execinfo.h>
#define HS_UNWIND_BACKTRACE(buf, n) backtrace(buf, n)
#else
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#define HS_UNWIND_BACKTRACE(buf, n) unw_backtrace(buf, n)
#endif

namespace hs::unwind {

constexpr int kMaxDepth = 256;
// Slots for the shim's own frames above the caller's (the walker, the recording function, its
// caller).
constexpr int kOwnFrames = 8;

// HEAPSNAP_UNWINDER: fast (the shim's walker, libunwind where it declines), libunwind (only), or
// check (both, every stack compared; counts written to HEAPSNAP_UNWIND_CHECK's file at exit).
enum Mode : int { kFast = 0, kLibunwindOnly = 1, kCheck = 2 };
extern int g_mode;

// Room for a capture: the caller's frames, after the shim's own.
struct Buffer {
  void *raw[kMaxDepth + kOwnFrames];
};

// HEAPSNAP_UNWINDER=check's capture: both ways, compared; libunwind's frames handed out.
int capture_checked(uintptr_t caller_ra, Buffer &b, int max_depth, bool *truncated, const uintptr_t **first,
                    fast_unwind::Cache *&cache, uint64_t lo, uint64_t hi);

HS_INLINE int strip_own_frames(uintptr_t caller_ra, const uintptr_t *frames, int n, Buffer &b, int max_depth,
                               bool *truncated, const uintptr_t **first) {
  int start = 0;
  while (start < n && start < kOwnFrames && frames[start] != caller_ra) ++start;
  if (start == n || start == kOwnFrames) {
    // The caller's frame was not found (e.g. a tail call): keep the caller address alone first.
    b.raw[0] = reinterpret_cast<void *>(caller_ra);
    *first = reinterpret_cast<const uintptr_t *>(&b.raw[0]);
    *truncated = false;
    return 1;
  }
  int count = n - start;
  *truncated = count > max_depth;
  if (count > max_depth) count = max_depth;
  *first = frames + start;
  return count;
}

HS_INLINE int capture_libunwind(uintptr_t caller_ra, Buffer &b, int max_depth, bool *truncated,
                                const uintptr_t **first) {
  int n = HS_UNWIND_BACKTRACE(b.raw, max_depth + kOwnFrames);
  return strip_own_frames(caller_ra, reinterpret_cast<const uintptr_t *>(b.raw), n, b, max_depth, truncated,
                          first);
}

// Unwinds and returns the number of frames, leaf first, starting at the frame that called the
// allocation function whose return address is `caller_ra` (the shim's own frames are dropped);
// *first points at them (inside b or the thread's walker cache, no copy). *truncated is set when
// `max_depth` cut the stack. The shim's walker (fast_unwind.h, on the thread's stack [lo, hi))
// goes first, libunwind when it declines. *id: as fast_unwind::walk's (null when libunwind
// walked); when it points at a remembered id, nothing else is set. Inline, so that the recording
// function calls the unwinder directly: every frame of the shim's own is one more frame to step.
HS_INLINE int capture(uintptr_t caller_ra, Buffer &b, int max_depth, bool *truncated, const uintptr_t **first,
                      fast_unwind::Cache *&cache, uint64_t lo, uint64_t hi, uint32_t **id) {
  static_assert(sizeof(void *) == sizeof(uintptr_t), "frames are addresses");
  if (max_depth > kMaxDepth) max_depth = kMaxDepth;
  *id = nullptr;
  if (HS_UNLIKELY(g_mode != kFast)) {
    if (g_mode == kLibunwindOnly) return capture_libunwind(caller_ra, b, max_depth, truncated, first);
    return capture_checked(caller_ra, b, max_depth, truncated, first, cache, lo, hi);
  }
  const uintptr_t *frames;
  int n = fast_unwind::walk(cache, lo, hi, &frames, id);  // (a declined walk leaves *id null)
  if (HS_UNLIKELY(n < 0)) return capture_libunwind(caller_ra, b, max_depth, truncated, first);
  if (*id && **id) return 0;  // the caller takes the remembered id (frames not needed)
  return strip_own_frames(caller_ra, frames, n, b, max_depth, truncated, first);
}

void init();
// kCheck: writes the comparison's counts (and the first stacks that differed) to path.
void write_check_report(const char *path);

}  // namespace hs::unwind
