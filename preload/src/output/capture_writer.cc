// What goes into the capture and when: the outbox of records, the writer thread that flushes
// them at least every flush_ms, the process record at the start and the end record at exit
// (frame_writer.cc turns the records into the file's zstd frames).
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "output/frame_writer.h"
#include "core/high_fd.h"
#include "core/own_mappings.h"
#include "sampling/module_map.h"
#include "core/proc_maps.h"
#include "core/rss_rollup.h"
#include "core/private_heap.h"
#include "snapshot/snapshot.h"
#include "core/thread_state.h"
#include "core/tracer.h"

#ifndef HEAPSNAP_VERSION
#define HEAPSNAP_VERSION "dev"
#endif

namespace hs {
namespace {

pthread_mutex_t g_outbox_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_flush_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_wake_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER;
wire::Buf *g_outbox = nullptr;
wire::Buf *g_pending = nullptr;     // the writer's side of the double buffer
// For a salvage (writer_salvage): the outbox's size when its lock was last released (its records
// up to there are whole), whether g_pending holds whole records not yet written, and whether the
// capture has its end record.
size_t g_outbox_committed = 0;
bool g_pending_whole = false;
bool g_finished = false;
pthread_t g_writer;
bool g_writer_running = false;
std::atomic<bool> g_writer_stop{false};
std::atomic<bool> g_wake_pending{false};
// The thread holding g_flush_mutex (its tid; 0: none) through lock_flush: a snapshot started
// outside the writer thread holds the writer off with it (writer_hold), and the test hook asks
// whether the writer could tick.
std::atomic<pid_t> g_flush_holder{0};
// The writer thread's ticks done (for the test hook, writer_test_tick_in_snapshot_append).
std::atomic<uint64_t> g_ticks_done{0};

void lock_flush() {
  pthread_mutex_lock(&g_flush_mutex);
  g_flush_holder.store(gettid(), std::memory_order_relaxed);
}
void unlock_flush() {
  g_flush_holder.store(0, std::memory_order_relaxed);
  pthread_mutex_unlock(&g_flush_mutex);
}


void collect_thread(ThreadState *s, void *) {
  s->lock.lock();
  outbox_lock();
  s->batch.serialize_to(outbox(), s->tid);
  outbox_unlock();
  s->lock.unlock();
}

// rollup: the record carries the RSS parts (rss_rollup.h).
TotalsView append_totals_record(bool rollup) {
  TotalsView t = read_totals();
  if (rollup) read_rss_rollup(&t);
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kTotals);
  encode_totals(outbox(), t);
  wire::end_record(outbox(), m);
  outbox_unlock();
  return t;
}

// Must hold g_flush_mutex. Moves every thread's events (and, with_totals, a Totals record) into
// g_pending. The writer thread's periodic flush also drives the snapshot triggers. False if a
// record was cut by an allocation failure: those records are dropped.
// The writer's ticks since the start (under g_flush_mutex): one in config.rss_parts_ticks reads
// the RSS parts, the first tick included; so does every flush outside the ticks (the last one at
// exit, an explicit flush), so that a run shorter than a tick has one too.
// The read's cost grows with the RSS: rollup_gap_ticks (rss_rollup.h) spaces the reads by it.
uint32_t g_ticks = 0;
uint32_t g_next_rollup_tick = 0;

// Whether this flush reads the RSS parts (see g_ticks), and the tick after which the next may.
bool rollup_due(bool tick) {
  if (!config.rss_parts_ticks) return false;
  if (!tick) return true;
  return g_ticks++ >= g_next_rollup_tick;
}
void rollup_cost(uint64_t cpu0, uint64_t cpu1) {
  const uint64_t cost = cpu0 && cpu1 > cpu0 ? cpu1 - cpu0 : 0;
  g_next_rollup_tick = g_ticks + rollup_gap_ticks(cost, config.flush_ms, config.rss_parts_ticks) - 1;
}

bool gather_locked(bool with_totals, bool tick) {
  modules::refresh(false);
  for_each_thread(collect_thread, nullptr);
  if (with_totals) {
    const bool rollup = rollup_due(tick);
    const uint64_t cpu0 = rollup && tick ? thread_cpu_ns() : 0;
    TotalsView t = append_totals_record(rollup);
    if (rollup && tick) rollup_cost(cpu0, thread_cpu_ns());
    if (tick) snapshot::writer_tick(t.heap > 0 ? uint64_t(t.heap) : 0, t.rss);
  }
  outbox_lock();
  g_outbox->swap(*g_pending);
  bool oom = g_pending->failed();
  g_pending_whole = !oom;
  outbox_unlock();
  if (oom) {
    // A record was cut by an allocation failure: the buffer is not trustworthy past that point.
    g_totals.dropped_events.fetch_add(1, std::memory_order_relaxed);
    g_pending->clear();
    return false;
  }
  return true;
}

// Must hold g_flush_mutex. Moves everything pending into the file; end_frame: the last frame ends
// too (frames::write_records).
bool flush_locked(bool with_totals, bool tick, bool end_frame) {
  if (frames::fd() < 0) return false;
  // The capture's first frame always ends with its flush (a forked child's first flush is the
  // writer thread's): it keeps the level its parent chose, the next frame adapts.
  return gather_locked(with_totals, tick) && frames::write_records(*g_pending, end_frame || frames::first_frame_pending());
}

// Appends the outbox's records to g_pending's (after them: the order they were made in); the
// outbox's are dropped if a record there was cut by an allocation failure.
void append_outbox_to_pending() {
  outbox_lock();
  if (!g_outbox->failed()) g_pending->bytes(g_outbox->data(), g_outbox->size());
  // (Out of memory for the copy: g_pending keeps its records whole, the outbox's are dropped.)
  if (g_outbox->failed() || g_pending->failed()) g_totals.dropped_events.fetch_add(1, std::memory_order_relaxed);
  g_outbox->clear();
  outbox_unlock();
}

void append_end_record(const TotalsView &t, const char *reason) {
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kEnd);
  size_t at = outbox().open(1);
  encode_totals(outbox(), t);
  outbox().close(at);
  outbox().str(2, reason);
  wire::end_record(outbox(), m);
  outbox_unlock();
}

