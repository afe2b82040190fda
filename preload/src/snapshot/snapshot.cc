#include "snapshot/snapshot.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
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
#include "snapshot/growth_series.h"
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
uint32_t g_taken = 0;            // snapshots started by this process, at-peak ones left out
uint32_t g_next_index = 0;       // the next snapshot's number (at-peak ones included)
uint64_t g_last_periodic_ns = 0;
bool g_heap_fired = false, g_rss_fired = false;
// The writer's own sighting of the heap over the threshold when no fold set the alarm off (several
// threads, each under its fold size): when and at what figure (0: none).
uint64_t g_heap_seen_ns = 0;
int64_t g_heap_seen_bytes = 0;
// The heap alarm's crossing of --snapshot-heap-above, taken from the alarm (poll_alarm): when and
// at what figure (0: not crossed).
uint64_t g_heap_crossed_ns = 0;
int64_t g_heap_crossed_bytes = 0;
// --snapshot-rss-above's crossing: seen at a fold by the RSS alarm (crossed), or by the writer's
// own read of RSS at a tick (seen: RSS that grew without an allocation to fold). When (0: not
// yet) and at what RSS.
uint64_t g_rss_crossed_ns = 0, g_rss_crossed_bytes = 0;
bool g_rss_by_writer = false;

// --snapshot-at-peak. Each time the heap passes the kept snapshot's heap by the percentage (from
// kPeakFloor up), the thread whose allocation crossed waits while the writer forks a child that
// stays frozen (it does not scan: it waits on a pipe); the frozen child before it is killed. At
// the end the last one is told to scan, and its file goes into the capture. So the capture holds
// one at-peak snapshot, taken at the crossing allocation of the last level below the run's
// maximum: within the percentage of it. What it costs: a fork per level (about 15 per doubling of
// the heap at 5%), and while a frozen child lives, the pages the program writes are copied once
// (copy on write): at most the image's size in extra memory. Its SnapshotBegin is written by the
// child (deferred), as it is appended after later records.
constexpr int64_t kPeakFloor = 256 << 10;
int64_t g_peak_next = kPeakFloor;  // the heap whose crossing forks the next one
bool g_peak_due = false;           // crossed, not yet forked
// Forking at every level on the way up cost a fork, and the copy of the pages the program wrote
// while each child lived, for each 5% of rise (py: 76 forks). Instead the crossing arms the fall
// alarm, and the snapshot is forked at the first free that folds a fall (before it counts) deep
// enough that the heap, less the folds' slack, could be more than the percentage under its
// highest (fall_may_wait, thread_registry.cc: a dip within it forks nothing, dipping_rise 45 forks
// -> 25; several threads have no room left for it): once per peak, at its top less at most a rise
// and a fall of the fold room per thread, which the writer keeps within the percentage of the
// level (peak_fold_room). (Frees that fold a fall are
// the trigger: a heap that falls by realloc alone, or by threads that end, is taken at the end, or
// at the next free that folds.) Until the fork, every other thread's free that folds a fall waits
// as well (fall_hold): the threads of a program often free their parts of a peak together, and
// went on freeing while the writer woke and forked. New threads take the narrowed fold room from
// their first count (adopt_fold_room), so the bound holds for each thread.
bool g_peak_armed = false;

// The fold room for the at-peak level: with T threads, 2 x T x the room within the percentage of
// the level; at least 4 KiB (a thread folds once per 4 KiB its heap moves, at most) and at most
// kFoldBytes.
int64_t peak_fold_room(int64_t level) {
  const int64_t threads = std::max<int64_t>(1, g_totals.most_live_threads.load(std::memory_order_relaxed));
  const int64_t room = level / 100 * int64_t(config.snapshot_peak_pct) / (2 * threads);
  return std::clamp<int64_t>(room, 4096, kFoldBytes);
}
struct Frozen {
  pid_t pid = 0;
  int go_fd = -1;       // a GoMessage written here: scan now
  int64_t heap = -1;    // the heap when it was forked
  uint64_t pause = 0;   // the program's pause for the fork (sent with the go)
  uint32_t index = 0;
  bool scanning = false;    // told to scan before the end (scan_kept_early)
  uint64_t scan_ns = 0;     // when (since the start)
  int64_t scan_heap = 0;    // the heap the writer saw then
  bool reaped = false;      // scanned, ended, and waited for (reap_early_scan): its pid is free
  bool reaped_ok = false;   // and its file is complete
  char path[4400] = {};
};
// constinit: the shim's constructor runs before this file's dynamic initializers would (a global
// with a constructor was reset after init() had set it).
constinit Frozen g_frozen;
uint32_t g_peak_taken = 0, g_peak_failed = 0;

