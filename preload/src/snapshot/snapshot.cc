#include "snapshot/snapshot.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "core/proc_maps.h"
#include "core/spinlock.h"
#include "core/thread_state.h"
#include "core/tracer.h"
#include "output/wire_encoder.h"
#include "snapshot/child.h"
#include "snapshot/child_internal.h"
#include "snapshot/signal_trigger.h"
#include "snapshot/thread_regs.h"
#include "tables/info_shadow.h"
#include "intercept/usable_size.h"

namespace hs::snapshot {
namespace {

// heapsnap_snapshot()'s requests, oldest first: made by any thread of the program, served one a
// tick by the writer (a snapshot's child must end before the next starts). Requests made while
// kClientQueue wait are dropped and counted (their labels would otherwise be merged silently).
constexpr uint32_t kClientQueue = 16;
std::atomic<uint32_t> g_client_pending{0};
SpinLock g_client_lock;
constexpr size_t kClientLabelBytes = 256;  // a label's bytes kept, its terminating null included
char g_client_queue[kClientQueue][kClientLabelBytes];
uint32_t g_client_head = 0, g_client_count = 0;
std::atomic<uint64_t> g_client_dropped{0};
uint32_t g_taken = 0;            // snapshots started by this process
uint64_t g_last_periodic_ns = 0;
bool g_heap_fired = false, g_rss_fired = false;
// The running child, if any.
pid_t g_child = 0;
uint32_t g_child_index = 0;
uint64_t g_child_started_ns = 0;
int g_child_fd = -1;
char g_child_path[4400];
// The other threads' registers, captured before the clone (the child reads its copy).
regs::Result g_regs;
uint64_t g_program_pid = 0;


// Ranges exclude_range() named (a few: the tail guard's stack).
constexpr size_t kMaxExtra = 4;
child::Range g_extra[kMaxExtra];
size_t g_nextra = 0;

uint64_t g_writer_lo = 0, g_writer_hi = 0;

void append_record_begin(uint32_t index, int trigger, const char *label, uint64_t pause,
                         const TotalsView &t, uint64_t when) {
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kSnapshotBegin);
  outbox().u64(1, index);
  outbox().u64(2, when);
  outbox().u64(3, uint64_t(trigger));
  outbox().str(4, label);
  outbox().u64(5, pause);
  size_t at = outbox().open(6);
  encode_totals(outbox(), t);
  outbox().close(at);
  wire::end_record(outbox(), m);
  outbox_unlock();
}

void append_failure(uint32_t index, const char *why) {
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kSnapshotEnd);
  outbox().u64(1, index);
  outbox().boolean(8, false);
  outbox().str(9, why);
  wire::end_record(outbox(), m);
  outbox_unlock();
}

// HEAPSNAP_DEBUG: this thread's CPU time (ns).
uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// HEAPSNAP_DEBUG: this thread's time spent runnable but waiting for a CPU (schedstat's
// run_delay, ns), to tell a pause stretched by preemption from one stretched by work or a lock.
uint64_t run_delay_ns() {
  char buf[128];
  if (read_small_file("/proc/thread-self/schedstat", buf, sizeof(buf)) <= 0) return 0;
  const char *p = strchr(buf, ' ');
  return p ? strtoull(p + 1, nullptr, 10) : 0;
}

__attribute__((noinline)) uint64_t current_sp() {
  return reinterpret_cast<uint64_t>(__builtin_frame_address(0));
}