// A thread's pending events, for a salvage: whole unless the thread ended inside an append
// (its batch lock held), then dropped and counted.
void salvage_thread(ThreadState *s, void *dropped) {
  if (!s->lock.try_lock()) {
    *static_cast<uint64_t *>(dropped) += s->batch.count;
    return;
  }
  outbox_lock();
  s->batch.serialize_to(outbox(), s->tid);
  outbox_unlock();
  s->lock.unlock();
}

// Whether the writer is the only thread left. After main's pthread_exit (or in a child forked
// from another thread, once that thread returns) the thread-group leader stays a zombie, still
// counted in Threads:, until the process ends. No stdio: nothing here allocates.
bool only_writer_left() {
  char buf[4096];
  if (read_small_file("/proc/self/status", buf, sizeof(buf)) <= 0) return false;
  const char *t = strstr(buf, "\nThreads:");
  if (!t) return false;
  long threads = strtol(t + 9, nullptr, 10);
  if (threads != 2) return threads == 1;
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", g_pid);
  if (read_small_file(path, buf, sizeof(buf)) <= 0) return false;
  const char *paren = strrchr(buf, ')');
  return paren && paren[1] == ' ' && paren[2] == 'Z';
}

// The writer's stack, mapped here rather than by pthread_create: the other way to learn a thread's
// stack (for snapshots, which leave it out), pthread_getattr_np, allocates its CPU set through the
// program's malloc, and that first malloc on the writer's thread made glibc create an arena for
// it: one arena fewer for the program's threads, and memory the program does not have natively.
// Kept across fork: in a child, the parent's writer is gone and its copy serves the child's.
constexpr size_t kWriterStackBytes = size_t(8) << 20, kWriterGuardBytes = 4096;
uint8_t *g_writer_stack = nullptr;  // its guard page, then the stack