// --snapshot-on-growth: each one is a scanning child like the others, but its file is kept aside
// (its SnapshotBegin in it, deferred) and the ones kept (GrowthSeries: thinned evenly to
// --max-snapshots) are appended at the end, or by the tail guard when the program ends without
// exit handlers.
constinit GrowthSeries g_growth;
bool g_growth_due = false;
uint32_t g_growth_taken = 0, g_growth_failed = 0;
// The running child, if any.
pid_t g_child = 0;
uint32_t g_child_index = 0;
int g_child_trigger = -1;
int64_t g_child_heap = 0;  // the heap when it was taken
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

// A snapshot asked for and not taken is said in the capture (a marker that `snapshots` and
// `summary` show), once per trigger and reason: never a silent miss.
// A tracer's marker (tid 0) in the capture, printf-style, cut at 255 bytes.
__attribute__((format(printf, 1, 2))) void tracer_marker(const char *fmt, ...) {
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (n > 0) outbox_append_marker(0, text, size_t(n) < sizeof(text) ? size_t(n) : sizeof(text) - 1);
}

// The writer's backstop for a level no fold crossed: its summed figure past it, with several
// threads (each one's rise under its fold size unseen by the alarm). With one thread the alarm is
// exact, and the sum, read between a thread's counters and its fold, would only be early.
bool writer_sum_past(uint64_t heap_bytes, int64_t level) {
  return int64_t(heap_bytes) >= level && g_totals.most_live_threads.load(std::memory_order_relaxed) > 1;
}

void note_not_taken(int trigger, int reason) {
  static const char *const kTriggerNames[] = {"exit", "signal", "periodic", "heap-threshold", "rss-threshold",
                                              "client", "before-destructors", "peak", "growth"};
  static const char *const kReasons[] = {"--max-snapshots reached", "cannot create its file next to the capture"};
  static uint32_t noted = 0;
  uint32_t bit = 1u << (uint32_t(trigger) * 2 + uint32_t(reason));
  if (trigger < 0 || trigger > kGrowth || (noted & bit)) return;
  noted |= bit;
  tracer_marker("heapsnap: snapshot not taken (%s): %s%s", kTriggerNames[trigger], kReasons[reason],
                reason == 0 ? " (the later ones of this trigger too)" : "");
}

// Starts the child. Returns false if it could not (then nothing is pending).
bool start(int trigger, const char *label) {
  const bool frozen = trigger == kPeak;  // a frozen at-peak child (Frozen above), beside any other
  const bool deferred = frozen || trigger == kGrowth;  // its child writes its SnapshotBegin
  if (!frozen && g_child) return false;  // (the callers try again once it has ended)
  if (!deferred && g_taken >= config.snapshot_max) {
    note_not_taken(trigger, 0);
    return false;
  }
  uint32_t index = g_next_index;
  uint64_t prep0 = mono_ns();
  // (Buffers of this function's are static: a larger frame here exposes more of the forking
  // thread's stale stack below the program's frames to the child's scan of that stack.)
  static char peak_path[4400];
  char *path = frozen ? peak_path : g_child_path;
  snprintf(path, 4400, frozen ? "%s.peak-%u.tmp" : trigger == kGrowth ? "%s.growth-%u.tmp" : "%s.snapshot-%u.tmp",
           writer_capture_path(), index);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    note_not_taken(trigger, 1);
    return false;
  }
  int go[2] = {-1, -1};
  if (frozen && pipe2(go, O_CLOEXEC) != 0) {
    close(fd);
    unlink(path);
    return false;
  }
  g_next_index++;
  if (!deferred) g_taken++;
  TotalsView t = read_totals();
  uint64_t when = now_rel_ns();
  static char peak_label[256];
  if (trigger == kPeak) {
    // With several threads the alarm sees the heap at the threads' folds: each thread's last rise
    // and fall of the fold room may be unseen, so the bound is the percentage of what the folds
    // showed.
    uint32_t threads = g_totals.most_live_threads.load(std::memory_order_relaxed);
    if (threads > 1)
      snprintf(peak_label, sizeof(peak_label),
               "at peak (the heap at %lld B, within %u%% of the highest the threads' folds showed, itself within %u x %lld B "
               "of the true one; %u taken before it)",
               (long long)t.heap, config.snapshot_peak_pct, threads,
               (long long)(2 * widest_fold_room()), g_peak_taken);
    else
      snprintf(peak_label, sizeof(peak_label), "at peak (the heap at %lld B, within %u%% of the run's highest; %u taken before it)",
               (long long)t.heap, config.snapshot_peak_pct, g_peak_taken);
    label = peak_label;
  }
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
  child::DeferredBegin begin{trigger, label, when, g_regs.first_signal_ns ? g_regs.first_signal_ns : t0, &t};
  if (pid == 0)
    child::run({index, fd, sp, g_writer_lo, g_writer_hi, t.live_blocks, g_program_pid, &g_regs, g_extra, g_nextra,
                deferred ? &begin : nullptr, go[0]});
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
  if (frozen) {
    close(fd);
    close(go[0]);
    if (pid < 0) {
      close(go[1]);
      unlink(path);
      return false;
    }
    g_frozen.pid = pid_t(pid);
    g_frozen.go_fd = go[1];
    g_frozen.heap = t.heap;
    g_frozen.pause = pause;
    g_frozen.index = index;
    g_frozen.scanning = false;
    g_frozen.reaped = false;
    memcpy(g_frozen.path, peak_path, sizeof(peak_path));
    return true;
  }
  if (pid < 0) {
    close(fd);
    unlink(g_child_path);
    if (!deferred) append_failure(index, "fork failed");
    return false;
  }
  g_child = pid_t(pid);
  g_child_index = index;
  g_child_trigger = trigger;
  g_child_heap = t.heap;
  g_child_fd = fd;
  g_child_started_ns = t0;
  if (!deferred) append_record_begin(index, trigger, label, pause, t, when);
  // (A deferred one's pause: the child measures it from its own start, which is later.)
  return true;
}

