#include "unwinder.h"

#if defined(__SANITIZE_THREAD__)
// Only in the shim's ThreadSanitizer unit test (tests/unit/shim_concurrency_test.cc, build-tsan/):
// libunwind's per-thread trace cache frees itself in the last round of a thread's TSD
// destructors, after TSan has let go of the thread, and TSan crashes in the mutex it takes
// (libunwind also exports `backtrace`, so that test links without libunwind). glibc's backtrace
// keeps no per-thread state.
#include <execinfo.h>
#else
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

namespace hs::unwind {

void init() {
#if !defined(__SANITIZE_THREAD__)
  // Per-thread caching makes unw_backtrace's fast path (x86_64 frame classification cache)
  // effective; measured ~0.5 us per stack on this class of machine.
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
#endif
}

int capture(uintptr_t caller_ra, uintptr_t *frames, int max_depth, bool *truncated) {
  // A few extra slots for the shim's own frames (hook, slow path, this function).
  constexpr int kOwnFrames = 8;
  void *raw[kMaxDepth + kOwnFrames];
  if (max_depth > kMaxDepth) max_depth = kMaxDepth;
#if defined(__SANITIZE_THREAD__)
  int n = backtrace(raw, max_depth + kOwnFrames);
#else
  int n = unw_backtrace(raw, max_depth + kOwnFrames);
#endif
  int start = 0;
  while (start < n && start < kOwnFrames && reinterpret_cast<uintptr_t>(raw[start]) != caller_ra)
    ++start;
  if (start == n || start == kOwnFrames) {
    // The caller's frame was not found (e.g. a tail call): keep the caller address alone first.
    frames[0] = caller_ra;
    *truncated = false;
    return 1;
  }
  int count = n - start;
  *truncated = count > max_depth;
  if (count > max_depth) count = max_depth;
  for (int i = 0; i < count; ++i) frames[i] = reinterpret_cast<uintptr_t>(raw[start + i]);
  return count;
}

}  // namespace hs::unwind