void *writer_main(void *) {
  t_local.guard = 1;  // the writer's own allocations are never traced
  // Named, so that top -H, gdb and perf show which thread of the program is the tracer's.
  prctl(PR_SET_NAME, "heapsnap-writer", 0, 0, 0);
  uint64_t lo = reinterpret_cast<uint64_t>(g_writer_stack) + kWriterGuardBytes;
  snapshot::set_writer_stack(lo, lo + kWriterStackBytes);
  while (!g_writer_stop.load(std::memory_order_acquire)) {
    pthread_mutex_lock(&g_wake_mutex);
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = uint64_t(ts.tv_nsec) + uint64_t(config.flush_ms) * 1000000ull;
    ts.tv_sec += time_t(ns / 1000000000ull);
    ts.tv_nsec = long(ns % 1000000000ull);
    if (!g_writer_stop.load(std::memory_order_acquire) && !g_wake_pending.load(std::memory_order_acquire))
      pthread_cond_timedwait(&g_wake, &g_wake_mutex, &ts);
    g_wake_pending.store(false, std::memory_order_relaxed);
    pthread_mutex_unlock(&g_wake_mutex);
    if (g_writer_stop.load(std::memory_order_acquire)) break;
    lock_flush();
    bool ok = flush_locked(true, true, false);
    unlock_flush();
    g_ticks_done.fetch_add(1, std::memory_order_release);
    if (!ok && frames::fd() >= 0) {
      stop_tracing("cannot write the capture file");
      break;
    }
    // Every thread of the program has ended (main called pthread_exit, or a child forked from a
    // thread saw that thread return): glibc ends the process with status 0 when its last thread
    // ends, but it counts this one, so it never would. Do what glibc does for the last thread;
    // the shim's destructor finishes the capture.
    if (only_writer_left()) exit(0);
  }
  return nullptr;
}

void append_process_info(bool fork_child, int parent_pid) {
  wire::Buf &b = outbox();
  wire::RecordMark m = wire::begin_record(b, wire::kProcess);
  b.u64(1, uint64_t(getpid()));
  b.u64(2, uint64_t(getppid()));
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[n > 0 ? n : 0] = '\0';
  b.str(3, exe);
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char args[8192];
    ssize_t got = read(fd, args, sizeof(args) - 1);
    close(fd);
    for (ssize_t i = 0; i < got;) {
      size_t l = strnlen(args + i, size_t(got - i));
      b.len(4, args + i, l);
      i += ssize_t(l) + 1;
    }
  }
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  b.u64(5, uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec));
  b.u64(6, config.sample_bytes);
  b.u64(7, uint64_t(config.max_stack_depth));
  b.str(8, HEAPSNAP_VERSION);
  b.u64(9, uint64_t(sysconf(_SC_PAGESIZE)));
  b.boolean(10, fork_child);
  b.u64(11, uint64_t(parent_pid));
  utsname u;
  if (uname(&u) == 0) b.str(13, u.nodename);
  wire::end_record(b, m);
}

}  // namespace

const char *writer_capture_path() { return frames::path(); }