// The heap alarm's level: the lowest heap at which a trigger not yet due wants to know.
int64_t wanted_alarm() {
  int64_t level = INT64_MAX;
  if (config.snapshot_heap_above && !g_heap_fired && !g_heap_crossed_ns) level = int64_t(config.snapshot_heap_above);
  if (config.snapshot_peak_pct && !g_peak_due && !g_peak_armed && g_peak_next < level) level = g_peak_next;
  if (g_growth.enabled() && !g_growth_due && g_growth.next_level() < level) level = g_growth.next_level();
  return level;
}

// Sets the alarm afresh: the crossing time first (a fold that sees the new level must be able to
// set it), then the level.
// The thread whose allocation crosses a growth step waits until its snapshot is forked: the
// snapshot is of that moment. Other crossings do not wait: arming the fall alarm forks nothing,
// and waiting for the writer at each at-peak level cost py (bench workload, native 1.2 s) about
// 0.7 s: 2.6 s with the waits, 1.9 s without.
void rearm() {
  const int64_t level = wanted_alarm();
  const bool forks = g_growth.enabled() && !g_growth_due && g_growth.next_level() == level;
  if (config.snapshot_peak_pct) set_fold_room(peak_fold_room(g_peak_next));
  g_totals.heap_alarm_time.store(0, std::memory_order_release);
  g_totals.peak_arm_level.store(config.snapshot_peak_pct && !g_peak_due && !g_peak_armed ? g_peak_next : INT64_MAX,
                                std::memory_order_relaxed);
  g_totals.heap_alarm_waits.store(forks, std::memory_order_relaxed);
  g_totals.heap_alarm.store(level, std::memory_order_release);
}

// The writer's look at the alarm: a crossing becomes the triggers' due flags, and the alarm is set
// for the levels still waiting. (A fold that went off just as the writer re-armed may store "off"
// after the new level: put right here, at the next look.)
// The at-peak level passed: the fall alarm armed.
// (Armed here only if the fold that crossed did not arm it: that one may have been taken by a
// free already, and arming it again made a second hold and a fork to be killed as lower.)
void peak_level_passed() {
  g_peak_armed = true;
  if (g_totals.peak_arm_level.exchange(INT64_MAX, std::memory_order_acq_rel) != INT64_MAX)
    g_totals.fall_alarm.store(1, std::memory_order_release);
}

// A fall taken (poll_alarm saw it) and not yet served: its frees wait until serve_fall.
bool g_fall_pending = false;

bool poll_alarm() {
  // A free that fell with the fall alarm armed waits for the at-peak fork.
  const bool fell = g_totals.fall_alarm_time.exchange(0, std::memory_order_acq_rel) != 0;
  if (fell) {
    g_peak_armed = false;
    g_peak_due = true;
    g_fall_pending = true;
  }
  uint64_t crossed = g_totals.heap_alarm_time.load(std::memory_order_acquire);
  if (!crossed) {
    if (g_totals.heap_alarm.load(std::memory_order_relaxed) == INT64_MAX && wanted_alarm() != INT64_MAX) rearm();
    return fell;
  }
  int64_t h = g_totals.heap_alarm_heap.load(std::memory_order_relaxed);
  if (config.snapshot_heap_above && !g_heap_fired && !g_heap_crossed_ns && h >= int64_t(config.snapshot_heap_above)) {
    g_heap_crossed_ns = crossed & ~uint64_t(1);
    if (!g_heap_crossed_ns) g_heap_crossed_ns = 1;
    g_heap_crossed_bytes = h;
  }
  if (config.snapshot_peak_pct && !g_peak_due && !g_peak_armed && h >= g_peak_next) peak_level_passed();
  if (g_growth.enabled() && h >= g_growth.next_level()) g_growth_due = true;
  rearm();
  return true;
}