// Starts the child. Returns false if it could not (then nothing is pending).
bool start(int trigger, const char *label) {
  if (g_child || g_taken >= config.snapshot_max) return false;
  uint32_t index = g_taken++;
  uint64_t prep0 = mono_ns();
  snprintf(g_child_path, sizeof(g_child_path), "%s.snapshot-%u.tmp", writer_capture_path(), index);
  int fd = open(g_child_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  TotalsView t = read_totals();
  uint64_t when = now_rel_ns();
  g_program_pid = uint64_t(getpid());
  // The other threads' registers: the running ones are parked in the register signal's handler
  // from here until release() (thread_regs.h). Nothing below takes a lock one of them may hold.
  g_regs = regs::handshake();
  // Registers of this thread onto its stack, where the child's scan of it will find them.
  __builtin_unwind_init();
  uint64_t sp = current_sp();
  uint64_t cpu0 = config.debug ? thread_cpu_ns() : 0;
  uint64_t delay0 = config.debug ? run_delay_ns() : 0;
  uint64_t t0 = mono_ns();
  // A raw fork: no atfork handlers (the program's would run in a context they do not expect),
  // and no SIGCHLD (exit signal 0), so the program's wait() never sees this child.
  long pid = syscall(SYS_clone, 0, nullptr, nullptr, nullptr, nullptr);
  if (pid == 0) child::run({index, fd, sp, g_writer_lo, g_writer_hi, t.live_blocks, g_program_pid, &g_regs, g_extra, g_nextra});
  uint64_t t1 = mono_ns();
  regs::release();
  // The recorded pause: from the first thread parked (or the clone when none was) to the end of
  // the clone.
  uint64_t pause = t1 - (g_regs.first_signal_ns ? g_regs.first_signal_ns : t0);
  if (config.debug) {
    // The clone is the kernel copying the page tables; its CPU time leaves out any wait for a CPU
    // on a busy machine.
    uint64_t cpu = thread_cpu_ns() - cpu0;
    uint64_t delay = run_delay_ns() - delay0;
    char msg[640];
    int n = snprintf(msg, sizeof(msg),
                     "heapsnap: snapshot %u: pause %lu us = handshake %lu us (%u threads: %u signaled, %u registers, "
                     "%u blocked sp/pc, %u missing) + clone %lu us (%lu us of CPU, %lu us waiting for a CPU); file and totals "
                     "before it %lu us\n",
                     index, (unsigned long)(pause / 1000), (unsigned long)((t0 - (g_regs.first_signal_ns ? g_regs.first_signal_ns : t0)) / 1000),
                     g_regs.n, g_regs.signaled, g_regs.captured, g_regs.blocked, g_regs.missing,
                     (unsigned long)((t1 - t0) / 1000), (unsigned long)(cpu / 1000), (unsigned long)(delay / 1000),
                     (unsigned long)(((g_regs.first_signal_ns ? g_regs.first_signal_ns : t0) - prep0) / 1000));
    if (n > 0) (void)!write(2, msg, size_t(n) < sizeof(msg) ? size_t(n) : sizeof(msg) - 1);
  }
  if (pid < 0) {
    close(fd);
    unlink(g_child_path);
    append_failure(index, "fork failed");
    return false;
  }
  g_child = pid_t(pid);
  g_child_index = index;
  g_child_fd = fd;
  g_child_started_ns = t0;
  append_record_begin(index, trigger, label, pause, t, when);
  return true;
}

// Appends the child's file to the capture once it has exited. Returns true when nothing is
// pending any more.
bool finish(bool block) {
  if (!g_child) return true;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(g_child, &status, (block ? 0 : WNOHANG) | __WCLONE);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  close(g_child_fd);
  g_child_fd = -1;
  bool ok = r == g_child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!writer_append_file(g_child_path) || !ok) {
    char why[96];
    if (r == g_child && WIFSIGNALED(status)) snprintf(why, sizeof(why), "snapshot child killed by signal %d", WTERMSIG(status));
    else snprintf(why, sizeof(why), "snapshot child failed (status %d)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (!ok) append_failure(g_child_index, why);
  }
  unlink(g_child_path);
  g_child = 0;
  return true;
}

}  // namespace

void init() {
  if (!config.snapshots) return;
  regs::init();
  info::init(usable::g_glibc_layout);
  info::enabled = true;
  trigger::init(config.snapshot_signal);
  g_last_periodic_ns = now_rel_ns();
  if (config.snapshot_heap_above) g_totals.heap_alarm.store(int64_t(config.snapshot_heap_above), std::memory_order_relaxed);
}

bool enabled() { return config.snapshots; }