bool writer_append_file(const char *path) {
  if (!frames::fd_ok()) return false;
  // What the outbox holds goes first: a snapshot's SnapshotBegin must come before the records of
  // its child (at exit the snapshot is started and finished before the outbox is written again,
  // and its Begin came after its own records).
  // The frame ends before the file's frames are appended (even with nothing pending); written
  // in one go, a short program's only frame of events is compressed in one pass.
  append_outbox_to_pending();
  if (!frames::write_records(*g_pending, true)) return false;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const size_t kChunk = 1u << 20;
  auto *buf = static_cast<uint8_t *>(heap::alloc(kChunk));
  bool ok = buf != nullptr;
  while (ok) {
    ssize_t n = read(fd, buf, kChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    ok = frames::append_raw(buf, size_t(n));
  }
  heap::release(buf);
  close(fd);
  return ok;
}

void outbox_lock() { pthread_mutex_lock(&g_outbox_mutex); }
void outbox_unlock() {
  g_outbox_committed = g_outbox->size();
  pthread_mutex_unlock(&g_outbox_mutex);
}
wire::Buf &outbox() { return *g_outbox; }
// A poke made while the writer is busy is kept (g_wake_pending) for its next wait, which then
// returns at once: a heap alarm's poke is not lost for a whole tick. (trylock: a program's signal
// handler that allocates on a thread interrupted inside this lock only loses the flag.)
void outbox_poke_writer() {
  bool locked = pthread_mutex_trylock(&g_wake_mutex) == 0;
  g_wake_pending.store(true, std::memory_order_release);
  pthread_cond_signal(&g_wake);
  if (locked) pthread_mutex_unlock(&g_wake_mutex);
}
bool writer_serves_alarms() {
  return g_writer_running && !g_writer_stop.load(std::memory_order_acquire) && !t_local.guard;
}

void outbox_append_marker(uint32_t tid, const char *text, size_t n) {
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kMarker);
  outbox().u64(1, now_rel_ns());
  outbox().u64(2, tid);
  outbox().len(3, text, n);
  wire::end_record(outbox(), m);
  outbox_unlock();
}

bool writer_open_capture(bool fork_child, int parent_pid) {
  if (!g_outbox) {
    g_outbox = new (heap::alloc_zeroed(sizeof(wire::Buf))) wire::Buf();
    g_pending = new (heap::alloc_zeroed(sizeof(wire::Buf))) wire::Buf();
  }
  if (!frames::init() || !frames::open(getpid())) return false;
  outbox_lock();
  g_outbox->clear();
  append_process_info(fork_child, parent_pid);
  outbox_unlock();
  modules::refresh(true);
  return true;
}