// Tells a frozen child to scan. background: the program runs on.
bool send_go(Frozen &f, bool background) {
  const child::GoMessage go{f.pause, background ? 1u : 0u, 0};
  ssize_t n;
  do n = write(f.go_fd, &go, sizeof(go)); while (n < 0 && errno == EINTR);
  return n == ssize_t(sizeof(go));
}

// Ends a frozen child: told to scan, unless it was told already, and waited for (scan), or
// killed. Returns whether its file is complete.
bool end_frozen(Frozen &f, bool scan) {
  if (!f.pid) return false;
  bool ok = false;
  if (f.reaped) {  // (its pid may be another process's by now: neither killed nor waited for)
    ok = scan && f.reaped_ok;
  } else if (scan && (f.scanning || send_go(f, false))) {
    int status = 0;
    pid_t r;
    do r = waitpid(f.pid, &status, __WCLONE); while (r < 0 && errno == EINTR);
    ok = r == f.pid && WIFEXITED(status) && WEXITSTATUS(status) == child::kExitDone;
  } else {
    kill(f.pid, SIGKILL);
    pid_t r;
    do r = waitpid(f.pid, nullptr, __WCLONE); while (r < 0 && errno == EINTR);
  }
  close(f.go_fd);
  f.pid = 0;
  f.go_fd = -1;
  return ok;
}

// The at-peak level above a heap: the percentage higher, and at least kPeakFloor.
int64_t peak_level(int64_t heap) {
  int64_t next = heap + heap / 100 * int64_t(config.snapshot_peak_pct) + 1;
  return next < kPeakFloor ? kPeakFloor : next;
}

// Forks a frozen at-peak child when one is due: the alarm went off, or (several threads, none of
// whose folds crossed the level) the writer's own sum is past it. The one before it is killed
// once the new one is forked (the thread waiting on the alarm is let go first, by the caller).
constinit Frozen g_frozen_old;
void maybe_start_peak(uint64_t heap_bytes) {
  if (!config.snapshot_peak_pct) return;
  if (!g_peak_due) {
    if (g_peak_armed || !writer_sum_past(heap_bytes, g_peak_next)) return;
    peak_level_passed();
    if (!g_peak_due) return;
  }
  g_peak_due = false;
  Frozen old = g_frozen;
  g_frozen.pid = 0;
  if (start(kPeak, "at peak") && g_frozen.heap > old.heap) {
    ++g_peak_taken;
    g_frozen_old = old;
  } else {
    // Not forked, or the heap fell back below the kept one's since the crossing: the old one stays.
    if (g_frozen.pid) {
      end_frozen(g_frozen, false);
      unlink(g_frozen.path);
    }
    if (!old.pid) ++g_peak_failed;
    g_frozen = old;
  }
  g_peak_next = peak_level(g_frozen.pid ? g_frozen.heap : 0);
  rearm();
}

// The kept at-peak child scans before the end once the heap has fallen below half of its heap: the
// peak is then most likely behind the program, and a scan at the end kept the program's exit
// waiting for it (py, bench workload: 104 ms of a 1.47 s run, after the heap had fallen to 54 KiB
// at 1.34 s), and the child holding the copies of every page the program wrote since the fork, as
// long as the program ran. It scans on one thread, the program running on beside it. Should the
// heap pass the level after all, the next fork replaces it like any other, scanned or not: the
// cost of a wrong guess is one scan, on one core, once per fork at most.
void scan_kept_early(uint64_t heap_bytes) {
  if (!config.snapshot_peak_pct || !g_frozen.pid || g_frozen.scanning || g_peak_due) return;
  if (int64_t(heap_bytes) >= g_frozen.heap / 2) return;
  if (!send_go(g_frozen, true)) return;  // (then the end tries again)
  g_frozen.scanning = true;
  g_frozen.scan_ns = now_rel_ns();
  g_frozen.scan_heap = int64_t(heap_bytes);
}

// An early-scanned child is waited for as soon as it ends, at the writer's ticks, not at the
// program's end: it is not left a zombie, which a program waiting for any child (__WALL) could
// take, and whose pid a kill at the end could find reused.
void reap_early_scan() {
  if (!g_frozen.pid || !g_frozen.scanning || g_frozen.reaped) return;
  int status = 0;
  pid_t r;
  do r = waitpid(g_frozen.pid, &status, __WCLONE | WNOHANG); while (r < 0 && errno == EINTR);
  if (r == 0) return;  // still scanning
  g_frozen.reaped = true;
  g_frozen.reaped_ok = r == g_frozen.pid && WIFEXITED(status) && WEXITSTATUS(status) == child::kExitDone;
}