void request(const char *label) {
  if (!config.snapshots || !config.snapshot_client) return;
  size_t n = label ? strlen(label) : 0;
  if (n >= kClientLabelBytes) n = kClientLabelBytes - 1;
  SpinGuard g(g_client_lock);
  if (g_client_count == kClientQueue) {
    g_client_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  char *slot = g_client_queue[(g_client_head + g_client_count++) % kClientQueue];
  if (n) memcpy(slot, label, n);
  slot[n] = '\0';
  g_client_pending.store(g_client_count, std::memory_order_release);
}

namespace {
// The label of the pending client request, copied out under its lock (another request may be
// rewriting it while the snapshot starts).
bool take_client_request(char (&label)[kClientLabelBytes]) {
  if (!g_client_pending.load(std::memory_order_acquire)) return false;
  SpinGuard g(g_client_lock);
  if (!g_client_count) return false;
  memcpy(label, g_client_queue[g_client_head], sizeof(label));
  g_client_head = (g_client_head + 1) % kClientQueue;
  g_client_pending.store(--g_client_count, std::memory_order_release);
  return true;
}
}  // namespace

void exclude_range(uint64_t lo, uint64_t hi) {
  if (g_nextra < kMaxExtra) g_extra[g_nextra++] = {lo, hi};
}

void set_writer_stack(uint64_t lo, uint64_t hi) {
  regs::set_writer_tid(uint32_t(syscall(SYS_gettid)));  // called on the writer thread
  g_writer_lo = lo;
  g_writer_hi = hi;
}

static bool start_heap_threshold();

void writer_tick(uint64_t heap_bytes, uint64_t rss_bytes) {
  if (!config.snapshots) return;
  info::advise_hugepages();
  finish(false);
  if (g_child) return;
  uint64_t now = now_rel_ns();
  char label[kClientLabelBytes];
  if (trigger::take()) {
    start(kSignal, "signal");
  } else if (take_client_request(label)) {
    start(kClient, label);
  } else if (config.snapshot_every_ns && now - g_last_periodic_ns >= config.snapshot_every_ns) {
    g_last_periodic_ns = now;
    start(kPeriodic, "periodic");
  } else if (config.snapshot_heap_above && !g_heap_fired &&
             (g_totals.heap_alarm_time.load(std::memory_order_acquire) || heap_bytes >= config.snapshot_heap_above)) {
    g_heap_fired = start_heap_threshold();
  } else if (config.snapshot_rss_above && !g_rss_fired && rss_bytes >= config.snapshot_rss_above) {
    g_rss_fired = true;
    start(kRss, "rss threshold");
  }
}

void drain() { finish(true); }

// The heap-threshold snapshot, labelled with when the heap crossed the threshold and how long after
// it the snapshot was taken (the heap may have fallen since). False: not taken (another snapshot's
// child still running, or --max-snapshots reached): the writer tries again at its next tick.
static bool start_heap_threshold() {
  uint64_t crossed = g_totals.heap_alarm_time.load(std::memory_order_acquire) & ~uint64_t(1);
  char label[128];
  if (crossed) {
    uint64_t now = now_rel_ns();
    snprintf(label, sizeof(label), "heap threshold (crossed at %.1f ms with the heap at %lld B, taken %.2f ms later)",
             double(crossed) / 1e6, (long long)g_totals.heap_alarm_heap.load(std::memory_order_relaxed),
             now > crossed ? double(now - crossed) / 1e6 : 0.0);
  } else {
    snprintf(label, sizeof(label), "heap threshold");
  }
  return start(kHeap, label);
}

void after_fork_child() {
  regs::set_writer_tid(0);  // the parent's writer; a writer of this process says so when it starts
  g_child = 0;
  g_child_fd = -1;
  g_taken = 0;
  trigger::after_fork_child();
}

void at_exit() {
  if (!config.snapshots) return;
  // What the threads recorded goes into the file before the exit snapshot is taken: a process
  // killed while it waits for the snapshot child keeps it, and the last frame then holds only
  // what came after (a capture cut short lost every event of a short program with it).
  writer_flush_now();
  finish(true);
  // Requests the writer had no tick left to serve (the program asked, then exited).
  char label[kClientLabelBytes];
  while (take_client_request(label) && start(kClient, label)) finish(true);
  if (uint64_t dropped = g_client_dropped.exchange(0)) {
    // Said where the timeline shows the program's own markers.
    char text[128];
    int n = snprintf(text, sizeof(text), "heapsnap: %llu snapshot request(s) dropped: %u were already waiting",
                     (unsigned long long)dropped, kClientQueue);
    outbox_append_marker(0, text, n > 0 && size_t(n) < sizeof(text) ? size_t(n) : strlen(text));
  }
  if (trigger::pending() && start(kSignal, "signal")) finish(true);
  // A heap threshold crossed since the writer's last tick (a short peak, then the end).
  if (config.snapshot_heap_above && !g_heap_fired && g_totals.heap_alarm_time.load(std::memory_order_acquire) &&
      start_heap_threshold())
    finish(true);
  if (config.snapshot_at_exit && start(kExit, "exit")) finish(true);
}

bool wants_before_destructors() { return config.snapshots && config.snapshot_before_destructors; }

void before_destructors(const char *how) {
  static uint64_t taken_in = 0;  // the pid that took it: once per process, a forked child its own
  if (!wants_before_destructors() || !tracing() || taken_in == uint64_t(getpid())) return;
  taken_in = uint64_t(getpid());
  writer_flush_now();  // what the threads recorded goes first, as at exit
  finish(true);
  if (start(kBeforeDestructors, how)) finish(true);
}

void at_salvage() {
  if (!config.snapshots || !config.snapshot_at_exit) return;
  // A snapshot child the program had running went with it (its parent is gone; the file it left
  // is incomplete and is not appended).
  if (g_child) {
    if (g_child_fd >= 0) close(g_child_fd);
    unlink(g_child_path);
    append_failure(g_child_index, "the process ended while this snapshot was being taken");
    g_child = 0;
    g_child_fd = -1;
  }
  // The heap as the process left it. No thread's registers are known any more: each thread stack
  // is scanned whole, and the label says so.
  if (start(kExit, "exit (the process ended without exit handlers: thread stacks scanned whole)")) finish(true);
}

}  // namespace hs::snapshot