bool writer_start_thread() {
  // A child forked by the writer thread itself (the program's atexit handlers run on it when only
  // it is left, see only_writer_left) runs on that stack: its writer needs another one.
  uint8_t here;
  if (g_writer_stack && &here >= g_writer_stack && &here < g_writer_stack + kWriterGuardBytes + kWriterStackBytes)
    g_writer_stack = nullptr;
  if (!g_writer_stack) {
    void *m = mmap(nullptr, kWriterGuardBytes + kWriterStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) return false;
    if (mprotect(m, kWriterGuardBytes, PROT_NONE) != 0) {
      munmap(m, kWriterGuardBytes + kWriterStackBytes);
      return false;
    }
    g_writer_stack = static_cast<uint8_t *>(m);
    own_mappings::name(m, kWriterGuardBytes + kWriterStackBytes);  // (the snapshot child knows it: writer_lo/hi)
  }
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  if (pthread_attr_setstack(&attr, g_writer_stack + kWriterGuardBytes, kWriterStackBytes) != 0) {
    pthread_attr_destroy(&attr);
    return false;
  }
  sigset_t all, old;
  sigfillset(&all);
  // The writer must never run the program's signal handlers.
  pthread_sigmask(SIG_SETMASK, &all, &old);
  g_writer_stop.store(false);
  int rc = pthread_create(&g_writer, &attr, writer_main, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  g_writer_running = rc == 0;
  return g_writer_running;
}

void writer_stop_thread() {
  if (!g_writer_running) return;
  g_writer_stop.store(true, std::memory_order_release);
  pthread_mutex_lock(&g_wake_mutex);
  pthread_cond_signal(&g_wake);
  pthread_mutex_unlock(&g_wake_mutex);
  if (!pthread_equal(pthread_self(), g_writer)) pthread_join(g_writer, nullptr);
  g_writer_running = false;
}

void writer_collect_batches() { for_each_thread(collect_thread, nullptr); }

void writer_flush_now() {
  lock_flush();
  flush_locked(true, false, true);
  unlock_flush();
}

void writer_hold() {
  lock_flush();
  flush_locked(true, false, true);
}

void writer_release() { unlock_flush(); }

void writer_test_tick_in_snapshot_append() {
  if (!config.test_tick_in_snapshot_append || !g_writer_running || pthread_equal(pthread_self(), g_writer) ||
      g_flush_holder.load(std::memory_order_relaxed) == gettid())
    return;
  // Two: the tick in progress, if any, may have looked at the snapshot child before it was
  // reaped; the next one starts after. (At most 30 s: a writer that stopped meanwhile.)
  const uint64_t from = g_ticks_done.load(std::memory_order_acquire);
  for (int i = 0; i < 30000 && g_ticks_done.load(std::memory_order_acquire) < from + 2; ++i) {
    timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

void writer_finish(const char *reason) {
  writer_stop_thread();
  lock_flush();
  if (frames::fd() >= 0) {
    // The events and the end record in one go: a short program's only frame of events is then
    // compressed in one pass (with tables sized to it, and its size declared).
    gather_locked(false, false);
    TotalsView t = read_totals();
    append_end_record(t, reason);
    append_outbox_to_pending();
    frames::write_records(*g_pending, true);
    frames::close();
  }
  g_finished = true;
  unlock_flush();
}

bool writer_finished() { return g_finished || !g_outbox; }

// Runs in the tail guard (tail_guard.h), alone in the address space of a process that ended
// without the shim's exit path: every other task is gone, every lock is free or held by a thread
// that will never release it. Nothing here waits for one: what a lock guards is taken as it is
// where it is whole, and dropped (and counted) where it may not be.
void writer_salvage(int capture_fd, const char *reason) {
  if (writer_finished()) return;
  bool mid_flush = pthread_mutex_trylock(&g_flush_mutex) != 0;
  bool outbox_cut = pthread_mutex_trylock(&g_outbox_mutex) != 0;
  pthread_mutex_init(&g_flush_mutex, nullptr);
  g_flush_holder.store(0, std::memory_order_relaxed);
  pthread_mutex_init(&g_outbox_mutex, nullptr);
  registry_reset_alone();
  if (outbox_cut) g_outbox->truncate(g_outbox_committed);
  // The writer died in a flush: the records it was writing (whole once gathered) start a frame of
  // their own where its last complete write ended.
  if (mid_flush && !g_pending_whole) g_pending->clear();
  if (!frames::salvage_begin(capture_fd, mid_flush)) return;
  uint64_t dropped = 0;
  for_each_thread(salvage_thread, &dropped);
  snapshot::at_salvage();
  TotalsView t = read_totals();
  t.dropped += dropped;
  append_end_record(t, reason);
  append_outbox_to_pending();
  frames::write_records(*g_pending, true);
  frames::close();
  g_finished = true;
}

void writer_note_failure(const char *what) {
  if (config.debug) {
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "heapsnap: tracing stopped: %s (%.300s)\n", what, frames::path());
    if (n > int(sizeof(msg)) - 1) n = int(sizeof(msg)) - 1;  // snprintf returns what it would have written
    if (n > 0) (void)!write(2, msg, size_t(n));
  }
}

void writer_fork_prepare() { lock_flush(); }

void writer_fork_parent() { unlock_flush(); }

void writer_after_fork_child() {
  pthread_mutex_init(&g_flush_mutex, nullptr);
  g_flush_holder.store(0, std::memory_order_relaxed);
  pthread_mutex_init(&g_outbox_mutex, nullptr);
  pthread_mutex_init(&g_wake_mutex, nullptr);
  pthread_cond_init(&g_wake, nullptr);
  g_writer_running = false;
  frames::after_fork_child();
  if (g_outbox) g_outbox->clear();  // the parent writes what it had pending
  if (g_pending) g_pending->clear();
}

}  // namespace hs