// The frozen child that the last fork replaced, killed (after the waiting thread was let go).
void end_replaced_peak() {
  if (!g_frozen_old.pid) return;
  end_frozen(g_frozen_old, false);
  unlink(g_frozen_old.path);
}

// The kept at-peak snapshot goes into the capture (at the end), with a marker saying how many
// were taken; or a marker saying why there is none.
void append_kept_peak() {
  if (!config.snapshot_peak_pct) return;
  if (g_frozen.pid) {
    int64_t heap = g_frozen.heap;
    const uint64_t scanned_ns = g_frozen.scanning ? g_frozen.scan_ns : 0;
    const int64_t scanned_heap = g_frozen.scan_heap;
    bool ok = end_frozen(g_frozen, true) && writer_append_file(g_frozen.path);
    unlink(g_frozen.path);
    if (!ok) ++g_peak_failed;
    char early[160] = "";
    if (scanned_ns)
      snprintf(early, sizeof(early), "; scanned from %.3f s, when the heap had fallen to %lld B", double(scanned_ns) / 1e9,
               (long long)scanned_heap);
    tracer_marker("heapsnap: at-peak snapshot %s: the heap at %lld B (%u taken, %u failed)%s",
                  ok ? "kept" : "lost (its child failed)", (long long)heap, g_peak_taken, g_peak_failed, early);
  } else if (g_peak_taken || g_peak_failed) {
    tracer_marker("heapsnap: no at-peak snapshot: %u taken, %u failed", g_peak_taken, g_peak_failed);
  } else {
    tracer_marker("heapsnap: no at-peak snapshot: the heap never reached %lld B", (long long)kPeakFloor);
  }
}

void growth_path(uint32_t index, char (&out)[4400]) {
  snprintf(out, sizeof(out), "%s.growth-%u.tmp", writer_capture_path(), index);
}

// Starts a growth snapshot when one is due (the alarm, or the writer's sum with several threads),
// and deletes the files of the ones the series let go.
bool maybe_start_growth(uint64_t heap_bytes) {
  if (!g_growth.enabled()) return false;
  bool due = g_growth_due || writer_sum_past(heap_bytes, g_growth.next_level());
  if (!due) return false;
  char label[160];
  snprintf(label, sizeof(label), "growth (the heap past %lld B: +%llu%s since the last)", (long long)g_growth.next_level(),
           (unsigned long long)(g_growth.step_bytes() ? g_growth.step_bytes() : g_growth.step_pct()),
           g_growth.step_bytes() ? " B" : "%");
  if (!start(kGrowth, label)) return false;
  g_growth_due = false;
  ++g_growth_taken;
  uint32_t dropped[GrowthSeries::kMaxKept];
  uint32_t n = g_growth.taken(g_child_index, g_child_heap, dropped);
  char path[4400];
  for (uint32_t i = 0; i < n; ++i) {
    growth_path(dropped[i], path);
    unlink(path);
  }
  rearm();
  return true;
}

// The kept growth snapshots into the capture, oldest first, with a marker that says what was kept.
void append_growth() {
  if (!g_growth.enabled() || (!g_growth_taken && !g_growth.size())) return;
  char path[4400];
  uint32_t appended = 0, kept = g_growth.size();
  for (uint32_t i = 0; i < kept; ++i) {
    growth_path(g_growth.index_at(i), path);
    appended += writer_append_file(path);
    unlink(path);
  }
  tracer_marker("heapsnap: growth snapshots: %u kept of %u taken (%u failed; thinned %u times)", appended,
                g_growth_taken, g_growth_failed, g_growth.thinned());
  g_growth.configure(0, 0, 2);  // appended once
}

