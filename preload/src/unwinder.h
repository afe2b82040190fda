// Stack capture for sampled allocations only (never on the fast path).
#pragma once
#include <cstddef>
#include <cstdint>

#include "common.h"

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
// Slots for the shim's own frames above the caller's (the recording function, its caller).
constexpr int kOwnFrames = 8;

// Room for a capture: the caller's frames, after the shim's own.
struct Buffer {
  void *raw[kMaxDepth + kOwnFrames];
};

// Unwinds into b and returns the number of frames, leaf first, starting at the frame that called
// the allocation function whose return address is `caller_ra` (the shim's own frames are
// dropped); *first points at it inside b (no copy). *truncated is set when `max_depth` cut the
// stack. Inline, so that the recording function calls the unwinder directly: every frame of the
// shim's own costs a trace-cache lookup in libunwind, like any frame of the program.
HS_INLINE int capture(uintptr_t caller_ra, Buffer &b, int max_depth, bool *truncated,
                      const uintptr_t **first) {
  static_assert(sizeof(void *) == sizeof(uintptr_t), "frames are addresses");
  if (max_depth > kMaxDepth) max_depth = kMaxDepth;
  int n = HS_UNWIND_BACKTRACE(b.raw, max_depth + kOwnFrames);
  int start = 0;
  while (start < n && start < kOwnFrames && reinterpret_cast<uintptr_t>(b.raw[start]) != caller_ra)
    ++start;
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
  *first = reinterpret_cast<const uintptr_t *>(&b.raw[start]);
  return count;
}

void init();

}  // namespace hs::unwind
