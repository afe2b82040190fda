#include "snapshot/child_threads.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "core/common.h"
#include "core/config.h"

namespace hs::snapshot::child::threads {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == 4, "a futex word");

#if defined(__x86_64__)
// A system call that writes no errno (see child_threads.h: a worker shares its starter's TLS).
HS_INLINE long raw(long n, long a = 0, long b = 0, long c = 0, long d = 0) {
  long ret;
  register long r10 asm("r10") = d;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
}

// A worker's stack: its frames are the scan loop's and, at worst, the fault handler's.
constexpr size_t kStackBytes = size_t(256) << 10, kGuardBytes = 4096;

struct Start {
  void (*fn)(void *, uint32_t);
  void *arg;
  uint32_t k;
  // The thread's id while it runs: set by the kernel before clone() returns (CLONE_PARENT_SETTID),
  // cleared and woken at its exit (CLONE_CHILD_CLEARTID).
  volatile int32_t tid;
};

int worker_main(void *p) {
  auto *s = static_cast<Start *>(p);
  s->fn(s->arg, s->k);
  return 0;  // glibc's clone() then makes the exit system call: this thread only
}
#endif

}  // namespace

uint32_t wanted() {
  if (config.snapshot_threads) return config.snapshot_threads;
#if defined(__x86_64__)
  cpu_set_t set;
  CPU_ZERO(&set);
  uint32_t n = sched_getaffinity(0, sizeof(set), &set) == 0 ? uint32_t(CPU_COUNT(&set)) : 1;
  if (n > kMaxThreads) n = kMaxThreads;
  return n ? n : 1;
#else
  return 1;
#endif
}

void wait_while(const std::atomic<uint32_t> &word, uint32_t value) {
#if defined(__x86_64__)
  if (word.load(std::memory_order_acquire) == value)
    raw(SYS_futex, long(&word), FUTEX_WAIT_PRIVATE, long(value), 0);
#else
  while (word.load(std::memory_order_acquire) == value) sched_yield();
#endif
}

void wake_all(const std::atomic<uint32_t> &word) {
#if defined(__x86_64__)
  raw(SYS_futex, long(&word), FUTEX_WAKE_PRIVATE, INT_MAX, 0);
#else
  (void)word;
#endif
}

uint32_t run(uint32_t n, void (*fn)(void *, uint32_t), void *arg) {
  uint32_t started = 0;
#if defined(__x86_64__)
  if (n > 64) n = 64;
  static Start starts[64];
  constexpr int kFlags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                         CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  for (uint32_t k = 1; k < n; ++k) {
    // Stacks come from mmap (never the program's allocator), after the child read the program's
    // mappings: no root scan sees them. Never unmapped: the child exits soon after.
    void *m = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) break;
    if (mprotect(m, kGuardBytes, PROT_NONE) != 0) break;
    Start &s = starts[started];
    s = {fn, arg, k, 0};
    void *top = static_cast<uint8_t *>(m) + kGuardBytes + kStackBytes;
    pid_t *tid = const_cast<pid_t *>(reinterpret_cast<volatile pid_t *>(&s.tid));
    if (clone(worker_main, top, kFlags, &s, tid, nullptr, tid) < 0) break;
    ++started;
  }
#endif
  fn(arg, 0);
#if defined(__x86_64__)
  for (uint32_t i = 0; i < started; ++i)
    for (int32_t t; (t = starts[i].tid) != 0;)
      raw(SYS_futex, long(&starts[i].tid), FUTEX_WAIT, long(t), 0);  // (not _PRIVATE: the kernel's exit wake is shared)
#endif
  return started + 1;
}

}  // namespace hs::snapshot::child::threads