// Why a snapshot child's end was not a complete file, from its exit code (child::Exit; -1: no
// status), or from waitpid's errno when the wait failed: ECHILD when the program reaped it itself,
// which the status 0 of a failed wait used to call "failed (status 0)".
void child_failure_reason(pid_t r, int status, int wait_errno, char *why, size_t cap) {
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (r < 0)
    snprintf(why, cap, wait_errno == ECHILD ? "snapshot child lost: the program reaped it (waitpid: ECHILD)"
                                            : "snapshot child lost: waitpid failed (errno %d)",
             wait_errno);  // (no strerror: it may translate, and allocate, in the program's locale)
  else if (WIFSIGNALED(status))
    snprintf(why, cap, "snapshot child killed by signal %d", WTERMSIG(status));
  else if (code == child::kExitNoMemory)
    snprintf(why, cap, "snapshot child out of memory (its arena or the block list)");
  else if (code == child::kExitFileTorn)
    snprintf(why, cap, "snapshot child could not write its file whole (a write failed, or out of memory)");
  else if (code == child::kExitNoMaps)
    snprintf(why, cap, "snapshot child cannot read /proc/self/maps");
  else if (code > child::kExitCrashed)
    snprintf(why, cap, "snapshot child crashed (signal %d)", code - child::kExitCrashed);
  else if (code == child::kExitDone)
    snprintf(why, cap, "snapshot child's file could not be appended to the capture");
  else if (code == child::kExitSaidWhy)
    snprintf(why, cap, "snapshot child stopped early, and its file (which says why) could not be appended to the capture");
  else
    snprintf(why, cap, "snapshot child failed (exit status %d)", code);
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
  const int wait_errno = r < 0 ? errno : 0;
  close(g_child_fd);
  g_child_fd = -1;
  const int code = r == g_child && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const bool ok = code == child::kExitDone;
  if (r == g_child) writer_test_tick_in_snapshot_append();
  if (g_child_trigger == kGrowth) {
    // Kept aside (GrowthSeries counted it when it started); a failed one is forgotten.
    if (!ok) {
      g_growth.forget(g_child_index);
      unlink(g_child_path);
      ++g_growth_failed;
    }
    g_child = 0;
    return true;
  }
  // A torn file goes nowhere; one whose end record names its error is the snapshot's only end (a
  // second one here made `snapshots` list the failure twice).
  const bool appended = code != child::kExitFileTorn && writer_append_file(g_child_path);
  const bool said = appended && code == child::kExitSaidWhy;
  if ((!ok || !appended) && !said) {
    char why[128];
    child_failure_reason(r == g_child ? r : -1, status, wait_errno, why, sizeof(why));
    append_failure(g_child_index, why);
  }
  unlink(g_child_path);
  g_child = 0;
  return true;
}

}  // namespace

static void arm_rss_alarm();

