#include "sampling/unwinder.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "core/config.h"

// Under __SANITIZE_THREAD__ (only in the shim's ThreadSanitizer unit test, tests/unit/
// shim_concurrency_test.cc, build-tsan/) the libunwind path uses glibc's backtrace: libunwind's
// per-thread trace cache frees itself in the last round of a thread's TSD destructors, after TSan
// has let go of the thread, and TSan crashes in the mutex it takes (libunwind also exports
// `backtrace`, so that test links without libunwind). glibc's backtrace keeps no per-thread state.

namespace hs::unwind {

int g_mode = kFast;

namespace {

// kCheck's tallies. The first stacks that differed are kept for the report.
std::atomic<uint64_t> g_walks{0}, g_same{0}, g_differ{0}, g_declined{0};
std::atomic<uint64_t> g_why[6];  // per fast_unwind::Declined (index -reason)
std::atomic<uintptr_t> g_no_rule_pc{0};
constexpr int kShown = 24;
struct Shown {
  int fast_n, lib_n;
  bool fast_trunc, lib_trunc;
  uintptr_t fast[kShown], lib[kShown];
};
Shown g_first_difference;
std::atomic<bool> g_have_difference{false};

}  // namespace

void init() {
  g_mode = config.unwinder;
  fast_unwind::set_sampling(config.sample_bytes);
#if !defined(__SANITIZE_THREAD__)
  // Per-thread caching makes unw_backtrace's fast path (x86_64 frame classification cache)
  // effective; measured ~0.5 us per stack on this class of machine.
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
#endif
}

int capture_checked(uintptr_t caller_ra, Buffer &b, int max_depth, bool *truncated, const uintptr_t **first,
                    fast_unwind::Cache *&cache, uint64_t lo, uint64_t hi) {
  g_walks.fetch_add(1, std::memory_order_relaxed);
  const uintptr_t *frames;
  uint32_t *id = nullptr;  // (unused: the check interns libunwind's frames every time)
  int n = fast_unwind::walk(cache, lo, hi, &frames, &id);
  int lib_n = capture_libunwind(caller_ra, b, max_depth, truncated, first);
  if (n < 0) {
    g_declined.fetch_add(1, std::memory_order_relaxed);
    if (-n < 6) g_why[-n].fetch_add(1, std::memory_order_relaxed);
    if (n == fast_unwind::kNoRule) g_no_rule_pc.store(fast_unwind::declined_pc(cache), std::memory_order_relaxed);
    return lib_n;
  }
  Buffer scratch;
  bool fast_trunc = false;
  const uintptr_t *fast_first = nullptr;
  int fast_n = strip_own_frames(caller_ra, frames, n, scratch, max_depth, &fast_trunc, &fast_first);
  bool same = fast_n == lib_n && fast_trunc == *truncated &&
              memcmp(fast_first, *first, size_t(lib_n) * sizeof(uintptr_t)) == 0;
  if (same) {
    g_same.fetch_add(1, std::memory_order_relaxed);
  } else {
    g_differ.fetch_add(1, std::memory_order_relaxed);
    if (!g_have_difference.exchange(true)) {
      Shown &s = g_first_difference;
      s.fast_n = fast_n;
      s.lib_n = lib_n;
      s.fast_trunc = fast_trunc;
      s.lib_trunc = *truncated;
      for (int i = 0; i < kShown; ++i) {
        s.fast[i] = i < fast_n ? fast_first[i] : 0;
        s.lib[i] = i < lib_n ? (*first)[i] : 0;
      }
    }
  }
  return lib_n;  // the check records libunwind's stacks
}

void write_check_report(const char *path) {
  if (g_mode != kCheck || !path || !*path) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);  // every process of the run adds its own
  if (fd < 0) return;
  char line[512];
  int len = snprintf(line, sizeof(line), "walks %llu same %llu differ %llu declined %llu\n",
                     (unsigned long long)g_walks.load(), (unsigned long long)g_same.load(),
                     (unsigned long long)g_differ.load(), (unsigned long long)g_declined.load());
  (void)!write(fd, line, size_t(len));
  len = snprintf(line, sizeof(line),
                 "declined: other stack %llu, no rule %llu (last at %#lx), out of stack %llu, too deep %llu, "
                 "no memory %llu\n",
                 (unsigned long long)g_why[1].load(), (unsigned long long)g_why[2].load(),
                 (unsigned long)g_no_rule_pc.load(), (unsigned long long)g_why[3].load(),
                 (unsigned long long)g_why[4].load(), (unsigned long long)g_why[5].load());
  (void)!write(fd, line, size_t(len));
  if (g_have_difference.load()) {
    const Shown &s = g_first_difference;
    for (int which = 0; which < 2; ++which) {
      int n = which ? s.lib_n : s.fast_n;
      len = snprintf(line, sizeof(line), "%s %d frames%s:", which ? "libunwind" : "walker", n,
                     (which ? s.lib_trunc : s.fast_trunc) ? " (truncated)" : "");
      (void)!write(fd, line, size_t(len));
      for (int i = 0; i < n && i < kShown; ++i) {
        len = snprintf(line, sizeof(line), " %#lx", (unsigned long)(which ? s.lib[i] : s.fast[i]));
        (void)!write(fd, line, size_t(len));
      }
      (void)!write(fd, "\n", 1);
    }
  }
  close(fd);
}

}  // namespace hs::unwind
