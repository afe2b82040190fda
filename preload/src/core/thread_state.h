// Per-thread state: the hot counters and sampling countdown live in initial-exec TLS (no pointer
// chase, no allocation); everything needed only on the sampled path lives in a ThreadState in the
// private heap, registered so the writer can flush it and read the counters of every live thread.
#pragma once
#include <sched.h>

#include <atomic>
#include <cstdint>

#include "core/common.h"
#include "output/event_batch.h"
#include "sampling/fast_unwind.h"
#include "core/spinlock.h"

namespace hs {

// TLS must be trivially initialized (a non-trivial thread_local would make glibc register a
// destructor, which allocates), so counters are plain integers accessed with relaxed atomics:
// plain loads and stores on x86-64, but well-defined when another thread reads them.
template <typename T>
HS_INLINE T load_relaxed(const T &v) { return __atomic_load_n(&v, __ATOMIC_RELAXED); }
template <typename T>
HS_INLINE void store_relaxed(T &v, T x) { __atomic_store_n(&v, x, __ATOMIC_RELAXED); }
template <typename T>
HS_INLINE T exchange_relaxed(T &v, T x) { return __atomic_exchange_n(&v, x, __ATOMIC_RELAXED); }
// Adds with one add-to-memory instruction: a signal handler that allocates on this thread can
// only run between instructions, so its own update is never lost between a load and a store (as
// it was with load + store). No lock prefix: only the owning thread writes.
template <typename T>
HS_INLINE T add_local(T &a, T d) {
#if defined(__x86_64__)
  static_assert(sizeof(T) == 8, "64-bit counters");
  asm volatile("addq %1, %0" : "+m"(a) : "er"(d));
  return load_relaxed(a);
#else
  return __atomic_add_fetch(&a, d, __ATOMIC_RELAXED);
#endif
}
// The same add, when the result is not needed (no reload of the counter).
template <typename T>
HS_INLINE void add_mem(T &a, T d) {
#if defined(__x86_64__)
  static_assert(sizeof(T) == 8, "64-bit counters");
  asm volatile("addq %1, %0" : "+m"(a) : "er"(d));
#else
  __atomic_add_fetch(&a, d, __ATOMIC_RELAXED);
#endif
}
HS_INLINE void bump(uint64_t &a, uint64_t d) { add_mem(a, d); }
// The subtraction, in one instruction too.
template <typename T>
HS_INLINE void sub_mem(T &a, T d) {
#if defined(__x86_64__)
  static_assert(sizeof(T) == 8, "64-bit counters");
  asm volatile("subq %1, %0" : "+m"(a) : "er"(d));
#else
  __atomic_sub_fetch(&a, d, __ATOMIC_RELAXED);
#endif
}
// Subtracts d in one instruction (as add_local) and says whether the result is <= 0, from the
// subtraction's own flags: no reload and compare.
HS_INLINE bool sub_local_le_zero(int64_t &a, int64_t d) {
#if defined(__x86_64__)
  bool le;
  asm volatile("subq %2, %0" : "+m"(a), "=@ccle"(le) : "er"(d));
  return le;
#else
  return __atomic_sub_fetch(&a, d, __ATOMIC_RELAXED) <= 0;
#endif
}

// Heap accounting. Each thread batches its heap delta and folds it into the global figure when it
// moves by more than kFoldBytes; the peak is exact for a single thread and within
// threads * kFoldBytes otherwise.
constexpr int64_t kFoldBytes = 256 * 1024;
// heap_delta and heap_delta_max are kept kHeapBias above the thread's heap change since its last
// fold: the TLS image starts them there (initial_thread_local) and fold_heap puts them back. A
// free then learns whether to fold (a change of -kFoldBytes or less: a biased value <= 0) from the
// flags of its one subtraction (sub_local_le_zero).
constexpr int64_t kHeapBias = kFoldBytes;

// Written only by the owning thread; read (relaxed) by whoever sums the totals.
struct Counters {
  uint64_t alloc_calls;
  uint64_t free_calls;
  uint64_t bytes_allocated;
  uint64_t bytes_freed;
  uint64_t realloc_calls;
  uint64_t realloc_moves;
  uint64_t foreign_frees;
  uint64_t sampled;
  int64_t heap_delta;  // not yet folded into the global heap figure, + kHeapBias
};

struct ThreadState;

// A test-and-test-and-set lock that stops spinning after a while and gives its CPU away: with
// more runnable threads than CPUs (stress: 4 workers and the writer on 2 CPUs), a holder that was
// preempted inside its few-hundred-cycle section otherwise costs every waiter a whole time slice
// of spinning (perf: 60% of sampled_blocks::insert was the spin loop). sched_yield is
// async-signal-safe. Same interface as SpinLock.
class YieldLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; flag_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 128) __builtin_ia32_pause();
        else sched_yield();
      }
    }
  }
  bool try_lock() { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() { flag_.store(false, std::memory_order_release); }
  void reset() { flag_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> flag_{false};
};

struct YieldGuard {
  explicit YieldGuard(YieldLock &l) : lock(l) { lock.lock(); }
  ~YieldGuard() { lock.unlock(); }
  YieldLock &lock;
};

enum ThreadPhase : uint8_t { kThreadNew = 0, kThreadRegistered = 1, kThreadGone = 2 };

struct ThreadLocal {
  int64_t countdown;       // bytes until the next sample; < 0 means take the slow path
  // guard: > 0 while inside the tracer: nested calls pass straight through.
  // sampling: > 0 while inside tracer code that never allocates through the program's
  // allocator (recording a sampled event, the pool tables): an allocation nested in it can only
  // come from a signal handler of the program, and is still counted (not sampled), interpose.cc.
  // The two share one word and every change of either is ONE instruction (enter_sampling /
  // leave_sampling / GuardScope in sampled_path.cc): a handler landing between two separate
  // updates (guard still set, sampling already cleared) passed its allocation through uncounted
  // (issue 7's signal_alloc flake, tests/programs/signal_step.c).
  // unregistered: 1 until the thread has a ThreadState (init_thread in sampled_path.cc) and again
  // once it left the registry. It shares the word too, so that the fast paths learn "outside the
  // tracer and registered" from one compare of guard_word with 0 (free tested `state` apart: 4
  // more instructions of every free).
  union {
    struct {
      uint32_t guard;
      uint16_t sampling;
      uint8_t unused;
      uint8_t unregistered;
    };
    uint64_t guard_word;
  };
  uint8_t phase;           // ThreadPhase
  uint64_t rng;
  int64_t heap_delta_max;  // highest heap_delta since the last fold (for an exact peak), + kHeapBias
  // A new maximum of heap_delta at or above this folds at once: kFoldBytes + kHeapBias, or less
  // when the global heap is within kFoldBytes of a heap alarm (--snapshot-heap-above), so that
  // the fold that crosses it is the allocation that does (fold_heap, heap_alarm).
  int64_t fold_at;
  // The bias of heap_delta and heap_delta_max since the last fold: the fold room then (a fall of
  // this much folds; g_totals.fold_room), kHeapBias unless --snapshot-at-peak narrowed it.
  int64_t heap_bias;
  ThreadState *state;
  Counters counters;
};

// Every thread's TLS starts as a copy of this (constant: no constructor, glibc copies the image).
constexpr ThreadLocal initial_thread_local() {
  ThreadLocal t{};
  t.heap_delta_max = kHeapBias;
  t.fold_at = kFoldBytes + kHeapBias;
  t.heap_bias = kHeapBias;
  t.counters.heap_delta = kHeapBias;
  t.unregistered = 1;
  return t;
}

extern __thread ThreadLocal t_local HS_TLS;

// guard_word units (see ThreadLocal): one level of guard, and one of guard + sampling together.
constexpr uint64_t kGuardUnit = 1;
constexpr uint64_t kSamplingUnit = (uint64_t(1) << 32) | kGuardUnit;
constexpr uint64_t kSamplingMask = uint64_t(0xffff) << 32;
constexpr uint64_t kUnregisteredMask = uint64_t(0xff) << 56;
// Enters / leaves tracer code that makes no allocation of its own through the program's
// allocator: nested allocations (a signal handler's) are counted, not sampled. Each is one
// add-to-memory instruction, so a handler sees either both flags raised or neither.
// The "memory" clobber also keeps the compiler from moving the tracer's own memory accesses
// out of the scope.
HS_INLINE void add_guard_word(ThreadLocal &t, uint64_t d) {
#if defined(__x86_64__)
  asm volatile("addq %1, %0" : "+m"(t.guard_word) : "r"(d) : "memory");
#else
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  __atomic_add_fetch(&t.guard_word, d, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}
HS_INLINE void enter_sampling(ThreadLocal &t) { add_guard_word(t, kSamplingUnit); }
HS_INLINE void leave_sampling(ThreadLocal &t) { add_guard_word(t, uint64_t(0) - kSamplingUnit); }
struct SamplingScope {
  explicit SamplingScope(ThreadLocal &t) : t(t) { enter_sampling(t); }
  ~SamplingScope() { leave_sampling(t); }
  SamplingScope(const SamplingScope &) = delete;
  SamplingScope &operator=(const SamplingScope &) = delete;
  ThreadLocal &t;
};

struct StackCacheEntry {
  uint64_t hash;
  uint32_t id;
};

struct ThreadState {
  static constexpr uint32_t kStackCacheSize = 512;
  uint32_t tid;
  YieldLock lock;             // guards batch: the owner appends, the writer flushes
  ThreadLocal *tls;           // the owner's TLS block, for its counters
  ThreadState *next;          // registry list
  StackCacheEntry stack_cache[kStackCacheSize];
  uint64_t next_id, id_limit;  // this thread's reserved range of sample ids
  // The thread's stack: an address inside it, learnt at registration, and its bounds, learnt from
  // the maps when first needed (resolve_stack): the usual way, pthread_getattr_np, takes the
  // thread's own lock and mallocs under it (its CPU set), so calling it from the thread's first
  // malloc deadlocked any program whose first malloc is pthread_getattr_np's (Rust's runtime).
  uint64_t stack_hint;
  uint64_t stack_lo, stack_hi;  // 0 until resolved (or if the maps did not say)
  bool stack_resolved;
  fast_unwind::Cache *unwind_cache;  // the stack walker's (allocated at the first sample)
  EventBatch batch;
};

// Registry of live threads (their counters are summed into the totals).
ThreadState *register_current_thread();  // nullptr if the private heap is exhausted
void unregister_thread(ThreadState *s);  // folds its counters, flushes its events
void for_each_thread(void (*fn)(ThreadState *, void *), void *arg);
void registry_lock();
void registry_unlock();
void registry_after_fork_child();
// The tail guard's salvage, alone in a process that ended: the registry's lock is reset (a thread
// that ended holding it never releases it).
void registry_reset_alone();

// Stack ranges of the registered threads (for the snapshot child, which reads its frozen copy
// of the registry without locks). Fills up to cap entries; returns the count.
struct ThreadStackRange {
  uint32_t tid;
  uint64_t lo, hi;
};
size_t thread_stacks(ThreadStackRange *out, size_t cap);

void fold_heap(ThreadLocal &t, bool may_wait = true);  // may_wait false: under the registry lock

// Learns s's stack bounds from /proc/self/maps, once (on its own thread; no lock, no allocation).
void resolve_stack(ThreadState *s);

// The counter updates of an allocation or free of `size`: true when the thread's heap delta is
// due to fold into the global figure. The fast paths (interpose.cc) fold after returning, so that
// they make no call themselves; account_* fold at once.
HS_INLINE bool count_alloc(ThreadLocal &t, uint64_t size) {
  bump(t.counters.alloc_calls, 1);
  bump(t.counters.bytes_allocated, size);
  int64_t d = add_local(t.counters.heap_delta, int64_t(size));
  if (d <= t.heap_delta_max) return false;
  store_relaxed(t.heap_delta_max, d);
  return d >= t.fold_at;
}
HS_INLINE bool count_free(ThreadLocal &t, uint64_t size) {
  bump(t.counters.free_calls, 1);
  bump(t.counters.bytes_freed, size);
  return sub_local_le_zero(t.counters.heap_delta, int64_t(size));
}
// The free of `size` that count_free just said folds a fall (a slow path: once per kFoldBytes of
// a thread's fall): with the at-peak fall alarm armed, the snapshot is forked first, while the
// block is still counted (and, the caller's part, still in the shadow): the heap at its highest
// since the level was passed, less this thread's other unfolded frees (under kFoldBytes).
void before_fall_fold(ThreadLocal &t, uint64_t size);
// The writer's new fold room (--snapshot-at-peak narrows it), counted in the widest.
void set_fold_room(int64_t room);
// The most any thread's heap has moved unfolded: the widest fold room given out (kFoldBytes
// unless --snapshot-at-peak narrowed every one of them).
int64_t widest_fold_room();
HS_INLINE void account_alloc(ThreadLocal &t, uint64_t size) {
  if (HS_UNLIKELY(count_alloc(t, size))) fold_heap(t);
}
HS_INLINE void account_free(ThreadLocal &t, uint64_t size) {
  if (HS_UNLIKELY(count_free(t, size))) fold_heap(t);
}

}  // namespace hs
