// Global tracer state shared by the interposed functions, the writer thread and fork handling.
#pragma once
#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "core/common.h"
#include "output/wire_encoder.h"

namespace hs {

enum TracerState : int {
  kUninit = 0,    // constructor not run yet: calls pass through
  kStarting = 1,  // constructor running
  kActive = 2,    // tracing
  kStopped = 3,   // disabled, failed, or finished: calls pass through for good
};

extern std::atomic<int> g_state HS_HIDDEN;
extern uint64_t g_start_ns;   // CLOCK_MONOTONIC at capture start
extern int g_pid;             // pid that owns the current capture

HS_INLINE bool tracing() { return g_state.load(std::memory_order_relaxed) == kActive; }
// Sets g_state, and with it whether the allocation fast paths run (shadow::fast_top): tracing,
// glibc's chunk layout for usable sizes, no snapshot table.
void set_state(int s);
HS_INLINE uint64_t now_rel_ns() { return mono_ns() - g_start_ns; }
HS_INLINE uint64_t coarse_rel_ns() {
  uint64_t n = coarse_ns();
  return n > g_start_ns ? n - g_start_ns : 0;
}

// Figures folded in from exited threads and batched heap deltas.
struct GlobalTotals {
  std::atomic<uint64_t> alloc_calls{0}, free_calls{0}, bytes_allocated{0}, bytes_freed{0};
  std::atomic<uint64_t> realloc_calls{0}, realloc_moves{0}, foreign_frees{0}, sampled{0};
  std::atomic<int64_t> heap{0};
  std::atomic<int64_t> peak{0};
  std::atomic<uint64_t> peak_time{0};
  std::atomic<uint32_t> threads_seen{0};
  std::atomic<uint32_t> live_threads{0};
  std::atomic<uint32_t> most_live_threads{0};  // the most registered at once
  std::atomic<uint64_t> dropped_events{0};
  // The heap alarm (--snapshot-heap-above): the heap figure that sets it off (INT64_MAX: none, or
  // gone off), and when it went off (coarse_rel_ns() | 1; 0: not yet). Set off by the fold of the
  // allocation that crosses it (thread_registry.cc), served by the writer (snapshot.cc).
  std::atomic<int64_t> heap_alarm{INT64_MAX};
  std::atomic<uint64_t> heap_alarm_time{0};
  std::atomic<int64_t> heap_alarm_heap{0};  // the heap figure that set it off (written before the time)
  // Bumped (and futex-woken) by the writer each time it has served an alarm: with
  // --snapshot-at-peak, the thread that set the alarm off waits for it (heap_alarm).
  std::atomic<uint32_t> heap_alarm_served{0};
  // Whether the thread that sets the alarm off waits: set with each level (rearm), true when the
  // crossing itself forks a snapshot (a growth step, an at-peak level below the fall alarm's).
  std::atomic<bool> heap_alarm_waits{false};
  // How far a thread's heap moves, up or down, between its folds: kFoldBytes, or less with
  // --snapshot-at-peak, where the writer sets it from the next level (rearm), so that a snapshot
  // forked at a fold is within the percentage of the heap's highest point.
  std::atomic<int64_t> fold_room{256 * 1024};  // (kFoldBytes: thread_registry.cc checks)
  // The widest fold room any thread has been given (at its registration or a fold): each
  // thread's unfolded change is within it, so the peak's accuracy is the threads times this.
  // Raised by adopt_fold_room and set_fold_room only.
  std::atomic<int64_t> fold_room_widest{0};
  // The at-peak fall alarm (--snapshot-at-peak): 1 while armed, set by the writer once the heap
  // passed the next at-peak level; the first free that folds a fall takes it (0), and waits while
  // the writer forks the snapshot, its block still counted and in the shadow. When
  // (coarse_rel_ns() | 1; 0: not yet).
  std::atomic<uint32_t> fall_alarm{0};
  // The at-peak level whose crossing arms the fall alarm, at the fold that crosses it (INT64_MAX:
  // none): armed there, not by the writer later, which a peak of a few milliseconds may be over by.
  std::atomic<int64_t> peak_arm_level{INT64_MAX};
  std::atomic<uint64_t> fall_alarm_time{0};
  // 1 from the free that took the fall alarm until the writer has forked its snapshot
  // (serve_alarm): every other free that folds a fall meanwhile waits too, its block still
  // counted. Without it the other threads' frees went on while the writer woke and forked: eight
  // threads freeing 250,000 bytes each at once left an at-peak snapshot of 0.25 to 1.7 of 1.9 MiB.
  std::atomic<uint32_t> fall_hold{0};
  // Bumped (and futex-woken) by the writer once it has forked for a fall it took (serve_fall).
  std::atomic<uint32_t> fall_served{0};
  // The RSS alarm (--snapshot-rss-above): the resident bytes that set it off (0: none, or gone
  // off). Checked at each fold (every kFoldBytes of a thread's heap rise), where the process's
  // maximum RSS (one getrusage) says whether the current one (statm) is worth reading; the
  // writer's tick stays the backstop for RSS that grows without allocating. When it went off
  // (coarse_rel_ns() | 1; 0: not yet) and the RSS it read then (written before the time).
  std::atomic<uint64_t> rss_alarm{0};
  std::atomic<uint64_t> rss_alarm_time{0};
  std::atomic<uint64_t> rss_alarm_rss{0};
  std::atomic<uint64_t> rss_alarm_read_ns{0};  // the last statm read (at most one a jiffy)
};
extern GlobalTotals g_totals HS_HIDDEN;

struct TotalsView {
  uint64_t time_ns, alloc_calls, free_calls, bytes_allocated, bytes_freed;
  int64_t heap;
  uint64_t live_blocks, peak, peak_time, sampled, foreign_frees, rss, realloc_calls,
      realloc_moves, dropped;
  uint32_t threads_seen, peak_accuracy;
  // Totals.rss_parts, read on some writer ticks only (rss_rollup.h); has_rollup false elsewhere.
  bool has_rollup;
  uint64_t rollup_rss, rollup_anon, rollup_shmem, rollup_swap, rollup_heapsnap_heap, rollup_cost_ns;
};
TotalsView read_totals();
void encode_totals(wire::Buf &b, const TotalsView &t);  // Totals fields into an open message

// The outbox: serialized records waiting for the writer thread. Appending takes a short lock;
// the writer swaps the whole buffer out each flush.
void outbox_lock();
void outbox_unlock();
wire::Buf &outbox();          // only under outbox_lock()
void outbox_poke_writer();    // ask for an early flush (outbox is large, a heap alarm)
bool writer_serves_alarms();  // the writer thread runs (and this is not the tracer's own call)
// Appends a timeline marker record (text, n bytes; tid 0: the tracer's own) to the outbox.
void outbox_append_marker(uint32_t tid, const char *text, size_t n);
constexpr size_t kOutboxFlushBytes = 4u << 20;
constexpr size_t kOutboxLimitBytes = 512u << 20;  // beyond this, events are dropped (and counted)

// Writer lifecycle (capture_writer.cc).
bool writer_open_capture(bool fork_child, int parent_pid);
bool writer_start_thread();
void writer_stop_thread();
void writer_flush_now();               // collect every thread's events, write a frame
void writer_collect_batches();         // move every thread's pending events into the outbox
void writer_finish(const char *reason);
void writer_fork_prepare();
void writer_fork_parent();
void writer_after_fork_child();
void writer_note_failure(const char *what);
// Whether the capture has its end record (or was never opened).
bool writer_finished();
// The tail guard's salvage of a process that ended without the shim's exit path (tail_guard.h):
// every thread's pending events, the outbox and an end record saying `reason`, written through
// the guard's own descriptor of the capture.
void writer_salvage(int capture_fd, const char *reason);
const char *writer_capture_path();
// Appends a file of complete zstd frames (a snapshot child's output) to the capture. Must be
// called by whoever holds the writer (the writer thread's tick, a thread between writer_hold and
// writer_release, or at exit after it stopped).
bool writer_append_file(const char *path);
// Holds the writer thread off (its flush lock), after writing what the threads recorded, so that
// the calling thread may do what the writer's tick does (start a snapshot, reap its child, append
// its file) while the writer runs on: the two doing it at once appended a child's file twice, or
// wrote into the capture together. writer_release lets the writer go on.
void writer_hold();
void writer_release();
// The test hook HEAPSNAP_TEST_TICK_IN_SNAPSHOT_APPEND (config.h): called after a snapshot child
// is reaped, before its file is appended.
void writer_test_tick_in_snapshot_append();

// Stops tracing for good, keeping the program running.
void stop_tracing(const char *why);

}  // namespace hs
