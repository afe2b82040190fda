#include "unwinder.h"

// Under __SANITIZE_THREAD__ (only in the shim's ThreadSanitizer unit test, tests/unit/
// shim_concurrency_test.cc, build-tsan/) capture() uses glibc's backtrace: libunwind's per-thread
// trace cache frees itself in the last round of a thread's TSD destructors, after TSan has let go
// of the thread, and TSan crashes in the mutex it takes (libunwind also exports `backtrace`, so
// that test links without libunwind). glibc's backtrace keeps no per-thread state.

namespace hs::unwind {

void init() {
#if !defined(__SANITIZE_THREAD__)
  // Per-thread caching makes unw_backtrace's fast path (x86_64 frame classification cache)
  // effective; measured ~0.5 us per stack on this class of machine.
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
#endif
}

}  // namespace hs::unwind