void init() {
  if (!config.snapshots) return;
  regs::init();
  info::init(usable::g_glibc_layout);
  info::enabled = true;
  trigger::init(config.snapshot_signal);
  g_last_periodic_ns = now_rel_ns();
  g_growth.configure(config.snapshot_growth_bytes, config.snapshot_growth_pct, config.snapshot_max);
  rearm();
  arm_rss_alarm();
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
static bool start_rss_threshold();
static void start_triggered(uint64_t heap_bytes, uint64_t rss_bytes);

// Whether the RSS-threshold snapshot is due: the alarm's crossing (at the fold of an allocation),
// else the writer's own reading at this tick (rss_bytes; 0: none).
static bool rss_threshold_due(uint64_t rss_bytes, uint64_t now) {
  if (!g_rss_crossed_ns) {
    if (uint64_t crossed = g_totals.rss_alarm_time.load(std::memory_order_acquire)) {
      g_rss_crossed_ns = crossed & ~uint64_t(1) ? crossed & ~uint64_t(1) : 1;
      g_rss_crossed_bytes = g_totals.rss_alarm_rss.load(std::memory_order_relaxed);
    } else if (rss_bytes >= config.snapshot_rss_above) {
      g_totals.rss_alarm.store(0, std::memory_order_relaxed);  // (a fold's crossing now would say nothing new)
      g_rss_crossed_ns = now ? now : 1;
      g_rss_crossed_bytes = rss_bytes;
      g_rss_by_writer = true;
    }
  }
  return g_rss_crossed_ns != 0;
}

// Whether the heap-threshold snapshot is due at this tick. The alarm (set at the fold that crossed
// the threshold) is exact; the writer's own figure is only a backstop for several threads whose
// unfolded rises add up past it without any fold crossing it. That figure sums the threads'
// counters, which a thread updates before its fold: read between the two, the crossing allocation
// is seen before its own alarm goes off (CI, stop 35: "heap threshold" with no crossing time).
// So the backstop is for several threads only (with one, the fold is the crossing allocation
// itself), and fires at the tick after its sighting, by when a fold in flight has set the alarm.
static bool heap_threshold_due(uint64_t heap_bytes, uint64_t now) {
  if (g_heap_crossed_ns) return true;
  if (!writer_sum_past(heap_bytes, int64_t(config.snapshot_heap_above))) return false;
  if (g_heap_seen_ns) return true;
  g_heap_seen_ns = now ? now : 1;
  g_heap_seen_bytes = int64_t(heap_bytes);
  return false;
}

// The thread that set an alarm off goes on (heap_alarm, before_fall_fold), now that its snapshots
// are forked.
static void serve_alarm() {
  g_totals.heap_alarm_served.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, &g_totals.heap_alarm_served, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

// The frees of a fall go on, once maybe_start_peak has forked (or failed to) for the fall that
// poll_alarm took: the hold first, then the count (see wait_for_peak_fork). A fall taken after
// this tick's poll_alarm is served at the next look, after its own fork.
static void serve_fall() {
  if (!g_fall_pending) return;
  g_fall_pending = false;
  g_totals.fall_hold.store(0, std::memory_order_seq_cst);
  g_totals.fall_served.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, &g_totals.fall_served, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void writer_tick(uint64_t heap_bytes, uint64_t rss_bytes) {
  if (!config.snapshots) return;
  info::advise_hugepages();
  finish(false);
  const bool alarm = poll_alarm();
  // The fold room follows the threads as they come (rearm sets it only when the level moves).
  if (config.snapshot_peak_pct) set_fold_room(peak_fold_room(g_peak_next));
  maybe_start_peak(heap_bytes);  // a frozen child, beside any other
  serve_fall();
  reap_early_scan();
  scan_kept_early(heap_bytes);
  if (g_growth_due) {
    // At the crossing, as the thread that crossed waits: after the running child, if any (a heap
    // that grows by the step faster than a snapshot scans is paused that long).
    finish(true);
    maybe_start_growth(heap_bytes);
  }
  if (!g_child) start_triggered(heap_bytes, rss_bytes);
  if (alarm) serve_alarm();
  end_replaced_peak();
}

static void start_triggered(uint64_t heap_bytes, uint64_t rss_bytes) {
  uint64_t now = now_rel_ns();
  char label[kClientLabelBytes];
  if (trigger::take()) {
    start(kSignal, "signal");
  } else if (take_client_request(label)) {
    start(kClient, label);
  } else if (config.snapshot_every_ns && now - g_last_periodic_ns >= config.snapshot_every_ns) {
    g_last_periodic_ns = now;
    start(kPeriodic, "periodic");
  } else if (config.snapshot_heap_above && !g_heap_fired && heap_threshold_due(heap_bytes, now)) {
    g_heap_fired = start_heap_threshold();
  } else if (config.snapshot_rss_above && !g_rss_fired && rss_threshold_due(rss_bytes, now)) {
    g_rss_fired = start_rss_threshold();
  } else {
    maybe_start_growth(heap_bytes);
  }
}

// The end with the fall alarm armed (the heap passed the level and has not fallen since): the
// at-peak snapshot is of now. Unless a free has just taken the alarm: poll_alarm makes that due.
static void take_armed_peak() {
  uint32_t armed = 1;
  // (Armed by the writer, or by the fold that crossed the level: peak_arm_level.)
  if (!g_totals.fall_alarm.compare_exchange_strong(armed, 0, std::memory_order_acq_rel)) return;
  g_peak_armed = false;
  g_peak_due = true;
}

void drain() {
  finish(true);
  const bool alarm = poll_alarm();
  take_armed_peak();
  maybe_start_peak(0);
  serve_fall();
  if (alarm) serve_alarm();
  end_replaced_peak();
  append_kept_peak();
  append_growth();
}

// The heap-threshold snapshot, labelled with when the heap crossed the threshold and how long after
// it the snapshot was taken (the heap may have fallen since). False: not taken (another snapshot's
// child still running, or --max-snapshots reached): the writer tries again at its next tick.
static bool start_heap_threshold() {
  uint64_t crossed = g_heap_crossed_ns;
  char label[192];
  if (crossed) {
    uint64_t now = now_rel_ns();
    snprintf(label, sizeof(label), "heap threshold (crossed at %.1f ms with the heap at %lld B, taken %.2f ms later)",
             double(crossed) / 1e6, (long long)g_heap_crossed_bytes,
             now > crossed ? double(now - crossed) / 1e6 : 0.0);
  } else if (g_heap_seen_ns) {
    uint64_t now = now_rel_ns();
    snprintf(label, sizeof(label),
             "heap threshold (crossed by %.1f ms: the writer saw the heap at %lld B, several threads' sum; taken %.2f ms later)",
             double(g_heap_seen_ns) / 1e6, (long long)g_heap_seen_bytes,
             now > g_heap_seen_ns ? double(now - g_heap_seen_ns) / 1e6 : 0.0);
  } else {
    snprintf(label, sizeof(label), "heap threshold");
  }
  return start(kHeap, label);
}

// The RSS-threshold snapshot, labelled like the heap's: when RSS was seen over the threshold, by
// whom, at what figure, and how long after it the snapshot was taken. False: not taken yet.
static bool start_rss_threshold() {
  char label[192];
  const uint64_t now = now_rel_ns();
  snprintf(label, sizeof(label), "rss threshold (%s %.1f ms with RSS at %llu B, taken %.2f ms later)",
           g_rss_by_writer ? "seen by the writer at" : "crossed at", double(g_rss_crossed_ns) / 1e6,
           (unsigned long long)g_rss_crossed_bytes,
           now > g_rss_crossed_ns ? double(now - g_rss_crossed_ns) / 1e6 : 0.0);
  return start(kRss, label);
}

// Arms the RSS alarm (at start, and afresh in a forked child).
static void arm_rss_alarm() {
  g_rss_fired = g_rss_by_writer = false;
  g_rss_crossed_ns = g_rss_crossed_bytes = 0;
  g_totals.rss_alarm_time.store(0, std::memory_order_relaxed);
  g_totals.rss_alarm_read_ns.store(0, std::memory_order_relaxed);
  g_totals.rss_alarm.store(config.snapshot_rss_above, std::memory_order_release);
}

void after_fork_child() {
  regs::set_writer_tid(0);  // the parent's writer; a writer of this process says so when it starts
  g_child = 0;
  g_child_fd = -1;
  g_taken = 0;
  g_next_index = 0;
  // The parent's crossings and kept at-peak snapshot are the parent's (its file, its capture).
  g_heap_fired = g_rss_fired = false;
  g_heap_seen_ns = g_heap_crossed_ns = 0;
  g_peak_due = g_peak_armed = false;
  g_totals.fall_alarm.store(0, std::memory_order_relaxed);
  g_totals.peak_arm_level.store(INT64_MAX, std::memory_order_relaxed);
  g_totals.fall_alarm_time.store(0, std::memory_order_relaxed);
  g_totals.fall_hold.store(0, std::memory_order_relaxed);
  g_fall_pending = false;
  g_frozen.pid = g_frozen_old.pid = 0;  // the parent's children, not this process's
  g_frozen.go_fd = g_frozen_old.go_fd = -1;
  g_frozen.heap = -1;
  g_peak_taken = g_peak_failed = 0;
  g_peak_next = kPeakFloor;
  g_growth.configure(config.snapshot_growth_bytes, config.snapshot_growth_pct, config.snapshot_max);
  g_growth_due = false;
  g_growth_taken = g_growth_failed = 0;
  if (config.snapshots) {
    rearm();
    arm_rss_alarm();
  }
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
    tracer_marker("heapsnap: %llu snapshot request(s) dropped: %u were already waiting", (unsigned long long)dropped,
                  kClientQueue);
  }
  if (trigger::pending() && start(kSignal, "signal")) finish(true);
  // A heap threshold crossed since the writer's last tick (a short peak, then the end).
  const bool alarm = poll_alarm();
  if (config.snapshot_heap_above && !g_heap_fired && (g_heap_crossed_ns || g_heap_seen_ns) && start_heap_threshold())
    finish(true);
  // Likewise RSS crossed at a fold since the writer's last tick.
  if (config.snapshot_rss_above && !g_rss_fired && rss_threshold_due(0, 0) && start_rss_threshold()) finish(true);
  // An at-peak snapshot due (the heap rose past the level while a child was running, or it passed
  // the level and has not fallen since), then the kept one into the capture, before the exit
  // snapshot.
  take_armed_peak();
  maybe_start_peak(0);
  serve_fall();
  if (alarm) serve_alarm();
  end_replaced_peak();
  append_kept_peak();
  if (maybe_start_growth(0)) finish(true);  // (a growth crossed since the last tick)
  append_growth();
  if (config.snapshot_at_exit && start(kExit, "exit")) finish(true);
}

bool wants_before_destructors() { return config.snapshots && config.snapshot_before_destructors; }

void before_destructors(const char *how) {
  static uint64_t taken_in = 0;  // the pid that took it: once per process, a forked child its own
  if (!wants_before_destructors() || !tracing() || taken_in == uint64_t(getpid())) return;
  taken_in = uint64_t(getpid());
  // On the program's thread, with the writer thread running on: it is held off (its tick reaps
  // and appends snapshot children too, and writes the capture), after what the threads recorded
  // has been written, as at exit. Without it a tick during the append of the child's file (a few
  // MB, slow on a busy machine) reaped the child again (ECHILD), appended the file a second time
  // or after a failure record, or wrote its frames into the middle of it.
  writer_hold();
  finish(true);
  if (start(kBeforeDestructors, how)) finish(true);
  writer_release();
}

void at_salvage() {
  // (A frozen at-peak child of the program's sees its parent gone and exits without a word: the
  // at-peak snapshot is lost with the exit handlers.)
  if (!config.snapshots) return;
  // A snapshot child the program had running went with it (its parent is gone; the file it left
  // is incomplete and is not appended).
  if (g_child) {
    if (g_child_fd >= 0) close(g_child_fd);
    unlink(g_child_path);
    if (g_child_trigger == kGrowth) {
      g_growth.forget(g_child_index);
      ++g_growth_failed;
    } else {
      append_failure(g_child_index, "the process ended while this snapshot was being taken");
    }
    g_child = 0;
    g_child_fd = -1;
  }
  // The growth snapshots kept so far (a long run ended by a signal still has them).
  append_growth();
  if (!config.snapshot_at_exit) return;
  // The heap as the process left it. No thread's registers are known any more: each thread stack
  // is scanned whole, and the label says so.
  if (start(kExit, "exit (the process ended without exit handlers: thread stacks scanned whole)")) finish(true);
}

}  // namespace hs::snapshot
