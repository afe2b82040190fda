#include "snapshot/child_threads.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "core/common.h"
#include "core/config.h"
#include "core/private_heap.h"
#include "core/raw_syscall.h"

namespace hs::snapshot::child::threads {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == 4, "a futex word");

#if defined(__x86_64__)
// (see child_threads.h: a worker shares its starter's TLS)
HS_INLINE long raw(long n, long a = 0, long b = 0, long c = 0, long d = 0) { return hs::raw_syscall(n, a, b, c, d); }

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

long raw_syscall(long n, long a, long b, long c, long d) { return hs::raw_syscall(n, a, b, c, d); }

namespace {
#if defined(__x86_64__)
int background_main(void *p) {
  auto *b = static_cast<Background *>(p);
  b->fn(b->arg);
  return 0;
}
#endif
}  // namespace

bool start(Background &b, void (*fn)(void *), void *arg) {
  b.fn = fn;
  b.arg = arg;
  b.started = false;
#if defined(__x86_64__)
  constexpr int kFlags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                         CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  auto *stack = static_cast<uint8_t *>(heap::alloc(kStackBytes));
  if (!stack) return false;
  void *top = reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(stack) + kStackBytes) & ~uintptr_t(15));
  pid_t *tid = const_cast<pid_t *>(reinterpret_cast<volatile pid_t *>(&b.tid));
  b.started = clone(background_main, top, kFlags, &b, tid, nullptr, tid) >= 0;
#endif
  return b.started;
}

void join(Background &b) {
#if defined(__x86_64__)
  if (!b.started) return;
  for (int32_t t; (t = b.tid) != 0;) raw(SYS_futex, long(&b.tid), FUTEX_WAIT, long(t), 0);
  b.started = false;
#else
  (void)b;
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

namespace {

// Thread 0: consumes the chunks made since the last call, in order. True if it consumed any.
bool consume_ready(Ordered &o) {
  bool any = false;
  for (uint32_t k = o.emitted.load(std::memory_order_relaxed); k < o.nchunks; ++k) {
    if (o.done[k % o.nslots].load(std::memory_order_acquire) != k + 1) break;
    o.consume(o.ctx, k, k % o.nslots);
    o.emitted.store(k + 1, std::memory_order_release);
    wake_all(o.emitted);
    any = true;
  }
  return any;
}

// Thread 0 waits for the next chunk in order, consuming meanwhile.
void consume_or_wait(Ordered &o) {
  uint32_t seen = o.completed.load(std::memory_order_acquire);  // (before the check: no lost wake)
  if (!consume_ready(o)) wait_while(o.completed, seen);
}

void ordered_thread(void *arg, uint32_t t) {
  Ordered &o = *static_cast<Ordered *>(arg);
  const bool consumer = t == 0;
  for (;;) {
    if (consumer) consume_ready(o);
    uint32_t k = o.next.fetch_add(1, std::memory_order_relaxed);
    if (k >= o.nchunks) break;
    // Chunk k's slot is free once chunk k - nslots is consumed.
    for (uint32_t e; k >= (e = o.emitted.load(std::memory_order_acquire)) + o.nslots;) {
      if (consumer) consume_or_wait(o);
      else wait_while(o.emitted, e);
    }
    o.produce(o.ctx, k, k % o.nslots, t);
    o.done[k % o.nslots].store(k + 1, std::memory_order_release);
    o.completed.fetch_add(1, std::memory_order_release);
    wake_all(o.completed);
  }
  if (consumer)
    while (o.emitted.load(std::memory_order_relaxed) < o.nchunks) consume_or_wait(o);
}

}  // namespace

uint32_t ordered(Ordered &o, uint32_t n, bool (*slots)(void *ctx, uint32_t nslots)) {
  if (n > o.nchunks) n = o.nchunks ? o.nchunks : 1;  // (a thread without a chunk is no help)
  if (n > 64) n = 64;
  o.nslots = kSlotsPerThread * n;
  o.done = static_cast<std::atomic<uint32_t> *>(heap::alloc_zeroed(size_t(o.nslots) * sizeof(std::atomic<uint32_t>)));
  if (!o.done || !slots(o.ctx, o.nslots)) return 0;
  return run(n, ordered_thread, &o);
}

}  // namespace hs::snapshot::child::threads
