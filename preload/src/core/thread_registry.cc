#include <pthread.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "core/config.h"
#include "core/private_heap.h"
#include "core/proc_maps.h"
#include "core/thread_state.h"
#include "core/tracer.h"

namespace hs {

__thread ThreadLocal t_local HS_TLS = initial_thread_local();

namespace {

pthread_mutex_t g_registry_mutex = PTHREAD_MUTEX_INITIALIZER;
ThreadState *g_threads = nullptr;

void fold_counters(ThreadLocal &t) {
  Counters &c = t.counters;
  auto take = [](uint64_t &from, std::atomic<uint64_t> &to) {
    to.fetch_add(exchange_relaxed(from, uint64_t(0)), std::memory_order_relaxed);
  };
  take(c.alloc_calls, g_totals.alloc_calls);
  take(c.free_calls, g_totals.free_calls);
  take(c.bytes_allocated, g_totals.bytes_allocated);
  take(c.bytes_freed, g_totals.bytes_freed);
  take(c.realloc_calls, g_totals.realloc_calls);
  take(c.realloc_moves, g_totals.realloc_moves);
  take(c.foreign_frees, g_totals.foreign_frees);
  take(c.sampled, g_totals.sampled);
  fold_heap(t, false);
}

uint64_t read_rss() {
  // statm's second field: resident pages. A raw read: no stdio (it would allocate).
  char buf[128];
  if (read_small_file("/proc/self/statm", buf, sizeof(buf)) <= 0) return 0;
  const char *p = buf;
  while (*p && *p != ' ') ++p;
  uint64_t pages = 0;
  while (*p == ' ') ++p;
  while (*p >= '0' && *p <= '9') pages = pages * 10 + uint64_t(*p++ - '0');
  return pages * uint64_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

namespace {

// Records a heap figure reached by `when` as the peak if it is higher than the one recorded.
void raise_peak(int64_t candidate, uint64_t when) {
  int64_t peak = g_totals.peak.load(std::memory_order_relaxed);
  while (candidate > peak) {
    if (g_totals.peak.compare_exchange_weak(peak, candidate, std::memory_order_relaxed)) {
      g_totals.peak_time.store(when, std::memory_order_relaxed);
      break;
    }
  }
}

// Thread t's rise since its last fold above where it is now, if it held still while read (a fold
// or a call in between: 0, left to the fold, which sees it; see fold_heap), at most `cap`.
int64_t excursion(ThreadLocal &t, int64_t cap) {
  int64_t d = __atomic_load_n(&t.counters.heap_delta, __ATOMIC_ACQUIRE);
  int64_t max = __atomic_load_n(&t.heap_delta_max, __ATOMIC_ACQUIRE);
  if (__atomic_load_n(&t.counters.heap_delta, __ATOMIC_ACQUIRE) != d || max <= d) return 0;
  return max - d < cap ? max - d : cap;  // (both biased alike)
}

void raise_widest_fold_room(int64_t room) {
  int64_t w = g_totals.fold_room_widest.load(std::memory_order_relaxed);
  while (room > w && !g_totals.fold_room_widest.compare_exchange_weak(w, room, std::memory_order_relaxed)) {
  }
}

// A thread starts with the fold room in force, not the TLS image's kHeapBias: with
// --snapshot-at-peak narrowing it, a thread that never folded kept a room of kFoldBytes, and the
// at-peak bound (a rise and a fall of the room per thread) did not hold for it (stress: 256 KiB
// unseen per thread on a 1.4 MiB heap). Called before the thread is linked into the registry and
// before its first count, so nothing else reads these yet.
void adopt_fold_room(ThreadLocal &t) {
  const int64_t room = g_totals.fold_room.load(std::memory_order_relaxed);
  raise_widest_fold_room(room);
  if (room == t.heap_bias || t.counters.heap_delta != t.heap_bias || t.heap_delta_max != t.heap_bias) return;
  t.heap_bias = room;
  t.heap_delta_max = room;
  t.counters.heap_delta = room;
  t.fold_at = room + room;
}

// The cap of each thread's excursion in a summed candidate. One thread alone: none (its excursion
// is exact). Several: the widest fold room each, which keeps the sum within peak_accuracy
// (threads * that room) of the true peak, as a thread may rise and fall by up to twice that
// without folding.
int64_t excursion_cap() {
  return g_totals.most_live_threads.load(std::memory_order_relaxed) > 1 ? widest_fold_room() : INT64_MAX;
}

// The heap now as every counter says, plus every registered thread's excursion: the peak candidate
// of the moments since the threads' last folds (the registry lock held). Summed, not the largest
// one: blocks of several threads, each thread under kFoldBytes, live at the same time (8 threads
// holding 100 KB each) were seen one thread at a time, and the peak was one thread's share of it
// (tests/integration/capture_cases.py, case threads).
int64_t peak_candidate_locked() {
  int64_t heap = int64_t(g_totals.bytes_allocated.load(std::memory_order_relaxed) -
                         g_totals.bytes_freed.load(std::memory_order_relaxed));
  int64_t excursions = 0, cap = excursion_cap();
  for (ThreadState *s = g_threads; s; s = s->next) {
    Counters &c = s->tls->counters;
    heap += int64_t(load_relaxed(c.bytes_allocated) - load_relaxed(c.bytes_freed));
    excursions += excursion(*s->tls, cap);
  }
  return heap + excursions;
}

}  // namespace

// The heap alarm, at a fold: gone off when the heap reached it (its highest point since this
// thread's last fold: `candidate`), else this thread folds again as soon as its own rise would
// reach it from the heap as it is now. With one thread that is the crossing allocation itself;
// with several, each thread's unfolded change (under kFoldBytes) is not in `now`.
// Waits until the writer has served the alarm. The callee-saved registers go onto this frame
// first: the snapshot's handshake reads only the stack pointer of a thread asleep in a system call,
// and the program's frames may hold a pointer (the block just allocated) in one of them.
__attribute__((noinline)) static void wait_served(std::atomic<uint32_t> &count, uint32_t served) {
  __builtin_unwind_init();
  for (int i = 0; i < 1000 && count.load(std::memory_order_acquire) == served && writer_serves_alarms(); ++i) {
    timespec ts{0, 10 * 1000 * 1000};
    syscall(SYS_futex, &count, FUTEX_WAIT_PRIVATE, served, &ts, nullptr, 0);
  }
}
static void wait_alarm_served(uint32_t served) { wait_served(g_totals.heap_alarm_served, served); }

static void heap_alarm(ThreadLocal &t, int64_t now, int64_t candidate, bool may_wait) {
  // Whether to wait goes with the level (rearm stores it first): read with it, not after the
  // crossing, by when the writer may have served this crossing and set the flag for the next level
  // (a growth snapshot forked 25 MB past its step, 2 runs in 6).
  const int64_t alarm = g_totals.heap_alarm.load(std::memory_order_acquire);
  const bool waits = g_totals.heap_alarm_waits.load(std::memory_order_relaxed);
  if (candidate >= alarm) {
    uint64_t expected = 0;
    const uint32_t served = g_totals.heap_alarm_served.load(std::memory_order_acquire);
    g_totals.heap_alarm_heap.store(candidate, std::memory_order_relaxed);  // (first writer's may be overwritten:
    // by a figure that also crossed, as close to the crossing)
    if (g_totals.heap_alarm_time.compare_exchange_strong(expected, coarse_rel_ns() | 1, std::memory_order_acq_rel)) {
      g_totals.heap_alarm.store(INT64_MAX, std::memory_order_relaxed);
      outbox_poke_writer();  // the writer takes the snapshot now, not at its next tick
      // With --snapshot-at-peak this thread waits (while the writer runs, at most 10 s) until the writer has forked
      // the snapshot: the heap it holds is the one that crossed, not what came after (a program
      // that reaches its peak in a millisecond and frees it again). No lock of the tracer's is
      // held here (may_wait), and the handshake reads a thread asleep in a futex wait from outside.
      if (may_wait && waits && writer_serves_alarms()) wait_alarm_served(served);
    }
    return;
  }
  // (t.fold_at is the bias plus the fold room: the rise to the alarm when that is less.)
  const int64_t room = alarm - now, bias = t.heap_bias;
  if (room < bias) t.fold_at = bias + (room < 1 ? 1 : room);
}

// The RSS alarm, at a fold. The process's maximum RSS never falls and is at least the current
// one, so while it is under the level the current one is too: one system call, no file read. Past
// it (the RSS crossed, or the maximum is an earlier image's: execve keeps it), statm says what
// the RSS is now, at most once a jiffy (the coarse clock), so a maximum that stays over the level
// costs a read per 4 ms at most.
__attribute__((noinline)) static void rss_alarm(uint64_t level) {
  const int saved = errno;
  rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0 && uint64_t(ru.ru_maxrss) * 1024 >= level) {
    const uint64_t now = coarse_rel_ns() | 1;
    uint64_t last = g_totals.rss_alarm_read_ns.load(std::memory_order_relaxed);
    if (last != now && g_totals.rss_alarm_read_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      const uint64_t rss = read_rss();
      if (rss >= level && g_totals.rss_alarm.compare_exchange_strong(level, 0, std::memory_order_relaxed)) {
        g_totals.rss_alarm_rss.store(rss, std::memory_order_relaxed);
        g_totals.rss_alarm_time.store(now, std::memory_order_release);
        outbox_poke_writer();  // the writer takes the snapshot now, not at its next tick
      }
    }
  }
  errno = saved;
}

// A free that folds a fall waits, un-counted (the owner's counters: each update one store), its
// block still in the shadow, until the writer has forked the at-peak snapshot: the one that took
// the fall alarm (take: it tells the writer), or any other while that fork is pending (fall_hold).
__attribute__((noinline)) static void wait_for_peak_fork(ThreadLocal &t, uint64_t size, bool take) {
  bump(t.counters.free_calls, uint64_t(-1));
  bump(t.counters.bytes_freed, uint64_t(0) - size);
  add_local(t.counters.heap_delta, int64_t(size));
  // (The writer clears the hold before it counts the fall served, once it has forked for it
  // (serve_fall): a free that still sees the hold read the count from before, and wakes then.
  // Its own count: serve_alarm, for other alarms in the same tick, had let the falls go before
  // the fork.)
  const uint32_t served = g_totals.fall_served.load(std::memory_order_seq_cst);
  if (take) {
    g_totals.fall_hold.store(1, std::memory_order_seq_cst);
    g_totals.fall_alarm_time.store(coarse_rel_ns() | 1, std::memory_order_release);
    outbox_poke_writer();
  }
  if ((take || g_totals.fall_hold.load(std::memory_order_seq_cst)) && writer_serves_alarms())
    wait_served(g_totals.fall_served, served);
  bump(t.counters.free_calls, 1);
  bump(t.counters.bytes_freed, size);
  add_local(t.counters.heap_delta, -int64_t(size));
}

// Whether the at-peak fork may wait for a later fall: the heap after this free, less what the
// fork may miss (a rise and a fall of the fold room per thread, each thread's unfolded part: the
// bound the at-peak label states; the next fall this thread folds is within it), is still within
// the percentage of its highest since the level was passed. A peak that falls back a little and
// rises again then costs no fork, nor the copy of every page the program writes while that child
// lives, and the snapshot stays within the percentage. With the fold room narrowed for several
// threads (peak_fold_room: their slack is the whole percentage) nothing is left to wait for; with
// one thread on a heap of tens of megabytes (the room at most 256 KiB) nearly all of it is.
// (Waiting for the whole percentage left stress's snapshots at 94.6% of its peak, the
// several-thread estimate of it.) Only while one thread has ever run: two threads' frees that
// fold at once would each read the heap before the other's fold (two 40 MB frees at 1 GB, each
// seeing 960 MB, left 920 MB before the next fold forked), and a check and fold made one atomic
// step would cost every fold a compare-and-swap loop.
static bool fall_may_wait(ThreadLocal &t) {
  if (g_totals.most_live_threads.load(std::memory_order_relaxed) > 1) return false;
  const int64_t bias = t.heap_bias, heap = g_totals.heap.load(std::memory_order_relaxed);
  const int64_t after = heap + (t.counters.heap_delta - bias);
  const int64_t high = std::max(g_totals.peak.load(std::memory_order_relaxed), heap + (t.heap_delta_max - bias));
  const int64_t slack = 2 * widest_fold_room();  // (the widest: every room given out, the current one too)
  return after - slack >= high - high / 100 * int64_t(config.snapshot_peak_pct);
}

void before_fall_fold(ThreadLocal &t, uint64_t size) {
  uint32_t armed = 1;
  if (HS_UNLIKELY(g_totals.fall_alarm.load(std::memory_order_relaxed)) && !fall_may_wait(t) &&
      g_totals.fall_alarm.compare_exchange_strong(armed, 0, std::memory_order_relaxed))
    return wait_for_peak_fork(t, size, true);  // this free takes the alarm
  if (HS_UNLIKELY(g_totals.fall_hold.load(std::memory_order_relaxed))) wait_for_peak_fork(t, size, false);
}

static_assert(kFoldBytes == 256 * 1024, "GlobalTotals::fold_room starts at kFoldBytes");

int64_t widest_fold_room() {
  const int64_t w = g_totals.fold_room_widest.load(std::memory_order_relaxed);
  return w > 0 ? w : kFoldBytes;
}

void set_fold_room(int64_t room) {
  raise_widest_fold_room(room);
  g_totals.fold_room.store(room, std::memory_order_relaxed);
}

void fold_heap(ThreadLocal &t, bool may_wait) {
  // The maximum goes back first, then the delta (release): read_totals, reading the delta, the
  // maximum, then the delta again, never sees a reset delta with the old maximum, which would
  // count the folded rise twice (once in the heap, once as an excursion). Both go back to the fold
  // room as it is now (the next fall of that much folds), and the next rise of that much folds.
  const int64_t bias = t.heap_bias, room = g_totals.fold_room.load(std::memory_order_relaxed);
  int64_t max = t.heap_delta_max - bias;
  __atomic_store_n(&t.heap_delta_max, room, __ATOMIC_RELEASE);
  int64_t d = __atomic_exchange_n(&t.counters.heap_delta, room, __ATOMIC_ACQ_REL) - bias;
  t.heap_bias = room;
  t.fold_at = room + room;
  int64_t before = g_totals.heap.fetch_add(d, std::memory_order_relaxed);
  int64_t candidate = before + (max > d ? max : d);
  if (HS_UNLIKELY(g_totals.heap_alarm.load(std::memory_order_relaxed) != INT64_MAX)) heap_alarm(t, before + d, candidate, may_wait);
  // (When the candidate is an excursion that has fallen back since, it happened at some point
  // since this thread's last fold, and since the last read_totals if that did not see it: now is
  // its latest possible time.)
  raise_peak(candidate, coarse_rel_ns());
  if (int64_t arm = g_totals.peak_arm_level.load(std::memory_order_relaxed); HS_UNLIKELY(candidate >= arm) &&
      g_totals.peak_arm_level.compare_exchange_strong(arm, INT64_MAX, std::memory_order_relaxed))
    g_totals.fall_alarm.store(1, std::memory_order_release);
  if (uint64_t level = g_totals.rss_alarm.load(std::memory_order_relaxed); HS_UNLIKELY(level != 0) && candidate > before)
    rss_alarm(level);
}

void registry_lock() { pthread_mutex_lock(&g_registry_mutex); }
void registry_unlock() { pthread_mutex_unlock(&g_registry_mutex); }

ThreadState *register_current_thread() {
  void *mem = heap::alloc_zeroed(sizeof(ThreadState));
  if (!mem) return nullptr;
  auto *s = new (mem) ThreadState();
  s->tid = uint32_t(syscall(SYS_gettid));
  s->tls = &t_local;
  s->stack_hint = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  adopt_fold_room(t_local);
  registry_lock();
  s->next = g_threads;
  g_threads = s;
  registry_unlock();
  g_totals.threads_seen.fetch_add(1, std::memory_order_relaxed);
  uint32_t live = g_totals.live_threads.fetch_add(1, std::memory_order_relaxed) + 1;
  uint32_t most = g_totals.most_live_threads.load(std::memory_order_relaxed);
  while (live > most && !g_totals.most_live_threads.compare_exchange_weak(most, live, std::memory_order_relaxed)) {
  }
  return s;
}

void unregister_thread(ThreadState *s) {
  registry_lock();
  // Its rise since its last fold is a peak candidate together with the other threads' rises (its
  // fold below sees its own only): a thread that ends takes its excursion with it.
  raise_peak(peak_candidate_locked(), coarse_rel_ns());
  for (ThreadState **pp = &g_threads; *pp; pp = &(*pp)->next) {
    if (*pp == s) { *pp = s->next; break; }
  }
  // Folded under the lock read_totals holds while it reads the global figures and the registered
  // threads' counters: a reader finds the counters in one place or the other, never in neither
  // (totals that went backwards for a moment, tests/unit/shim_concurrency_test.cc).
  fold_counters(*s->tls);
  registry_unlock();
  outbox_lock();
  s->lock.lock();
  s->batch.serialize_to(outbox(), s->tid);
  s->lock.unlock();
  outbox_unlock();
  g_totals.live_threads.fetch_sub(1, std::memory_order_relaxed);
  fast_unwind::release(s->unwind_cache);
  s->~ThreadState();
  heap::release(s);
}

void resolve_stack(ThreadState *s) {
  if (s->stack_resolved) return;
  s->stack_resolved = true;
  Mapping m;
  if (!find_mapping(s->stack_hint, &m) || !m.readable || !m.writable) return;
  s->stack_hi = m.end;
  s->stack_lo = m.start;
  if (s->tid == uint32_t(getpid())) {
    // The main thread's [stack] grows down on demand: its bound is the stack limit, not the pages
    // mapped so far. (The walker only reads from the stack pointer up; the bound only has to be
    // below any stack pointer the thread will have.)
    rlimit rl;
    uint64_t limit = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : uint64_t(1) << 30;
    if (limit > uint64_t(1) << 30) limit = uint64_t(1) << 30;
    if (limit < m.end - m.start) limit = m.end - m.start;
    s->stack_lo = m.end - limit;
  }
}

size_t thread_stacks(ThreadStackRange *out, size_t cap) {
  size_t n = 0;
  // A thread whose bounds were never needed: the address known inside its stack stands for them
  // (the snapshot child matches ranges against the mappings).
  for (ThreadState *s = g_threads; s && n < cap; s = s->next)
    out[n++] = s->stack_hi ? ThreadStackRange{s->tid, s->stack_lo, s->stack_hi}
                           : ThreadStackRange{s->tid, s->stack_hint, s->stack_hint + 1};
  return n;
}

void for_each_thread(void (*fn)(ThreadState *, void *), void *arg) {
  registry_lock();
  for (ThreadState *s = g_threads; s; s = s->next) fn(s, arg);
  registry_unlock();
}

void registry_reset_alone() { pthread_mutex_init(&g_registry_mutex, nullptr); }

void registry_after_fork_child() {
  // Only the forking thread survives. The others' TLS blocks are still mapped (fork copies the
  // address space), so their counters can be folded in; then they leave the registry.
  pthread_mutex_init(&g_registry_mutex, nullptr);
  ThreadState *self = t_local.state;
  ThreadState *s = g_threads;
  g_threads = nullptr;
  uint32_t live = 0;
  while (s) {
    ThreadState *next = s->next;
    s->lock.reset();
    if (s == self) {
      s->next = g_threads;
      g_threads = s;
      s->tid = uint32_t(syscall(SYS_gettid));
      s->batch.reset();  // the parent writes its own pending events
      ++live;
    } else {
      fold_counters(*s->tls);
      fast_unwind::release(s->unwind_cache);
      s->~ThreadState();
      heap::release(s);
    }
    s = next;
  }
  g_totals.live_threads.store(live, std::memory_order_relaxed);
}

TotalsView read_totals() {
  TotalsView v{};
  // The global figures and the threads' counters under one lock: a thread leaving the registry
  // folds its counters into the global figures under it too (see unregister_thread).
  registry_lock();
  v.alloc_calls = g_totals.alloc_calls.load(std::memory_order_relaxed);
  v.free_calls = g_totals.free_calls.load(std::memory_order_relaxed);
  v.bytes_allocated = g_totals.bytes_allocated.load(std::memory_order_relaxed);
  v.bytes_freed = g_totals.bytes_freed.load(std::memory_order_relaxed);
  v.realloc_calls = g_totals.realloc_calls.load(std::memory_order_relaxed);
  v.realloc_moves = g_totals.realloc_moves.load(std::memory_order_relaxed);
  v.foreign_frees = g_totals.foreign_frees.load(std::memory_order_relaxed);
  v.sampled = g_totals.sampled.load(std::memory_order_relaxed);
  // A thread's heap may have risen and fallen by less than kFoldBytes since its last fold: its
  // highest excursion (heap_delta_max) above where it is now, summed over the threads, makes a
  // peak candidate too (see peak_candidate_locked).
  int64_t excursions = 0, cap = excursion_cap();
  for (ThreadState *s = g_threads; s; s = s->next) {
    Counters &c = s->tls->counters;
    v.alloc_calls += load_relaxed(c.alloc_calls);
    v.free_calls += load_relaxed(c.free_calls);
    v.bytes_allocated += load_relaxed(c.bytes_allocated);
    v.bytes_freed += load_relaxed(c.bytes_freed);
    v.realloc_calls += load_relaxed(c.realloc_calls);
    v.realloc_moves += load_relaxed(c.realloc_moves);
    v.foreign_frees += load_relaxed(c.foreign_frees);
    v.sampled += load_relaxed(c.sampled);
    excursions += excursion(*s->tls, cap);
  }
  registry_unlock();
  // The current heap and the live blocks are what the cumulative figures say (every update of
  // the heap goes with one of bytes_allocated or bytes_freed). Summing heap_delta instead gave a
  // heap that disagreed with them whenever a running thread was caught between its counter
  // updates (threads that outlive main, tests/integration/misbehave_cases.py threads_outlive).
  v.heap = int64_t(v.bytes_allocated - v.bytes_freed);
  v.live_blocks = v.alloc_calls - v.free_calls;
  v.time_ns = now_rel_ns();
  // Kept as the peak, not only reported: the writer reads the totals every flush, and a heap
  // that no fold saw (threads whose blocks are each under kFoldBytes, or a single thread's rise
  // and fall between two folds) must stay the peak with the time it was first seen, not move to
  // the time of whichever later read or fold finds it again (issue: peak "at exit" for a block
  // freed long before).
  raise_peak(v.heap + excursions, v.time_ns);
  int64_t peak = g_totals.peak.load(std::memory_order_relaxed);
  v.peak_time = g_totals.peak_time.load(std::memory_order_relaxed);
  v.peak = uint64_t(peak > 0 ? peak : 0);
  v.threads_seen = g_totals.threads_seen.load(std::memory_order_relaxed);
  // The threads' unfolded deltas are what the folded figure can miss: as many as ever ran at once.
  uint32_t most = g_totals.most_live_threads.load(std::memory_order_relaxed);
  v.peak_accuracy = most > 1 ? uint32_t(int64_t(most) * widest_fold_room()) : 0;
  v.dropped = g_totals.dropped_events.load(std::memory_order_relaxed);
  v.rss = read_rss();
  return v;
}

void encode_totals(wire::Buf &b, const TotalsView &t) {
  b.u64(1, t.time_ns);
  b.u64(2, t.alloc_calls);
  b.u64(3, t.free_calls);
  b.u64(4, t.bytes_allocated);
  b.u64(5, t.bytes_freed);
  b.i64(6, t.heap);
  b.u64(7, t.live_blocks);
  b.u64(8, t.peak);
  b.u64(9, t.peak_time);
  b.u64(10, t.sampled);
  b.u64(11, t.threads_seen);
  b.u64(12, t.foreign_frees);
  b.u64(13, t.rss);
  b.u64(14, t.realloc_calls);
  b.u64(15, t.realloc_moves);
  b.u64(16, t.dropped);
  b.u64(17, t.peak_accuracy);
  if (t.has_rollup) {
    size_t at = b.open(18);
    b.u64(1, t.rollup_rss);
    b.u64(2, t.rollup_anon);
    b.u64(3, t.rollup_shmem);
    b.u64(4, t.rollup_swap);
    b.u64(5, t.rollup_heapsnap_heap);
    b.u64(6, t.rollup_cost_ns);
    b.close(at);
  }
}

}  // namespace hs
